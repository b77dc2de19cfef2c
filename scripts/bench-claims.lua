-- wrk script for scripts/bench: every request is a first claim, POST /v1/operations with its own
-- Idempotency-Key (run nonce, wrk thread, per-thread counter), so every answer should be
-- 201 `execute`. Anything else is counted and reported, never hidden in the rate.
--
--   wrk -t 2 -c 64 -d 10s --latency -s scripts/bench-claims.lua http://127.0.0.1:PORT -- TOKEN NONCE
--
-- done() prints one machine-readable line that scripts/bench parses:
--   claims_result requests=N duration_us=N non_2xx=N not_execute=N socket_errors=N p50_us=N p99_us=N

local threads = {}

-- Runs in the main Lua state, once per wrk thread: number the threads.
function setup(thread)
    thread:set("thread_id", #threads)
    table.insert(threads, thread)
end

-- From here on each wrk thread has its own Lua state (its own globals).
function init(args)
    token = args[1] or error("usage: ... -- TOKEN NONCE")
    nonce = args[2] or error("usage: ... -- TOKEN NONCE")
    counter = 0
    non_2xx = 0
    not_execute = 0
    first_error = ""
end

function request()
    counter = counter + 1
    local key = string.format("wrk-%s-t%d-%d", nonce, thread_id, counter)
    local body = string.format(
        '{"tool":"payments.charge","holder":"worker-%d","request":' ..
        '{"amount":"%d.%02d","currency":"EUR","customer":"c-%d"}}',
        thread_id, counter % 1000, counter % 100, counter % 64)
    return wrk.format("POST", "/v1/operations", {
        ["Authorization"] = "Bearer " .. token,
        ["Idempotency-Key"] = key,
        ["Content-Type"] = "application/json",
    }, body)
end

function response(status, headers, body)
    if status < 200 or status >= 300 then
        non_2xx = non_2xx + 1
        if first_error == "" then
            first_error = status .. " " .. string.sub(body or "", 1, 200)
        end
    elseif not string.find(body or "", '"decision":"execute"', 1, true) then
        not_execute = not_execute + 1
        if first_error == "" then
            first_error = status .. " " .. string.sub(body or "", 1, 200)
        end
    end
end

function done(summary, latency, requests)
    local bad, odd, first = 0, 0, ""
    for _, thread in ipairs(threads) do
        bad = bad + (thread:get("non_2xx") or 0)
        odd = odd + (thread:get("not_execute") or 0)
        local e = thread:get("first_error") or ""
        if first == "" then
            first = e
        end
    end
    local e = summary.errors
    io.write(string.format(
        "claims_result requests=%d duration_us=%d non_2xx=%d not_execute=%d socket_errors=%d p50_us=%d p99_us=%d\n",
        summary.requests, summary.duration, bad, odd,
        e.connect + e.read + e.write + e.timeout,
        latency:percentile(50), latency:percentile(99)))
    if first ~= "" then
        io.write("claims_first_error " .. string.gsub(first, "\n", " ") .. "\n")
    end
end

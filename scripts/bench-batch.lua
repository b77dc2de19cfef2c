-- wrk script for scripts/bench: every request is a batch of SIZE first claims,
-- POST /v1/operations/batch, each intent with its own key (run nonce, wrk thread, counter), so
-- every answer should be 200 with SIZE results, each `execute`. Anything else is counted and
-- reported, never hidden in the rate.
--
--   wrk -t 2 -c 64 -d 10s --latency -s scripts/bench-batch.lua http://127.0.0.1:PORT -- TOKEN NONCE SIZE
--
-- done() prints one machine-readable line that scripts/bench parses:
--   batch_result requests=N size=N duration_us=N bad=N socket_errors=N p50_us=N p99_us=N

local threads = {}

function setup(thread)
    thread:set("thread_id", #threads)
    table.insert(threads, thread)
end

function init(args)
    token = args[1] or error("usage: ... -- TOKEN NONCE SIZE")
    nonce = args[2] or error("usage: ... -- TOKEN NONCE SIZE")
    size = tonumber(args[3] or error("usage: ... -- TOKEN NONCE SIZE"))
    counter = 0
    bad = 0
    first_error = ""
end

function request()
    local intents = {}
    for i = 1, size do
        counter = counter + 1
        intents[i] = string.format(
            '{"key":"wrkb-%s-t%d-%d","tool":"payments.charge","holder":"worker-%d","request":' ..
            '{"amount":"%d.%02d","currency":"EUR","customer":"c-%d"}}',
            nonce, thread_id, counter, thread_id, counter % 1000, counter % 100, counter % 64)
    end
    return wrk.format("POST", "/v1/operations/batch", {
        ["Authorization"] = "Bearer " .. token,
        ["Content-Type"] = "application/json",
    }, '{"intents":[' .. table.concat(intents, ",") .. ']}')
end

function response(status, headers, body)
    local _, executed = string.gsub(body or "", '"decision":"execute"', "")
    if status ~= 200 or executed ~= size then
        bad = bad + 1
        if first_error == "" then
            first_error = status .. " (" .. executed .. " of " .. size .. " execute) " .. string.sub(body or "", 1, 200)
        end
    end
end

function done(summary, latency, requests)
    local bad_total, first = 0, ""
    for _, thread in ipairs(threads) do
        bad_total = bad_total + (thread:get("bad") or 0)
        local e = thread:get("first_error") or ""
        if first == "" then
            first = e
        end
    end
    local e = summary.errors
    io.write(string.format(
        "batch_result requests=%d size=%d duration_us=%d bad=%d socket_errors=%d p50_us=%d p99_us=%d\n",
        summary.requests, threads[1]:get("size"), summary.duration, bad_total,
        e.connect + e.read + e.write + e.timeout,
        latency:percentile(50), latency:percentile(99)))
    if first ~= "" then
        io.write("batch_first_error " .. string.gsub(first, "\n", " ") .. "\n")
    end
end

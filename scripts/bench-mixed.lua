-- wrk script for scripts/bench: a mixed load, not only new keys. Of every 20 claims
-- (POST /v1/operations), by a per-thread counter:
--   12 first claims of new keys                       -> 201 execute
--    3 retries of a completed operation (same request) -> 200 replay
--    2 claims of a completed key with another amount   -> 422 conflict
--    1 claim of an operation reported outcome-unknown  -> 409 manual (the tool's loss is high:
--      an unknown outcome waits for an operator)
--    2 claims of a hot key another holder runs (a retry storm on HOT keys) -> 409 in_progress
-- scripts/bench seeds the completed (SEEDN keys), unknown (SEEDN / 2) and hot (HOT) operations
-- first, all under the prefix SEED. Every answer is checked against the decisions its kind
-- may get (wrk pairs no response with its request, so this counts by decision: each decision
-- must be one of the five and arrive in its share); anything else is an error.
--
--   wrk -t 2 -c 64 -d 10s --latency -s scripts/bench-mixed.lua URL -- TOKEN NONCE SEED SEEDN HOT
--
-- done() prints one machine-readable line that scripts/bench parses:
--   mixed_result requests=N duration_us=N errors=N socket_errors=N p50_us=N p99_us=N
--     execute=N replay=N conflict=N manual=N in_progress=N

local threads = {}
local kinds = { "execute", "replay", "conflict", "manual", "in_progress" }
local statuses = { execute = 201, replay = 200, conflict = 422, manual = 409, in_progress = 409 }

function setup(thread)
    thread:set("thread_id", #threads)
    table.insert(threads, thread)
end

function init(args)
    local usage = "usage: ... -- TOKEN NONCE SEED SEEDN HOT"
    token = args[1] or error(usage)
    nonce = args[2] or error(usage)
    seed = args[3] or error(usage)
    seedn = tonumber(args[4] or error(usage))
    hot = tonumber(args[5] or error(usage))
    counter = 0
    errors = 0
    first_error = ""
    for _, k in ipairs(kinds) do
        _G["n_" .. k] = 0
    end
end

local function claim(key, holder, amount)
    local body = string.format(
        '{"tool":"payments.charge","holder":"%s","request":' ..
        '{"amount":"%s","currency":"EUR","customer":"c-1"}}', holder, amount)
    return wrk.format("POST", "/v1/operations", {
        ["Authorization"] = "Bearer " .. token,
        ["Idempotency-Key"] = key,
        ["Content-Type"] = "application/json",
    }, body)
end

function request()
    counter = counter + 1
    local slot = counter % 20
    local holder = string.format("mixed-%d", thread_id)
    if slot < 12 then
        return claim(string.format("mix-%s-t%d-%d", nonce, thread_id, counter), holder, "1.00")
    elseif slot < 15 then
        return claim(string.format("%s-done-%d", seed, counter % seedn), holder, "1.00")
    elseif slot < 17 then
        return claim(string.format("%s-done-%d", seed, counter % seedn), holder, "2.00")
    elseif slot < 18 then
        return claim(string.format("%s-unknown-%d", seed, counter % math.floor(seedn / 2)), holder, "1.00")
    else
        return claim(string.format("%s-hot-%d", seed, counter % hot), holder, "1.00")
    end
end

function response(status, headers, body)
    local decision = string.match(body or "", '"decision":"([a-z_]+)"')
    if decision ~= nil and statuses[decision] == status then
        _G["n_" .. decision] = _G["n_" .. decision] + 1
        return
    end
    errors = errors + 1
    if first_error == "" then
        first_error = status .. " " .. string.sub(body or "", 1, 200)
    end
end

function done(summary, latency, requests)
    local errs, first = 0, ""
    local by = {}
    for _, k in ipairs(kinds) do
        by[k] = 0
    end
    for _, thread in ipairs(threads) do
        errs = errs + (thread:get("errors") or 0)
        for _, k in ipairs(kinds) do
            by[k] = by[k] + (thread:get("n_" .. k) or 0)
        end
        local e = thread:get("first_error") or ""
        if first == "" then
            first = e
        end
    end
    local e = summary.errors
    io.write(string.format(
        "mixed_result requests=%d duration_us=%d errors=%d socket_errors=%d p50_us=%d p99_us=%d " ..
        "execute=%d replay=%d conflict=%d manual=%d in_progress=%d\n",
        summary.requests, summary.duration, errs, e.connect + e.read + e.write + e.timeout,
        latency:percentile(50), latency:percentile(99),
        by.execute, by.replay, by.conflict, by.manual, by.in_progress))
    if first ~= "" then
        io.write("mixed_first_error " .. string.gsub(first, "\n", " ") .. "\n")
    end
end

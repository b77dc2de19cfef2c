"""The gateway seen by an agent using the official MCP Python SDK (`mcp`). Run by
tests/e2e_mcp.rs against a real `opledger serve` with pay_server.py as its upstream.

    agent_checks.py URL TOKEN OTHER_TOKEN OPERATOR_TOKEN EFFECTS_FILE BOOKS_EFFECTS_FILE

Upstream `pay` is pay_server.py over stdio (its effects in EFFECTS_FILE); upstream `books` is
another pay_server.py over Streamable HTTP (its effects in BOOKS_EFFECTS_FILE).

TOKEN is granted every tool; OTHER_TOKEN is an agent granted none of the upstream's;
OPERATOR_TOKEN has no agent role.

Each check asserts; the first failure ends the run with its message. The last line printed is
a JSON summary the Rust test checks against the ledger.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, OTHER_TOKEN, OPERATOR_TOKEN, EFFECTS, BOOKS_EFFECTS = sys.argv[1:7]
KEY = "io.opledger/idempotency-key"


def effects(tool=None, path=EFFECTS):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [e for e in lines if tool is None or e["tool"] == tool]


def client(headers=None, mode="legacy", token=None):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token or TOKEN}", **(headers or {})},
        timeout=httpx2.Timeout(30, read=60),
    )
    return http, Client(streamable_http_client(URL, http_client=http), mode=mode)


def meta_of(result):
    return dict(result.meta or {})


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def listing():
    http, c = client()
    async with http, c:
        every = {t.name: t for t in (await c.list_tools()).tools}
    tools = {n: t for n, t in every.items() if n.startswith("pay.")}
    assert set(tools) == {"pay.charge", "pay.balance", "pay.refund", "pay.notify", "pay.sync_catalog", "pay.crash"}, tools
    # The HTTP upstream's tools, under its own prefix, by their annotations (no [[tool]] entry).
    books = {n: dict(t.meta or {}).get("io.opledger/class") for n, t in every.items() if n.startswith("books.")}
    assert books["books.charge"] == "natural" and books["books.balance"] == "read", books
    classes = {n: dict(t.meta or {}).get("io.opledger/class") for n, t in tools.items()}
    # pay.charge has a [[tool]] entry (keyed) that its annotations cannot relax.
    assert classes == {
        "pay.charge": "keyed",
        "pay.balance": "read",
        "pay.refund": "unsafe",
        "pay.notify": "unsafe",
        "pay.sync_catalog": "natural",
        "pay.crash": "unsafe",
    }, classes
    assert all(t.output_schema is None for t in tools.values()), "no output schema is advertised"
    return classes


async def retries_in_parallel():
    """An agent's call times out on its side; it retries 20 times at once: one side effect."""
    args = {"amount": 1500, "customer": "cus_1", "delay_s": 3.0}
    # The agent gives up once the upstream has run the effect (the call runs on for 3 s) and
    # drops its connection (a stateless client: nothing keeps the request open).
    http, c = client(mode="auto")
    async with http, c:
        abandoned = asyncio.create_task(c.call_tool("pay.charge", args, meta={KEY: "order-1"}))
        for _ in range(400):
            if effects("charge") or abandoned.done():
                break
            await asyncio.sleep(0.05)
        assert effects("charge"), f"the first call never reached the upstream: {abandoned}"
        effect_at = asyncio.get_running_loop().time()
        abandoned.cancel()
        try:
            await abandoned
        except BaseException:  # cancelled, or the SDK's own error about it
            pass
    # The upstream call ends about 3 s after its effect: answers decided before that are
    # in_progress (with a margin for the 50 ms polling above).
    ends_at = effect_at + 2.9
    # 20 retries at once, while the abandoned call still runs upstream.
    http, c = client()
    async with http, c:
        retries = await asyncio.gather(
            *[c.call_tool("pay.charge", args, meta={KEY: "order-1"}) for _ in range(20)]
        )
        retries_in_time = asyncio.get_running_loop().time() < ends_at
        # Past the tool's 1 s lease, the abandoned call still runs: its lease is renewed, so
        # a retry is told to wait, not sent to a person.
        await asyncio.sleep(max(0.0, effect_at + 1.3 - asyncio.get_running_loop().time()))
        late = await c.call_tool("pay.charge", args, meta={KEY: "order-1"})
        assert asyncio.get_running_loop().time() < ends_at, (
            "the late retry came after the call ended: this machine is too slow for the check"
        )
        assert meta_of(late)["io.opledger/decision"] == "in_progress", meta_of(late)
        # The abandoned call finishes and is reported: a retry then replays its result.
        first = None
        for _ in range(100):
            r = await c.call_tool("pay.charge", args, meta={KEY: "order-1"})
            if meta_of(r)["io.opledger/decision"] == "replay":
                first = r
                break
            assert meta_of(r)["io.opledger/decision"] == "in_progress", meta_of(r)
            await asyncio.sleep(0.1)
        assert first is not None, "the abandoned call was never reported"
    # On a machine too slow to send all 20 within the call, the last ones replay.
    allowed = {"in_progress"} if retries_in_time else {"in_progress", "replay"}
    for r in retries:
        assert meta_of(r)["io.opledger/decision"] in allowed, meta_of(r)
        if meta_of(r)["io.opledger/decision"] == "in_progress":
            assert r.is_error and "do not change its arguments" in text_of(r), text_of(r)
    charges = effects("charge")
    assert len(charges) == 1, charges
    op = meta_of(first)["io.opledger/operation-id"]
    assert charges[0]["op"] == op, (charges, op)
    assert {meta_of(r)["io.opledger/operation-id"] for r in retries} == {op}
    assert text_of(first) == f"charged 1500 to cus_1 as {op}", text_of(first)

    # A replay returns the first result, without a call upstream.
    http, c = client()
    async with http, c:
        again = await c.call_tool("pay.charge", args, meta={KEY: "order-1"})
    assert meta_of(again)["io.opledger/decision"] == "replay", meta_of(again)
    assert text_of(again) == text_of(first), (text_of(again), text_of(first))
    assert not again.is_error
    assert len(effects("charge")) == 1
    # The header carries the key as well as _meta does.
    http, c = client({"Idempotency-Key": "order-1"})
    async with http, c:
        by_header = await c.call_tool("pay.charge", args)
    assert meta_of(by_header)["io.opledger/decision"] == "replay", meta_of(by_header)
    assert len(effects("charge")) == 1

    # Other arguments under the same key: a conflict naming the category.
    http, c = client()
    async with http, c:
        other = await c.call_tool(
            "pay.charge", {**args, "amount": 9999}, meta={KEY: "order-1"}
        )
    assert other.is_error
    assert meta_of(other)["io.opledger/decision"] == "conflict", meta_of(other)
    assert meta_of(other)["io.opledger/conflict"] == ["amount"], meta_of(other)
    assert len(effects("charge")) == 1
    return op


async def derived_keys():
    """Without a key, the same call in the same session is one operation."""
    args = {"amount": 7, "customer": "cus_2"}
    http, c = client()
    async with http, c:
        a = await c.call_tool("pay.charge", args)
        b = await c.call_tool("pay.charge", args)
        # What the contract ignores (delay_s) does not make it another call.
        ignored = await c.call_tool("pay.charge", {**args, "delay_s": 0.01})
        other = await c.call_tool("pay.charge", {**args, "amount": 8})
    assert meta_of(a)["io.opledger/decision"] == "execute", meta_of(a)
    assert meta_of(b)["io.opledger/decision"] == "replay", meta_of(b)
    assert meta_of(ignored)["io.opledger/decision"] == "replay", meta_of(ignored)
    assert meta_of(other)["io.opledger/decision"] == "execute", meta_of(other)
    assert len([e for e in effects("charge") if e["args"]["customer"] == "cus_2"]) == 2


async def reads_every_time():
    http, c = client()
    async with http, c:
        for _ in range(3):
            r = await c.call_tool("pay.balance", {"customer": "cus_1"})
            assert meta_of(r)["io.opledger/decision"] == "not_recorded", meta_of(r)
            assert "io.opledger/operation-id" not in meta_of(r)
    assert len(effects("balance")) == 3


async def hanging_upstream():
    """A destructive call whose upstream hangs: outcome unknown, never called twice."""
    http, c = client()
    async with http, c:
        first = await c.call_tool("pay.refund", {"charge_id": "ch_1"}, meta={KEY: "refund-1"})
        again = await c.call_tool("pay.refund", {"charge_id": "ch_1"}, meta={KEY: "refund-1"})
    assert first.is_error and meta_of(first)["io.opledger/decision"] == "outcome_unknown", meta_of(first)
    assert "may have happened" in text_of(first), text_of(first)
    assert "io.opledger/retry-safe" not in meta_of(first), meta_of(first)
    assert again.is_error
    assert meta_of(again)["io.opledger/decision"] in ("outcome_unknown", "manual"), meta_of(again)
    assert len(effects("refund")) == 1
    return meta_of(first)["io.opledger/operation-id"]


async def large_result():
    """A result over result_bytes_max: the caller gets it whole, a replay says it is withheld."""
    http, c = client()
    async with http, c:
        first = await c.call_tool("pay.notify", {"text": "x" * 50}, meta={KEY: "note-1"})
        again = await c.call_tool("pay.notify", {"text": "x" * 50}, meta={KEY: "note-1"})
    assert len(text_of(first)) == 5000, len(text_of(first))
    assert meta_of(again)["io.opledger/decision"] == "replay", meta_of(again)
    assert meta_of(again)["io.opledger/result-withheld"] == "too_large", meta_of(again)
    assert not again.is_error
    assert len(effects("notify")) == 1


async def refused_without_token():
    http = httpx2.AsyncClient(timeout=10)
    async with http:
        r = await http.post(
            URL,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert r.status_code == 401, r.status_code


async def ungranted_tools_are_not_there():
    http, c = client(token=OTHER_TOKEN)
    async with http, c:
        listed = (await c.list_tools()).tools
        assert listed == [], [t.name for t in listed]
        try:
            r = await c.call_tool("pay.charge", {"amount": 1, "customer": "c"}, meta={KEY: "x"})
        except Exception as e:  # the SDK raises protocol errors
            assert "no tool named" in str(e), e
        else:
            assert r.is_error and "no tool named" in text_of(r), r
    assert not [e for e in effects("charge") if e["args"]["customer"] == "c"]


async def stateless_clients_get_the_same_guarantees():
    """A 2026-07-28 client has no session: identical calls without a key are one operation
    within the window."""
    args = {"amount": 3, "customer": "cus_3"}
    results = []
    for _ in range(2):
        http, c = client(mode="auto")
        async with http, c:
            results.append(await c.call_tool("pay.charge", args))
    decisions = [meta_of(r)["io.opledger/decision"] for r in results]
    assert decisions == ["execute", "replay"], decisions
    assert len([e for e in effects("charge") if e["args"]["customer"] == "cus_3"]) == 1


async def run_ids_scope_keys_across_sessions():
    """A run id the client declares outlives a reconnect: the retry replays."""
    args = {"amount": 5, "customer": "cus_4"}
    results = []
    for _ in range(2):  # two sessions
        http, c = client()
        async with http, c:
            results.append(await c.call_tool("pay.charge", args, meta={"io.opledger/run-id": "run-9"}))
    assert [meta_of(r)["io.opledger/decision"] for r in results] == ["execute", "replay"]
    assert len([e for e in effects("charge") if e["args"]["customer"] == "cus_4"]) == 1


async def a_natural_tool_that_times_out_may_be_retried():
    http, c = client()
    async with http, c:
        first = await c.call_tool("pay.sync_catalog", {}, meta={KEY: "sync-1"})
        assert meta_of(first)["io.opledger/decision"] == "outcome_unknown", meta_of(first)
        assert "retrying the same call is safe" in text_of(first), text_of(first)
        again = await c.call_tool("pay.sync_catalog", {}, meta={KEY: "sync-1"})
    for r in (first, again):
        assert meta_of(r)["io.opledger/decision"] == "outcome_unknown", meta_of(r)
        assert meta_of(r)["io.opledger/retry-safe"] is True, meta_of(r)
        assert "retrying the same call is safe" in text_of(r), text_of(r)
    assert len(effects("sync_catalog")) == 2, "an idempotent tool is called again"


async def keys_must_agree_and_sessions_belong_to_their_principal():
    seen = {}

    async def remember(response):
        if sid := response.headers.get("mcp-session-id"):
            seen["sid"] = sid

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "k-header"},
        timeout=30,
        event_hooks={"response": [remember]},
    )
    async with http, Client(streamable_http_client(URL, http_client=http), mode="legacy") as c:
        try:
            r = await c.call_tool("pay.charge", {"amount": 1, "customer": "k"}, meta={KEY: "k-meta"})
        except Exception as e:
            assert "disagree" in str(e), e
        else:
            raise AssertionError(f"two different keys were accepted: {r}")
        sid = seen["sid"]
        # Another agent presenting this session is told there is none.
        async with httpx2.AsyncClient(timeout=10) as other:
            r = await other.post(
                URL,
                json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
                headers={
                    "Authorization": f"Bearer {OTHER_TOKEN}",
                    "Mcp-Session-Id": sid,
                    "Accept": "application/json, text/event-stream",
                },
            )
        assert r.status_code == 404, r.status_code
        # The owner's session is untouched by the foreign probe.
        assert [t.name for t in (await c.list_tools()).tools], "the owner still lists tools"
    assert not [e for e in effects("charge") if e["args"]["customer"] == "k"]


async def odd_keys_and_large_bodies_are_refused():
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "k\xe9".encode("latin-1")},
        timeout=30,
    )
    async with http, Client(streamable_http_client(URL, http_client=http), mode="legacy") as c:
        try:
            r = await c.call_tool("pay.charge", {"amount": 1, "customer": "odd"})
        except Exception as e:
            assert "visible ASCII" in str(e), e
        else:
            raise AssertionError(f"a non-ASCII key was taken for no key: {r}")
    async with httpx2.AsyncClient(timeout=10) as raw:
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 10000}}
        r = await raw.post(
            URL,
            json=big,
            headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"},
        )
        assert r.status_code == 413, r.status_code
    assert not [e for e in effects("charge") if e["args"]["customer"] == "odd"]


async def roles_and_hosts_are_checked():
    async with httpx2.AsyncClient(timeout=10) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = "application/json, text/event-stream"
        r = await http.post(URL, json=body, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}", "Accept": accept})
        assert r.status_code == 403, r.status_code
        r = await http.post(
            URL, json=body, headers={"Authorization": f"Bearer {TOKEN}", "Accept": accept, "Host": "evil.example"}
        )
        assert r.status_code == 403, r.status_code


async def an_http_upstream_is_served_like_a_stdio_one():
    http, c = client()
    async with http, c:
        first = await c.call_tool("books.charge", {"amount": 2, "customer": "b"}, meta={KEY: "books-1"})
        again = await c.call_tool("books.charge", {"amount": 2, "customer": "b"}, meta={KEY: "books-1"})
    assert meta_of(first)["io.opledger/decision"] == "execute", meta_of(first)
    assert meta_of(again)["io.opledger/decision"] == "replay", meta_of(again)
    charges = effects("charge", path=BOOKS_EFFECTS)
    assert len(charges) == 1 and charges[0]["op"] == meta_of(first)["io.opledger/operation-id"], charges


async def an_upstream_dying_mid_call_leaves_the_outcome_unknown():
    """The stdio upstream dies after its effect: unknown, to a person; while it is down, calls
    are answered not_executed with nothing claimed; once back, it serves again."""
    down = EFFECTS + ".down"
    http, c = client()
    async with http, c:
        first = await c.call_tool("pay.crash", {}, meta={KEY: "crash-1"})
        assert first.is_error and meta_of(first)["io.opledger/decision"] == "outcome_unknown", meta_of(first)
        assert "may have happened" in text_of(first), text_of(first)
        assert os.path.exists(down), "the upstream left its down marker"
        # Down (its restart waits on the marker): the same call is answered from the ledger,
        # never "nothing was done"; a new recorded call is released with nothing done.
        again = await c.call_tool("pay.crash", {}, meta={KEY: "crash-1"})
        assert meta_of(again)["io.opledger/decision"] in ("outcome_unknown", "manual"), meta_of(again)
        refused = await c.call_tool("pay.charge", {"amount": 4, "customer": "cus_down"}, meta={KEY: "down-1"})
        assert refused.is_error and meta_of(refused)["io.opledger/decision"] == "not_executed", meta_of(refused)
        assert "nothing was done" in text_of(refused), text_of(refused)
        os.remove(down)
        # Back: the refused call was not claimed, so it now runs.
        for _ in range(600):
            r = await c.call_tool("pay.charge", {"amount": 4, "customer": "cus_down"}, meta={KEY: "down-1"})
            if meta_of(r)["io.opledger/decision"] != "not_executed":
                break
            await asyncio.sleep(0.1)
        assert meta_of(r)["io.opledger/decision"] == "execute", meta_of(r)
    assert len(effects("crash")) == 1
    assert len([e for e in effects("charge") if e["args"]["customer"] == "cus_down"]) == 1
    return meta_of(first)["io.opledger/operation-id"]


async def a_keyless_call_after_the_window_is_a_new_operation():
    """Stateless, keyless: identical calls are one operation until derived_key_window (3 s in
    this config) has passed since it finished."""
    args = {"amount": 6, "customer": "cus_5"}
    answers = []
    for pause in (0, 0, 3.5):
        await asyncio.sleep(pause)
        http, c = client(mode="auto")
        async with http, c:
            answers.append(await c.call_tool("pay.charge", args))
    assert [meta_of(r)["io.opledger/decision"] for r in answers] == ["execute", "replay", "execute"], [
        meta_of(r) for r in answers
    ]
    ops = [meta_of(r)["io.opledger/operation-id"] for r in answers]
    assert ops[0] == ops[1] != ops[2], ops
    assert len([e for e in effects("charge") if e["args"]["customer"] == "cus_5"]) == 2


async def main():
    classes = await listing()
    charge_op = await retries_in_parallel()
    await derived_keys()
    await reads_every_time()
    refund_op = await hanging_upstream()
    await large_result()
    await refused_without_token()
    await ungranted_tools_are_not_there()
    await stateless_clients_get_the_same_guarantees()
    await run_ids_scope_keys_across_sessions()
    await a_natural_tool_that_times_out_may_be_retried()
    await keys_must_agree_and_sessions_belong_to_their_principal()
    await roles_and_hosts_are_checked()
    await odd_keys_and_large_bodies_are_refused()
    await an_http_upstream_is_served_like_a_stdio_one()
    await a_keyless_call_after_the_window_is_a_new_operation()
    crash_op = await an_upstream_dying_mid_call_leaves_the_outcome_unknown()
    print(json.dumps({"classes": classes, "charge_op": charge_op, "refund_op": refund_op, "crash_op": crash_op}))


asyncio.run(main())

"""The synchronous client against the real binary."""

from __future__ import annotations

import threading
import time
import types
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
from conftest import CHARGE, TOKEN_A, TOKEN_B, TOKEN_SLOW_RAISED, TOKEN_SLOW_RETRIED, LogWatch, Server

import opledger
from opledger import (
    ApiError,
    Client,
    Conflict,
    DefiniteFailure,
    InProgressTimeout,
    KeyExpired,
    ManualResolution,
    NotAccepted,
    NotRecorded,
    OpledgerError,
    OutcomeUnknown,
    Rejected,
    Result,
    UnreportedOperation,
)

TICKET = {"project": "ops", "title": "disk full"}


class ProviderTimeout(Exception):
    """What a side effect's SDK raises when it cannot tell whether the call went through."""


class Background:
    """Runs a function in a thread and hands back its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: Optional[BaseException] = None

        def run() -> None:
            try:
                self.value = fn()
            except BaseException as e:  # handed to the test
                self.error = e

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self) -> Any:
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the background call did not finish in 30 s"
        if self.error is not None:
            raise self.error
        return self.value


def eventually(check: Callable[[], bool], what: str, limit: float = 15.0) -> None:
    """Polls the ledger until ``check`` holds (a state the server reaches by itself)."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {limit} s"
        time.sleep(0.05)


def test_the_package_is_the_installed_copy_and_ships_its_type_marker() -> None:
    source = Path(__file__).resolve().parents[1] / "src"
    installed = Path(opledger.__file__).resolve()
    assert source not in installed.parents, f"imported from the source tree: {installed}"
    assert installed.with_name("py.typed").is_file()


def test_the_readme_examples_run(server: Server) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:3]]
    quick_start, context_manager = blocks
    assert 'token="dev-..."' in quick_start and "http://127.0.0.1:7070" in quick_start
    # As pasted: only the address and the token a reader fills in.
    quick_start = quick_start.replace("http://127.0.0.1:7070", server.base).replace(
        '"dev-..."', repr(TOKEN_A)
    )
    printed: List[Any] = []
    namespace: Dict[str, Any] = {"print": printed.append}
    exec(compile(quick_start, "README.md", "exec"), namespace)
    assert len(printed) == 2 and printed[0] == "charging 10.50 EUR", printed
    charge_id = printed[1]
    assert charge_id.startswith("ch_py_"), printed
    assert namespace["charge"]("42", "10.50").resource_ref == charge_id
    assert len(printed) == 2, "a retry replays without charging"
    # The context manager's example: an intent of its own, executed once.
    exec(compile(context_manager, "README.md", "exec"), namespace)
    assert namespace["result"].resource_ref.startswith("ch_py_")
    assert printed[2:] == ["charging 10.50 EUR"], printed
    namespace["ledger"].close()


def test_the_projects_readme_quick_start_runs(server: Server) -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = readme.split("```python\n")[1].split("```", 1)[0]
    for pasted in ('token="dev-..."', "http://127.0.0.1:7070", 'f"py-order-{order}-charge"'):
        assert pasted in block, pasted
    # Its own keys, so that the client README's charge of order 42 is not replayed here.
    block = (
        block.replace("http://127.0.0.1:7070", server.base)
        .replace('"dev-..."', repr(TOKEN_A))
        .replace('f"py-order-{order}-charge"', 'f"top-readme-{order}-charge"')
    )
    printed: List[Any] = []
    namespace: Dict[str, Any] = {"print": printed.append}
    exec(compile(block, "README.md", "exec"), namespace)
    assert len(printed) == 2 and printed[0].startswith("charging"), printed
    again = namespace["charge"]("42", "10.50")
    assert again.resource_ref == printed[1] and len(printed) == 2, (again, printed)
    namespace["ledger"].close()


def test_execute_complete_then_replay_returns_the_stored_result_without_running_the_effect(
    client: Client, key: Callable[[str], str]
) -> None:
    calls: List[str] = []

    @client.exactly_once(
        tool="payments.charge",
        key=lambda order, **_: key(f"order-{order}"),
        request=lambda order, **fields: fields,
    )
    def charge(operation_id: str, order: str, **request: Any) -> Result:
        calls.append(operation_id)
        return Result(f"ch-{operation_id[:8]}", 201, {"x-resource-version": "1"})

    first = charge("42", **CHARGE)
    assert calls and first == Result(f"ch-{calls[0][:8]}", 201, {"x-resource-version": "1"})
    # 10.5 is 10.50: the same intent, so a replay.
    again = charge("42", amount="10.5", currency="EUR", customer="c-7")
    assert again == first
    assert len(calls) == 1
    stored = client.get(calls[0])
    assert (stored.state, stored.version, stored.result) == ("completed", 2, first)


def test_claim_and_reports_answer_as_the_api_says(client: Client, key: Callable[[str], str]) -> None:
    k = key("low-level")
    claim = client.claim("payments.charge", k, CHARGE, "worker-1")
    assert (claim.decision, claim.http_status, claim.state, claim.version) == (
        "execute",
        201,
        "processing",
        1,
    )
    assert claim.executable and claim.lease is not None and claim.lease.holder == "worker-1"
    op = claim.operation_id

    other = client.claim("payments.charge", k, CHARGE, "worker-2")
    assert (other.decision, other.http_status, other.operation_id) == ("in_progress", 409, op)
    assert other.raise_for_decision() is other  # in_progress is not an error by itself
    # The same holder re-claiming its live operation carries on.
    assert client.claim("payments.charge", k, CHARGE, "worker-1").decision == "execute"

    assert client.heartbeat(op, "worker-1").decision == "accepted"
    with pytest.raises(Rejected) as refused:
        client.complete(op, "worker-2", "ch_1", 201)
    assert (refused.value.code, refused.value.number, refused.value.state) == ("not_holder", 3, "processing")

    done = client.complete(op, "worker-1", "ch_1", 201, headers={"x-resource-version": "7"})
    assert (done.decision, done.state, done.version) == ("accepted", "completed", 2)
    assert done.result == Result("ch_1", 201, {"x-resource-version": "7"})
    repeat = client.complete(op, "worker-1", "ch_1", 201, headers={"x-resource-version": "7"})
    assert repeat.decision == "unchanged"
    with pytest.raises(Rejected) as late:
        client.fail(op, "worker-1", "definite", "card_declined")
    assert late.value.code == "already_finished"

    replay = client.claim("payments.charge", k, CHARGE, "worker-3")
    assert (replay.decision, replay.http_status, replay.result) == ("replay", 200, done.result)

    changed = client.claim("payments.charge", k, dict(CHARGE, amount="99.00"), "worker-3")
    assert (changed.decision, changed.http_status, changed.conflict) == ("conflict", 422, ("amount",))
    with pytest.raises(Conflict):
        changed.raise_for_decision()

    stale = client.claim("payments.charge", key("stale"), CHARGE, "worker-1")
    with pytest.raises(Rejected) as version:
        client.unknown(stale.operation_id, "worker-1", expected_version=stale.version + 5)
    assert version.value.code == "stale_version"


def test_two_threads_with_the_same_key_run_the_effect_once(
    server: Server, key: Callable[[str], str], logs: LogWatch
) -> None:
    k = key("threads")
    calls: List[str] = []
    other_told_to_wait = logs.event("wait")
    start = threading.Barrier(2)

    with Client(server.base, TOKEN_A) as ledger:

        @ledger.exactly_once(tool="payments.charge", key=k, request=lambda: CHARGE)
        def charge(operation_id: str) -> str:
            calls.append(operation_id)
            # Hold the operation until the other caller has been told `in_progress`.
            assert other_told_to_wait.wait(20), "the other caller never saw in_progress"
            return "ch-threads"

        def call() -> Result:
            start.wait(timeout=20)
            return charge()

        callers = [Background(call), Background(call)]
        results = [c.result() for c in callers]

    assert len(calls) == 1
    assert results == [Result("ch-threads", 200, {}), Result("ch-threads", 200, {})]
    waits = logs.of("wait")
    assert waits and {getattr(r, "operation_id") for r in waits} == {calls[0]}


def test_a_changed_request_raises_conflict_naming_the_category(
    client: Client, key: Callable[[str], str]
) -> None:
    calls: List[str] = []

    @client.exactly_once(tool="payments.charge", key=lambda **_: key("conflict"))
    def charge(operation_id: str, **request: Any) -> str:
        calls.append(operation_id)
        return "ch-conflict"

    charge(**CHARGE)
    with pytest.raises(Conflict) as caught:
        charge(**dict(CHARGE, customer="c-8"))
    assert caught.value.categories == ("recipient",)
    assert caught.value.operation_id == calls[0]
    assert "recipient" in str(caught.value)
    with pytest.raises(Conflict) as two:
        charge(**dict(CHARGE, amount="11.00", description="more"))
    assert set(two.value.categories) == {"amount", "body"}
    assert len(calls) == 1


@pytest.mark.parametrize(
    "tool, request_, state, error",
    [
        ("payments.charge", CHARGE, "outcome_unknown", OutcomeUnknown),
        ("tickets.create", TICKET, "manual", ManualResolution),
    ],
)
def test_an_effect_that_raises_is_reported_unknown_and_never_runs_again(
    client: Client,
    key: Callable[[str], str],
    tool: str,
    request_: Any,
    state: str,
    error: type,
) -> None:
    calls: List[str] = []

    @client.exactly_once(tool=tool, key=key(f"raises-{tool}"), request=lambda: request_)
    def effect(operation_id: str) -> str:
        calls.append(operation_id)
        raise ProviderTimeout("no answer from the provider")

    with pytest.raises(ProviderTimeout):
        effect()
    assert client.get(calls[0]).state == state
    with pytest.raises(error) as caught:
        effect()
    assert (caught.value.operation_id, caught.value.state) == (calls[0], state)
    assert len(calls) == 1


def test_a_natural_tool_is_released_after_an_unknown_outcome_and_runs_again(
    client: Client, key: Callable[[str], str]
) -> None:
    calls: List[str] = []

    @client.exactly_once(tool="notes.append", key=key("natural"), request=lambda: {"note": "hi"})
    def append(operation_id: str) -> str:
        calls.append(operation_id)
        if len(calls) == 1:
            raise ProviderTimeout("no answer")
        return "note-1"

    with pytest.raises(ProviderTimeout):
        append()
    assert client.get(calls[0]).state == "released"
    assert append() == Result("note-1", 200, {})
    assert len(calls) == 2 and calls[0] == calls[1]  # the same operation id both times


def test_a_declared_definite_failure_is_reported_and_replayed(
    client: Client, key: Callable[[str], str]
) -> None:
    calls: List[str] = []

    @client.exactly_once(tool="payments.charge", key=key("declined"), request=lambda: CHARGE)
    def charge(operation_id: str) -> str:
        calls.append(operation_id)
        raise DefiniteFailure("card_declined")

    with pytest.raises(DefiniteFailure) as first:
        charge()
    assert (first.value.operation_id, first.value.replayed) == (calls[0], False)
    assert str(first.value) == f"operation {calls[0]}: failed definitely: card_declined"
    stored = client.get(calls[0])
    assert stored.state == "failed" and stored.failure is not None and stored.failure.code == "card_declined"
    with pytest.raises(DefiniteFailure) as replayed:
        charge()
    assert (replayed.value.code, replayed.value.replayed, replayed.value.operation_id) == (
        "card_declined",
        True,
        calls[0],
    )
    assert len(calls) == 1


def test_not_accepted_releases_the_key_for_a_retry_under_the_same_id(
    client: Client, key: Callable[[str], str]
) -> None:
    calls: List[str] = []

    @client.exactly_once(tool="payments.charge", key=key("not-accepted"), request=lambda: CHARGE)
    def charge(operation_id: str) -> str:
        calls.append(operation_id)
        if len(calls) == 1:
            raise NotAccepted("provider_refused_connection")
        return "ch-second-try"

    with pytest.raises(NotAccepted):
        charge()
    assert client.get(calls[0]).state == "released"
    assert charge().resource_ref == "ch-second-try"
    assert len(calls) == 2 and calls[0] == calls[1]


def test_in_progress_waits_with_backoff_then_gets_the_replay(
    client: Client, key: Callable[[str], str], logs: LogWatch
) -> None:
    calls: List[str] = []
    started = threading.Event()
    release = threading.Event()
    logs.listen(lambda r: release.set() if getattr(r, "opledger_event", None) == "wait" else None)

    @client.exactly_once(tool="payments.charge", key=key("wait"), request=lambda: CHARGE)
    def charge(operation_id: str) -> str:
        calls.append(operation_id)
        started.set()
        assert release.wait(20), "the second caller never waited"
        return "ch-after-wait"

    first = Background(charge)
    assert started.wait(20)
    # Told in_progress, the second caller waits; its first wait releases the executor.
    second = charge()
    assert first.result() == second == Result("ch-after-wait", 200, {})
    assert len(calls) == 1
    assert logs.of("wait")


def test_in_progress_past_the_wait_limit_raises(client: Client, key: Callable[[str], str]) -> None:
    started = threading.Event()
    release = threading.Event()
    calls: List[str] = []

    @client.exactly_once(tool="payments.charge", key=key("limit"), request=lambda: CHARGE, wait_limit=0.4)
    def charge(operation_id: str) -> str:
        calls.append(operation_id)
        started.set()
        assert release.wait(20)
        return "ch-limit"

    first = Background(charge)
    assert started.wait(20)
    try:
        with pytest.raises(InProgressTimeout) as caught:
            charge()
    finally:
        release.set()
    assert caught.value.operation_id == calls[0]
    assert caught.value.waited >= 0.4 and caught.value.attempts >= 2
    assert first.result().resource_ref == "ch-limit"
    assert len(calls) == 1


def test_the_context_manager_executes_reports_and_replays(client: Client, key: Callable[[str], str]) -> None:
    k = key("with")
    with client.operation("payments.charge", k, CHARGE) as op:
        assert op.executing and not op.replayed
        ref = f"ch-{op.id[:8]}"
        stored = op.complete(resource_ref=ref, status=201)
    assert stored == Result(ref, 201, {})

    with client.operation("payments.charge", k, CHARGE) as again:
        assert again.replayed and again.id == op.id
        assert again.result == stored
        with pytest.raises(OpledgerError):
            again.complete("ch-other", 201)

    with pytest.raises(UnreportedOperation):
        with client.operation("tickets.create", key("forgot"), TICKET) as forgot:
            pass
    assert client.get(forgot.id).state == "manual"

    with pytest.raises(KeyError):
        with client.operation("payments.charge", key("raised"), CHARGE) as raised:
            raise KeyError("lost")
    assert client.get(raised.id).state == "outcome_unknown"

    with client.operation("payments.charge", key("declined"), CHARGE) as declined:
        assert declined.fail("definite", "card_declined").state == "failed"


def test_bad_input_raises_api_error_with_the_code(
    server: Server, client: Client, key: Callable[[str], str]
) -> None:
    cases = [
        (lambda: client.claim("no.such.tool", key("e1"), CHARGE, "w"), 400, "unknown_tool"),
        (
            lambda: client.claim("payments.charge", key("e2"), dict(CHARGE, amount="ten"), "w"),
            400,
            "invalid_request",
        ),
        (lambda: client.claim("payments.charge", key("e3"), CHARGE, "has space"), 400, "invalid_field"),
        (lambda: client.claim("payments.charge", "k" * 256, CHARGE, "w"), 400, "invalid_key"),
        (
            lambda: client.claim("payments.charge", key("e4"), CHARGE, "w", parent=str(uuid.uuid4())),
            400,
            "unknown_parent",
        ),
        (lambda: client.get(str(uuid.uuid4())), 404, "not_found"),
    ]
    for call, status, code in cases:
        with pytest.raises(ApiError) as caught:
            call()
        assert (caught.value.status, caught.value.code, caught.value.retriable) == (status, code, False), code
        assert caught.value.message
        assert "k" * 40 not in str(caught.value)

    with Client(server.base, TOKEN_B) as b:
        with pytest.raises(ApiError) as forbidden:
            b.claim("notes.append", key("e5"), {"note": "x"}, "w")
        assert (forbidden.value.status, forbidden.value.code) == (403, "tool_not_allowed")
    with Client(server.base, "not-a-configured-token") as nobody:
        with pytest.raises(ApiError) as unauthenticated:
            nobody.get(str(uuid.uuid4()))
        assert (unauthenticated.value.status, unauthenticated.value.code) == (401, "unauthenticated")
        assert "not-a-configured-token" not in str(unauthenticated.value) + repr(nobody)

    calls: List[str] = []

    @client.exactly_once(tool="no.such.tool", key=key("e6"))
    def effect(operation_id: str, **request: Any) -> str:
        calls.append(operation_id)
        return "never"

    with pytest.raises(ApiError) as decorated:
        effect(x=1)
    assert decorated.value.code == "unknown_tool" and calls == []

    # A key that cannot travel in a header is refused before sending, without echoing it.
    with pytest.raises(ValueError) as unsendable:
        client.claim("payments.charge", "secret\r\nX-Injected: 1", CHARGE, "w")
    assert "secret" not in str(unsendable.value)


def test_a_rate_limited_call_is_retried_after_retry_after(
    server: Server, key: Callable[[str], str], logs: LogWatch
) -> None:
    # 1 request a second, bursts of 1: calls in a row after the first meet 429 and wait.
    started = time.monotonic()
    with Client(server.base, TOKEN_SLOW_RETRIED, retries=5) as slow:
        claim = slow.claim("payments.charge", key("rate"), CHARGE, "w")
        done = slow.complete(claim.operation_id, "w", "ch-rate", 201)
        for _ in range(5):  # more calls only on a machine too slow to meet the limit
            read = slow.get(claim.operation_id)
            if logs.of("retry"):
                break
    assert (done.decision, read.state) == ("accepted", "completed")
    limited = [r for r in logs.of("retry") if getattr(r, "status") == 429]
    assert limited, "no call met 429"
    assert all(getattr(r, "code") == "rate_limited" for r in limited)
    # Retry-After (1 s) was honoured for every retry.
    assert time.monotonic() - started >= len(limited) * 1.0


def test_a_rate_limited_call_raises_once_retries_run_out(server: Server, key: Callable[[str], str]) -> None:
    error: Optional[ApiError] = None
    with Client(server.base, TOKEN_SLOW_RAISED, retries=0) as slow:
        for _ in range(5):
            try:
                # A read tool's claim: nothing is recorded.
                assert (
                    slow.claim("search.lookup", key("rate-raised"), {"q": "x"}, "w").decision
                    == "not_recorded"
                )
            except ApiError as e:
                error = e
                break
    assert error is not None, "five calls in a row were never limited"
    assert (error.status, error.code, error.retriable) == (429, "rate_limited", True)
    assert error.retry_after is not None and error.retry_after >= 1


def test_an_expired_key_raises_key_expired(client: Client, key: Callable[[str], str]) -> None:
    k = key("expired")
    with client.operation("short.keyed", k, {"amount": "1"}) as op:
        op.complete("r-1", 200)
    eventually(lambda: client.get(op.id).state == "expired", "expiry after the 300 ms retention")
    calls: List[str] = []

    @client.exactly_once(tool="short.keyed", key=k, request=lambda: {"amount": "1"})
    def effect(operation_id: str) -> str:
        calls.append(operation_id)
        return "r-2"

    with pytest.raises(KeyExpired) as caught:
        effect()
    assert (caught.value.operation_id, caught.value.claim.http_status) == (op.id, 410)
    assert calls == []


def test_a_read_tool_is_not_recorded(client: Client, key: Callable[[str], str]) -> None:
    claim = client.claim("search.lookup", key("read"), {"q": "x"}, "w")
    assert (claim.decision, claim.recorded, claim.operation_id) == ("not_recorded", False, "")

    @client.exactly_once(tool="search.lookup", key=key("read"))
    def lookup(operation_id: str, **request: Any) -> str:
        return "never"

    with pytest.raises(NotRecorded):
        lookup(q="x")


def test_no_token_key_or_request_value_reaches_a_log_or_an_exception(
    server: Server, key: Callable[[str], str], logs: LogWatch
) -> None:
    secret_key = key("secret-key-7f3a")
    value = "secret-value-91c2"
    texts: List[str] = []
    with Client(server.base, TOKEN_A, retries=1, backoff=0.01) as ledger:
        texts.append(repr(ledger))

        @ledger.exactly_once(
            tool="payments.charge",
            key=secret_key,
            request=lambda amount: {**CHARGE, "amount": amount, "customer": value},
        )
        def charge(operation_id: str, amount: str) -> str:
            raise ProviderTimeout("timed out")

        for amount in ("1.00", "1.00", "2.00"):
            try:
                charge(amount)
            except Exception as e:  # every kind this flow raises
                texts.append(f"{e!s} {e!r}")
                claim = getattr(e, "claim", None)
                if claim is not None:
                    texts.append(repr(claim))
        try:
            ledger.claim("payments.charge", secret_key + "x" * 300, {"customer": value}, "w")
        except ApiError as e:
            texts.append(f"{e!s} {e!r}")
    texts.append(logs.text())
    everything = "\n".join(texts)
    assert "OutcomeUnknown" in everything and "Conflict" in everything  # the flow went where meant
    for secret in (TOKEN_A, secret_key, value):
        assert secret not in everything


def test_an_operation_is_found_by_tool_and_key_and_an_operator_settles_it(client: Client, key: Callable[[str], str]) -> None:
    k = key("operator-flow")
    claim = client.claim("tickets.create", k, TICKET, holder="w1")
    assert claim.decision == "execute"
    found = client.lookup("tickets.create", k)
    assert (found.operation_id, found.state) == (claim.operation_id, "processing")
    with pytest.raises(ApiError) as missing:
        client.lookup("tickets.create", key("never-claimed"))
    assert (missing.value.status, missing.value.code) == (404, "not_found")

    # Unknown for a tool nobody can query: it goes to a person, and shows in the queue.
    assert client.unknown(claim.operation_id, "w1").state == "manual"
    queued = [item["operation_id"] for item in client.queue()["items"]]
    assert claim.operation_id in queued
    taken = client.take_over(claim.operation_id, reason="nobody can query the ticket system")
    assert taken.taken_over_by == "agent-a", taken
    resolved = client.resolve(claim.operation_id, Result("TCK-7", 201), reason="TCK-7 exists")
    assert resolved.state == "completed"
    assert resolved.result is not None and resolved.result.resource_ref == "TCK-7"
    assert client.lookup("tickets.create", k).state == "completed"
    history = client.history(claim.operation_id)
    types_seen = [event["type"] for event in history["events"]]
    assert types_seen[0] == "claimed" and "resolved" in types_seen, types_seen
    # (A derived entry, such as the move to manual, carries no event of its own.)
    by_type = {e["type"]: e["event"] for e in history["events"] if "event" in e}
    assert by_type["taken_over"]["reason"] == "nobody can query the ticket system"
    assert by_type["resolved"]["by"]["reason"] == "TCK-7 exists"

    # tickets.create declares no compensation here: the call is made, and refused as such.
    with pytest.raises(ApiError) as refused:
        client.compensate(claim.operation_id, "w2", {"reason": "undo"})
    assert refused.value.code == "no_compensation"


def test_claim_many_answers_each_intent_as_a_claim_of_its_own(
    client: Client, key: Callable[[str], str]
) -> None:
    first, second = key("many-1"), key("many-2")
    results = client.claim_many(
        [
            opledger.Intent("payments.charge", first, CHARGE, holder="w1"),
            opledger.Intent("payments.charge", "not a key", CHARGE, holder="w1"),
            opledger.Intent("no.such.tool", second, {}, holder="w1"),
            opledger.Intent("tickets.create", second, TICKET, holder="w1"),
        ]
    )
    assert len(results) == 4
    ok, bad_key, unknown, ticket = results
    assert isinstance(ok, opledger.Claim) and ok.decision == "execute", ok
    assert isinstance(bad_key, ApiError) and (bad_key.status, bad_key.code) == (400, "invalid_key")
    assert isinstance(unknown, ApiError) and unknown.code == "unknown_tool"
    assert isinstance(ticket, opledger.Claim) and ticket.decision == "execute"
    # Sent again, the running one is in progress for another holder.
    again = client.claim_many([opledger.Intent("payments.charge", first, CHARGE, holder="w2")])
    assert isinstance(again[0], opledger.Claim) and again[0].decision == "in_progress", again
    with pytest.raises(ValueError):
        client.claim_many([])


def test_a_retried_batch_of_default_holders_gets_the_same_answers(
    client: Client, key: Callable[[str], str]
) -> None:
    # Holders drawn when the intents are made: sent again, the same intents are the same
    # holders, so what they run is theirs to run (execute again), never "in progress".
    intents = [opledger.Intent("payments.charge", key(f"dh-{i}"), CHARGE) for i in range(3)]
    assert len({i.holder for i in intents}) == 3, "a holder of its own each"
    first = client.claim_many(intents)
    again = client.claim_many(intents)
    for one, two in zip(first, again):
        assert isinstance(one, opledger.Claim) and isinstance(two, opledger.Claim)
        assert (one.decision, two.decision) == ("execute", "execute"), (one, two)
        assert one.operation_id == two.operation_id
    # Another worker's intents (new holders) are told the operations are in progress.
    other = client.claim_many([opledger.Intent("payments.charge", i.key, CHARGE) for i in intents])
    assert [getattr(r, "decision") for r in other] == ["in_progress"] * 3


def test_a_key_the_ledger_refuses_is_refused_alone_in_a_batch(
    client: Client, key: Callable[[str], str]
) -> None:
    results = client.claim_many(
        [
            opledger.Intent("payments.charge", "caf\u00e9 \n", CHARGE),
            opledger.Intent("payments.charge", key("beside-bad-key"), CHARGE),
        ]
    )
    bad, good = results
    assert isinstance(bad, ApiError) and (bad.status, bad.code) == (400, "invalid_key"), bad
    assert "caf" not in str(bad), "the key is never echoed"
    assert isinstance(good, opledger.Claim) and good.decision == "execute"


def test_report_many_answers_each_report_as_its_own_call(
    client: Client, key: Callable[[str], str]
) -> None:
    claimed = client.claim_many(
        [opledger.Intent("payments.charge", key(f"rep-{i}"), CHARGE, holder="w1") for i in range(3)]
    )
    ids = [c.operation_id for c in claimed if isinstance(c, opledger.Claim)]
    assert len(ids) == 3
    results = client.report_many(
        [
            opledger.ReportIntent(ids[0], "complete", "w1", result=Result("ch-rep", 201)),
            opledger.ReportIntent(ids[1], "fail", "w1", kind="definite", code="card_declined"),
            opledger.ReportIntent(ids[2], "unknown", "someone-else"),
        ]
    )
    done, failed, refused = results
    assert isinstance(done, opledger.Report) and done.state == "completed", done
    assert isinstance(failed, opledger.Report) and failed.state == "failed", failed
    assert isinstance(refused, Rejected), refused
    with pytest.raises(ValueError):
        client.report_many([opledger.ReportIntent(ids[0], "complete", "w1")])


def test_exactly_once_many_runs_each_effect_once_and_reports_each_outcome(
    client: Client, key: Callable[[str], str]
) -> None:
    ran: List[str] = []

    def charge(operation_id: str, intent: opledger.Intent) -> str:
        ran.append(intent.key)
        if intent.key.endswith("declined"):
            raise opledger.DefiniteFailure("card_declined")
        if intent.key.endswith("boom"):
            raise RuntimeError("the provider timed out")
        return f"ch-{operation_id[:8]}"

    keys = [key("eom-ok"), key("eom-declined"), key("eom-boom")]
    intents = [opledger.Intent("payments.charge", k, CHARGE) for k in keys]
    intents.append(opledger.Intent("payments.charge", "not a key \n", CHARGE))
    ok, declined, boom, bad = client.exactly_once_many(intents, charge, status=201)
    assert ran == keys, "each effect that may run ran once; the refused intent did not"
    assert isinstance(ok, Result) and ok.resource_ref.startswith("ch-") and ok.status == 201, ok
    assert isinstance(declined, opledger.DefiniteFailure) and declined.code == "card_declined"
    assert declined.operation_id, "the failure names its operation"
    assert isinstance(boom, opledger.OpledgerError) and isinstance(boom.__cause__, RuntimeError)
    assert isinstance(bad, ApiError) and bad.code == "invalid_key"

    # What the ledger now holds, for a new worker's batch: nothing runs again.
    again = client.exactly_once_many([opledger.Intent("payments.charge", k, CHARGE) for k in keys], charge)
    assert ran == keys
    assert again[0] == ok, "the stored result replays"
    assert isinstance(again[1], opledger.DefiniteFailure) and again[1].replayed
    assert isinstance(again[2], opledger.OutcomeUnknown), again[2]
    assert client.lookup("payments.charge", keys[0]).state == "completed"


def test_exactly_once_many_releases_what_an_interruption_kept_from_running(
    client: Client, key: Callable[[str], str]
) -> None:
    keys = [key("eom-int-0"), key("eom-int-1"), key("eom-int-2")]

    def stop_at_second(operation_id: str, intent: opledger.Intent) -> str:
        if intent.key == keys[1]:
            raise KeyboardInterrupt
        return "ch-first"

    with pytest.raises(KeyboardInterrupt):
        client.exactly_once_many([opledger.Intent("payments.charge", k, CHARGE) for k in keys], stop_at_second)
    states = [client.lookup("payments.charge", k).state for k in keys]
    # Run and reported; interrupted while running (may have happened); never run (released).
    assert states == ["completed", "outcome_unknown", "released"], states


def test_exactly_once_many_called_again_never_runs_what_another_call_holds(
    client: Client, key: Callable[[str], str]
) -> None:
    # The same intents, claimed (and left running) by their own holders first: a call of
    # exactly_once_many is another worker, so it waits and gives up, running nothing.
    intents = [opledger.Intent("payments.charge", key(f"eom-held-{i}"), CHARGE) for i in range(2)]
    held = client.claim_many(intents)
    assert [getattr(c, "decision") for c in held] == ["execute", "execute"]
    ran: List[str] = []
    out = client.exactly_once_many(intents, lambda op_id, intent: ran.append(op_id) or "ch", wait_limit=0.3)
    assert ran == [], "never executed while another holder runs it"
    assert all(isinstance(o, opledger.InProgressTimeout) for o in out), out
    # An Intent made with holder=None still gets a holder of its own.
    assert opledger.Intent("payments.charge", "k", CHARGE, holder=None).holder  # type: ignore[arg-type]

"""The asyncio client against the real binary (each test runs its own event loop)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable, List

import pytest
from conftest import CHARGE, TOKEN_A, LogWatch, Server

from opledger import (
    ApiError,
    AsyncClient,
    Claim,
    Conflict,
    InProgressTimeout,
    Intent,
    ManualResolution,
    OutcomeUnknown,
    Rejected,
    Result,
)


class ProviderTimeout(Exception):
    pass


def on_wait(logs: LogWatch, event: asyncio.Event) -> None:
    """Sets ``event`` (on its loop) when a caller is told ``in_progress`` and waits."""
    loop = asyncio.get_running_loop()

    def listener(record: logging.LogRecord) -> None:
        if getattr(record, "opledger_event", None) == "wait":
            loop.call_soon_threadsafe(event.set)

    logs.listen(listener)


def test_execute_complete_then_replay(server: Server, key: Callable[[str], str]) -> None:
    async def main() -> None:
        calls: List[str] = []
        async with AsyncClient(server.base, TOKEN_A) as ledger:

            @ledger.exactly_once(
                tool="payments.charge", key=key("async-replay"), request=lambda: CHARGE, status=201
            )
            async def charge(operation_id: str) -> str:
                calls.append(operation_id)
                await asyncio.sleep(0)
                return f"ch-{operation_id[:8]}"

            first = await charge()
            again = await charge()
            assert first == again == Result(f"ch-{calls[0][:8]}", 201, {})
            assert len(calls) == 1
            stored = await ledger.get(calls[0])
            assert (stored.state, stored.result) == ("completed", first)

    asyncio.run(main())


def test_the_low_level_calls(server: Server, key: Callable[[str], str]) -> None:
    async def main() -> None:
        async with AsyncClient(server.base, TOKEN_A) as ledger:
            k = key("async-low")
            claim = await ledger.claim("payments.charge", k, CHARGE, "w-1")
            assert (claim.decision, claim.http_status) == ("execute", 201)
            assert (await ledger.claim("payments.charge", k, CHARGE, "w-2")).decision == "in_progress"
            assert (await ledger.heartbeat(claim.operation_id, "w-1")).decision == "accepted"
            with pytest.raises(Rejected) as refused:
                await ledger.unknown(claim.operation_id, "w-2")
            assert refused.value.code == "not_holder"
            done = await ledger.complete(claim.operation_id, "w-1", "ch-1", 201)
            assert (done.decision, done.state) == ("accepted", "completed")
            replay = await ledger.claim("payments.charge", k, CHARGE, "w-3")
            assert (replay.decision, replay.result) == ("replay", done.result)
            failed = await ledger.claim("payments.charge", key("async-fail"), CHARGE, "w-1")
            report = await ledger.fail(failed.operation_id, "w-1", "definite", "card_declined")
            assert report.failure is not None and report.failure.code == "card_declined"
            with pytest.raises(ApiError) as missing:
                await ledger.get(str(uuid.uuid4()))
            assert (missing.value.status, missing.value.code) == (404, "not_found")

    asyncio.run(main())


def test_two_tasks_with_the_same_key_run_the_effect_once(
    server: Server, key: Callable[[str], str], logs: LogWatch
) -> None:
    async def main() -> None:
        calls: List[str] = []
        other_told_to_wait = asyncio.Event()
        on_wait(logs, other_told_to_wait)
        async with AsyncClient(server.base, TOKEN_A) as ledger:

            @ledger.exactly_once(tool="payments.charge", key=key("tasks"), request=lambda: CHARGE)
            async def charge(operation_id: str) -> str:
                calls.append(operation_id)
                # Hold the operation until the other task has been told `in_progress`.
                await asyncio.wait_for(other_told_to_wait.wait(), 20)
                return "ch-tasks"

            results = await asyncio.gather(charge(), charge())
        assert list(results) == [Result("ch-tasks", 200, {})] * 2
        assert len(calls) == 1

    asyncio.run(main())
    assert logs.of("wait"), "the second task was never told in_progress"


def test_a_changed_request_raises_conflict(server: Server, key: Callable[[str], str]) -> None:
    async def main() -> None:
        calls: List[str] = []
        async with AsyncClient(server.base, TOKEN_A) as ledger:

            @ledger.exactly_once(tool="payments.charge", key=key("async-conflict"))
            async def charge(operation_id: str, **request: Any) -> str:
                calls.append(operation_id)
                return "ch"

            await charge(**CHARGE)
            with pytest.raises(Conflict) as caught:
                await charge(**dict(CHARGE, amount="10.51"))
        assert caught.value.categories == ("amount",)
        assert len(calls) == 1

    asyncio.run(main())


@pytest.mark.parametrize(
    "tool, request_, state, error",
    [
        ("payments.charge", CHARGE, "outcome_unknown", OutcomeUnknown),
        ("tickets.create", {"project": "p", "title": "t"}, "manual", ManualResolution),
    ],
)
def test_an_effect_that_raises_never_runs_again(
    server: Server, key: Callable[[str], str], tool: str, request_: Any, state: str, error: type
) -> None:
    async def main() -> None:
        calls: List[str] = []
        async with AsyncClient(server.base, TOKEN_A) as ledger:

            @ledger.exactly_once(tool=tool, key=key(f"async-raises-{tool}"), request=lambda: request_)
            async def effect(operation_id: str) -> str:
                calls.append(operation_id)
                raise ProviderTimeout()

            with pytest.raises(ProviderTimeout):
                await effect()
            assert (await ledger.get(calls[0])).state == state
            with pytest.raises(error):
                await effect()
        assert len(calls) == 1

    asyncio.run(main())


def test_a_cancelled_effect_is_reported_unknown(server: Server, key: Callable[[str], str]) -> None:
    async def main() -> None:
        started = asyncio.Event()
        async with AsyncClient(server.base, TOKEN_A) as ledger:

            @ledger.exactly_once(tool="payments.charge", key=key("cancelled"), request=lambda: CHARGE)
            async def charge(operation_id: str) -> str:
                ids.append(operation_id)
                started.set()
                await asyncio.Event().wait()  # until cancelled
                return "never"

            ids: List[str] = []
            task = asyncio.ensure_future(charge())
            await asyncio.wait_for(started.wait(), 20)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await ledger.get(ids[0])).state == "outcome_unknown"

    asyncio.run(main())


def test_in_progress_waits_then_replays_and_is_bounded(
    server: Server, key: Callable[[str], str], logs: LogWatch
) -> None:
    async def scenario() -> None:
        calls: List[str] = []
        started = asyncio.Event()
        release = asyncio.Event()
        on_wait(logs, release)
        async with AsyncClient(server.base, TOKEN_A) as ledger:

            @ledger.exactly_once(tool="payments.charge", key=key("async-wait"), request=lambda: CHARGE)
            async def charge(operation_id: str) -> str:
                calls.append(operation_id)
                started.set()
                await asyncio.wait_for(release.wait(), 20)
                return "ch-async-wait"

            first = asyncio.ensure_future(charge())
            await asyncio.wait_for(started.wait(), 20)
            # Told in_progress, this caller waits; its first wait releases the executor.
            second = await charge()
            assert await first == second == Result("ch-async-wait", 200, {})
            assert len(calls) == 1

            # Bounded: an executor that holds on past the wait limit.
            held = asyncio.Event()
            stop = asyncio.Event()

            @ledger.exactly_once(tool="payments.charge", key=key("async-limit"), request=lambda: CHARGE)
            async def hold(operation_id: str) -> str:
                held.set()
                await asyncio.wait_for(stop.wait(), 20)
                return "ch-held"

            holder = asyncio.ensure_future(hold())
            await asyncio.wait_for(held.wait(), 20)
            try:
                with pytest.raises(InProgressTimeout):
                    async with ledger.operation(
                        "payments.charge", key("async-limit"), CHARGE, wait_limit=0.3
                    ):
                        raise AssertionError("must not execute")
            finally:
                stop.set()
            assert (await holder).resource_ref == "ch-held"

    asyncio.run(scenario())


def test_claim_many_async(server: Server, key: Callable[[str], str]) -> None:
    async def main() -> None:
        async with AsyncClient(server.base, TOKEN_A) as ledger:
            results = await ledger.claim_many(
                [
                    Intent("payments.charge", key("async-many"), CHARGE, holder="w1"),
                    Intent("payments.charge", "not a key", CHARGE, holder="w1"),
                ]
            )
            assert isinstance(results[0], Claim) and results[0].decision == "execute"
            assert isinstance(results[1], ApiError) and results[1].code == "invalid_key"

    asyncio.run(main())


def test_exactly_once_many_async_runs_the_effects_side_by_side(server: Server, key: Callable[[str], str]) -> None:
    async def main() -> None:
        both_running = asyncio.Event()
        running: List[str] = []

        async def charge(operation_id: str, intent: Intent) -> str:
            running.append(intent.key)
            if len(running) == 2:
                both_running.set()
            # Each waits until both have started: run one after the other, this never ends.
            await asyncio.wait_for(both_running.wait(), 20)
            return f"ch-{intent.key[-1]}"

        keys = [key("aeom-0"), key("aeom-1")]
        async with AsyncClient(server.base, TOKEN_A) as ledger:
            out = await ledger.exactly_once_many([Intent("payments.charge", k, CHARGE) for k in keys], charge)
            assert out == [Result("ch-0", 200, {}), Result("ch-1", 200, {})], out
            again = await ledger.exactly_once_many([Intent("payments.charge", k, CHARGE) for k in keys], charge)
            assert again == out and len(running) == 2, "replayed, not run again"

    asyncio.run(main())

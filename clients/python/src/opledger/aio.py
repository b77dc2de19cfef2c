"""The asyncio client: the same surface as :class:`opledger.Client`, awaitable.

Each HTTP exchange runs the standard library's ``http.client`` in a worker thread
(``asyncio.to_thread``): no dependency and one HTTP implementation for both clients.
Everything that waits (retry backoff, ``Retry-After``, waiting while another holder has the
operation) is an ``asyncio.sleep`` on the event loop, so waiting tasks hold no thread.
A cancelled task stops waiting at once; an exchange already sent finishes in its thread
(every call of the API is safe to repeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._core import Answer, Base, Call, KeySource, Waiter, log, log_wait, op_path, settle
from . import _many
from ._transport import TRANSPORT_ERRORS, Response
from .client import (
    ParentSource,
    R,
    RequestSource,
    T,
    _claim_of,
    _ExecutionState,
    as_result,
    call_inputs,
    status_of,
)
from .errors import ApiError, DefiniteFailure, NotAccepted, OpledgerError, UnreportedOperation
from .models import Claim, Intent, Operation, Report, ReportIntent, Result, default_holder

__all__ = ["AsyncClient", "AsyncExecution"]


class AsyncClient(Base):
    """The asyncio twin of :class:`opledger.Client` (same arguments, same answers and
    exceptions). Safe to share between tasks; ``await client.aclose()`` or
    ``async with AsyncClient(...)`` closes its kept-alive connections."""

    async def claim(
        self,
        tool: str,
        key: str,
        request: Mapping[str, Any],
        holder: str,
        parent: Optional[str] = None,
    ) -> Claim:
        """``POST /v1/operations``; see :meth:`opledger.Client.claim`."""
        return self._claim_of(await self._send(self._claim_call(tool, key, request, holder, parent)))

    async def complete(
        self,
        operation_id: str,
        holder: str,
        resource_ref: str,
        status: int,
        headers: Optional[Mapping[str, str]] = None,
        expected_version: Optional[int] = None,
    ) -> Report:
        call = self._complete_call(operation_id, holder, resource_ref, status, headers, expected_version)
        return self._report_of(call, await self._send(call))

    async def fail(
        self,
        operation_id: str,
        holder: str,
        kind: str,
        code: str,
        expected_version: Optional[int] = None,
    ) -> Report:
        call = self._fail_call(operation_id, holder, kind, code, expected_version)
        return self._report_of(call, await self._send(call))

    async def unknown(self, operation_id: str, holder: str, expected_version: Optional[int] = None) -> Report:
        call = self._holder_call(operation_id, "unknown", holder, expected_version)
        return self._report_of(call, await self._send(call))

    async def heartbeat(
        self, operation_id: str, holder: str, expected_version: Optional[int] = None
    ) -> Report:
        call = self._holder_call(operation_id, "heartbeat", holder, expected_version)
        return self._report_of(call, await self._send(call))

    async def get(self, operation_id: str) -> Operation:
        return self._operation_of(await self._send(self._call("GET", op_path(operation_id))))

    async def claim_many(self, intents: Sequence[Intent]) -> List[Union[Claim, ApiError]]:
        return await self._batch(intents, self._batch_call, self._batch_of)

    async def report_many(self, reports: Sequence[ReportIntent]) -> List[Union[Report, OpledgerError]]:
        return await self._batch(reports, self._reports_call, self._reports_of)

    async def lookup(self, tool: str, key: str) -> Operation:
        return self._operation_of(await self._send(self._lookup_call(tool, key)))

    async def queue(self) -> Dict[str, Any]:
        return self._json_of(await self._send(self._call("GET", "/v1/reconciliation")))

    async def take_over(
        self,
        operation_id: str,
        expected_version: Optional[int] = None,
        reason: Optional[str] = None,
    ) -> Report:
        call = self._take_over_call(operation_id, expected_version, reason)
        return self._report_of(call, await self._send(call))

    async def resolve(
        self,
        operation_id: str,
        result: Optional[Result] = None,
        expected_version: Optional[int] = None,
        reason: Optional[str] = None,
    ) -> Report:
        call = self._resolve_call(operation_id, result, expected_version, reason)
        return self._report_of(call, await self._send(call))

    async def compensate(self, operation_id: str, holder: str, request: Mapping[str, Any]) -> Claim:
        return self._claim_of(await self._send(self._compensate_call(operation_id, holder, request)))

    async def history(self, operation_id: str) -> Dict[str, Any]:
        return self._json_of(await self._send(self._call("GET", op_path(operation_id, "history"))))

    async def aclose(self) -> None:
        self._transport.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the ergonomic forms -----------------------------------------------------------

    @contextlib.asynccontextmanager
    async def operation(
        self,
        tool: str,
        key: str,
        request: Mapping[str, Any],
        *,
        holder: Optional[str] = None,
        parent: Optional[str] = None,
        wait_limit: Optional[float] = None,
    ) -> AsyncIterator["AsyncExecution"]:
        """``async with client.operation(...) as op``; see :meth:`opledger.Client.operation`."""
        holder = holder or default_holder()
        claim = await self._claim_decided(tool, key, request, holder, parent, wait_limit)
        settle(claim)
        op = AsyncExecution(self, claim, holder)
        if not op.executing:
            yield op
            return
        try:
            yield op
        except DefiniteFailure as failure:
            failure.operation_id = failure.operation_id or op.id
            await op._report_quietly("definite", failure.code)
            raise
        except NotAccepted as refusal:
            refusal.operation_id = refusal.operation_id or op.id
            await op._report_quietly("not_accepted", refusal.code)
            raise
        except BaseException:
            # Cancellation included: the effect may have happened.
            await op._report_quietly("unknown", "")
            raise
        if not op.reported:
            await op._report_quietly("unknown", "")
            raise UnreportedOperation(
                f"operation {op.id}: the block ended without complete, fail or unknown; "
                "it was reported unknown"
            )

    def exactly_once(
        self,
        tool: str,
        key: KeySource,
        request: Optional[RequestSource] = None,
        *,
        holder: Optional[str] = None,
        parent: ParentSource = None,
        status: int = 200,
        wait_limit: Optional[float] = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Awaitable[Result]]]:
        """Decorate an ``async def`` side effect; see :meth:`opledger.Client.exactly_once`."""

        def decorate(effect: Callable[..., Any]) -> Callable[..., Awaitable[Result]]:
            @functools.wraps(effect)
            async def run(*args: Any, **kwargs: Any) -> Result:
                k, req, par = call_inputs(key, request, parent, args, kwargs)
                async with self.operation(
                    tool, k, req, holder=holder, parent=par, wait_limit=wait_limit
                ) as op:
                    if op.replayed:
                        assert op.result is not None  # settle() raised otherwise
                        return op.result
                    produced = effect(op.id, *args, **kwargs)
                    if inspect.isawaitable(produced):
                        produced = await produced
                    outcome = as_result(produced, status)
                    return await op.complete(
                        outcome.resource_ref, status_of(outcome, status), outcome.headers
                    )

            return run

        return decorate

    async def exactly_once_many(
        self,
        intents: Sequence[Intent],
        effect: Callable[[str, Intent], Any],
        *,
        status: int = 200,
        wait_limit: Optional[float] = None,
    ) -> List[_many.Outcome]:
        """As :meth:`opledger.Client.exactly_once_many`, with the effects (``async def`` or
        plain) run side by side. Cancelled, the effects that finished are reported, the
        others (they may have happened) ``unknown``, and the cancellation is raised."""
        intents = _many.fresh(intents)
        claims = await self._claim_many_decided(intents, wait_limit)
        known, run = _many.settled(claims)
        produced: Dict[int, Any] = {}

        async def one(i: int) -> None:
            claim = _claim_of(claims[i])
            try:
                made = effect(claim.operation_id, intents[i])
                if inspect.isawaitable(made):
                    made = await made
                produced[i] = as_result(made, status)
            except Exception as error:  # noqa: BLE001 - reported, and returned in its place
                produced[i] = error

        tasks = [asyncio.ensure_future(one(i)) for i in run]
        try:
            await asyncio.gather(*tasks)
        except BaseException as interruption:
            # Nothing keeps running behind the caller's back: the others are cancelled and
            # awaited before anything is reported.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for i in run:
                produced.setdefault(i, interruption)
            try:
                await self._reported(claims, intents, produced, status)
            except OpledgerError as error:
                log.warning("could not report a batch after an interruption: %s", error,
                            extra={"opledger_event": "report_failed"})
            raise
        return _many.place(known, await self._reported(claims, intents, produced, status))

    async def _reported(
        self,
        claims: Sequence[Union[Claim, OpledgerError]],
        intents: Sequence[Intent],
        produced: Dict[int, Any],
        status: int,
    ) -> Dict[int, _many.Outcome]:
        """Reports the effects run, in one request: each one's outcome."""
        if not produced:
            return {}
        order, reports = _many.reports(claims, intents, produced, status)
        try:
            answers = await self.report_many(reports)
        except OpledgerError:
            await self._report_quietly(_many.unknowns(claims, intents, order))
            raise
        refused = _many.refused_completes(order, reports, answers)
        if refused:
            await self._report_quietly(_many.unknowns(claims, intents, refused))
        return {i: _many.outcome_of(r, a, produced[i]) for i, r, a in zip(order, reports, answers)}

    async def _report_quietly(self, reports: List[ReportIntent]) -> None:
        """Reports after a failure: never hides it."""
        try:
            await self.report_many(reports)
        except OpledgerError as error:
            log.warning("could not report %d operations unknown: %s", len(reports), error,
                        extra={"opledger_event": "report_failed"})

    async def _claim_many_decided(
        self, intents: Sequence[Intent], wait_limit: Optional[float]
    ) -> List[Union[Claim, OpledgerError]]:
        """As :meth:`opledger.Client._claim_many_decided`."""
        waiter = Waiter(self.wait_limit if wait_limit is None else wait_limit)
        claims: List[Union[Claim, OpledgerError]] = list(await self.claim_many(intents))
        while True:
            waiting = _many.waiting(claims)
            if not waiting:
                return claims
            delay = waiter.delay()
            if delay is None:
                for i in waiting:
                    claims[i] = waiter.timeout(_claim_of(claims[i]))
                return claims
            log_wait(_claim_of(claims[waiting[0]]), delay)
            await asyncio.sleep(delay)
            for i, again in zip(waiting, await self.claim_many([intents[i] for i in waiting])):
                claims[i] = again

    # -- internals ---------------------------------------------------------------------

    async def _exchange(self, call: Call) -> Response:
        return await asyncio.to_thread(
            self._transport.exchange, call.method, call.path, call.headers, call.body
        )

    async def _batch(
        self,
        items: Sequence[T],
        make: Callable[[Sequence[T]], Call],
        read: Callable[[Call, Answer], List[R]],
    ) -> List[R]:
        """As :meth:`Client._batch`: the batch, then its retriable items again."""
        call = make(items)
        results = read(call, await self._send(call))
        attempt = 0
        while True:
            again, delay = self._items_again(call, results, attempt)
            if not again:
                return results
            await asyncio.sleep(delay)
            call = make([items[i] for i in again])
            for i, result in zip(again, read(call, await self._send(call))):
                results[i] = result
            attempt += 1

    async def _send(self, call: Call) -> Answer:
        attempt = 0
        while True:
            try:
                response = await self._exchange(call)
            except TRANSPORT_ERRORS as error:
                await asyncio.sleep(self._transport_retry(call, error, attempt))
                attempt += 1
                continue
            answer, delay, api_error = self._interpret(call, response, attempt)
            if answer is not None:
                return answer
            assert api_error is not None
            if delay is None:
                raise api_error
            await asyncio.sleep(delay)
            attempt += 1

    async def _claim_decided(
        self,
        tool: str,
        key: str,
        request: Mapping[str, Any],
        holder: str,
        parent: Optional[str],
        wait_limit: Optional[float],
    ) -> Claim:
        waiter = Waiter(self.wait_limit if wait_limit is None else wait_limit)
        while True:
            claim = await self.claim(tool, key, request, holder, parent)
            if claim.decision != "in_progress":
                return claim
            delay = waiter.delay()
            if delay is None:
                raise waiter.timeout(claim)
            log_wait(claim, delay)
            await asyncio.sleep(delay)


class AsyncExecution(_ExecutionState):
    """The operation inside ``async with client.operation(...) as op``."""

    def __init__(self, client: AsyncClient, claim: Claim, holder: str) -> None:
        super().__init__(claim, holder)
        self._client = client

    async def complete(
        self, resource_ref: str, status: int, headers: Optional[Mapping[str, str]] = None
    ) -> Result:
        self._check()
        self.report = await self._client.complete(self.id, self.holder, resource_ref, status, headers)
        self.result = self.report.result or Result(resource_ref, status, dict(headers or {}))
        return self.result

    async def fail(self, kind: str, code: str) -> Report:
        self._check()
        self.report = await self._client.fail(self.id, self.holder, kind, code)
        return self.report

    async def unknown(self) -> Report:
        self._check()
        self.report = await self._client.unknown(self.id, self.holder)
        return self.report

    async def heartbeat(self) -> Report:
        return await self._client.heartbeat(self.id, self.holder)

    async def _report_quietly(self, kind: str, code: str) -> None:
        if self.report is not None:
            return
        try:
            if kind == "unknown":
                self.report = await self._client.unknown(self.id, self.holder)
            else:
                self.report = await self._client.fail(self.id, self.holder, kind, code)
        except OpledgerError as error:
            log.warning(
                "operation %s: could not report %s after the side effect raised: %s",
                self.id,
                kind,
                error,
                extra={"opledger_event": "report_failed", "operation_id": self.id},
            )

"""The synchronous client: the API calls, and the ergonomic forms that claim, run the side
effect with the operation id as its external key, and report."""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._core import (
    Answer,
    Base,
    Call,
    KeySource,
    Waiter,
    log,
    log_wait,
    op_path,
    settle,
)
from . import _many
from ._transport import TRANSPORT_ERRORS
from .errors import ApiError, DefiniteFailure, NotAccepted, OpledgerError, UnreportedOperation
from .models import Claim, Intent, Operation, Report, ReportIntent, Result, default_holder

__all__ = ["Client", "Execution"]

F = TypeVar("F", bound=Callable[..., Any])
# A batch's items and their results.
T = TypeVar("T")
R = TypeVar("R")

RequestSource = Callable[..., Mapping[str, Any]]
ParentSource = Union[str, Callable[..., Optional[str]], None]


class Client(Base):
    """A client of one ledger, as one principal (its bearer token).

    ``retries`` retriable answers (408, 429, 503; 502/504 from a proxy) and transport
    failures are sent again with exponential backoff from ``backoff`` seconds, up to
    ``max_backoff``, honouring ``Retry-After``. ``wait_limit`` is how long the ergonomic
    forms wait, by default, while another worker holds an operation (``in_progress``).
    Safe to share between threads; ``close()`` (or ``with Client(...)``) closes its kept-alive
    connections.
    """

    # -- the API ---------------------------------------------------------------------

    def claim(
        self,
        tool: str,
        key: str,
        request: Mapping[str, Any],
        holder: str,
        parent: Optional[str] = None,
    ) -> Claim:
        """``POST /v1/operations``: create-or-return the operation of ``key``.

        Every decision is returned as a :class:`Claim` (``claim.raise_for_decision()``
        raises the typed exception of those that forbid executing); error answers raise
        :class:`ApiError`.
        """
        return self._claim_of(self._send(self._claim_call(tool, key, request, holder, parent)))

    def claim_many(self, intents: Sequence[Intent]) -> List[Union[Claim, ApiError]]:
        """``POST /v1/operations/batch``: claim up to 1,000 intents in one request. One result
        per intent, in order: the :class:`Claim` a claim of its own would have returned, or the
        :class:`ApiError` it would have raised (returned here, not raised: one bad intent never
        fails the others). Items refused as retriable (the node unavailable, a decision late)
        are sent again, up to ``retries`` times, honouring their ``retry_after``. Raises only
        when the batch itself is refused."""
        return self._batch(intents, self._batch_call, self._batch_of)

    def report_many(self, reports: Sequence[ReportIntent]) -> List[Union[Report, OpledgerError]]:
        """``POST /v1/reports/batch``: up to 1,000 reports in one request. One result per
        report, in order: the :class:`Report` its own call would have returned, or the error
        it would have raised (:class:`Rejected`, :class:`ApiError`), returned in its place.
        Retriable refusals are sent again, as for :meth:`claim_many`."""
        return self._batch(reports, self._reports_call, self._reports_of)

    def complete(
        self,
        operation_id: str,
        holder: str,
        resource_ref: str,
        status: int,
        headers: Optional[Mapping[str, str]] = None,
        expected_version: Optional[int] = None,
    ) -> Report:
        """Report that the side effect happened, with its business result."""
        call = self._complete_call(operation_id, holder, resource_ref, status, headers, expected_version)
        return self._report_of(call, self._send(call))

    def fail(
        self,
        operation_id: str,
        holder: str,
        kind: str,
        code: str,
        expected_version: Optional[int] = None,
    ) -> Report:
        """Report a failure: ``kind="definite"`` settles it (claims replay ``code``);
        ``kind="not_accepted"`` (provably never accepted) releases the key."""
        call = self._fail_call(operation_id, holder, kind, code, expected_version)
        return self._report_of(call, self._send(call))

    def unknown(self, operation_id: str, holder: str, expected_version: Optional[int] = None) -> Report:
        """Report that the executor does not know whether the side effect happened."""
        call = self._holder_call(operation_id, "unknown", holder, expected_version)
        return self._report_of(call, self._send(call))

    def heartbeat(self, operation_id: str, holder: str, expected_version: Optional[int] = None) -> Report:
        """Extend the executor's live lease."""
        call = self._holder_call(operation_id, "heartbeat", holder, expected_version)
        return self._report_of(call, self._send(call))

    def get(self, operation_id: str) -> Operation:
        """``GET /v1/operations/{id}`` (the principal's own operations only; 404 otherwise)."""
        return self._operation_of(self._send(self._call("GET", op_path(operation_id))))

    def lookup(self, tool: str, key: str) -> Operation:
        """The principal's operation of ``tool`` under ``key``, found without claiming it
        (nothing is appended); :class:`ApiError` ``not_found`` if nobody claimed it."""
        return self._operation_of(self._send(self._lookup_call(tool, key)))

    # -- operators and auditors ---------------------------------------------------------

    def queue(self) -> Dict[str, Any]:
        """The reconciliation queue (operator role): ``items`` (each with its guidance),
        ``count``, ``total``, ``truncated``."""
        return self._json_of(self._send(self._call("GET", "/v1/reconciliation")))

    def take_over(
        self,
        operation_id: str,
        expected_version: Optional[int] = None,
        reason: Optional[str] = None,
    ) -> Report:
        """Take an operation over (operator role): automation stops touching it. ``reason``
        (at most 500 bytes) is kept in the operation's history."""
        call = self._take_over_call(operation_id, expected_version, reason)
        return self._report_of(call, self._send(call))

    def resolve(
        self,
        operation_id: str,
        result: Optional[Result] = None,
        expected_version: Optional[int] = None,
        reason: Optional[str] = None,
    ) -> Report:
        """Settle an operation taken over (operator role): ``result`` is what the external
        system shows was done (completed), ``None`` that it was not executed; ``reason`` is
        kept in the operation's history."""
        call = self._resolve_call(operation_id, result, expected_version, reason)
        return self._report_of(call, self._send(call))

    def compensate(self, operation_id: str, holder: str, request: Mapping[str, Any]) -> Claim:
        """Claim the compensation of a completed operation: an operation of its own, answered
        as a claim is (``execute``: run the compensating tool with its id, then report)."""
        return self._claim_of(self._send(self._compensate_call(operation_id, holder, request)))

    def history(self, operation_id: str) -> Dict[str, Any]:
        """Every event of an operation, decoded and redacted (auditor role; any principal's)."""
        return self._json_of(self._send(self._call("GET", op_path(operation_id, "history"))))

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the ergonomic forms -----------------------------------------------------------

    @contextlib.contextmanager
    def operation(
        self,
        tool: str,
        key: str,
        request: Mapping[str, Any],
        *,
        holder: Optional[str] = None,
        parent: Optional[str] = None,
        wait_limit: Optional[float] = None,
    ) -> Iterator["Execution"]:
        """Claim, and hand the block an :class:`Execution`.

        Entering waits (bounded backoff, up to ``wait_limit``) while another holder has the
        operation, then raises :class:`Conflict`, :class:`OutcomeUnknown`,
        :class:`ManualResolution`, :class:`KeyExpired`, :class:`InProgressTimeout`,
        :class:`DefiniteFailure` (a replayed definite failure) or :class:`ResultWithheld`
        when it must not execute. On a completed ``replay`` the block runs with
        ``op.replayed`` true and ``op.result`` the stored result: it must not run the effect.
        On ``execute`` the block runs the effect with ``op.id`` as its idempotency key and
        reports with ``op.complete(...)`` (or ``op.fail``/``op.unknown``). If the block
        raises before reporting, the client reports ``fail`` for :class:`DefiniteFailure`
        (``definite``) and :class:`NotAccepted` (``not_accepted``), ``unknown`` for any other
        exception (the effect may have happened), and re-raises. A block that ends without
        reporting is reported ``unknown`` and raises :class:`UnreportedOperation`.
        """
        holder = holder or default_holder()
        claim = self._claim_decided(tool, key, request, holder, parent, wait_limit)
        settle(claim)
        op = Execution(self, claim, holder)
        if not op.executing:
            yield op
            return
        try:
            yield op
        except DefiniteFailure as failure:
            failure.operation_id = failure.operation_id or op.id
            op._report_quietly("definite", failure.code)
            raise
        except NotAccepted as refusal:
            refusal.operation_id = refusal.operation_id or op.id
            op._report_quietly("not_accepted", refusal.code)
            raise
        except BaseException:
            op._report_quietly("unknown", "")
            raise
        if not op.reported:
            op._report_quietly("unknown", "")
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
    ) -> Callable[[Callable[..., Any]], Callable[..., Result]]:
        """Decorate a side effect so that it runs at most once per key.

        The decorated function is called as ``effect(operation_id, *args, **kwargs)`` and
        returns the result reference: a ``str`` (reported with ``status``) or a
        :class:`Result`. ``key`` is a str or a function of the call's arguments; so are
        ``request`` (default: the call's keyword arguments, positional ones refused) and
        ``parent``. The wrapper returns the stored :class:`Result`, whether this call ran the
        effect or replayed it. See :meth:`operation` for every other answer.
        """

        def decorate(effect: Callable[..., Any]) -> Callable[..., Result]:
            @functools.wraps(effect)
            def run(*args: Any, **kwargs: Any) -> Result:
                k, req, par = call_inputs(key, request, parent, args, kwargs)
                with self.operation(tool, k, req, holder=holder, parent=par, wait_limit=wait_limit) as op:
                    if op.replayed:
                        assert op.result is not None  # settle() raised otherwise
                        return op.result
                    outcome = as_result(effect(op.id, *args, **kwargs), status)
                    return op.complete(outcome.resource_ref, status_of(outcome, status), outcome.headers)

            return run

        return decorate

    def exactly_once_many(
        self,
        intents: Sequence[Intent],
        effect: Callable[[str, Intent], Any],
        *,
        status: int = 200,
        wait_limit: Optional[float] = None,
    ) -> List[_many.Outcome]:
        """Run a batch of side effects, each at most once per key: claim them in one request,
        call ``effect(operation_id, intent)`` for each that may run (it returns the result
        reference, a ``str`` reported with ``status``, or a :class:`Result`), and report them
        all in one request. One outcome per intent, in order: the stored :class:`Result`
        (run now or replayed) or the error a single :meth:`exactly_once` call would have
        raised, returned in its place (one intent's trouble never stops the others). An
        effect that raises :class:`DefiniteFailure` or :class:`NotAccepted` is reported as
        that failure, any other exception as ``unknown``, and one whose ``complete`` report is
        refused or fails as ``unknown`` too. Each call claims under holders of its own (the
        intents' holders are not used), as each :meth:`exactly_once` call does: calling again
        with the same intents never runs an effect whose first call's lease lasts. Intents in
        progress with another holder are claimed again (all together) until ``wait_limit``. Interrupted
        (``KeyboardInterrupt``), the effects already run are reported, those not yet run are
        released (``not_accepted``), and the interruption is raised."""
        intents = _many.fresh(intents)
        claims = self._claim_many_decided(intents, wait_limit)
        known, run = _many.settled(claims)
        produced: Dict[int, Any] = {}
        try:
            for i in run:
                claim = claims[i]
                assert isinstance(claim, Claim)
                try:
                    produced[i] = as_result(effect(claim.operation_id, intents[i]), status)
                except Exception as error:  # noqa: BLE001 - reported, and returned in its place
                    produced[i] = error
        except BaseException as interruption:
            self._report_interrupted(claims, intents, run, produced, interruption, status)
            raise
        return _many.place(known, self._reported(claims, intents, produced, status))

    def _reported(
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
            answers = self.report_many(reports)
        except OpledgerError:
            self._report_quietly(_many.unknowns(claims, intents, order))
            raise
        refused = _many.refused_completes(order, reports, answers)
        if refused:
            self._report_quietly(_many.unknowns(claims, intents, refused))
        return {i: _many.outcome_of(r, a, produced[i]) for i, r, a in zip(order, reports, answers)}

    def _report_quietly(self, reports: List[ReportIntent]) -> None:
        """Reports after a failure: never hides it."""
        try:
            self.report_many(reports)
        except OpledgerError as error:
            log.warning("could not report %d operations unknown: %s", len(reports), error,
                        extra={"opledger_event": "report_failed"})

    def _report_interrupted(
        self,
        claims: Sequence[Union[Claim, OpledgerError]],
        intents: Sequence[Intent],
        run: Sequence[int],
        produced: Dict[int, Any],
        interruption: BaseException,
        status: int,
    ) -> None:
        """After an interruption: the effects run reported, the one interrupted unknown,
        those never run released. Never hides the interruption."""
        reports = []
        for i in run:
            if i in produced:
                reports.append(_many.report_for(_claim_of(claims[i]), intents[i], produced[i], status))
            elif not any(j not in produced and j < i for j in run):
                reports.append(_many.report_for(_claim_of(claims[i]), intents[i], interruption, status))
            else:
                reports.append(_many.interrupted(_claim_of(claims[i]), intents[i]))
        self._report_quietly(reports)

    def _claim_many_decided(
        self, intents: Sequence[Intent], wait_limit: Optional[float]
    ) -> List[Union[Claim, OpledgerError]]:
        """Claims a batch; those in progress with another holder again, together, until
        decided or the wait limit (then :class:`InProgressTimeout` in their place)."""
        waiter = Waiter(self.wait_limit if wait_limit is None else wait_limit)
        claims: List[Union[Claim, OpledgerError]] = list(self.claim_many(intents))
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
            time.sleep(delay)
            for i, again in zip(waiting, self.claim_many([intents[i] for i in waiting])):
                claims[i] = again

    # -- internals ---------------------------------------------------------------------

    def _batch(
        self,
        items: Sequence[T],
        make: Callable[[Sequence[T]], Call],
        read: Callable[[Call, Answer], List[R]],
    ) -> List[R]:
        """Sends a batch, then again its items refused as retriable, until none is or the
        retries are spent."""
        call = make(items)
        results = read(call, self._send(call))
        attempt = 0
        while True:
            again, delay = self._items_again(call, results, attempt)
            if not again:
                return results
            time.sleep(delay)
            call = make([items[i] for i in again])
            for i, result in zip(again, read(call, self._send(call))):
                results[i] = result
            attempt += 1

    def _send(self, call: Call) -> Answer:
        attempt = 0
        while True:
            try:
                response = self._transport.exchange(call.method, call.path, call.headers, call.body)
            except TRANSPORT_ERRORS as error:
                time.sleep(self._transport_retry(call, error, attempt))
                attempt += 1
                continue
            answer, delay, api_error = self._interpret(call, response, attempt)
            if answer is not None:
                return answer
            assert api_error is not None
            if delay is None:
                raise api_error
            time.sleep(delay)
            attempt += 1

    def _claim_decided(
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
            claim = self.claim(tool, key, request, holder, parent)
            if claim.decision != "in_progress":
                return claim
            delay = waiter.delay()
            if delay is None:
                raise waiter.timeout(claim)
            log_wait(claim, delay)
            time.sleep(delay)


class _ExecutionState:
    """What an operation inside ``with``/``async with client.operation(...)`` knows, whichever
    client runs it: its claim, holder, result and report."""

    def __init__(self, claim: Claim, holder: str) -> None:
        self.claim = claim
        self.holder = holder
        self.result: Optional[Result] = claim.result if claim.decision == "replay" else None
        self.report: Optional[Report] = None

    @property
    def id(self) -> str:
        """The operation id: the external system's idempotency key."""
        return self.claim.operation_id

    @property
    def executing(self) -> bool:
        return self.claim.decision == "execute"

    @property
    def replayed(self) -> bool:
        """True when the operation had finished: ``result`` is the stored one; do not execute."""
        return self.claim.decision == "replay"

    @property
    def reported(self) -> bool:
        return self.report is not None

    def _check(self) -> None:
        if not self.executing:
            raise OpledgerError(f"operation {self.id} was replayed: there is nothing to report")
        if self.report is not None:
            raise OpledgerError(f"operation {self.id} was reported already ({self.report.state})")


class Execution(_ExecutionState):
    """The operation inside ``with client.operation(...) as op``."""

    def __init__(self, client: Client, claim: Claim, holder: str) -> None:
        super().__init__(claim, holder)
        self._client = client

    def complete(self, resource_ref: str, status: int, headers: Optional[Mapping[str, str]] = None) -> Result:
        """Report the side effect's result; returns the stored :class:`Result`."""
        self._check()
        self.report = self._client.complete(self.id, self.holder, resource_ref, status, headers)
        self.result = self.report.result or Result(resource_ref, status, dict(headers or {}))
        return self.result

    def fail(self, kind: str, code: str) -> Report:
        """Report a ``definite`` or ``not_accepted`` failure."""
        self._check()
        self.report = self._client.fail(self.id, self.holder, kind, code)
        return self.report

    def unknown(self) -> Report:
        """Report that it is not known whether the side effect happened."""
        self._check()
        self.report = self._client.unknown(self.id, self.holder)
        return self.report

    def heartbeat(self) -> Report:
        """Extend the lease during a long side effect."""
        return self._client.heartbeat(self.id, self.holder)

    def _report_quietly(self, kind: str, code: str) -> None:
        """Report after the block raised: never hides the block's exception."""
        if self.report is not None:
            return
        try:
            if kind == "unknown":
                self.report = self._client.unknown(self.id, self.holder)
            else:
                self.report = self._client.fail(self.id, self.holder, kind, code)
        except OpledgerError as error:
            log.warning(
                "operation %s: could not report %s after the side effect raised: %s",
                self.id,
                kind,
                error,
                extra={"opledger_event": "report_failed", "operation_id": self.id},
            )


def call_inputs(
    key: KeySource,
    request: Optional[RequestSource],
    parent: ParentSource,
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> Tuple[str, Mapping[str, Any], Optional[str]]:
    """The key, the business request and the parent of one decorated call."""
    k = key(*args, **kwargs) if callable(key) else key
    if request is not None:
        req = request(*args, **kwargs)
    elif args:
        raise TypeError(
            "pass the business fields as keyword arguments, or give exactly_once a request= function"
        )
    else:
        req = dict(kwargs)
    par = parent(*args, **kwargs) if callable(parent) else parent
    return k, req, par


def status_of(outcome: Result, default: int) -> int:
    return outcome.status if outcome.status is not None else default


def as_result(produced: Any, status: int) -> Result:
    if isinstance(produced, Result):
        return produced
    if isinstance(produced, str):
        return Result(produced, status)
    raise TypeError(
        "a side effect decorated with exactly_once returns its resource reference (str) or an opledger.Result"
    )


def _claim_of(claim: Any) -> Claim:
    """A batch slot known to hold a claim."""
    assert isinstance(claim, Claim)
    return claim

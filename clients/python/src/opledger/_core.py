"""What the sync and asyncio clients share: building requests, reading answers, the retry
and wait policies. No I/O here: the clients send and sleep."""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import ssl
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

from ._transport import Response, Transport
from ._version import __version__
from .errors import (
    ApiError,
    DefiniteFailure,
    InProgressTimeout,
    NotRecorded,
    OpledgerError,
    Rejected,
    ResultWithheld,
    TransportError,
    error_for_claim,
)
from .models import (
    default_holder,
    Claim,
    Intent,
    ReportIntent,
    Operation,
    Report,
    Result,
    parse_claim,
    parse_operation,
    parse_rejection,
    parse_report,
)

log = logging.getLogger("opledger")

#: Most intents one batch carries (``Client.claim_many``).
BATCH_INTENTS_MAX = 1000

# Characters that may travel in an HTTP header value: visible ASCII, space and tab.
_HEADER_SAFE = re.compile(r"^[\x20-\x7e\t]*$")

# Statuses a proxy may answer without an opledger error body that are safe to retry.
_RETRIABLE_BARE = (502, 503, 504)

KeySource = Union[str, Callable[..., str]]


def check_header_value(value: Any, what: str) -> str:
    """Refuses what cannot be sent as a header value, without echoing it (keys and tokens
    are secrets of a kind: they never enter an exception message)."""
    if not isinstance(value, str):
        raise TypeError(f"the {what} must be a str")
    if not _HEADER_SAFE.match(value):
        raise ValueError(f"the {what} must be visible ASCII (it is not shown here)")
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        # A string holding a decimal is a valid `amount` and keeps its digits exactly.
        return str(value)
    raise TypeError(f"a request value of type {type(value).__name__} is not JSON")


def encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), allow_nan=False, default=_json_default).encode()


def op_path(operation_id: str, action: str = "") -> str:
    if not isinstance(operation_id, str) or not operation_id:
        raise ValueError("an operation id is a non-empty str")
    path = "/v1/operations/" + quote(operation_id, safe="")
    return path + "/" + action if action else path


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class Call:
    """One API call, ready to send (and to send again)."""

    method: str
    path: str
    # The token, the key and the request: never shown.
    headers: Dict[str, str] = field(repr=False)
    body: Optional[bytes] = field(repr=False)


@dataclass(frozen=True)
class Answer:
    status: int
    body: Dict[str, Any]


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of retriable answers (408, 429, 503, and 502/504 from a proxy) and of
    transport failures. Every call of the API is safe to repeat: a claim is keyed, a
    repeated report is answered ``unchanged``.

    The wait before retry ``n`` (0-based) honours ``Retry-After`` when the answer has one
    (plus up to 10 % jitter); otherwise it is drawn from [b/2, b] with
    ``b = min(max_backoff, backoff * 2**n)``. A ``Retry-After`` longer than
    ``max_retry_after`` is not waited for: the error is raised at once.
    """

    retries: int = 4
    backoff: float = 0.2
    max_backoff: float = 10.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: Optional[float]) -> Optional[float]:
        """Seconds to wait before retry number ``attempt`` (0-based), or None to give up."""
        if attempt >= self.retries:
            return None
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            return retry_after + random.uniform(0, retry_after * 0.1)
        ceiling = min(self.max_backoff, self.backoff * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)


class Waiter:
    """Bounded backoff while another holder executes (``in_progress``): 50 ms doubling to
    ``max_delay``, jittered, never past ``limit`` seconds from the first claim."""

    def __init__(self, limit: float, initial: float = 0.05, max_delay: float = 2.0) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + max(0.0, limit)
        self.next = initial
        self.max_delay = max_delay
        self.attempts = 0

    def delay(self) -> Optional[float]:
        """The wait before the next claim, or None once the limit is reached."""
        self.attempts += 1
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return None
        delay = min(random.uniform(self.next / 2, self.next), remaining)
        self.next = min(self.next * 2, self.max_delay)
        return delay

    def timeout(self, claim: Claim) -> InProgressTimeout:
        return InProgressTimeout(claim, time.monotonic() - self.started, self.attempts)


def log_wait(claim: Claim, delay: float) -> None:
    log.debug(
        "operation %s is in progress with another holder; claiming again in %.2f s",
        claim.operation_id,
        delay,
        extra={"opledger_event": "wait", "operation_id": claim.operation_id, "decision": claim.decision},
    )


class Base:
    """Request building and answer reading shared by :class:`Client` and :class:`AsyncClient`."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = 10.0,
        max_retry_after: float = 60.0,
        wait_limit: float = 60.0,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        check_header_value(token, "token")
        if not token.strip():
            raise ValueError("the token is empty")
        self._auth = "Bearer " + token.strip()
        self.base_url = base_url
        self.retry = RetryPolicy(retries, backoff, max_backoff, max_retry_after)
        self.wait_limit = wait_limit
        self._transport = Transport(base_url, timeout=timeout, ssl_context=ssl_context)

    def __repr__(self) -> str:
        # Never the token.
        return f"{type(self).__name__}({self.base_url!r})"

    # -- requests ----------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        body: Optional[Mapping[str, Any]] = None,
        extra: Optional[Dict[str, str]] = None,
    ) -> Call:
        headers = {
            "Authorization": self._auth,
            "Accept": "application/json",
            "User-Agent": f"opledger-python/{__version__}",
        }
        data = None
        if body is not None:
            data = encode(body)
            headers["Content-Type"] = "application/json"
        if extra:
            headers.update(extra)
        return Call(method, path, headers, data)

    def _claim_call(
        self,
        tool: str,
        key: str,
        request: Mapping[str, Any],
        holder: str,
        parent: Optional[str],
    ) -> Call:
        check_header_value(key, "Idempotency-Key")
        body: Dict[str, Any] = {"tool": tool, "holder": holder, "request": dict(request)}
        if parent is not None:
            body["parent"] = parent
        return self._call("POST", "/v1/operations", body, {"Idempotency-Key": key})

    def _batch_call(self, intents: Sequence[Intent]) -> Call:
        if not 1 <= len(intents) <= BATCH_INTENTS_MAX:
            raise ValueError(f"a batch carries 1 to {BATCH_INTENTS_MAX} intents, not {len(intents)}")
        body = []
        for intent in intents:
            # In the body, a key need not be a header value: one the ledger refuses is refused
            # alone, in its result.
            if not isinstance(intent.key, str):
                raise TypeError("an intent's key must be a str")
            one: Dict[str, Any] = {
                "key": intent.key,
                "tool": intent.tool,
                "holder": intent.holder,
                "request": dict(intent.request),
            }
            if intent.parent is not None:
                one["parent"] = intent.parent
            body.append(one)
        return self._call("POST", "/v1/operations/batch", {"intents": body})

    def _items_again(self, call: Call, results: Sequence[Any], attempt: int) -> Tuple[List[int], float]:
        """The items of a batch's answer to send again — those refused as retriable (the
        node was unavailable, the decision late) — and the wait before, honouring their
        ``retry_after``; none once the retries are spent."""
        again = [i for i, r in enumerate(results) if isinstance(r, ApiError) and r.retriable]
        if not again:
            return [], 0.0
        afters = [r.retry_after for r in (results[i] for i in again) if r.retry_after is not None]
        delay = self.retry.delay(attempt, max(afters) if afters else None)
        if delay is None:
            return [], 0.0
        log.info(
            "%s %s: %d of %d items retriable; retry %d of %d in %.2f s",
            call.method, call.path, len(again), len(results), attempt + 1, self.retry.retries, delay,
            extra={"opledger_event": "retry", "status": None, "code": "batch_items"},
        )
        return again, delay

    @staticmethod
    def _batch_of(call: Call, answer: Answer) -> List[Union[Claim, ApiError]]:
        results = _results_of(call, answer)
        out: List[Union[Claim, ApiError]] = []
        for result in results:
            status = int(result.get("status", 0))
            error = _item_error(call, status, result)
            out.append(error if error is not None else parse_claim(status, result))
        return out

    def _reports_call(self, reports: Sequence[ReportIntent]) -> Call:
        if not 1 <= len(reports) <= BATCH_INTENTS_MAX:
            raise ValueError(f"a batch carries 1 to {BATCH_INTENTS_MAX} reports, not {len(reports)}")
        body = []
        for r in reports:
            if r.report not in ("complete", "fail", "unknown", "heartbeat"):
                raise ValueError('report is "complete", "fail", "unknown" or "heartbeat"')
            one: Dict[str, Any] = {"operation_id": r.operation_id, "report": r.report, "holder": r.holder}
            if r.report == "complete":
                if r.result is None or r.result.status is None:
                    raise ValueError("a complete report needs a result with its status")
                found: Dict[str, Any] = {"resource_ref": r.result.resource_ref, "status": r.result.status}
                if r.result.headers:
                    found["headers"] = dict(r.result.headers)
                one["result"] = found
            if r.report == "fail":
                if r.kind not in ("definite", "not_accepted") or not r.code:
                    raise ValueError('a fail report needs kind "definite" or "not_accepted" and a code')
                one["kind"], one["code"] = r.kind, r.code
            if r.expected_version is not None:
                one["expected_version"] = r.expected_version
            body.append(one)
        return self._call("POST", "/v1/reports/batch", {"reports": body})

    def _reports_of(self, call: Call, answer: Answer) -> List[Union[Report, OpledgerError]]:
        results = _results_of(call, answer)
        out: List[Union[Report, OpledgerError]] = []
        for result in results:
            status = int(result.get("status", 0))
            error = _item_error(call, status, result)
            if error is not None:
                out.append(error)
                continue
            try:
                out.append(self._report_of(call, Answer(status, result)))
            except OpledgerError as refused:
                out.append(refused)
        return out

    def _complete_call(
        self,
        operation_id: str,
        holder: str,
        resource_ref: str,
        status: int,
        headers: Optional[Mapping[str, str]],
        expected_version: Optional[int],
    ) -> Call:
        result: Dict[str, Any] = {"resource_ref": resource_ref, "status": status}
        if headers:
            result["headers"] = dict(headers)
        body: Dict[str, Any] = {"holder": holder, "result": result}
        if expected_version is not None:
            body["expected_version"] = expected_version
        return self._call("POST", op_path(operation_id, "complete"), body)

    def _fail_call(
        self, operation_id: str, holder: str, kind: str, code: str, expected_version: Optional[int]
    ) -> Call:
        if kind not in ("definite", "not_accepted"):
            raise ValueError('kind is "definite" or "not_accepted"')
        body: Dict[str, Any] = {"holder": holder, "kind": kind, "code": code}
        if expected_version is not None:
            body["expected_version"] = expected_version
        return self._call("POST", op_path(operation_id, "fail"), body)

    def _holder_call(
        self, operation_id: str, action: str, holder: str, expected_version: Optional[int]
    ) -> Call:
        body: Dict[str, Any] = {"holder": holder}
        if expected_version is not None:
            body["expected_version"] = expected_version
        return self._call("POST", op_path(operation_id, action), body)

    def _lookup_call(self, tool: str, key: str) -> Call:
        check_header_value(key, "Idempotency-Key")
        query = urlencode({"tool": tool})
        return self._call("GET", f"/v1/operations/lookup?{query}", None, {"Idempotency-Key": key})

    def _take_over_call(
        self, operation_id: str, expected_version: Optional[int], reason: Optional[str]
    ) -> Call:
        body: Dict[str, Any] = {}
        if expected_version is not None:
            body["expected_version"] = expected_version
        if reason is not None:
            body["reason"] = reason
        return self._call("POST", op_path(operation_id, "takeover"), body)

    def _resolve_call(
        self,
        operation_id: str,
        result: Optional[Result],
        expected_version: Optional[int],
        reason: Optional[str],
    ) -> Call:
        body: Dict[str, Any] = {"outcome": "not_executed" if result is None else "completed"}
        if reason is not None:
            body["reason"] = reason
        if result is not None:
            if result.status is None:
                raise ValueError("a resolved result needs its status")
            found: Dict[str, Any] = {"resource_ref": result.resource_ref, "status": result.status}
            if result.headers:
                found["headers"] = dict(result.headers)
            body["result"] = found
        if expected_version is not None:
            body["expected_version"] = expected_version
        return self._call("POST", op_path(operation_id, "resolve"), body)

    def _compensate_call(self, operation_id: str, holder: str, request: Mapping[str, Any]) -> Call:
        body = {"holder": holder, "request": dict(request)}
        return self._call("POST", op_path(operation_id, "compensate"), body)

    # -- answers -----------------------------------------------------------------------

    def _interpret(
        self, call: Call, response: Response, attempt: int
    ) -> Tuple[Optional[Answer], Optional[float], Optional[ApiError]]:
        """(answer, None, None) for an answer to return; (None, delay, error) to retry after
        ``delay`` seconds; (None, None, error) to raise ``error``."""
        try:
            payload = json.loads(response.body) if response.body else None
        except ValueError:
            payload = None
        error_body = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(error_body, dict):
            error = ApiError(
                response.status,
                str(error_body.get("code", "")),
                str(error_body.get("message", "")),
                error_body.get("retriable") is True,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                method=call.method,
                path=call.path,
            )
        elif isinstance(payload, dict) and (response.status < 400 or "decision" in payload):
            return Answer(response.status, payload), None, None
        else:
            error = ApiError(
                response.status,
                f"http_{response.status}",
                "the answer is not an opledger answer (a proxy in between?)",
                response.status in _RETRIABLE_BARE,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
                method=call.method,
                path=call.path,
            )
        if error.retriable:
            delay = self.retry.delay(attempt, error.retry_after)
            if delay is not None:
                log.debug(
                    "%s %s answered %d %s; retry %d of %d in %.2f s",
                    call.method,
                    call.path,
                    error.status,
                    error.code,
                    attempt + 1,
                    self.retry.retries,
                    delay,
                    extra={"opledger_event": "retry", "status": error.status, "code": error.code},
                )
                return None, delay, error
        return None, None, error

    def _transport_retry(self, call: Call, error: BaseException, attempt: int) -> float:
        delay = self.retry.delay(attempt, None)
        if delay is None:
            raise TransportError(
                call.method, call.path, f"{type(error).__name__}: {error} (after {attempt + 1} attempts)"
            ) from error
        log.debug(
            "%s %s failed (%s); retry %d of %d in %.2f s",
            call.method,
            call.path,
            type(error).__name__,
            attempt + 1,
            self.retry.retries,
            delay,
            extra={"opledger_event": "retry", "status": None, "code": type(error).__name__},
        )
        return delay

    @staticmethod
    def _report_of(call: Call, answer: Answer) -> Report:
        body = answer.body
        if body.get("decision") == "rejected":
            rejection = parse_rejection(body.get("rejection"))
            report = parse_report(body) if "operation_id" in body else None
            raise Rejected(
                rejection.code if rejection else "",
                rejection.number if rejection else 0,
                rejection.message if rejection else "",
                report=report,
                operation_id=report.operation_id if report else call.path.split("/")[3],
                expected_version=rejection.expected_version if rejection else None,
                current_version=rejection.current_version if rejection else None,
            )
        if answer.status >= 400:
            raise ApiError(
                answer.status,
                "unexpected",
                "an answer this client does not know",
                False,
                method=call.method,
                path=call.path,
            )
        return parse_report(body)

    @staticmethod
    def _claim_of(answer: Answer) -> Claim:
        return parse_claim(answer.status, answer.body)

    @staticmethod
    def _operation_of(answer: Answer) -> Operation:
        return parse_operation(answer.body)

    @staticmethod
    def _json_of(answer: Answer) -> Dict[str, Any]:
        return dict(answer.body)


def _results_of(call: Call, answer: Answer) -> List[Any]:
    """A batch answer's results, one per item."""
    results = answer.body.get("results")
    if not isinstance(results, list):
        raise ApiError(answer.status, "unexpected", "a batch answer without results", False,
                       method=call.method, path=call.path)
    return results


def _item_error(call: Call, status: int, result: Mapping[str, Any]) -> Optional[ApiError]:
    """A batch item's refusal, if it was refused."""
    error = result.get("error")
    if not isinstance(error, dict):
        return None
    after = error.get("retry_after")
    return ApiError(status, str(error.get("code", "")), str(error.get("message", "")),
                    error.get("retriable") is True,
                    retry_after=float(after) if isinstance(after, (int, float)) else None,
                    method=call.method, path=call.path)


def settle(claim: Claim) -> Optional[Result]:
    """What a decided claim means for the ergonomic forms.

    Returns None for ``execute`` (run the effect); the stored result for a completed
    ``replay``; raises the typed exception for everything that forbids executing. The
    caller handles ``in_progress`` (wait and claim again) before asking.
    """
    if claim.decision == "execute":
        return None
    if claim.decision == "replay":
        if claim.result_withheld:
            raise ResultWithheld(claim)
        if claim.state == "failed" and claim.failure is not None:
            raise DefiniteFailure(claim.failure.code, operation_id=claim.operation_id, replayed=True)
        if claim.result is not None:
            return claim.result
    if claim.decision == "not_recorded":
        raise NotRecorded(claim)
    error = error_for_claim(claim)
    if error is not None:
        raise error
    raise ApiError(
        claim.http_status,
        "unexpected_decision",
        f"a claim answered {claim.decision!r} in state {claim.state!r}, which this client does not know",
        False,
        method="POST",
        path="/v1/operations",
    )

"""The client's exceptions.

Messages name the HTTP method, the path (which holds at most an operation id), the status and
the server's stable code and message; never a token, an idempotency key or a request value
(the server's own messages never carry them either).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:
    from .models import Claim, Report

__all__ = [
    "ApiError",
    "Conflict",
    "DecisionError",
    "DefiniteFailure",
    "InProgressTimeout",
    "KeyExpired",
    "ManualResolution",
    "NotAccepted",
    "NotRecorded",
    "OpledgerError",
    "OutcomeUnknown",
    "Rejected",
    "ResultWithheld",
    "TransportError",
    "UnreportedOperation",
]

_CODE = re.compile(r"^[!-~]{1,128}$")


class OpledgerError(Exception):
    """Base class of every exception this package raises."""


class TransportError(OpledgerError):
    """The ledger could not be reached (connection refused or reset, timeout, a broken
    answer), and the retries ran out. Every call of the API is safe to send again."""

    def __init__(self, method: str, path: str, reason: str) -> None:
        super().__init__(f"{method} {path}: {reason}")
        self.method = method
        self.path = path
        self.reason = reason


class ApiError(OpledgerError):
    """An ``{"error": {"code", "message", "retriable"}}`` answer (4xx/5xx): nothing was
    appended to the ledger. ``retriable`` (408, 429, 503) means the same call may simply be
    sent again; the client has already done so ``retries`` times when it raises one."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retriable: bool,
        *,
        retry_after: Optional[float] = None,
        method: str = "",
        path: str = "",
    ) -> None:
        super().__init__(f"{method} {path}: {status} {code}: {message}".strip())
        self.status = status
        self.code = code
        self.message = message
        self.retriable = retriable
        self.retry_after = retry_after
        self.method = method
        self.path = path


class DecisionError(OpledgerError):
    """A claim's answer that forbids executing the side effect. ``claim`` is the answer."""

    def __init__(self, claim: "Claim", message: str) -> None:
        super().__init__(message)
        self.claim = claim
        self.operation_id = claim.operation_id
        self.state = claim.state
        self.version = claim.version
        self.decision = claim.decision


class Conflict(DecisionError):
    """422 ``conflict``: the key was used before with another business request.
    ``categories`` names the fingerprint categories that differ (``amount``, ``recipient``,
    ``target``, ``body``, ``upstream``, ``other``). The earlier request is never shown."""

    def __init__(self, claim: "Claim") -> None:
        self.categories: Tuple[str, ...] = claim.conflict
        super().__init__(
            claim,
            f"operation {claim.operation_id}: the key was used with another request "
            f"(differs in: {', '.join(claim.conflict) or 'unknown'}); a new intent needs a new key",
        )


class OutcomeUnknown(DecisionError):
    """409 ``outcome_unknown``: nobody knows yet whether the side effect happened; the
    ledger's recovery asks the tool. Do not execute; claim again later."""

    def __init__(self, claim: "Claim") -> None:
        super().__init__(
            claim,
            f"operation {claim.operation_id}: its outcome is unknown; recovery is finding out, "
            "do not execute it again",
        )


class ManualResolution(DecisionError):
    """409 ``manual``: an operator decides what happened. Do not execute."""

    def __init__(self, claim: "Claim") -> None:
        super().__init__(
            claim,
            f"operation {claim.operation_id}: waits for an operator (GET /v1/reconciliation); "
            "do not execute it again",
        )


class KeyExpired(DecisionError):
    """410 ``key_expired``: the key's retention lapsed and its answer is gone; a new intent
    needs a new key (executing under this one would reuse the operation id)."""

    def __init__(self, claim: "Claim") -> None:
        super().__init__(
            claim,
            f"operation {claim.operation_id}: the key's retention lapsed; use a new key for a new intent",
        )


class InProgressTimeout(DecisionError):
    """Another worker held the operation (``in_progress``) for longer than the wait limit."""

    def __init__(self, claim: "Claim", waited: float, attempts: int) -> None:
        self.waited = waited
        self.attempts = attempts
        super().__init__(
            claim,
            f"operation {claim.operation_id}: still in progress with another holder after "
            f"{waited:.1f} s and {attempts} claims",
        )


class NotRecorded(DecisionError):
    """``not_recorded``: the tool is a ``read`` tool; nothing is recorded, so there is no
    operation to execute exactly once. Call it directly."""

    def __init__(self, claim: "Claim") -> None:
        super().__init__(claim, "the tool is a read tool: nothing is recorded; call it directly")


class ResultWithheld(DecisionError):
    """``replay`` with ``result_withheld``: the operation finished, but this principal may
    no longer use the tool, so the ledger does not show its result."""

    def __init__(self, claim: "Claim") -> None:
        super().__init__(
            claim,
            f"operation {claim.operation_id}: finished, but the principal may no longer use the "
            "tool; the result is withheld",
        )


class Rejected(OpledgerError):
    """409 ``rejected`` (or 404 ``unknown_operation``): a report the operation's state does
    not allow. ``code``/``number``/``message`` come from ``rejection``; ``report`` has the
    current state (``None`` for ``unknown_operation``)."""

    def __init__(
        self,
        code: str,
        number: int,
        message: str,
        *,
        report: Optional["Report"] = None,
        operation_id: str = "",
        expected_version: Optional[int] = None,
        current_version: Optional[int] = None,
    ) -> None:
        super().__init__(f"operation {operation_id}: report rejected: {code} ({number}): {message}")
        self.code = code
        self.number = number
        self.message = message
        self.report = report
        self.operation_id = operation_id
        self.state = report.state if report is not None else None
        self.version = report.version if report is not None else None
        self.expected_version = expected_version
        self.current_version = current_version


class DefiniteFailure(OpledgerError):
    """A definite business failure: it must not be retried under this key.

    Raise it from a side effect (the ergonomic forms report ``fail`` with kind
    ``definite`` and re-raise it); it is also raised on the ``replay`` of an operation that
    failed definitely (``replayed`` is then true). ``code`` is 1-128 visible ASCII
    characters, e.g. ``card_declined``.
    """

    def __init__(self, code: str, *, operation_id: str = "", replayed: bool = False) -> None:
        if not isinstance(code, str) or not _CODE.match(code):
            raise ValueError("a failure code is 1-128 visible ASCII characters (0x21-0x7E)")
        super().__init__(f"operation {operation_id or '?'}: failed definitely: {code}")
        self.code = code
        self.operation_id = operation_id
        self.replayed = replayed

    def __str__(self) -> str:
        # The id is filled in once the ergonomic forms know which operation failed.
        return f"operation {self.operation_id or '?'}: failed definitely: {self.code}"


class NotAccepted(OpledgerError):
    """The external system provably never accepted the call. Raise it from a side effect:
    the ergonomic forms report ``fail`` with kind ``not_accepted`` (the key is released, so
    the next claim executes again under the same operation id) and re-raise it."""

    def __init__(self, code: str, *, operation_id: str = "") -> None:
        if not isinstance(code, str) or not _CODE.match(code):
            raise ValueError("a failure code is 1-128 visible ASCII characters (0x21-0x7E)")
        super().__init__(f"operation {operation_id or '?'}: not accepted: {code}")
        self.code = code
        self.operation_id = operation_id

    def __str__(self) -> str:
        return f"operation {self.operation_id or '?'}: not accepted: {self.code}"


class UnreportedOperation(OpledgerError):
    """An ``operation(...)`` block that executed ended without ``complete``, ``fail`` or
    ``unknown``; the client reported ``unknown`` (the effect may have happened)."""


def error_for_claim(claim: "Claim") -> Optional[DecisionError]:
    """The exception a claim's decision calls for, if it forbids executing."""
    if claim.decision == "conflict":
        return Conflict(claim)
    if claim.decision == "outcome_unknown":
        return OutcomeUnknown(claim)
    if claim.decision == "manual":
        return ManualResolution(claim)
    if claim.decision == "key_expired":
        return KeyExpired(claim)
    return None

"""Typed views of the ledger's answers (see ``schemas/openapi.yaml``).

Every answer about an operation carries ``operation_id``, ``state`` and ``version``; the
other fields are present when the server sends them. ``raw`` keeps the whole JSON answer
(it never holds a key, a token or a request value: the server does not send them).
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = [
    "Claim",
    "Failure",
    "Lease",
    "Operation",
    "Rejection",
    "Report",
    "Result",
]


@dataclass(frozen=True)
class Lease:
    """The executor's lease while an operation is ``processing``."""

    holder: str
    expires_at: str


@dataclass(frozen=True)
class Result:
    """A side effect's business result: what ``complete`` stores and a ``replay`` returns.

    ``status`` is the business status of the side effect (required when reporting; a
    ``conflict`` answer shows ``resource_ref`` only). ``headers`` are answer headers to
    replay (at most 16).
    """

    resource_ref: str
    status: Optional[int] = None
    headers: Dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Failure:
    """A reported failure: ``kind`` is ``definite`` or ``not_accepted``."""

    kind: str
    code: str


@dataclass(frozen=True)
class Rejection:
    """Why a report was refused (``rejection`` of a 409 ``rejected`` answer)."""

    code: str
    number: int
    message: str
    expected_version: Optional[int] = None
    current_version: Optional[int] = None


@dataclass(frozen=True)
class Operation:
    """An operation as ``GET /v1/operations/{id}`` shows it."""

    operation_id: str
    state: str
    version: int
    tool: Optional[str] = None
    holder: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    lease: Optional[Lease] = None
    result: Optional[Result] = None
    result_withheld: bool = False
    failure: Optional[Failure] = None
    parent: Optional[str] = None
    compensates: Optional[str] = None
    released_because: Optional[str] = None
    resolved_by: Optional[str] = None
    taken_over_by: Optional[str] = None
    expired_from: Optional[str] = None
    recovery: Optional[Dict[str, Any]] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Claim(Operation):
    """The answer to a claim: ``decision`` says what the caller may do.

    ``execute`` (201): run the side effect with ``operation_id`` as its idempotency key,
    then report. ``replay`` (200): finished; ``result`` (completed) or ``failure``
    (definitely failed). ``in_progress`` / ``outcome_unknown`` / ``manual`` (409),
    ``conflict`` (422, ``conflict`` lists the categories), ``key_expired`` (410): do not
    execute. ``not_recorded`` (200): a ``read`` tool; nothing is recorded and
    ``operation_id`` is empty.
    """

    decision: str = ""
    conflict: Tuple[str, ...] = ()
    http_status: int = 0

    @property
    def executable(self) -> bool:
        """Whether this caller is the executor (``decision == "execute"``)."""
        return self.decision == "execute"

    @property
    def recorded(self) -> bool:
        """False for a ``read`` tool's claim (``not_recorded``)."""
        return self.decision != "not_recorded"

    def raise_for_decision(self) -> "Claim":
        """Raise the typed exception for an answer that forbids executing.

        ``conflict`` -> :class:`~opledger.Conflict`, ``outcome_unknown`` ->
        :class:`~opledger.OutcomeUnknown`, ``manual`` -> :class:`~opledger.ManualResolution`,
        ``key_expired`` -> :class:`~opledger.KeyExpired`. Returns the claim otherwise
        (``execute``, ``replay``, ``in_progress``, ``not_recorded``).
        """
        from .errors import error_for_claim

        error = error_for_claim(self)
        if error is not None:
            raise error
        return self


@dataclass(frozen=True)
class Report(Operation):
    """The answer to an executor's report: ``decision`` is ``accepted`` or ``unchanged``."""

    decision: str = ""


def _opt_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return default


def parse_result(value: Any) -> Optional[Result]:
    if not isinstance(value, Mapping) or not isinstance(value.get("resource_ref"), str):
        return None
    status = value.get("status")
    headers = value.get("headers")
    return Result(
        resource_ref=value["resource_ref"],
        status=_int(status) if isinstance(status, (int, float)) else None,
        headers={str(k): str(v) for k, v in headers.items()} if isinstance(headers, Mapping) else {},
    )


def parse_rejection(value: Any) -> Optional[Rejection]:
    if not isinstance(value, Mapping):
        return None
    expected = value.get("expected_version")
    current = value.get("current_version")
    return Rejection(
        code=str(value.get("code", "")),
        number=_int(value.get("number")),
        message=str(value.get("message", "")),
        expected_version=_int(expected) if expected is not None else None,
        current_version=_int(current) if current is not None else None,
    )


def _operation_fields(body: Mapping[str, Any]) -> Dict[str, Any]:
    lease = body.get("lease")
    failure = body.get("failure")
    recovery = body.get("recovery")
    return {
        "operation_id": str(body.get("operation_id", "")),
        "state": str(body.get("state", "")),
        "version": _int(body.get("version")),
        "tool": _opt_str(body.get("tool")),
        "holder": _opt_str(body.get("holder")),
        "created_at": _opt_str(body.get("created_at")),
        "updated_at": _opt_str(body.get("updated_at")),
        "lease": Lease(holder=str(lease.get("holder", "")), expires_at=str(lease.get("expires_at", "")))
        if isinstance(lease, Mapping)
        else None,
        "result": parse_result(body.get("result")),
        "result_withheld": body.get("result_withheld") is True,
        "failure": Failure(kind=str(failure.get("kind", "")), code=str(failure.get("code", "")))
        if isinstance(failure, Mapping)
        else None,
        "parent": _opt_str(body.get("parent")),
        "compensates": _opt_str(body.get("compensates")),
        "released_because": _opt_str(body.get("released_because")),
        "resolved_by": _opt_str(body.get("resolved_by")),
        "taken_over_by": _opt_str(body.get("taken_over_by")),
        "expired_from": _opt_str(body.get("expired_from")),
        "recovery": dict(recovery) if isinstance(recovery, Mapping) else None,
        "raw": dict(body),
    }


def parse_operation(body: Mapping[str, Any]) -> Operation:
    return Operation(**_operation_fields(body))


def parse_claim(http_status: int, body: Mapping[str, Any]) -> Claim:
    conflict = body.get("conflict")
    return Claim(
        **_operation_fields(body),
        decision=str(body.get("decision", "")),
        conflict=tuple(str(c) for c in conflict) if isinstance(conflict, list) else (),
        http_status=http_status,
    )


def parse_report(body: Mapping[str, Any]) -> Report:
    return Report(**_operation_fields(body), decision=str(body.get("decision", "")))


_HOLDER_UNSAFE = re.compile(r"[^!-~]")


def default_holder() -> str:
    """A holder unique to one call: ``<host>-<pid>-<random>``.

    The ledger gives ``execute`` again to the *same* holder re-claiming its live operation
    (a worker that lost the first answer carries on), so two concurrent calls must never
    share a holder unless they are the same worker.
    """
    host = _HOLDER_UNSAFE.sub("", socket.gethostname())[:64] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Intent:
    """One intent of a batch (:meth:`Client.claim_many`): what :meth:`Client.claim` takes.
    ``holder`` defaults to one drawn when the intent is made (:func:`default_holder`), so
    sending the same ``Intent`` again — a retried batch — claims as the same holder and gets
    the same answers (``execute`` again for an operation it runs); a new worker makes new
    intents."""

    tool: str
    key: str = field(repr=False)
    request: Mapping[str, Any] = field(repr=False)
    holder: str = field(default_factory=lambda: default_holder())
    parent: Optional[str] = None

    def __post_init__(self) -> None:
        # ``holder=None`` (what earlier versions took) still means a holder of its own.
        if self.holder is None:
            object.__setattr__(self, "holder", default_holder())


@dataclass(frozen=True)
class ReportIntent:
    """One report of a batch (:meth:`Client.report_many`): ``report`` is ``"complete"`` (with
    ``result``), ``"fail"`` (with ``kind`` and ``code``), ``"unknown"`` or ``"heartbeat"``."""

    operation_id: str
    report: str
    holder: str
    result: Optional["Result"] = None
    kind: Optional[str] = None
    code: Optional[str] = None
    expected_version: Optional[int] = None

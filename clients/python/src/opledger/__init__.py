"""A client of opledger, the operation ledger that makes AI agents' side effects happen
exactly once.

    import opledger

    ledger = opledger.Client("http://127.0.0.1:7070", token)

    @ledger.exactly_once(
        tool="payments.charge",
        key=lambda order, amount: f"order-{order}-charge",
        request=lambda order, amount: {"amount": amount, "currency": "EUR", "customer": "c-7"},
    )
    def charge(operation_id: str, order: str, amount: str) -> str:
        return provider.charge(amount, idempotency_key=operation_id).id  # the result reference

    charge("42", "10.50")  # charges once; a retry returns the stored opledger.Result

Standard library only; :class:`Client` is synchronous, :class:`AsyncClient` its asyncio twin.
"""

from ._version import __version__
from .aio import AsyncClient, AsyncExecution
from .client import Client, Execution
from .errors import (
    ApiError,
    Conflict,
    DecisionError,
    DefiniteFailure,
    InProgressTimeout,
    KeyExpired,
    ManualResolution,
    NotAccepted,
    NotRecorded,
    OpledgerError,
    OutcomeUnknown,
    Rejected,
    ResultWithheld,
    TransportError,
    UnreportedOperation,
)
from .models import Claim, Failure, Intent, Lease, Operation, Rejection, Report, ReportIntent, Result

__all__ = [
    "__version__",
    "ApiError",
    "AsyncClient",
    "AsyncExecution",
    "Claim",
    "Client",
    "Conflict",
    "DecisionError",
    "DefiniteFailure",
    "Execution",
    "Failure",
    "InProgressTimeout",
    "Intent",
    "KeyExpired",
    "Lease",
    "ManualResolution",
    "NotAccepted",
    "NotRecorded",
    "OpledgerError",
    "Operation",
    "OutcomeUnknown",
    "Rejected",
    "Rejection",
    "Report",
    "ReportIntent",
    "Result",
    "ResultWithheld",
    "TransportError",
    "UnreportedOperation",
]

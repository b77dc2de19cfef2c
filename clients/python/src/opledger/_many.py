"""A batch of side effects, each run at most once (``exactly_once_many``): what the sync and
asyncio clients share. The batch is claimed in one request, the effects that may run are run,
and their outcomes reported in one request; each intent gets its own outcome, in order."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._core import log, settle
from .errors import DefiniteFailure, NotAccepted, OpledgerError
from .models import Claim, Intent, Report, ReportIntent, Result, default_holder

#: What one intent of a batch came to: the stored result (run now or replayed), or the
#: error a single ``exactly_once`` call would have raised.
Outcome = Union[Result, OpledgerError]

#: Reported for an effect a batch never ran because the caller was interrupted (it provably
#: never reached the external system: the key is released).
INTERRUPTED = "interrupted_before_run"


def fresh(intents: Sequence[Intent]) -> List[Intent]:
    """The intents under holders of this call's own, as a single ``exactly_once`` draws one per
    call: a second call with the same intents — a retry after its reports failed — is another
    worker, told ``in_progress`` while the first call's leases last, never ``execute`` again."""
    return [dataclasses.replace(intent, holder=default_holder()) for intent in intents]


def unknowns(claims: Sequence[Any], intents: Sequence[Intent], indexes: Sequence[int]) -> List[ReportIntent]:
    """``unknown`` reports for effects whose outcome could not be reported as it was (they may
    have happened): what a single ``exactly_once`` reports when its ``complete`` fails."""
    return [ReportIntent(claims[i].operation_id, "unknown", intents[i].holder) for i in indexes]


def reports(
    claims: Sequence[Any], intents: Sequence[Intent], produced: Dict[int, Any], status: int
) -> Tuple[List[int], List[ReportIntent]]:
    """The effects run, in order, and what to report for each."""
    order = sorted(produced)
    return order, [report_for(claims[i], intents[i], produced[i], status) for i in order]


def waiting(claims: Sequence[Any]) -> List[int]:
    """The intents in progress with another holder: to claim again."""
    return [i for i, c in enumerate(claims) if isinstance(c, Claim) and c.decision == "in_progress"]


def refused_completes(order: Sequence[int], reports: Sequence[ReportIntent], answers: Sequence[Any]) -> List[int]:
    """The effects whose ``complete`` report the ledger refused."""
    return [i for i, r, a in zip(order, reports, answers) if r.report == "complete" and isinstance(a, OpledgerError)]


def settled(claims: Sequence[Union[Claim, OpledgerError]]) -> Tuple[List[Optional[Outcome]], List[int]]:
    """Each intent's outcome where its claim already says it (a replay's stored result, a
    refusal, a decision that forbids executing), and the indexes of those to run."""
    known: List[Optional[Outcome]] = []
    run: List[int] = []
    for i, claim in enumerate(claims):
        if isinstance(claim, OpledgerError):
            known.append(claim)
            continue
        try:
            stored = settle(claim)
        except OpledgerError as refused:
            known.append(refused)
            continue
        known.append(stored)
        if stored is None:
            run.append(i)
    return known, run


def report_for(claim: Claim, intent: Intent, produced: Any, status: int) -> ReportIntent:
    """What to report for one effect, from what it returned or raised (``produced``): its
    result; a definite or not-accepted failure; otherwise ``unknown`` (it may have happened)."""
    holder = intent.holder
    if isinstance(produced, DefiniteFailure):
        produced.operation_id = produced.operation_id or claim.operation_id
        return ReportIntent(claim.operation_id, "fail", holder, kind="definite", code=produced.code)
    if isinstance(produced, NotAccepted):
        produced.operation_id = produced.operation_id or claim.operation_id
        return ReportIntent(claim.operation_id, "fail", holder, kind="not_accepted", code=produced.code)
    if isinstance(produced, BaseException):
        return ReportIntent(claim.operation_id, "unknown", holder)
    assert isinstance(produced, Result)
    found = Result(produced.resource_ref, produced.status if produced.status is not None else status, produced.headers)
    return ReportIntent(claim.operation_id, "complete", holder, result=found)


def interrupted(claim: Claim, intent: Intent) -> ReportIntent:
    """The report of an effect the batch never ran."""
    return ReportIntent(claim.operation_id, "fail", intent.holder, kind="not_accepted", code=INTERRUPTED)


def outcome_of(report: ReportIntent, answer: Union[Report, OpledgerError], produced: Any) -> Outcome:
    """An effect's outcome once reported: the stored result, or what the effect raised. A
    report the ledger refused is logged; a completed effect whose report was refused
    returns that refusal (its result is not stored, and the effect is reported ``unknown``)."""
    if isinstance(answer, OpledgerError):
        log.warning(
            "operation %s: the %s report was refused: %s",
            report.operation_id,
            report.report,
            answer,
            extra={"opledger_event": "report_failed", "operation_id": report.operation_id},
        )
        if report.report == "complete":
            return answer
    if isinstance(produced, OpledgerError):
        return produced
    if isinstance(produced, BaseException):
        # Not an opledger error: the effect's own exception, kept as the cause.
        unknown = OpledgerError(f"operation {report.operation_id}: the side effect raised; it was reported unknown")
        unknown.__cause__ = produced
        return unknown
    assert report.result is not None
    stored = answer.result if isinstance(answer, Report) and answer.result is not None else None
    return stored or report.result


def place(known: List[Optional[Outcome]], outcomes: Dict[int, Outcome]) -> List[Outcome]:
    """Every intent's outcome, in order."""
    out: List[Outcome] = []
    for i, k in enumerate(known):
        o = outcomes.get(i, k)
        assert o is not None, "every intent is settled or run"
        out.append(o)
    return out

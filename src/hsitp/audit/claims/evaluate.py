"""Evaluating every claim into its row (:data:`~hsitp.audit.claims.render.COLUMNS`): its check's outcome, the
verdict and basis (reading, circular, hedged), its knife edge."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hsitp.audit.claims.checks import AnyOf, Check, ClaimsError
from hsitp.audit.claims.core import Context, Outcome, _fmt
from hsitp.audit.claims.entries import ClaimEntry
from hsitp.audit.claims.registry import evaluate_check
from hsitp.audit.claims.render import Row
from hsitp.audit.claims.validate import load_claims
from hsitp.audit.claims.verdicts import (
    _holds,
    hedged,
    judge,
    knife_edge,
    possibility_hedged,
)
from hsitp.outcomes import Basis, Claim

# The stage that measures each measured check (rule 15: such a claim is pending on it, never not reproducible).
MEASURING_STAGE = {
    "measured": "train (the accuracy run)",
    "accuracy_verdicts": "train (the accuracy run)",
    "probe_memory": "probe",
    "probe_throughput": "probe",
    "probe_estimate": "probe",
    "bench_compare": "bench (>= 3 launches)",
    "bench_trend": "bench (>= 3 launches)",
    "bench_value": "bench (>= 3 launches)",
    "shard_compare": "bench shard mode on a GPU (benchmarks/gpu_check.sh)",
    "shard_value": "bench shard mode on a GPU (benchmarks/gpu_check.sh)",
}


def measuring_stage(check: Check) -> str:
    """The first stage of this project that could measure the claim (a measured check in its check), or ""."""
    if check.fn in MEASURING_STAGE:
        return MEASURING_STAGE[check.fn]
    subs = check.checks if isinstance(check, AnyOf) else []
    return next((stage for sub in subs if (stage := measuring_stage(sub))), "")


def evaluate_claim(ctx: Context, c: ClaimEntry) -> tuple[Outcome, str, str]:
    """(outcome, verdict, basis) of one claim; rule 15 applied (:func:`_evaluate` does the rest)."""
    o, verdict, basis = _evaluate(ctx, c)
    if verdict == Claim.NOT_REPRODUCIBLE and measuring_stage(c.check):
        return o, Claim.PENDING, Basis.PENDING
    return o, verdict, basis


def _evaluate(ctx: Context, c: ClaimEntry) -> tuple[Outcome, str, str]:
    """(outcome, verdict, basis) of one claim. Evidence that holds by our own construction (``by_construction``) is
    shown but does not decide: the claim's ``reading`` verdict does (rule 3). A computed claim whose check is
    circular (rule 11) has basis ``circular``, and says ``consistent`` where it would say ``holds``."""
    try:
        o = evaluate_check(ctx, c.check)
    except (KeyError, TypeError) as exc:
        raise ClaimsError(f"claim {c.id}: check {c.check.fn!r} is missing {exc}") from exc
    if c.reading is not None and reading_decides(c, o):
        return o, c.reading.verdict, Basis.READING
    return (o, *judge(o, c.check, possibility_hedged(c.zh)))


def reading_decides(c: ClaimEntry, o: Outcome) -> bool:
    """Rule 3: a claim whose evidence holds by our own construction is decided by its reading, unless a measured
    sub-check of a first_decided claim decided (a measurement is not our construction). A claim whose only check is
    a measurement of our own config (s7_4_training: the run averaged 10 epochs because we set it so) is by
    construction too."""
    measurement_decided = o.basis == Basis.MEASURED and o.verdict != Claim.PENDING
    return bool(c.by_construction) and not (measurement_decided and o.decided_by)


def _reason(ctx: Context, c: ClaimEntry, o: Outcome, verdict: str, basis: str, by_reading: bool) -> str:
    """A row's reason: the outcome's, the claim's own, which sub-check decided (first_decided), the reading that
    decides by construction, the conditions a conditional claim holds under, and rule 15 for a pending one."""
    own = c.reason.strip()
    reason = o.reason or own
    if o.basis == "measured" and o.reason and not o.decided_by and own:
        reason = f"{o.reason[0].upper()}{o.reason[1:]}. {own}"
    if o.decided_by:  # first_decided: say which sub-check decided, and what the others said
        said = f"Decided by {o.decided_by} (basis {basis})" + (f"; {o.others}" if o.others else "") + "."
        reason = " ".join(x for x in (said, o.reason, own) if x)
    if by_reading and c.reading is not None:
        reason = c.reading.reason.strip() + (f" (Other sub-checks: {o.others}.)" if o.others else "")
    elif o.parts and verdict in (Claim.CONDITIONAL, Claim.HOLDS) and basis != Basis.READING:
        held = [lbl for lbl, po, pc in o.parts if _holds(po, pc)]
        if verdict == Claim.CONDITIONAL or (possibility_hedged(c.zh) and len(held) < len(o.parts)):
            reason = (f"holds only under: {', '.join(held)}. " + reason).strip()
    if verdict == Claim.PENDING and _evaluate(ctx, c)[1] == Claim.NOT_REPRODUCIBLE:
        reason = (
            f"Pending (rule 15): stage {measuring_stage(c.check)} of this project can measure it and has not "
            f"decided it here; not reproducible is kept for claims no stage could measure. {reason}"
        )
    return reason


def evaluate_claims(ctx: Context, claims: Sequence[ClaimEntry] | None = None) -> list[Row]:
    """One row per claim, verdicts computed where a number decides them."""
    return [evaluate_row(ctx, c) for c in (claims if claims is not None else load_claims())]


def evaluate_row(ctx: Context, c: ClaimEntry) -> Row:
    """One claim's row: its verdict, basis, reason, tolerance and knife edge."""
    o, verdict, basis = evaluate_claim(ctx, c)
    existential = possibility_hedged(c.zh)
    by_reading = c.reading is not None and reading_decides(c, o)
    how, source, tolerance = o.how, o.source, o.tolerance
    if by_reading and c.reading is not None:
        how = f"by construction ({c.by_construction}): {o.how}"
        source = f"{c.reading.source}; evidence: {o.source}"
    if c.about:
        tolerance = f"about: {c.about}; {tolerance}".strip("; ")
    if existential and basis in ("computed", "circular", "measured") and (o.parts or o.fraction is not None):
        tolerance = f"{tolerance}; hedged (可能): holds if it occurs at one point or more".strip("; ")
    knife, edge = (False, "") if by_reading else knife_edge(o, c.check, existential)
    number = (
        o.value if isinstance(o.value, int | float | np.number) and not isinstance(o.value, bool) else None
    )
    return Row(
        id=c.id,
        section=c.section,
        kind=c.kind,
        zh=c.zh.strip(),
        en=c.en.strip(),
        paper_value=c.paper_value or o.paper_value,
        pipeline_value=_fmt(o.value) if not isinstance(o.value, list) else str(o.value),
        pipeline_number=float(number) if number is not None else math.nan,
        how=how,
        source=source,
        tolerance=tolerance,
        verdict=verdict,
        basis=basis,
        reason=_reason(ctx, c, o, verdict, basis, by_reading),
        hedged=hedged(c.zh),
        knife_edge=knife,
        edge=edge,
        refines="; ".join(c.refines),
        variant=c.variant or "",
        rests_on=c.rests_on or "",
        tag=c.tag or "",
    )

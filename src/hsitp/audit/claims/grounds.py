"""What a claim's verdict may rest on (docs/audit.md rules 2 and 8), checked on claims.yaml as it loads.

A sentence rests either on the paper's formulas under the constants it or its section sets (``rests_on:
formulas``), or on what real hardware or real training does (``rests_on: measurement``). A formula claim is judged
by those formulas alone: no measurement sits in its check, and a measurement bearing on it is a finding (kind
``finding``, ``refines`` naming it). A measurement claim is judged by a full measurement alone: its check tries only
fully measured checks (:data:`~hsitp.audit.claims.core.FULLY_MEASURED_CHECKS`) and may close with what it waits for
(pending, needs_gpu, a reading); a modelled or half-measured value bearing on it is a finding. Half-measured checks
(the GPU shards) appear in findings only.
"""

from __future__ import annotations

from collections.abc import Iterator

from hsitp.audit.claims.checks import MEASURED_CHECKS, AnyOf, Check
from hsitp.audit.claims.core import (
    FULLY_MEASURED_CHECKS,
    HALF_MEASURED_CHECKS,
    MODELLED_CHECKS,
    REFINED_VARIABLES,
    WAITING_CHECKS,
)
from hsitp.audit.claims.entries import ClaimEntry


def leaf_checks(check: Check) -> Iterator[Check]:
    """Every check in a check tree that is not a composite (any_of, first_decided)."""
    if isinstance(check, AnyOf):
        for sub in check.checks:
            yield from leaf_checks(sub)
    else:
        yield check


def grounds_problems(c: ClaimEntry) -> list[str]:
    """The ways a claim breaks rules 2 and 8 (empty when it keeps them; a finding keeps them by its type)."""
    if c.kind == "finding":
        return []
    cid, rests = c.id, c.rests_on
    fns = [leaf.fn for leaf in leaf_checks(c.check)]
    out = []
    half = sorted({f for f in fns if f in HALF_MEASURED_CHECKS | MODELLED_CHECKS})
    if half:
        out.append(f"{cid}: {', '.join(half)} (half-measured or modelled) may sit in a finding only (rule 8)")
    measured = [f for f in fns if f in MEASURED_CHECKS]
    if measured and rests is None:
        out.append(f"{cid}: its check reads a measurement; say what the sentence rests on (rests_on: ...)")
    if rests == "formulas" and measured:
        out.append(f"{cid}: rests on the paper's formulas; its measurement belongs in a finding (rule 2)")
    if rests == "measurement":
        other = sorted({f for f in fns if f not in FULLY_MEASURED_CHECKS | WAITING_CHECKS})
        if other:
            out.append(
                f"{cid}: rests on a measurement; {', '.join(other)} may not decide it: a finding (rule 2)"
            )
        if not any(f in FULLY_MEASURED_CHECKS or f == "pending" for f in fns):
            out.append(
                f"{cid}: rests on a measurement but its check neither measures nor names the stage that would"
            )
    if not c.by_construction and any(_refined(leaf) for leaf in leaf_checks(c.check)):
        out.append(f"{cid}: the refined model's answer is a finding, never a claim's verdict (rule 2)")
    return out


def _refined(check: Check) -> bool:
    """The check selects our refined model (``model: refined``, a ``*_refined`` variable, or a variable only the
    refined model computes: :data:`REFINED_VARIABLES`, e.g. ccr.nc's per-layer ``layer_t_comm``): read from the
    fields the file set, whichever kind of check names them."""
    fields = check.model_dump(exclude_unset=True)
    sels = [fields.get(k) for k in ("sel", "lhs", "rhs")]
    names = {str(fields.get(k, "")) for k in ("variable", "rhs_variable")}
    names |= {str((fields.get("over") or {}).get("variable", ""))}
    only = REFINED_VARIABLES.get(str(fields.get("file", "")), frozenset())
    return any(n.endswith("_refined") or n in only for n in names) or any(
        isinstance(s, dict) and s.get("model") == "refined" for s in sels
    )

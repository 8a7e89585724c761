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

from collections.abc import Iterator, Mapping
from typing import Any

from hsitp.audit.claims.core import (
    FULLY_MEASURED_CHECKS,
    HALF_MEASURED_CHECKS,
    MEASURED_CHECKS,
    MODELLED_CHECKS,
    RESTS_ON,
    WAITING_CHECKS,
)


def leaf_checks(check: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every check in a check tree that is not a composite (any_of, first_decided)."""
    subs = check.get("checks")
    if isinstance(subs, list) and check.get("fn") in ("any_of", "first_decided"):
        for sub in subs:
            if isinstance(sub, Mapping):
                yield from leaf_checks(sub)
    else:
        yield check


def grounds_problems(c: Mapping[str, Any]) -> list[str]:
    """The ways a claim breaks rules 2 and 8 (empty when it keeps them)."""
    cid, rests = c.get("id"), c.get("rests_on")
    check = c.get("check")
    if not isinstance(check, Mapping):
        return []
    fns = [str(leaf.get("fn")) for leaf in leaf_checks(check)]
    out = []
    if rests is not None and rests not in RESTS_ON:
        out.append(f"{cid}: rests_on {rests!r} not in {', '.join(RESTS_ON)}")
    if c.get("kind") == "finding":
        return out + ([f"{cid}: a finding does not set rests_on"] if rests is not None else [])
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
    if any(_refined(leaf) for leaf in leaf_checks(check)):
        out.append(f"{cid}: the refined model's answer is a finding, never a claim's verdict (rule 2)")
    return out


def _refined(check: Mapping[str, Any]) -> bool:
    """The check selects our refined model (``model: refined``, or a ``*_refined`` variable)."""
    sels = [check.get(k) or {} for k in ("sel", "lhs", "rhs")]
    return str(check.get("variable", "")).endswith("_refined") or any(
        isinstance(s, Mapping) and s.get("model") == "refined" for s in sels
    )

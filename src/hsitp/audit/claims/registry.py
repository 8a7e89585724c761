"""The registry of checks: :data:`CHECKS`, each check function by the name a claim gives in ``check.fn``, and the
composite checks that evaluate others (``any_of``, ``first_decided``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hsitp.audit.claims import accuracy, bench, boundary, checks, computed, measured, shard
from hsitp.audit.claims.circularity import TABLE_CHECKS, paper_own
from hsitp.audit.claims.core import Context, Outcome, _fmt
from hsitp.audit.claims.verdicts import _holds, judge
from hsitp.outcomes import Claim


def check_any_of(ctx: Context, a: checks.AnyOf) -> Outcome:
    """Sub-checks under named conditions (e.g. intra- and inter-node β): all hold → holds, some → conditional on
    those, none → contradicted."""
    parts = [(str(sub.label), evaluate_check(ctx, sub), sub) for sub in a.checks]
    held = [lbl for lbl, o, sub in parts if _holds(o, sub)]
    return Outcome(
        value="; ".join(f"{lbl}: {_fmt(o.value)}" for lbl, o, _ in parts),
        how="; ".join(f"{lbl}: {o.how}" for lbl, o, _ in parts),
        source="; ".join(sorted({o.source for _, o, _ in parts})),
        fraction=len(held) / len(parts),
        labels=held,
        tolerance="; ".join(f"{lbl}: {o.tolerance}" for lbl, o, _ in parts),
        paper_value=next((o.paper_value for _, o, _ in parts if o.paper_value), ""),
        parts=parts,
    )


def check_first_decided(ctx: Context, a: checks.FirstDecided) -> Outcome:
    """Sub-checks in order (``checks``, each labelled): the run's measurement first, a modelled estimate next,
    the paper's arithmetic (or a reading) last. The first whose outcome is not pending decides the claim, with its
    own verdict mapping, tolerance and basis; the verdict's reason names it and what the others said (a pending
    one: why)."""
    subs = [(str(s.label), s, evaluate_check(ctx, s)) for s in a.checks]
    pick = next((i for i, (_, _, o) in enumerate(subs) if o.verdict != Claim.PENDING), len(subs) - 1)
    label, sub, o = subs[pick]
    notes, hows, sources = [], [f"[{label}] {o.how}"], [o.source]
    for i, (lbl, s, so) in enumerate(subs):
        if i == pick:
            continue
        if so.verdict == Claim.PENDING:
            notes.append(f"{lbl}: {so.reason.rstrip('. ')}")
        else:
            v, b = judge(so, s)
            value = f", value {_fmt(so.value)}" if str(so.value) != "" else ""
            notes.append(f"{lbl} would say {v} ({b}{value})")
            if so.how != "-":
                hows.append(f"[{lbl}] {so.how}")
        if so.source not in sources and so.source != "-":
            sources.append(so.source)
    return dataclasses.replace(
        o,
        how="; ".join(hows),
        source="; ".join(sources),
        decided_by=label,
        decides_with=sub,
        others="; ".join(notes),
    )


# Each kind's function is ``check_<fn>`` in the module of its kind (or here, for the composites): the table is
# read from the modules, and a kind of the claim language without its function fails at import, naming it.
_FUNCTIONS = {
    name: f
    for module in (computed, measured, accuracy, bench, shard, boundary)
    for name, f in vars(module).items()
    if name.startswith("check_")
} | {"check_any_of": check_any_of, "check_first_decided": check_first_decided}
CHECKS: dict[str, Callable[[Context, Any], Outcome]] = {
    fn: _FUNCTIONS[f"check_{fn}"] for fn in checks.KIND_NAMES
}


def evaluate_check(ctx: Context, check: checks.Check) -> Outcome:
    """One check's outcome; a table check's carries whether its evidence is the paper's own (rule 11 by data)."""
    o = CHECKS[check.fn](ctx, check)
    if check.fn in TABLE_CHECKS:
        o = dataclasses.replace(o, paper_own=paper_own(ctx, check))
    return o

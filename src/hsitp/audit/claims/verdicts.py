"""From an :class:`Outcome` to a verdict: the claim's tolerance and verdict mapping (:func:`decide`), knife edges
and the flip test (:func:`knife_edge`, rule 4), hedged claims (rule 5) and circular evidence (:func:`circular`,
rule 11)."""

from __future__ import annotations

import dataclasses
import math

from hsitp.audit.claims.boundary import CIRCULAR_FACTORS
from hsitp.audit.claims.checks import AnyOf, BoundaryMoves, Check, Quote, SplitRegime, TableCheck
from hsitp.audit.claims.core import CIRCULAR_CHECKS, PAPER_PRESETS, Outcome, _fmt
from hsitp.cost import stated
from hsitp.outcomes import Basis, Claim

# Quotes recomputed by the paper's own formulas and parameters alone (not those needing the registry's scenes or
# the refined memory model, which hsitp.cost adds beside them).
OWN_QUOTES = frozenset(q.key for q in stated.paper_quotes())
# Quote markers that hedge a claim (rule 5). 可能 ("may") hedges its scope: the claim holds if the effect occurs in at
# least one configuration of the stated scope. 约/大约/左右 ("about") hedge a number: the claim states its tolerance
# (field ``about``). 约束 ("constraint"), 归约/规约 ("reduce"), 节约, 约定 are not hedges.
POSSIBILITY_MARKERS = ("可能",)
APPROX_MARKERS = ("大约", "约", "左右")
NOT_HEDGES = ("约束", "归约", "规约", "节约", "约定")
KNIFE_EDGE_RTOL = 0.02  # rule 4: |value - edge| <= 2 % of a finite non-zero edge


def _without_non_hedges(zh: str) -> str:
    """The quote without the words that contain a marker but hedge nothing (约束, 归约, ...)."""
    text = str(zh)
    for word in NOT_HEDGES:
        text = text.replace(word, "")
    return text


def hedged(zh: str) -> bool:
    """Rule 5: the quote contains 可能, 约, 大约 or 左右 (words such as 约束 or 归约 are not hedges)."""
    return any(m in _without_non_hedges(zh) for m in POSSIBILITY_MARKERS + APPROX_MARKERS)


def possibility_hedged(zh: str) -> bool:
    """The quote says 可能 ("may"): the claim holds if the effect occurs in at least one configuration of its scope."""
    return any(m in str(zh) for m in POSSIBILITY_MARKERS)


def approximate(zh: str) -> bool:
    """The quote says 约/大约/左右 ("about"): the claim must state its tolerance (field ``about``)."""
    return any(m in _without_non_hedges(zh) for m in APPROX_MARKERS)


def deciding_check(o: Outcome, check: Check) -> Check:
    """The check whose mapping decides ``o``: the sub-check that decided a first_decided claim, else ``check``."""
    return o.decides_with if o.decides_with is not None else check


def _holds(o: Outcome, check: Check, existential: bool = False) -> bool:
    """Whether one outcome meets its check: the value in its band, the share at least ``min_fraction`` (any point
    at all for an existential, i.e. 可能-hedged, claim), the boolean, or all/any sub-checks of an any_of."""
    check = deciding_check(o, check)
    if o.parts:
        held = [_holds(po, pc) for _, po, pc in o.parts]
        return any(held) if existential else all(held)
    if o.band is not None:
        return bool(o.band[0] <= float(o.value) <= o.band[1])
    if o.fraction is not None:
        f = float(o.fraction)
        return f > 0 if existential else f >= check.min_fraction
    return bool(o.ok)


def decide(o: Outcome, check: Check, existential: bool = False) -> tuple[str, str]:
    """(verdict, basis) of an outcome under the claim's mapping (``if_true``/``if_false``/``if_partial``).

    The only place a number becomes a verdict: the flip test and the knife-edge mark move the outcome's value (or
    share, or one sub-check) and call this again. ``existential``: the claim is 可能-hedged (rule 5). A
    first_decided outcome is decided under the mapping of the sub-check that decided it."""
    check = deciding_check(o, check)
    if o.verdict is not None:
        return o.verdict, o.basis or (Basis.PENDING if o.verdict == Claim.PENDING else Basis.READING)
    basis = o.basis or Basis.COMPUTED
    if _holds(o, check, existential):
        return check.if_true, basis
    # partly: some sub-check holds, or some point of a share (a band or a boolean holds or does not)
    partly = any(_holds(po, pc) for _, po, pc in o.parts) if o.parts else (o.fraction or 0.0) > 0
    if partly and o.band is None:
        return check.if_partial, basis
    return check.if_false, basis


def judge(o: Outcome, check: Check, existential: bool = False) -> tuple[str, str]:
    """(verdict, basis) of :func:`decide`, and rule 11: a computed verdict on circular evidence has basis
    ``circular`` and says ``consistent`` where it would say ``holds``."""
    verdict, basis = decide(o, check, existential)
    if basis == Basis.COMPUTED and circular(deciding_check(o, check), o):
        return (Claim.CONSISTENT if verdict == Claim.HOLDS else verdict), Basis.CIRCULAR
    return verdict, basis


def _flip_one(o: Outcome, check: Check) -> Outcome:
    """The outcome with its deciding point moved across: the value to the other side of the band, the share by one
    point (towards and across ``min_fraction``), the boolean negated."""
    check = deciding_check(o, check)
    if o.parts:  # a nested any_of (a pair judged together): flip its sub-check on a knife edge
        for i, (label, po, pc) in enumerate(o.parts):
            if knife_edge(po, pc)[0]:
                parts = list(o.parts)
                parts[i] = (label, _flip_one(po, pc), pc)
                return dataclasses.replace(o, parts=parts)
        return o
    if o.band is not None:
        lo, hi = o.band
        v = float(o.value)
        inside = lo <= v <= hi
        if inside:  # out across the nearer finite edge
            edges = [e for e in (lo, hi) if math.isfinite(e)]
            e = min(edges, key=lambda x: abs(v - x))
            return dataclasses.replace(o, value=e + (1 if e == hi else -1) * max(abs(e), 1e-300) * 1e-6)
        e = lo if v < lo else hi
        return dataclasses.replace(o, value=e)
    if o.fraction is not None and o.n_points:
        m = check.min_fraction
        k = round(float(o.fraction) * o.n_points)
        k = k - 1 if float(o.fraction) >= m else k + 1
        return dataclasses.replace(o, fraction=min(max(k, 0), o.n_points) / o.n_points)
    return dataclasses.replace(o, ok=not o.ok)


def knife_edge(o: Outcome, check: Check, existential: bool = False) -> tuple[bool, str]:
    """Rule 4: (knife_edge, which edge). A band check is on a knife edge when |value − edge| ≤ 2 % of a finite
    non-zero edge (an exact ``expect`` check only when it misses by at most 2 %: a match of an exact number is not
    an edge); a share check when moving one point changes the verdict; an any_of when one of its sub-checks is on a
    knife edge and flipping that sub-check changes the verdict. Only the holds / does-not-hold threshold counts: a
    universal share check (min_fraction 1) that holds at every point is not marked, nor a share of 0 where one point
    would only turn contradicted into conditional."""
    check = deciding_check(o, check)
    if o.verdict is not None:
        return False, ""
    if o.parts:
        base = decide(o, check, existential)[0]
        notes = []
        for i, (label, po, pc) in enumerate(o.parts):
            sub_knife, sub_note = knife_edge(po, pc)
            if not sub_knife:
                continue
            flipped = list(o.parts)
            flipped[i] = (label, _flip_one(po, pc), pc)
            if decide(dataclasses.replace(o, parts=flipped), check, existential)[0] != base:
                notes.append(f"{label}: {sub_note}")
        return bool(notes), "; ".join(notes)
    if o.band is not None:
        v = float(o.value)
        lo, hi = o.band
        if o.exact:
            e = (lo + hi) / 2
            miss = abs(v - e)
            near = not (lo <= v <= hi) and e != 0 and miss <= KNIFE_EDGE_RTOL * abs(e)
            return near, (f"{_fmt(v)} vs {_fmt(e)} ({100 * miss / abs(e):.2g} %)" if near else "")
        for e in (lo, hi):
            if math.isfinite(e) and e != 0 and abs(v - e) <= KNIFE_EDGE_RTOL * abs(e):
                return True, f"{_fmt(v)} vs edge {_fmt(e)} ({100 * abs(v - e) / abs(e):.2g} %)"
        return False, ""
    if o.fraction is not None and o.n_points:
        n, f = o.n_points, float(o.fraction)
        k = round(f * n)
        m = 1.0 / n if existential else check.min_fraction
        ok = k / n >= m
        if ok and (m >= 1.0 and not existential):
            return False, ""
        if ok and (k - 1) / n < m:
            return True, f"{k} of {n} points, threshold {_fmt(m)}: one point fewer changes the verdict"
        if not ok and (k + 1) / n >= m:
            return True, f"{k} of {n} points, threshold {_fmt(m)}: one point more changes the verdict"
    return False, ""


def circular(check: Check, outcome: Outcome | None = None) -> bool:
    """Rule 11: the check evaluates the paper's own formulas at the paper's own numbers (a formula identity or value,
    a quote its own formulas and parameters recompute, a preset copied from the paper, or a stated-model table
    limited to the paper's presets), so
    agreement says the paper is consistent with its own assumptions, not that it holds.

    With the check's ``outcome`` a table check is judged by the data it read (``Outcome.paper_own``,
    :mod:`~hsitp.audit.claims.circularity`), an any_of by its parts' outcomes; without it, by the check's words."""
    fn = check.fn
    if outcome is not None:
        if outcome.paper_own is not None:
            return outcome.paper_own
        if fn == "any_of" and outcome.parts:
            return all(circular(pc, po) for _, po, pc in outcome.parts)
    if fn in CIRCULAR_CHECKS:
        return True
    if isinstance(check, Quote):  # two prose rules set side by side recompute nothing: not circular
        return "agrees_with" not in check.model_fields_set and check.key in OWN_QUOTES
    if isinstance(check, AnyOf) and fn == "any_of":
        return all(circular(sub) for sub in check.checks)
    # the paper's formulas on the paper's presets, moved by the paper's own numbers
    if isinstance(check, BoundaryMoves):
        named = set(check.hardware)
        if check.factor in ("beta", "preset"):
            named |= {t for t in check.to if isinstance(t, str)}
        return check.factor in CIRCULAR_FACTORS and bool(named) and named <= PAPER_PRESETS
    if not isinstance(check, TableCheck | SplitRegime):  # a table_attr selects nothing
        return False
    sel = check.sel or {}
    hw = sel.get("hardware")
    hardware = set(hw if isinstance(hw, list) else [hw]) if hw is not None else set()
    return sel.get("model") == "stated" and bool(hardware) and hardware <= PAPER_PRESETS

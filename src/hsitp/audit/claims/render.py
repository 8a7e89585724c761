"""An evaluated claim (:class:`Row`: the columns of ``paper_claims.{csv,md,json}``, in order) and the rows' counts
by verdict, basis and finding (:mod:`hsitp.audit.audit` writes the tables)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from hsitp.audit.claims.core import BASES, VERDICTS


@dataclass(frozen=True)
class Row:
    """One claim or finding of the table, evaluated."""

    id: str
    section: str
    kind: str
    zh: str
    en: str
    paper_value: str
    pipeline_value: str
    pipeline_number: float  # NaN where the pipeline's value is no number
    how: str
    source: str
    tolerance: str
    verdict: str
    basis: str
    reason: str
    hedged: bool
    knife_edge: bool
    edge: str
    refines: str
    variant: str  # the D-CHAG variant a claim naming D-CHAG judges: L, C or both (rule 14)
    rests_on: str  # what the sentence rests on: the paper's formulas or a measurement (rule 1)
    tag: str  # the rule or comparison the row states, shared with the rows stating it otherwise (rule 3)


COLUMNS = tuple(f.name for f in dataclasses.fields(Row))


def verdict_counts(rows: Sequence[Row]) -> dict[str, int]:
    """Verdicts of the claims; findings (our refined model's answers, kind ``finding``) are left out (rule 2)."""
    claims = [r for r in rows if r.kind != "finding"]
    return {v: sum(r.verdict == v for r in claims) for v in VERDICTS}


def basis_counts(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    """Verdicts of the claims by basis (measured, computed, circular, reading, pending): which verdicts this run's
    measurements decided, which the paper's own assumptions did (rule 11)."""
    claims = [r for r in rows if r.kind != "finding"]
    out: dict[str, dict[str, int]] = {}
    for b in BASES:
        here = {v: n for v in VERDICTS if (n := sum(r.verdict == v and r.basis == b for r in claims))}
        if here:
            out[b] = here
    return out


def finding_counts(rows: Sequence[Row]) -> dict[str, int]:
    """Verdicts of the findings alone (what the refined model, a measurement or a half-measurement says of the claims
    they refine)."""
    found = [r for r in rows if r.kind == "finding"]
    return {v: n for v in VERDICTS if (n := sum(r.verdict == v for r in found))}

"""The rows' columns (``paper_claims.{csv,md,json}``) and their counts by verdict, basis and finding
(:mod:`hsitp.audit.audit` writes the tables)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hsitp.audit.claims.core import BASES, VERDICTS

# Columns of paper_claims.{csv,md,json}, in order.
COLUMNS = (
    "id",
    "section",
    "kind",
    "zh",
    "en",
    "paper_value",
    "pipeline_value",
    "pipeline_number",
    "how",
    "source",
    "tolerance",
    "verdict",
    "basis",
    "reason",
    "hedged",
    "knife_edge",
    "edge",
    "refines",
    "variant",  # the D-CHAG variant a claim naming D-CHAG judges: L, C or both (rule 14)
    "rests_on",  # what the sentence rests on: the paper's formulas or a measurement (rule 1)
    "tag",  # the rule or comparison the row states, shared with the rows stating it otherwise (rule 3)
)


def verdict_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Verdicts of the claims; findings (our refined model's answers, kind ``finding``) are left out (rule 2)."""
    claims = [r for r in rows if r["kind"] != "finding"]
    return {v: sum(r["verdict"] == v for r in claims) for v in VERDICTS}


def basis_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Verdicts of the claims by basis (measured, computed, circular, reading, pending): which verdicts this run's
    measurements decided, which the paper's own assumptions did (rule 11)."""
    claims = [r for r in rows if r["kind"] != "finding"]
    out: dict[str, dict[str, int]] = {}
    for b in BASES:
        here = {v: n for v in VERDICTS if (n := sum(r["verdict"] == v and r["basis"] == b for r in claims))}
        if here:
            out[b] = here
    return out


def finding_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Verdicts of the findings alone (what the refined model, a measurement or a half-measurement says of the claims
    they refine)."""
    found = [r for r in rows if r["kind"] == "finding"]
    return {v: n for v in VERDICTS if (n := sum(r["verdict"] == v for r in found))}

"""Rule 11 by data, not by hand: whether a computed check's evidence uses only the paper's own numbers
and formulas, read from the coordinates of the values the check selects.

Evidence is the paper's own when every value the check reads is the paper's stated model (coordinate ``model =
stated``, or a variable of the stated model: :data:`STATED_VARIABLES`) at the paper's own inputs: its presets
(``hardware`` in :data:`~hsitp.audit.claims.core.PAPER_PRESETS`), its token cases (``case`` in
:data:`~hsitp.audit.claims.core.PAPER_CASES`), its patch size (8) and its C (the embedding width). Any other input
(a registry scene, another patch size or definition of C, another preset, the refined model) makes the evidence
ours, unless the selected values do not vary along it (then it carries no information: e.g. the stated
CCR_channel = P F/(beta C) is the same for every scene). ``lower_split_rule`` on the stated model compares the
formulas' pick with N against C, which is their own ratio N/C: the paper's own whatever the scenes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from hsitp.audit.claims.checks import (
    Check,
    LowerSplitRule,
    Sel,
    SplitRegime,
    TableCheck,
    TableCompare,
    TableFraction,
    TableValue,
)
from hsitp.audit.claims.core import PAPER_CASES, PAPER_PRESETS, Context

# Variables without a model coordinate that hold the paper's stated formulas.
STATED_VARIABLES = frozenset(
    {
        ("boundary", "region_stated"),
        ("boundary", "ccr_channel_stated"),
        ("boundary", "ccr_token_stated"),
        ("rho", "threshold"),  # P F / beta
        ("ccr", "N"),
    }
)
# Inputs that are not the paper's, and the values of each that are (dataset: none is).
OWN_VALUES: dict[str, frozenset] = {
    "dataset": frozenset(),
    "case": PAPER_CASES,
    "patch": frozenset({8}),
    "c_def": frozenset({"embed"}),
}
TABLE_CHECKS = (
    "table_value",
    "table_compare",
    "table_fraction",
    "table_spread",
    "split_regime",
    "lower_split_rule",
)


def _values(da: xr.DataArray, dim: str) -> list[Any]:
    return [v.item() if hasattr(v, "item") else v for v in np.atleast_1d(da[dim].values)]


def _constant_along(da: xr.DataArray, dim: str) -> bool:
    if dim not in da.dims or da.sizes[dim] < 2:
        return True
    first = da.isel({dim: 0})
    a, b = np.asarray(da.values), np.asarray(first.broadcast_like(da).transpose(*da.dims).values)
    if a.dtype.kind in "fc":
        return bool(np.all(np.isclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True)))
    return bool(np.all(a == b))


def own_selection(ds: xr.Dataset, file: str, variable: str, sel: Sel) -> bool:
    """The values of ``variable`` at ``sel`` are the paper's stated model at the paper's own inputs (see module)."""
    da = ds[variable]
    sel = {k: v for k, v in (sel or {}).items() if k in da.dims or k in da.coords}
    if "model" in da.dims:
        models = sel.get("model")
        if models is None or set(models if isinstance(models, list) else [models]) != {"stated"}:
            return False
    elif (file, variable) not in STATED_VARIABLES:
        return False
    if "hardware" in da.dims:
        hw = sel.get("hardware", _values(da, "hardware"))
        if not set(hw if isinstance(hw, list) else [hw]) <= PAPER_PRESETS:
            return False
    for dim, own in OWN_VALUES.items():
        if dim not in da.dims:
            continue
        picked = sel.get(dim, _values(da, dim))
        if set(picked if isinstance(picked, list) else [picked]) <= own:
            continue
        rest = da.sel({k: v for k, v in sel.items() if k != dim})
        if not _constant_along(rest, dim):  # the check's values depend on an input that is not the paper's
            return False
    return True


def _sels(a: TableCheck) -> Sequence[tuple[str, Sel]]:
    """(variable, selection) pairs a table check reads."""
    var, base = a.variable, dict(a.sel or {})
    if isinstance(a, TableCompare):
        rvar = a.rhs_variable if a.rhs_variable is not None else var
        return [(var, {**base, **(a.lhs or {})}), (rvar, {**base, **(a.rhs or {})})]
    out = [(var, base)]
    if isinstance(a, TableValue | TableFraction) and a.ratio_to:
        out.append((var, dict(a.ratio_to)))
    return out


def paper_own(ctx: Context, a: Check) -> bool | None:
    """Whether a table check's evidence is the paper's own (None: not a table check; rule 11 by its name)."""
    if isinstance(a, LowerSplitRule):
        return a.model == "stated"
    if isinstance(a, SplitRegime):
        ds = ctx.table("rho")
        return own_selection(ds, "rho", "ccr", {**(a.sel or {}), "split": ["channel", "token"]})
    if not isinstance(a, TableCheck):
        return None
    ds = ctx.table(a.file)
    own = all(own_selection(ds, a.file, v, s) for v, s in _sels(a))
    if own and isinstance(a, TableValue) and a.over:
        return bool(paper_own(ctx, a.over_check()))
    return own

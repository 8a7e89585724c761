"""Claims of the paper as data (``claims.yaml``), the check functions they name, and their verdicts.

Each claim names one check (``check.fn``). A check reads cached results only (the cost tables
``results/RUN/cost/*.nc``, the dataset registry, :mod:`hsitp.cost.stated`, the run's config, and the measured files:
the run's own probe/ and bench/ netCDF, the accuracy run's train/summary.nc) and returns an
:class:`Outcome`: the pipeline's value, where it came from, and either a boolean, a fraction of points where the
claim holds, or a verdict stated by reading (with its reason and source). :func:`verdict_of` turns that into one of
:data:`VERDICTS` under the claim's declared tolerance, so a number that decides a verdict is never typed by hand.

The rules every claim is held to (scope, the paper's formulas first, findings, "by construction" evidence, knife
edges, hedged claims, the flip test, sources, the measured basis, verdicts that can come out against the paper,
circular evidence, boundaries judged by moving them) are written down in ``docs/audit.md``; the functions here
implement the checkable ones (:func:`decide`, :func:`knife_edge`, :func:`hedged`, :func:`circular`,
:func:`check_first_decided`, :func:`check_boundary_moves`)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

from hsitp.cost import stated
from hsitp.data import registry
from hsitp.errors import HsitpError

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")

KINDS = (
    "number",
    "formula",
    "directional_rule",
    "dataset_fact",
    "design_parameter",
    "estimate",
    "conclusion",
    "reference_fact",
    "finding",  # our refined model's answer to a claim judged by the paper's formulas (``refines``: that claim)
)
# "consistent": holds, but only by the paper's own formulas applied to the paper's own numbers (basis circular)
VERDICTS = ("holds", "consistent", "conditional", "contradicted", "not_reproducible", "needs_gpu", "pending")
# How a verdict was reached: computed from cached results, read from a source, waiting on a stage, or decided by
# measurements: the run's own probe and bench files (results/<audit.measured_run or the audited run>/probe/*.nc,
# bench/*.nc) or the accuracy run's results/<audit.accuracy_run>/train/summary.nc; a measured check is pending while
# its file (or a point in its scope) is absent.
BASES = ("computed", "circular", "reading", "pending", "measured")
# The measured (and modelled) files a check may read, relative to the measured run's folder: (path, kind, stage).
MEASURED_FILES: dict[str, tuple[str, str, str]] = {
    "memory": ("probe/memory.nc", "probe_memory", "probe"),
    "throughput": ("probe/throughput.nc", "probe_throughput", "probe"),
    "estimate": ("probe/estimate.nc", "probe_estimate", "probe"),
    "microbench": ("bench/microbench.nc", "microbench", "bench"),
    "model_vs_measured": ("bench/model_vs_measured.nc", "model_vs_measured", "bench"),
}
# Checks reading the measured run's probe/bench files (config key audit.measured_run), and all measured checks.
RUN_MEASURED_CHECKS = frozenset(
    {"probe_memory", "probe_estimate", "probe_throughput", "bench_compare", "bench_trend", "bench_value"}
)
MEASURED_CHECKS = RUN_MEASURED_CHECKS | {"measured"}
# The paper's own presets: a stated-model table selection limited to these evaluates the paper with itself.
PAPER_PRESETS = frozenset({"paper-intra", "paper-inter"})
# Checks that evaluate the paper's own formulas at the paper's own numbers (rule 11).
CIRCULAR_CHECKS = frozenset({"formula_identity", "formula_value", "preset_value"})
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
DEFAULT_ACCURACY_RUN = "cpu-fair"  # audit.accuracy_run's schema default: the fair matrix (issue 36)
REQUIRED_FIELDS = ("id", "section", "kind", "zh", "en", "check")
COST_TABLES = ("rho", "ccr", "boundary", "scale", "plan")
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
)


class ClaimsError(HsitpError):
    """claims.yaml is malformed, or a check cannot be evaluated (names the claim and the key)."""


@dataclass
class Outcome:
    """What one check found. Exactly one of ``ok``, ``fraction``, ``verdict`` decides the claim."""

    value: Any = ""  # the pipeline's value (number or text)
    how: str = ""  # formula / method
    source: str = ""  # file and variable, registry entry, config key, or reading source
    ok: bool | None = None
    fraction: float | None = None  # share of points (datasets, cases, P, ...) where the claim holds
    verdict: str | None = None  # reading / pending / needs_gpu: stated, with a reason
    reason: str = ""
    tolerance: str = ""
    paper_value: str = ""
    labels: list[str] = field(default_factory=list)  # any_of: the conditions under which it holds
    # What decides it (so the flip test and the knife-edge mark can move the value): a numeric band [low, high]
    # for ``value`` (exact: an ``expect`` check), or the number of points behind ``fraction``.
    band: tuple[float, float] | None = None
    exact: bool = False
    n_points: int | None = None
    parts: list[tuple[str, Outcome, Mapping[str, Any]]] = field(
        default_factory=list
    )  # any_of: label, outcome, check
    basis: str | None = None  # "measured" for a check reading a measured file (probe, bench, accuracy run)
    # first_decided: the label and the check of the sub-check that decided (the verdict mapping, min_fraction and
    # band of the outcome are that sub-check's); empty for any other check.
    decided_by: str = ""
    decides_with: Mapping[str, Any] | None = None
    others: str = ""  # first_decided: what the sub-checks that did not decide said (a pending one: why)


class Context:
    """Cached inputs of one audit: the run's cost tables (read once), the registry, the run's config, and (for
    measured-basis checks) the measured run's probe/ and bench/ files (``audit.measured_run``, default the audited
    run) and ``results/<audit.accuracy_run>/train/summary.nc`` beside the run's folder."""

    def __init__(
        self, cost_dir: Path, config: Mapping[str, Any] | None = None, results_root: Path | None = None
    ) -> None:
        self.cost_dir = Path(cost_dir)
        self.config = dict(config or {})
        # results/ (the run folder's parent): where the accuracy run's folder sits
        self.results_root = Path(results_root) if results_root is not None else self.cost_dir.parent.parent
        self._tables: dict[str, xr.Dataset] = {}
        self._measured: dict[str, xr.Dataset] = {}
        self.inputs: dict[str, Path] = {}

    @property
    def measured_run(self) -> str:
        """The run whose probe/ and bench/ files the measured checks read: ``audit.measured_run``, else the audited
        run itself (the folder above ``cost/``)."""
        name = (self.config.get("audit") or {}).get("measured_run")
        return str(name) if name else self.cost_dir.parent.name

    @property
    def measured_dir(self) -> Path:
        name = (self.config.get("audit") or {}).get("measured_run")
        return self.results_root / str(name) if name else self.cost_dir.parent

    def measured(self, name: str) -> tuple[xr.Dataset | None, Path, Outcome | None]:
        """(dataset, path, None) of a measured file of the measured run (:data:`MEASURED_FILES`), or (None, path,
        a pending outcome naming the file and the stage that writes it) while it is absent."""
        rel, kind, stage = MEASURED_FILES[name]
        path = self.measured_dir / rel
        if not path.exists():
            return (
                None,
                path,
                Outcome(
                    verdict="pending",
                    basis="pending" if name == "estimate" else "measured",
                    how="-",
                    source=str(path),
                    reason=f"pending: no {path} (the {stage} stage of run `{self.measured_run}`; "
                    "audit.measured_run names another run)",
                ),
            )
        if name not in self._measured:
            from hsitp.io import read_netcdf

            self._measured[name] = read_netcdf(path, kind=kind)
            self.inputs[f"measured_{name}"] = path
        return self._measured[name], path, None

    @property
    def accuracy_run(self) -> str:
        return str((self.config.get("audit") or {}).get("accuracy_run", DEFAULT_ACCURACY_RUN))

    @property
    def accuracy_summary(self) -> Path:
        """``results/<audit.accuracy_run>/train/summary.nc``: the input of measured-basis claims; when that run is
        absent here, its committed reference ``results/reference/<audit.accuracy_run>/train/summary.nc`` (issue 41:
        the headline run read from the reference, the verdict saying so)."""
        run = self.results_root / self.accuracy_run / "train" / "summary.nc"
        ref = self.results_root / "reference" / self.accuracy_run / "train" / "summary.nc"
        return ref if not run.exists() and ref.exists() else run

    @property
    def accuracy_from_reference(self) -> bool:
        """Whether the accuracy claims read the committed reference (the run is not here)."""
        return self.accuracy_summary.parent.parent.parent.name == "reference"

    def table(self, name: str) -> xr.Dataset:
        """``cost/NAME.nc`` (kind ``cost_NAME``; ``model_NAME`` accepted: the files written before issue 8's
        rename of the stage, as in results/reference/)."""
        if name not in COST_TABLES:
            raise ClaimsError(f"unknown cost table {name!r}; one of {', '.join(COST_TABLES)}")
        if name not in self._tables:
            from hsitp.io import read_netcdf

            path = self.cost_dir / f"{name}.nc"
            ds = read_netcdf(path)
            if ds.attrs.get("kind") not in (f"cost_{name}", f"model_{name}"):
                ds = read_netcdf(path, kind=f"cost_{name}")  # raises with the reader's message
            self._tables[name] = ds
            self.inputs[name] = path
        return self._tables[name]


# --- helpers -------------------------------------------------------------------------------------------------------
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _op(name: str) -> Callable[[Any, Any], Any]:
    if name not in _OPS:
        raise ClaimsError(f"unknown comparison {name!r}; one of {' '.join(_OPS)}")
    return _OPS[name]


def _sel(da: xr.DataArray, sel: Mapping[str, Any] | None) -> xr.DataArray:
    if not sel:
        return da
    try:
        return da.sel({k: v for k, v in sel.items()})
    except (KeyError, ValueError) as exc:
        raise ClaimsError(f"selection {dict(sel)} not in {da.name!r} (dims {dict(da.sizes)}): {exc}") from exc


def _sel_text(sel: Mapping[str, Any] | None) -> str:
    if not sel:
        return ""
    return "[" + ", ".join(f"{k}={v}" for k, v in sel.items()) + "]"


def _fmt(x: Any) -> str:
    if isinstance(x, float | np.floating):
        return f"{float(x):.6g}"
    return str(x)


def _is_exact(args: Mapping[str, Any]) -> bool:
    return "expect" in args


def _bounds(args: Mapping[str, Any]) -> tuple[float, float, str]:
    """``low``/``high`` bounds, or ``expect`` with ``rtol`` (default 1e-12: exact up to rounding)."""
    if "expect" in args:
        e, rtol = float(args["expect"]), float(args.get("rtol", 1e-12))
        return e - abs(e) * rtol, e + abs(e) * rtol, f"{_fmt(e)} (rtol {rtol:g})"
    low, high = float(args.get("low", -math.inf)), float(args.get("high", math.inf))
    return low, high, f"[{_fmt(low)}, {_fmt(high)}]"


# The names a formula may use: the paper's formulas and constants, the token grid, math.
def _n_tokens(rows: int, cols: int, patch: int, grid: str = "crop") -> int:
    from hsitp.cost.tables.common import n_tokens

    return n_tokens(rows, cols, patch, grid)


FORMULA_NAMES: dict[str, Any] = {
    "ccr_channel": lambda *a: float(stated.ccr_channel(*a)),
    "ccr_token": lambda *a: float(stated.ccr_token(*a)),
    "threshold": lambda *a: float(stated.threshold(*a)),
    "relative_throughput": lambda *a: float(stated.relative_throughput(*a)),
    "ccr_2d": lambda *a: float(stated.ccr_2d(*a)),
    "rho": lambda *a: float(stated.rho(*a)),
    "n_tokens": _n_tokens,
    "F": stated.PAPER_F,
    "beta_intra": stated.PAPER_BETA_INTRA,
    "beta_inter": stated.PAPER_BETA_INTER,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
    "abs": abs,
}


def _eval(expr: str, extra: Mapping[str, Any] | None = None) -> float:
    names = {**FORMULA_NAMES, **(extra or {})}
    try:
        return float(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - names are the whitelist above
    except Exception as exc:  # a typo in claims.yaml: say which expression
        raise ClaimsError(f"formula {expr!r} cannot be evaluated: {exc}") from exc


# --- checks --------------------------------------------------------------------------------------------------------
def check_quote(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A quote recorded in ccr.nc (stated.paper_quotes + the table's own): consistent or not."""
    ds = ctx.table("ccr")
    key = a["key"]
    if key not in ds["quote"].values:
        raise ClaimsError(f"quote {key!r} not in ccr.nc (quotes: {', '.join(map(str, ds['quote'].values))})")
    q = ds.sel(quote=key)
    text = str(q["quoted_text"].values)
    if text:
        value, paper = str(q["computed_text"].values), text
        tol = "same split"
    else:
        value = float(q["computed"].values)
        lo, hi = float(q["quoted_low"].values), float(q["quoted_high"].values)
        paper, tol = f"[{_fmt(lo)}, {_fmt(hi)}]", f"quoted range [{_fmt(lo)}, {_fmt(hi)}]"
    ok = bool(int(q["quote_consistent"].values))
    band = None if text else (lo, hi)
    if band is not None and ok != (lo <= value <= hi):
        raise ClaimsError(
            f"quote {key!r}: quote_consistent {ok} disagrees with computed {value} in [{lo}, {hi}]"
        )
    return Outcome(
        value=value,
        how=str(q["quote_how"].values),
        source=f"cost/ccr.nc:computed[quote={key}]",
        ok=ok,
        tolerance=tol,
        paper_value=paper,
        band=band,
    )


def check_quote_texts_agree(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Two of the paper's prose rules (quoted_text of two quotes) name the same split."""
    ds = ctx.table("ccr")
    ta, tb = (str(ds["quoted_text"].sel(quote=k).values) for k in (a["a"], a["b"]))
    return Outcome(
        value=f"{a['a']}: {ta}; {a['b']}: {tb}",
        how="the split each rule names for the same regime",
        source=f"cost/ccr.nc:quoted_text[quote={a['a']},{a['b']}]",
        ok=ta == tb,
        tolerance="same split",
    )


def check_formula_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A formula (paper's stated model, constants F, beta_intra, beta_inter, n_tokens) against the paper's number."""
    v = _eval(a["expr"], a.get("at"))
    lo, hi, tol = _bounds(a)
    return Outcome(
        value=v,
        how=a["expr"],
        source="hsitp.cost.stated",
        ok=lo <= v <= hi,
        tolerance=tol,
        band=(lo, hi),
        exact=_is_exact(a),
    )


def check_formula_identity(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Two expressions agree at every listed point (a derivation step; rtol 1e-12 by default)."""
    rtol = float(a.get("rtol", 1e-12))
    points = a.get("points") or [a.get("at", {})]
    worst = 0.0
    for p in points:
        lhs, rhs = _eval(a["lhs"], p), _eval(a["rhs"], p)
        worst = max(worst, abs(lhs - rhs) / max(abs(rhs), 1e-300))
    return Outcome(
        value=worst,
        how=f"max relative |({a['lhs']}) − ({a['rhs']})| over {len(points)} point(s)",
        source="hsitp.cost.stated",
        ok=worst <= rtol,
        tolerance=f"rtol {rtol:g}",
        band=(0.0, rtol),
    )


def _reduce(da: xr.DataArray, how: str) -> float:
    vals = np.asarray(da.values, dtype=float).ravel()
    if how == "value":
        if vals.size != 1:
            raise ClaimsError(f"selection of {da.name!r} holds {vals.size} values; give reduce: min/max/...")
        return float(vals[0])
    funcs = {
        "min": np.nanmin,
        "max": np.nanmax,
        "median": np.nanmedian,
        "count_positive": lambda v: float(np.sum(v > 0)),
        "count_distinct": lambda v: float(len(np.unique(v[np.isfinite(v)]))),
    }
    if how not in funcs:
        raise ClaimsError(f"unknown reduce {how!r}; one of value, {', '.join(funcs)}")
    return float(funcs[how](vals))


def check_table_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """One number from a cost table (optionally reduced over a selection) within bounds."""
    da = _sel(ctx.table(a["file"])[a["variable"]], a.get("sel"))
    if a.get("ratio_to"):
        da = da / _sel(ctx.table(a["file"])[a["variable"]], a["ratio_to"])
    red = a.get("reduce", "value")
    v = _reduce(da, red)
    ratio = f" / {a['variable']}{_sel_text(a['ratio_to'])}" if a.get("ratio_to") else ""
    how = f"{red} of {a['variable']}{_sel_text(a.get('sel'))}{ratio}"
    if a.get("over"):  # a ratio of two table values (e.g. one effect against another)
        other = check_table_value(ctx, {"file": a["file"], **a["over"]})
        v, how = v / float(other.value), f"({how}) / ({other.how})"
    lo, hi, tol = _bounds(a)
    return Outcome(
        value=v,
        how=how,
        source=f"cost/{a['file']}.nc:{a['variable']}",
        ok=lo <= v <= hi,
        tolerance=tol,
        band=(lo, hi),
        exact=_is_exact(a),
    )


def check_table_compare(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Elementwise ``var[sel+lhs] OP var[sel+rhs]`` over the remaining dims: the fraction of points where true."""
    var = a["variable"]
    rvar = a.get("rhs_variable", var)
    ds = ctx.table(a["file"])
    base = dict(a.get("sel") or {})
    left = _sel(ds[var], {**base, **(a.get("lhs") or {})})
    rsel = {**base, **(a.get("rhs") or {})}
    if rvar != var:  # a second variable: the shared selection applies to the dims it has
        rsel = {k: v for k, v in rsel.items() if k in ds[rvar].dims}
    right = _sel(ds[rvar], rsel)
    if a.get("rhs_min_over"):  # against the best of several (e.g. the better 1-D split)
        right = right.min(a["rhs_min_over"])
    if "rhs_factor" in a:
        right = right * float(a["rhs_factor"])
    if set(left.dims) != set(right.dims):
        raise ClaimsError(
            f"table_compare: {var}{_sel_text(a.get('lhs'))} has dims {left.dims}, the other side {right.dims}"
        )
    right = right.transpose(*left.dims)
    truth = np.asarray(_op(a["op"])(np.asarray(left.values), np.asarray(right.values)), dtype=bool).ravel()
    frac = float(truth.mean()) if truth.size else 0.0
    return Outcome(
        value=frac,
        how=f"share of {truth.size} point(s) where {var}{_sel_text(a.get('lhs'))} {a['op']} "
        f"{_fmt(float(a.get('rhs_factor', 1.0))) + '·' if 'rhs_factor' in a else ''}{rvar}{_sel_text(a.get('rhs'))}"
        f" at {_sel_text(base) or 'every point'}",
        source=f"cost/{a['file']}.nc:{var}" + (f",{rvar}" if rvar != var else ""),
        fraction=frac,
        n_points=int(truth.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_table_fraction(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Fraction of a table's selected values satisfying ``OP value`` (or within [low, high]); optionally of their
    ratio to another selection (``ratio_to``) or of their minimum over one dim (``min_over``, e.g. the better split)."""
    ds = ctx.table(a["file"])
    da = _sel(ds[a["variable"]], a.get("sel"))
    extra = ""
    if a.get("ratio_to"):
        da = da / _sel(ds[a["variable"]], a["ratio_to"])
        extra += f" / {a['variable']}{_sel_text(a['ratio_to'])}"
    if a.get("min_over"):
        da = da.min(a["min_over"])
        extra += f" (min over {a['min_over']})"
    vals = np.asarray(da.values).ravel()
    if "op" in a:
        truth = np.asarray(_op(a["op"])(vals, a["value"]), dtype=bool)
        cond = f"{a['op']} {a['value']}"
    else:
        lo, hi, _ = _bounds(a)
        truth = (vals >= lo) & (vals <= hi)
        cond = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    frac = float(truth.mean())
    return Outcome(
        value=frac,
        how=f"share of {vals.size} value(s) of {a['variable']}{_sel_text(a.get('sel'))}{extra} {cond}",
        source=f"cost/{a['file']}.nc:{a['variable']}",
        fraction=frac,
        n_points=int(vals.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_table_spread(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A quantity the paper says does not depend on ``dim``: max/min − 1 along it (worst over other dims)."""
    da = _sel(ctx.table(a["file"])[a["variable"]], a.get("sel"))
    spread = (da.max(a["dim"]) / da.min(a["dim"]) - 1.0).max()
    v = float(spread.values)
    rtol = float(a.get("rtol", 1e-9))
    return Outcome(
        value=v,
        how=f"max/min − 1 of {a['variable']}{_sel_text(a.get('sel'))} along {a['dim']}",
        source=f"cost/{a['file']}.nc:{a['variable']}",
        ok=v <= rtol,
        tolerance=f"spread ≤ {rtol:g}",
        band=(0.0, rtol),
    )


def check_lower_split_rule(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """How often a prose rule picks the 1-D split (channel vs token) with the lower CCR, over every rho.nc point
    (dataset × patch × definition of C × hardware × P) with C ≠ N. Rule ``longer``: split the longer of C and N
    (what the formulas give); ``shorter``: split the shorter (what §3.3 and §11 say)."""
    ds = ctx.table("rho")
    model = a.get("model", "stated")
    ccr = ds["ccr"].sel(model=model)
    chan, tok = ccr.sel(split="channel"), ccr.sel(split="token")
    C, N = ds["C"], ds["N"]  # (dataset, c_def), (dataset, patch)
    longer_is_c = (C > N).broadcast_like(chan)
    decided = (C != N).broadcast_like(chan) & (chan != tok)
    lower_is_c = chan < tok
    agree = (lower_is_c == longer_is_c) if a["rule"] == "longer" else (lower_is_c != longer_is_c)
    n = int(decided.sum())
    frac = float((agree & decided).sum()) / n if n else 0.0
    return Outcome(
        value=frac,
        how=f"share of {n} points where the '{a['rule']}' rule picks the 1-D split with the lower {model} CCR",
        source="cost/rho.nc:ccr,C,N",
        fraction=frac,
        n_points=n,
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_split_regime(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Share of rho.nc points (after ``sel``) where the choice between the two 1-D splits decides the regime: the
    better split's CCR is below 1 and the worse split's above 1 (``max(C, N) > P F/beta > min(C, N)`` under the
    stated model). Where both are above 1 (or both below), picking the wrong split changes no regime."""
    ds = ctx.table("rho")
    ccr = _sel(ds["ccr"].sel(split=["channel", "token"]), a.get("sel"))
    lo, hi = ccr.min("split"), ccr.max("split")
    decides = np.asarray(((lo < 1.0) & (hi > 1.0)).values, dtype=bool).ravel()
    frac = float(decides.mean()) if decides.size else 0.0
    return Outcome(
        value=frac,
        how=f"share of {decides.size} point(s) of ccr{_sel_text(a.get('sel'))} where min(channel, token) < 1 < "
        "max(channel, token)",
        source="cost/rho.nc:ccr",
        fraction=frac,
        n_points=int(decides.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_dataset_grid(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A scene's rows × cols (× bands) as the paper gives it, against the registry."""
    spec = registry.get(a["dataset"])
    keys = [k for k in ("rows", "cols", "bands") if k in a]
    got = {k: getattr(spec, k) for k in keys}
    return Outcome(
        value="x".join(str(got[k]) for k in keys),
        paper_value="x".join(str(a[k]) for k in keys),
        how=" x ".join(keys),
        source=f"hsitp.data.registry:{a['dataset']} (verified={spec.verified})",
        ok=all(int(a[k]) == got[k] for k in keys),
        tolerance="exact",
    )


def check_dataset_attr(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A registry attribute equals (or contains) what the paper says."""
    spec = registry.get(a["dataset"])
    v = getattr(spec, a["attr"])
    if "contains" in a:
        ok, tol = str(a["contains"]).lower() in str(v).lower(), f"contains {a['contains']!r}"
    else:
        ok, tol = v == a["equals"], f"equals {a['equals']!r}"
    return Outcome(
        value=v, how=a["attr"], source=f"hsitp.data.registry:{a['dataset']}.{a['attr']}", ok=ok, tolerance=tol
    )


def check_dataset_range(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Share of registry scenes whose bands (or tokens at a patch size) fall in [low, high]."""
    lo, hi, _ = _bounds(a)
    vals = {}
    for name in a.get("datasets") or registry.names():
        spec = registry.get(name)
        if a["attr"] == "tokens":
            vals[name] = _n_tokens(spec.rows, spec.cols, int(a["patch"]))
        else:
            vals[name] = getattr(spec, a["attr"])
    inside = [n for n, v in vals.items() if lo <= v <= hi]
    frac = len(inside) / len(vals)
    n_points = len(vals)
    what = f"tokens at p = {a['patch']}" if a["attr"] == "tokens" else a["attr"]
    return Outcome(
        value=frac,
        how=f"share of {len(vals)} registry scenes with {what} in [{_fmt(lo)}, {_fmt(hi)}]: "
        + ", ".join(f"{n}={v}" for n, v in vals.items()),
        source=f"hsitp.data.registry ({what})",
        fraction=frac,
        n_points=n_points,
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def _config_lookup(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ClaimsError(f"config key {key!r} not in the config the audit was given")
        node = node[part]
    return node


def check_config_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A design parameter of the paper against the run's config."""
    v = _config_lookup(ctx.config, a["key"])
    return Outcome(
        value=v, how=f"config {a['key']}", source=f"config:{a['key']}", ok=v == a["equals"], tolerance="equal"
    )


def check_table_attr(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A design parameter recorded in a cost table (attribute or coordinate values)."""
    ds = ctx.table(a["file"])
    if "coord" in a:
        v: Any = [x.item() if hasattr(x, "item") else x for x in ds[a["coord"]].values]
        src = f"cost/{a['file']}.nc:{a['coord']} (coordinate)"
    else:
        v = ds.attrs[a["attr"]]
        v = v.item() if hasattr(v, "item") else v
        src = f"cost/{a['file']}.nc:{a['attr']} (attribute)"
    want = a["equals"]
    ok = list(v) == list(want) if isinstance(want, list) else v == want
    return Outcome(value=v, how="recorded value", source=src, ok=ok, tolerance="equal")


def check_preset_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A hardware number of the paper against the preset that encodes it (hsitp.cost.hardware)."""
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(a["preset"])
    v = float(eval(a["field"], {"__builtins__": {}}, {"hw": hw}))  # noqa: S307 - attribute access on a preset
    lo, hi, tol = _bounds(a)
    return Outcome(
        value=v,
        how=a["field"],
        source=f"hsitp.cost.hardware:{a['preset']}",
        ok=lo <= v <= hi,
        tolerance=tol,
        band=(lo, hi),
        exact=_is_exact(a),
    )


def check_any_of(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Sub-checks under named conditions (e.g. intra- and inter-node β): all hold → holds, some → conditional on
    those, none → contradicted."""
    parts = [(sub["label"], evaluate_check(ctx, sub), sub) for sub in a["checks"]]
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


def check_reading(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A verdict that rests on reading (a reference's authors, a method's name, internal consistency of prose)."""
    return Outcome(verdict=a["verdict"], reason=a["reason"], source=a["source"], how="reading")


def check_pending(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Waits on a stage not built yet (training, memory probe)."""
    return Outcome(
        verdict="pending", reason=f"pending: {a['stage']} stage; {a['reason']}", how="-", source="-"
    )


def check_needs_gpu(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Needs a GPU measurement (tensor cores, NCCL overlap) that CPU/gloo runs cannot stand in for."""
    return Outcome(verdict="needs_gpu", reason=a["reason"], how="-", source=a.get("source", "-"))


def check_measured(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """:func:`_check_measured`, its reason saying when the summary is the committed reference, not a run here."""
    out = _check_measured(ctx, a)
    if ctx.accuracy_from_reference and out.verdict != "pending":
        note = f"from the committed reference {ctx.accuracy_summary}, not re-run here"
        out = replace(out, reason=f"{out.reason}; {note}" if out.reason else note)
    return out


def _check_measured(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A claim decided by measurements: a variable of ``results/<audit.accuracy_run>/train/summary.nc`` (kind
    ``train_summary``, one value per cell), as the share of the selected cells equal to ``equals`` (e.g. a verdict
    variable) or within [low, high]. Basis ``measured``; pending, with what it waits for, while the file or the
    variable is absent (the drift check compares such claims by presence and schema, never by verdict)."""
    path = ctx.accuracy_summary
    waits = a.get("waits_for", "")
    if not path.exists():
        return Outcome(
            verdict="pending",
            basis="measured",
            how="-",
            source=str(path),
            reason=f"pending: no {path} (run the accuracy run `{ctx.accuracy_run}`: audit.accuracy_run). {waits}".strip(),
        )
    from hsitp.io import read_netcdf

    ds = read_netcdf(path, kind="train_summary")
    ctx.inputs["accuracy_summary"] = path
    var = a["variable"]
    if var not in ds:
        return Outcome(
            verdict="pending",
            basis="measured",
            how="-",
            source=f"{path}:{var}",
            reason=f"pending: {path} has no variable {var!r} yet. {waits}".strip(),
        )
    da = ds[var]
    for key, want in (a.get("sel") or {}).items():  # cell coordinates (dataset, plan, P, split, ...)
        if key not in da.coords:
            raise ClaimsError(f"measured check: {var!r} has no coordinate {key!r} (coords {list(da.coords)})")
        keep = np.isin(np.asarray(da[key].values), np.asarray(want if isinstance(want, list) else [want]))
        da = da.isel({da[key].dims[0]: np.flatnonzero(keep)})
    vals = np.asarray(da.values).ravel()
    if (
        "flag_values" in da.attrs and "flag_meanings" in da.attrs
    ):  # CF flags (e.g. oa_verdict): compare by name
        names = dict(
            zip(
                np.atleast_1d(da.attrs["flag_values"]).tolist(),
                str(da.attrs["flag_meanings"]).split(),
                strict=True,
            )
        )
        vals = np.array([names.get(v, str(v)) for v in vals.tolist()], dtype=object)
    if vals.size == 0:
        raise ClaimsError(f"measured check: no cell of {var!r} in {path} matches {dict(a.get('sel') or {})}")
    if "undecided" in a and bool(np.all(vals.astype(str) == str(a["undecided"]))):
        # no cell decided either way: the measurement cannot judge the claim (not a contradiction of it); a share
        # of 0 with a decided cell is one (if_false: contradicted)
        return Outcome(
            verdict="not_reproducible",
            basis="measured",
            value=0.0,
            how=f"every one of {vals.size} cell(s) of {var}{_sel_text(a.get('sel'))} is {a['undecided']!r}",
            source=f"{path}:{var}",
            reason=f"no selected cell was decided ({a['undecided']}): more seeds could decide it",
        )
    if "equals" in a:
        truth = vals.astype(str) == str(a["equals"])
        cond = f"== {a['equals']!r}"
    else:
        lo, hi, _ = _bounds(a)
        num = vals.astype(float)
        truth = (num >= lo) & (num <= hi)
        cond = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    frac = float(truth.mean())
    return Outcome(
        value=frac,
        how=f"share of {vals.size} cell(s) of {var}{_sel_text(a.get('sel'))} {cond}",
        source=f"{path}:{var}",
        fraction=frac,
        n_points=int(vals.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
        basis="measured",
    )


# --- measured checks: the run's own probe and bench files -----------------------------------------------------------
def _undecided(path: Path, why: str, basis: str = "measured") -> Outcome:
    """A measured check whose file is there but decides nothing (no point in scope, every point oversubscribed or
    within its noise): pending, with why; a first_decided claim then falls through to its next sub-check."""
    return Outcome(verdict="pending", basis=basis, how="-", source=str(path), reason=f"undecided: {why}")


def _msel(da: xr.DataArray, sel: Mapping[str, Any] | None) -> tuple[xr.DataArray | None, str]:
    """``da`` at coordinate values (a scalar drops the dim, a list keeps it); (None, what was not measured) when a
    value is absent from the file (a point the run did not measure), :class:`ClaimsError` for an unknown name."""
    for key, want in (sel or {}).items():
        if key not in da.coords:
            raise ClaimsError(
                f"measured check: {da.name!r} has no coordinate {key!r} (coords {list(da.coords)})"
            )
        have = [v.item() if hasattr(v, "item") else v for v in np.atleast_1d(da[key].values)]
        wants = want if isinstance(want, list) else [want]
        absent = [w for w in wants if w not in have]
        if absent:
            return None, f"{key} = {', '.join(map(str, absent))} not measured ({key} = {have})"
        da = da.sel({key: want}, drop=not isinstance(want, list))
    return da, ""


def _condition(a: Mapping[str, Any]) -> tuple[Callable[[float], bool], str]:
    """The test a measured value must pass: ``op``/``value`` or the band ``low``/``high`` (or ``expect``)."""
    if "op" in a:
        f, x = _op(a["op"]), float(a["value"])
        return (lambda v: bool(f(v, x))), f"{a['op']} {_fmt(x)}"
    lo, hi, _ = _bounds(a)
    return (lambda v: lo <= v <= hi), f"in [{_fmt(lo)}, {_fmt(hi)}]"


def _labelled_points(q: xr.DataArray) -> list[tuple[str, float]]:
    """(label, value) of every finite point of ``q``; the label names the coordinates that vary."""
    q = q.squeeze()
    if not q.dims:
        v = float(q.values)
        return [("", v)] if math.isfinite(v) else []
    dims = list(q.dims)
    st = q.stack(_pt=dims)
    out = []
    for i in range(st.sizes["_pt"]):
        v = float(st.values[i])
        if math.isfinite(v):
            out.append((", ".join(f"{d}={_fmt(st[d].values[i].item())}" for d in dims), v))
    return out


MAX_LISTED = 12  # points listed in a measured check's `how`


def _share(
    points: Sequence[tuple[str, bool, str]],
    a: Mapping[str, Any],
    how: str,
    source: str,
    basis: str | None = "measured",
    left_out: Sequence[str] = (),
) -> Outcome:
    """A share outcome over decided points (label, holds, shown value), listing them and what was left out."""
    n = len(points)
    held = sum(ok for _, ok, _ in points)
    listed = "; ".join(f"{lbl}: {shown}{'' if ok else ' (no)'}" for lbl, ok, shown in points[:MAX_LISTED])
    more = f"; and {n - MAX_LISTED} more" if n > MAX_LISTED else ""
    out = f"; left out: {'; '.join(left_out)}" if left_out else ""
    return Outcome(
        value=held / n,
        how=f"{how}: {listed}{more}{out}",
        source=source,
        fraction=held / n,
        n_points=n,
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
        basis=basis,
    )


def _probe_model(ds: xr.Dataset) -> str:
    """The probe's model and device, as its attributes record them (the scale a measured verdict rests on)."""
    import json

    try:
        p = json.loads(ds.attrs.get("probe", "{}"))
    except ValueError:
        p = {}
    dev = sorted({str(d) for d in np.atleast_1d(ds["device"].values)}) if "device" in ds else []
    model = ", ".join(f"{k} {p[k]}" for k in ("dim", "depth", "heads", "L", "N", "batch") if k in p)
    return f"probe model {model}, {ds.attrs.get('dtype', '?')}; device {' / '.join(dev) or '?'}"


def check_probe_memory(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Measured per-rank memory of one training step (``probe/memory.nc``, real tensors under torchrun, the larger
    rank's value) as a share of points passing ``op``/``value`` or ``low``/``high``: ``variable`` (peak_allocated,
    or memory after ``sel`` summed over the ``sum`` dims, e.g. kind = activations) at ``lhs`` (plans, g) divided by
    its value at ``against`` (the same P and other coordinates, e.g. {plan: tp}, or a fixed point, e.g. {plan:
    dense, P: 1}), times P with ``scale_P`` (memory that falls as 1/P gives 1), over every measured P ≥ ``P_min``
    (default 2). Memory does not depend on how busy the cores were, so oversubscribed P count. Pending while the
    file, or a plan, P or g in scope, is absent."""
    ds, path, absent = ctx.measured("memory")
    if absent is not None:
        return absent
    var = a.get("variable", "peak_allocated")
    ran = ds["peak_allocated"].notnull().any("rank")  # memory holds 0 where a point was not run
    da, missing = _msel(ds[var].where(ran), a.get("sel"))
    if da is None:
        return _undecided(path, missing)
    for d in a.get("sum") or []:
        da = da.sum(d, min_count=1)
    da = da.max("rank")
    num, miss = _msel(da, a.get("lhs"))
    den, miss2 = _msel(da, a.get("against"))
    if num is None or den is None:
        return _undecided(path, miss or miss2)
    q = num / den.where(den > 0)
    if a.get("scale_P"):
        q = q * q["P"]
    if "P" in q.dims:
        q = q.where(q["P"] >= int(a.get("P_min", 2)))
    cond, ctext = _condition(a)
    pts = [(lbl, cond(v), _fmt(v)) for lbl, v in _labelled_points(q)]
    if not pts:
        return _undecided(
            path, f"no measured point of {var}{_sel_text(a.get('lhs'))} at P ≥ {a.get('P_min', 2)}"
        )
    summed = f" summed over {', '.join(a['sum'])}" if a.get("sum") else ""
    expr = (
        f"{var}{_sel_text(a.get('sel'))}{summed} (larger rank) at {_sel_text(a.get('lhs'))} / at "
        f"{_sel_text(a.get('against'))}{' × P' if a.get('scale_P') else ''}"
    )
    return _share(
        pts,
        a,
        f"measured in run `{ctx.measured_run}` ({_probe_model(ds)}): share of {len(pts)} point(s) of {expr} {ctext}",
        f"{path}:{var}",
    )


def check_probe_estimate(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """The planner's fake-tensor estimate (``probe/estimate.nc``: the model built under FakeTensorMode at the
    configs it lists, rank 0): ``variable`` (peak_allocated, or memory after ``sel`` summed over part and kind) of
    each config of a plan in ``lhs`` over the config of plan ``against`` with the same P, L, N, D, depth, batch,
    dtype and checkpointing, as a share passing ``op``/``value`` or ``low``/``high``. Modelled, not measured: basis
    computed, labelled so."""
    ds, path, absent = ctx.measured("estimate")
    if absent is not None:
        return absent
    var = a.get("variable", "peak_allocated")
    da = ds[var]
    if "part" in da.dims or "kind" in da.dims:
        da, missing = _msel(da, a.get("sel"))
        if da is None:
            return _undecided(path, missing, basis="pending")
        da = da.sum([d for d in ("part", "kind") if d in da.dims])
    keys = [k for k in ("P", "L", "N", "D", "depth", "batch", "dtype", "checkpointing") if k in ds]
    plans = [str(x) for x in ds["plan"].values]
    sig = [tuple(str(ds[k].values[i]) for k in keys) for i in range(len(plans))]
    want = a["lhs"] if isinstance(a["lhs"], list) else [a["lhs"]]
    cond, ctext = _condition(a)
    pts = []
    for i, plan in enumerate(plans):
        if plan not in want:
            continue
        j = next((j for j in range(len(plans)) if plans[j] == a["against"] and sig[j] == sig[i]), None)
        if j is None or not float(da.values[j]) > 0:
            continue
        v = float(da.values[i]) / float(da.values[j])
        pts.append((str(ds["config"].values[i]), cond(v), _fmt(v)))
    if not pts:
        return _undecided(path, f"no config of {want} with a matching {a['against']} config", basis="pending")
    return _share(
        pts,
        a,
        f"modelled with fake tensors in run `{ctx.measured_run}` (not measured: {ds.attrs.get('estimated', '')}): "
        f"share of {len(pts)} config(s) where {var} of {want} / {a['against']} at the same P, L, N, D, depth "
        f"{ctext}",
        f"{path}:{var}",
        basis="computed",
    )


def _oversubscribed(ds: xr.Dataset) -> dict[int, str]:
    """P values whose timings decide nothing: ranks × threads per rank exceeded the cores (the file's own label)."""
    import json

    out: dict[int, str] = {}
    if "oversubscribed" in ds and "P" in ds["oversubscribed"].dims:
        note = ds.get("oversubscribed_note")
        for i, P in enumerate(ds["P"].values):
            if int(ds["oversubscribed"].values[i]):
                text = str(note.values[i]) if note is not None else ""
                out[int(P)] = text or "oversubscribed"
    for P in json.loads(str(ds.attrs.get("oversubscribed_P", "[]")) or "[]"):
        out.setdefault(int(P), "oversubscribed")
    return out


def check_probe_throughput(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Measured throughput against tp (``probe/throughput.nc``: every plan at one P timed interleaved, in rounds)
    as a share of decided points passing ``op`` ``value``: ``quantity`` ratio (tokens/s of the plan / tokens/s of
    tp in the same round: a point decides only when its slowest and fastest round are on the same side of
    ``value``) or ccr_ratio (the plan's CCR / tp's at the same P, CCR = the slowest rank's collective time over its
    compute time, from each point's own full and compute-only steps). Plans ``plans``, P in ``P`` (or ≥ ``P_min``,
    default 2); an oversubscribed P (the file's label) decides nothing. Pending while nothing decides."""
    ds, path, absent = ctx.measured("throughput")
    if absent is not None:
        return absent
    over = _oversubscribed(ds)
    quantity = a.get("quantity", "ratio")
    if quantity == "ratio":
        med, lo, hi = ds["ratio_vs_tp_median"], ds["ratio_vs_tp_min"], ds["ratio_vs_tp_max"]
        what = "tokens/s of the plan / tokens/s of tp, interleaved rounds (median [slowest, fastest round])"
    elif quantity == "ccr_ratio":
        coll = ds["time_collectives"].sum("time_part").max("rank")
        comp = ds["time_compute"].sum("time_part").max("rank")
        ccr = coll / comp.where(comp > 0)
        med = ccr / ccr.sel(plan="tp", drop=True)
        lo = hi = med
        what = "CCR of the plan / CCR of tp (slowest rank's collective / compute time, medians)"
    else:
        raise ClaimsError(f"probe_throughput: quantity {quantity!r} is not ratio or ccr_ratio")
    sel = {**(a.get("sel") or {}), "plan": list(a["plans"])}
    arrays = []
    for x in (med, lo, hi):
        x, missing = _msel(x, sel)
        if x is None:
            return _undecided(path, missing)
        arrays.append(x)
    med, lo, hi = arrays
    in_scope = [
        int(P)
        for P in med["P"].values
        if (int(P) in a["P"] if a.get("P") else int(P) >= int(a.get("P_min", 2)))
    ]
    f, x = _op(a["op"]), float(a["value"])
    pts, left = [], [f"P = {P} ({over[P]}: decides nothing)" for P in in_scope if P in over]
    for P in in_scope:
        if P in over:
            continue
        for (lbl, v), (_, vl), (_, vh) in zip(
            _labelled_points(med.sel(P=[P])),
            _labelled_points(lo.sel(P=[P])),
            _labelled_points(hi.sel(P=[P])),
            strict=True,
        ):
            shown = _fmt(v) if quantity != "ratio" else f"{_fmt(v)} [{_fmt(vl)}, {_fmt(vh)}]"
            if bool(f(vl, x)) != bool(f(vh, x)):
                left.append(f"{lbl} {shown} (rounds on both sides of {_fmt(x)})")
                continue
            pts.append((lbl, bool(f(v, x)), shown))
    if not pts:
        measured = [int(P) for P in med["P"].values]
        why = "; ".join(left) if left else f"no P in scope measured (P = {measured})"
        scope = f"P in {a['P']}" if a.get("P") else f"P ≥ {a.get('P_min', 2)}"
        return _undecided(path, f"{why}; scope {scope}")
    return _share(
        pts,
        a,
        f"measured in run `{ctx.measured_run}` ({_probe_model(ds)}): share of {len(pts)} decided point(s) of "
        f"{what} {a['op']} {_fmt(x)}",
        f"{path}:{'ratio_vs_tp_median' if quantity == 'ratio' else 'time_collectives,time_compute'}",
        left_out=left,
    )


def _bench_arrays(
    ctx: Context, a: Mapping[str, Any], op: str, variable: str
) -> tuple[xr.Dataset | None, Path, Outcome | None, xr.DataArray | None, xr.DataArray | None, list[str]]:
    """(microbench, path, pending, values, half IQRs, P left out) of one op: communicating P (> 1) that are not
    oversubscribed, after ``sel`` and the ``where`` filters on N, D and ρ = D/N (e.g. {rho: ["<", 1]})."""
    ds, path, absent = ctx.measured("microbench")
    if absent is not None:
        return None, path, absent, None, None, []
    if op not in [str(x) for x in ds["op"].values]:
        return ds, path, _undecided(path, f"op {op} not benched"), None, None, []
    v = ds[variable].sel(op=op, drop=True)
    iqr_name = f"{variable}_iqr" if f"{variable}_iqr" in ds else None
    h = ds[iqr_name].sel(op=op, drop=True) / 2 if iqr_name else xr.zeros_like(v)
    v, missing = _msel(v, a.get("sel"))
    if v is None:
        return ds, path, _undecided(path, missing), None, None, []
    h, _ = _msel(h, a.get("sel"))
    over = _oversubscribed(ds)
    keep = [int(P) for P in v["P"].values if int(P) > 1 and int(P) not in over]
    left = [f"P = {P} ({over[P]}: decides nothing)" for P in v["P"].values if int(P) in over]
    mask = v["P"].isin(keep)
    for name, (opname, x) in (a.get("where") or {}).items():
        coord = v["D"] / v["N"] if name == "rho" else v[name]
        mask = mask & _op(opname)(coord, float(x))
    return ds, path, None, v.where(mask), h.where(mask), left


def _where_text(a: Mapping[str, Any]) -> str:
    w = a.get("where") or {}
    return (
        " and ".join(f"{'ρ = D/N' if k == 'rho' else k} {o} {_fmt(x)}" for k, (o, x) in w.items()) or "any ρ"
    )


def check_bench_compare(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Two ops of the microbenchmark at the same point (P, N, D, L, dtype; P > 1, not oversubscribed; ``where``
    filters on N, D, ρ = D/N): the share of decided points where ``variable`` (default ccr_measured) of ``lhs``
    ``op`` that of ``rhs``. A point decides only where the two values differ by more than half their IQRs together
    (their inter-quartile bands do not overlap). With ``agree_with`` (a model variable of bench/model_vs_measured.nc,
    e.g. ccr_stated), the share of decided points where that model orders the two ops as measured."""
    var = a.get("variable", "ccr_measured")
    ds, path, pend, L, hL, left = _bench_arrays(ctx, a, a["lhs"], var)
    if pend is not None:
        return pend
    _, _, pend, R, hR, _ = _bench_arrays(ctx, a, a["rhs"], var)
    if pend is not None:
        return pend
    f = _op(a["op"])
    model = None
    if a.get("agree_with"):
        mvm, mpath, absent = ctx.measured("model_vs_measured")
        if absent is not None:
            return absent
        mv = mvm[a["agree_with"]]
        model = (mv.sel(op=a["lhs"], drop=True), mv.sel(op=a["rhs"], drop=True))
    pts = []
    # Walk the points once, by coordinates (the arrays share their dims).
    stacked = xr.Dataset({"l": L, "r": R, "hl": hL, "hr": hR}).stack(_pt=list(L.dims))
    undecided = 0
    for i in range(stacked.sizes["_pt"]):
        l_, r_ = float(stacked["l"].values[i]), float(stacked["r"].values[i])
        if not (math.isfinite(l_) and math.isfinite(r_)):
            continue
        coords = {d: stacked[d].values[i].item() for d in L.dims}
        lbl = ", ".join(f"{d}={_fmt(coords[d])}" for d in L.dims if L.sizes[d] > 1 or d in ("N", "D"))
        if abs(l_ - r_) <= float(stacked["hl"].values[i]) + float(stacked["hr"].values[i]):
            undecided += 1
            continue
        shown = f"{a['lhs']} {_fmt(l_)} vs {a['rhs']} {_fmt(r_)}"
        if model is not None:
            ml = float(model[0].sel({d: coords[d] for d in model[0].dims}).values)
            mr = float(model[1].sel({d: coords[d] for d in model[1].dims}).values)
            ok = bool(f(ml, mr)) == bool(f(l_, r_))
            shown += f" (model {_fmt(ml)} vs {_fmt(mr)})"
        else:
            ok = bool(f(l_, r_))
        pts.append((lbl, ok, shown))
    if undecided:
        left = [*left, f"{undecided} point(s) within the repeats' IQR"]
    if not pts:
        return _undecided(
            path, "; ".join([f"no decided point of {a['lhs']} vs {a['rhs']} where {_where_text(a)}", *left])
        )
    rule = (
        f"the model's {a['agree_with']} orders {a['lhs']} {a['op']} {a['rhs']} as measured"
        if model is not None
        else f"{var}({a['lhs']}) {a['op']} {var}({a['rhs']})"
    )
    return _share(
        pts,
        a,
        f"measured in run `{ctx.measured_run}` (bench {ds.attrs.get('device', '?')}, batch "
        f"{_layer_batch(ds)}): share of {len(pts)} decided point(s) where {_where_text(a)} at which {rule}",
        f"{path}:{var}"
        + (
            f"; {ctx.measured_dir / MEASURED_FILES['model_vs_measured'][0]}:{a['agree_with']}"
            if model is not None
            else ""
        ),
        left_out=left,
    )


def _layer_batch(ds: xr.Dataset) -> str:
    import json

    try:
        return str(json.loads(ds.attrs.get("layer_shape", "{}")).get("batch", "?"))
    except ValueError:
        return "?"


def _collectives_text(ds: xr.Dataset, op: str) -> str:
    """Collective calls the op issued (traced, forward + backward) at each communicating P."""
    if "n_collectives" not in ds:
        return ""
    n = ds["n_collectives"].sel(op=op)
    per_p = {
        int(P): sorted({int(x) for x in np.ravel(n.sel(P=P).values) if np.isfinite(x)})
        for P in n["P"].values
        if int(P) > 1
    }
    return "; collective calls per step (traced, fwd + bwd): " + ", ".join(
        f"P = {P}: {v}" for P, v in per_p.items()
    )


def check_bench_trend(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """How one op's ``variable`` (default ccr_measured) moves with the size of its tensor (N·D elements per crop):
    the share of decided pairs of points (same P, L, dtype; different N·D; inter-quartile bands apart) where it
    ``direction`` (falls: larger on the smaller tensor; rises) as the tensor grows."""
    var = a.get("variable", "ccr_measured")
    ds, path, pend, V, H, left = _bench_arrays(ctx, a, a["op"], var)
    if pend is not None:
        return pend
    st = xr.Dataset({"v": V, "h": H}).stack(_pt=list(V.dims))
    rows = []
    for i in range(st.sizes["_pt"]):
        v = float(st["v"].values[i])
        if math.isfinite(v):
            c = {d: st[d].values[i].item() for d in V.dims}
            rows.append((c, v, float(st["h"].values[i])))
    falls = a.get("direction", "falls") == "falls"
    pts, undecided = [], 0
    for i, (ci, vi, hi) in enumerate(rows):
        for cj, vj, hj in rows[i + 1 :]:
            same = all(ci[d] == cj[d] for d in ci if d not in ("N", "D"))
            si, sj = ci["N"] * ci["D"], cj["N"] * cj["D"]
            if not same or si == sj:
                continue
            (cs, vs), (cl_, vl) = ((ci, vi), (cj, vj)) if si < sj else ((cj, vj), (ci, vi))
            if abs(vi - vj) <= hi + hj:
                undecided += 1
                continue
            ok = vs > vl if falls else vs < vl
            lbl = f"P={cs['P']}: N·D {cs['N']}·{cs['D']} vs {cl_['N']}·{cl_['D']}"
            pts.append((lbl, ok, f"{_fmt(vs)} vs {_fmt(vl)}"))
    if undecided:
        left = [*left, f"{undecided} pair(s) within the repeats' IQR"]
    if not pts:
        return _undecided(path, "; ".join([f"no decided pair of {a['op']} points of different size", *left]))
    return _share(
        pts,
        a,
        f"measured in run `{ctx.measured_run}` (bench {ds.attrs.get('device', '?')}, batch {_layer_batch(ds)}"
        f"{_collectives_text(ds, a['op'])}): share of {len(pts)} decided pair(s) where {var}({a['op']}) "
        f"{'falls' if falls else 'rises'} as the tensor (N·D) grows",
        f"{path}:{var}",
        left_out=left,
    )


def check_bench_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """One op's ``variable`` (default ccr_measured) at every communicating, not oversubscribed point passing
    ``op`` ``value``: the share of decided points (the inter-quartile band wholly on one side of ``value``)."""
    var = a.get("variable", "ccr_measured")
    ds, path, pend, V, H, left = _bench_arrays(ctx, a, a["of"], var)
    if pend is not None:
        return pend
    f, x = _op(a["op"]), float(a["value"])
    st = xr.Dataset({"v": V, "h": H}).stack(_pt=list(V.dims))
    pts, undecided = [], 0
    for i in range(st.sizes["_pt"]):
        v, h = float(st["v"].values[i]), float(st["h"].values[i])
        if not math.isfinite(v):
            continue
        c = {d: st[d].values[i].item() for d in V.dims}
        lbl = ", ".join(f"{d}={_fmt(c[d])}" for d in V.dims if V.sizes[d] > 1 or d in ("N", "D"))
        if bool(f(v - h, x)) != bool(f(v + h, x)):
            undecided += 1
            continue
        pts.append((lbl, bool(f(v, x)), f"{_fmt(v)} ± {_fmt(h)}"))
    if undecided:
        left = [*left, f"{undecided} point(s) whose IQR straddles {_fmt(x)}"]
    if not pts:
        return _undecided(path, "; ".join([f"no decided point of {a['of']}", *left]))
    return _share(
        pts,
        a,
        f"measured in run `{ctx.measured_run}` (bench {ds.attrs.get('device', '?')}, batch {_layer_batch(ds)}"
        f"{_collectives_text(ds, a['of'])}): share of {len(pts)} decided point(s) where {var}({a['of']}) "
        f"(median ± half IQR) {a['op']} {_fmt(x)}",
        f"{path}:{var}",
        left_out=left,
    )


def check_first_decided(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Sub-checks in order (``checks``, each labelled): the run's measurement first, a modelled estimate next,
    the paper's arithmetic (or a reading) last. The first whose outcome is not pending decides the claim, with its
    own verdict mapping, tolerance and basis; the verdict's reason names it and what the others said (a pending
    one: why)."""
    subs = [(s["label"], s, evaluate_check(ctx, s)) for s in a["checks"]]
    pick = next((i for i, (_, _, o) in enumerate(subs) if o.verdict != "pending"), len(subs) - 1)
    label, sub, o = subs[pick]
    notes, hows, sources = [], [f"[{label}] {o.how}"], [o.source]
    for i, (lbl, s, so) in enumerate(subs):
        if i == pick:
            continue
        if so.verdict == "pending":
            notes.append(f"{lbl}: {so.reason.rstrip('. ')}")
        else:
            v, b = decide(so, s)
            if b == "computed" and circular(s):
                v, b = ("consistent" if v == "holds" else v), "circular"
            value = f", value {_fmt(so.value)}" if str(so.value) != "" else ""
            notes.append(f"{lbl} would say {v} ({b}{value})")
            if so.how != "-":
                hows.append(f"[{lbl}] {so.how}")
        if so.source not in sources and so.source != "-":
            sources.append(so.source)
    import dataclasses

    return dataclasses.replace(
        o,
        how="; ".join(hows),
        source="; ".join(sources),
        decided_by=label,
        decides_with=sub,
        others="; ".join(notes),
    )


# --- boundary_moves: a factor that moves a boundary, judged by moving it ----------------------------------------
# Bytes per element of the number formats the paper names (§9.2, §11: FP8, INT8) beside the training formats.
FORMAT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1}
BOUNDARIES = ("threshold", "split", "max_P", "layers", "decision")
FACTORS = ("dtype", "beta", "preset", "width", "rho")
DIRECTIONS = ("moves", "up", "down", "none")
CIRCULAR_FACTORS = frozenset(
    {"beta", "preset", "rho"}
)  # on the paper's presets, only the paper's numbers move


def _boundary_params(a: Mapping[str, Any], hw_name: str, P: int) -> dict[str, Any]:
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(hw_name)
    return {
        "hw": hw.name,
        "P": int(P),
        "F": float(hw.flops),
        "beta": float(hw.beta_for(int(P))),
        "bytes": FORMAT_BYTES[a.get("dtype", "bfloat16")],
        "dtype": a.get("dtype", "bfloat16"),
        "memory": hw.memory_bytes,
        "D": int(a.get("D", stated.PAPER_C)),
        "C_scale": 1.0,
    }


def _changed(a: Mapping[str, Any], p: dict[str, Any], to: Any) -> tuple[dict[str, Any] | None, str]:
    """The parameters with the factor changed as the paper says, every quantity it touches at once; (None, why)
    where the change does not apply (a format the hardware lacks)."""
    from hsitp.cost.hardware import get_hardware

    factor, q = a["factor"], dict(p)
    if factor == "dtype":
        rate = (a.get("rate") or {}).get(p["hw"], {}).get(str(to))
        if rate is None:
            return None, f"{p['hw']} has no dense {to} rate (not in `rate`)"
        q.update(F=p["F"] * float(rate), bytes=FORMAT_BYTES[str(to)], dtype=str(to))
        return (
            q,
            f"{p['dtype']} → {to} (F × {_fmt(float(rate))}, bytes per element {p['bytes']} → {q['bytes']})",
        )
    if factor == "beta":
        new = get_hardware(str(to)).beta_for(p["P"]) if isinstance(to, str) else float(to)
        q["beta"] = float(new)
        return q, f"β {_fmt(p['beta'])} → {_fmt(q['beta'])} B/s ({to})"
    if factor == "preset":
        hw = get_hardware(str(to))
        q.update(hw=hw.name, F=float(hw.flops), beta=float(hw.beta_for(p["P"])), memory=hw.memory_bytes)
        return q, (
            f"{p['hw']} → {hw.name} (F {_fmt(p['F'])} → {_fmt(q['F'])}, β {_fmt(p['beta'])} → {_fmt(q['beta'])}, "
            f"memory {_fmt(p['memory'])} → {_fmt(q['memory'])} B)"
        )
    if factor == "width":
        q["D"] = int(to)
        return q, f"D {p['D']} → {q['D']}"
    if factor == "rho":
        q["C_scale"] = float(to)
        return q, f"ρ × {_fmt(float(to))} (C {_fmt(p['D'])} → {_fmt(p['D'] * float(to))}, N fixed)"
    raise ClaimsError(f"boundary_moves: unknown factor {factor!r}; one of {', '.join(FACTORS)}")


def _boundary_value(kind: str, p: Mapping[str, Any], a: Mapping[str, Any]) -> Any:
    """One boundary of the paper's decision under parameters ``p`` (the stated model, hsitp.cost.stated):
    threshold X* = P·F·b/(2β), the dimension a 1-D split must exceed to be compute-bound (§6.2's P·F/β with the
    bytes per element b and the 2 FLOPs per multiply-add its derivation cancels, §3.2); split: ρ* where
    CCR_channel = CCR_token (§3.3: the ratio of their coefficients); max_P: the largest P with CCR < 1 at dimension
    ``X`` (§11); layers: how many of a block's communicating layers (attention output projection, C_in = D; MLP
    fc2, C_in = 4D) exceed the threshold; decision: §10.1's region (data parallel / channel / token) of every
    registry scene at patch ``patch`` with C = D × the ρ factor."""
    beta_e = 2.0 * p["beta"] / p["bytes"]  # β in elements per second × 2 FLOPs per multiply-add
    X = float(stated.threshold(p["P"], p["F"], beta_e))
    if kind == "threshold":
        return X
    if kind == "split":
        return float(
            stated.ccr_channel(p["P"], p["F"], beta_e, 1) / stated.ccr_token(p["P"], p["F"], beta_e, 1)
        )
    if kind == "max_P":
        return float(a.get("X", stated.PAPER_N[1])) * beta_e / p["F"]
    if kind == "layers":
        c_ins = (p["D"], int(a.get("mlp_ratio", 4)) * p["D"])
        return sum(c > X for c in c_ins)
    if kind == "decision":
        C = p["D"] * p["C_scale"]
        out = []
        for name in registry.names():
            spec = registry.get(name)
            N = _n_tokens(spec.rows, spec.cols, int(a.get("patch", 8)))
            cc, ct = X / C, X / N
            out.append("data_parallel" if min(cc, ct) >= 1 else ("channel" if cc < ct else "token"))
        return tuple(out)
    raise ClaimsError(f"boundary_moves: unknown boundary {kind!r}; one of {', '.join(BOUNDARIES)}")


def _moved(kind: str, old: Any, new: Any, direction: str, rtol: float) -> bool:
    """Whether a boundary moved as stated: a decision by any scene's region, a count of layers by one, a number by
    more than ``rtol`` of itself."""
    if kind == "decision":
        up = down = old != new
    elif kind == "layers":
        up, down = new > old, new < old
    else:
        up, down = new > old * (1 + rtol), new < old * (1 - rtol)
    return {"moves": up or down, "up": up, "down": down, "none": not (up or down)}[direction]


def _show(kind: str, v: Any) -> str:
    """A boundary's value as shown: a decision as its regions' counts over the scenes."""
    if kind == "decision":
        return "(" + ", ".join(f"{r} {v.count(r)}" for r in dict.fromkeys(v)) + ")"
    return _fmt(v)


def check_boundary_moves(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Rule 12: a factor the paper says moves a boundary, judged by moving it. Each point (a preset of
    ``hardware`` × ``P`` × a new value in ``to``) recomputes the ``boundary`` (one of :data:`BOUNDARIES`, or a list:
    the point counts if any of them moves as stated) with the ``factor`` changed as the paper says, every quantity
    it touches at once (a number format: the rate F at that format, from ``rate``, and the bytes per element, hence
    β in elements per second; a preset: F, β and memory), and asks whether it moved in the paper's ``direction``
    (moves / up / down / none; by more than ``rtol``, default 1 %). The outcome is the share of points."""
    kinds = a["boundary"] if isinstance(a["boundary"], list) else [a["boundary"]]
    direction, rtol = a.get("direction", "moves"), float(a.get("rtol", 0.01))
    pts, skipped = [], []
    for hw in a["hardware"]:
        for P in a.get("P") or [8]:
            base = _boundary_params(a, hw, P)
            for to in a["to"]:
                new, what = _changed(a, base, to)
                if new is None:
                    skipped.append(what)
                    continue
                moved, shown = False, []
                for kind in kinds:
                    old_v, new_v = _boundary_value(kind, base, a), _boundary_value(kind, new, a)
                    moved |= _moved(kind, old_v, new_v, direction, rtol)
                    shown.append(f"{kind} {_show(kind, old_v)} → {_show(kind, new_v)}")
                pts.append((f"{hw} P={P} {what}", moved, ", ".join(shown)))
    if not pts:
        raise ClaimsError(f"boundary_moves: no point applies ({'; '.join(skipped)})")
    left = [f"not applicable: {s}" for s in dict.fromkeys(skipped)]
    return _share(
        pts,
        a,
        f"stated model (hsitp.cost.stated) recomputed with {a['factor']} changed: share of {len(pts)} point(s) where "
        f"{' or '.join(kinds)} {'moves' if direction == 'moves' else direction if direction != 'none' else 'stays'}"
        f" (rtol {rtol:g})",
        "hsitp.cost.stated, hsitp.cost.hardware" + (f"; {a['source']}" if a.get("source") else ""),
        basis=None,
        left_out=left,
    )


CHECKS: dict[str, Callable[[Context, Mapping[str, Any]], Outcome]] = {
    "quote": check_quote,
    "quote_texts_agree": check_quote_texts_agree,
    "formula_value": check_formula_value,
    "formula_identity": check_formula_identity,
    "table_value": check_table_value,
    "table_compare": check_table_compare,
    "table_fraction": check_table_fraction,
    "table_spread": check_table_spread,
    "lower_split_rule": check_lower_split_rule,
    "split_regime": check_split_regime,
    "dataset_grid": check_dataset_grid,
    "dataset_attr": check_dataset_attr,
    "dataset_range": check_dataset_range,
    "config_value": check_config_value,
    "table_attr": check_table_attr,
    "preset_value": check_preset_value,
    "any_of": check_any_of,
    "reading": check_reading,
    "pending": check_pending,
    "needs_gpu": check_needs_gpu,
    "measured": check_measured,
    "probe_memory": check_probe_memory,
    "probe_estimate": check_probe_estimate,
    "probe_throughput": check_probe_throughput,
    "bench_compare": check_bench_compare,
    "bench_trend": check_bench_trend,
    "bench_value": check_bench_value,
    "first_decided": check_first_decided,
    "boundary_moves": check_boundary_moves,
}
# Verdict mapping keys a claim may set on its check.
VERDICT_KEYS = ("if_true", "if_false", "if_partial")


def evaluate_check(ctx: Context, check: Mapping[str, Any]) -> Outcome:
    fn = check.get("fn")
    if fn not in CHECKS:
        raise ClaimsError(f"unknown check {fn!r}; one of {', '.join(CHECKS)}")
    return CHECKS[fn](ctx, check)


def hedged(zh: str) -> bool:
    """Rule 5: the quote contains 可能, 约, 大约 or 左右 (words such as 约束 or 归约 are not hedges)."""
    text = str(zh)
    for word in NOT_HEDGES:
        text = text.replace(word, "")
    return any(m in text for m in POSSIBILITY_MARKERS + APPROX_MARKERS)


def possibility_hedged(zh: str) -> bool:
    """The quote says 可能 ("may"): the claim holds if the effect occurs in at least one configuration of its scope."""
    return any(m in str(zh) for m in POSSIBILITY_MARKERS)


def approximate(zh: str) -> bool:
    """The quote says 约/大约/左右 ("about"): the claim must state its tolerance (field ``about``)."""
    text = str(zh)
    for word in NOT_HEDGES:
        text = text.replace(word, "")
    return any(m in text for m in APPROX_MARKERS)


def deciding_check(o: Outcome, check: Mapping[str, Any]) -> Mapping[str, Any]:
    """The check whose mapping decides ``o``: the sub-check that decided a first_decided claim, else ``check``."""
    return o.decides_with if o.decides_with is not None else check


def _holds(o: Outcome, check: Mapping[str, Any], existential: bool = False) -> bool:
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
        return f > 0 if existential else f >= float(check.get("min_fraction", 1.0))
    return bool(o.ok)


def decide(o: Outcome, check: Mapping[str, Any], existential: bool = False) -> tuple[str, str]:
    """(verdict, basis) of an outcome under the claim's mapping (``if_true``/``if_false``/``if_partial``).

    The only place a number becomes a verdict: the flip test and the knife-edge mark move the outcome's value (or
    share, or one sub-check) and call this again. ``existential``: the claim is 可能-hedged (rule 5). A
    first_decided outcome is decided under the mapping of the sub-check that decided it."""
    check = deciding_check(o, check)
    if o.verdict is not None:
        return o.verdict, o.basis or ("pending" if o.verdict == "pending" else "reading")
    basis = o.basis or "computed"
    if o.parts:
        held = [_holds(po, pc) for _, po, pc in o.parts]
        ok = any(held) if existential else all(held)
        partial = not ok and any(held)
    elif o.band is not None or o.fraction is None:
        ok, partial = _holds(o, check), False
    else:
        ok = _holds(o, check, existential)
        partial = not ok and float(o.fraction) > 0
    if ok:
        return check.get("if_true", "holds"), basis
    if partial:
        return check.get("if_partial", "conditional"), basis
    return check.get("if_false", "contradicted"), basis


def verdict_of(o: Outcome, check: Mapping[str, Any]) -> tuple[str, str]:
    """(verdict, basis) of an outcome of a claim that is not 可能-hedged (see :func:`decide`)."""
    return decide(o, check)


def _flip_one(o: Outcome, check: Mapping[str, Any]) -> Outcome:
    """The outcome with its deciding point moved across: the value to the other side of the band, the share by one
    point (towards and across ``min_fraction``), the boolean negated."""
    import dataclasses

    check = deciding_check(o, check)
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
        m = float(check.get("min_fraction", 1.0))
        k = round(float(o.fraction) * o.n_points)
        k = k - 1 if float(o.fraction) >= m else k + 1
        return dataclasses.replace(o, fraction=min(max(k, 0), o.n_points) / o.n_points)
    return dataclasses.replace(o, ok=not o.ok)


def knife_edge(o: Outcome, check: Mapping[str, Any], existential: bool = False) -> tuple[bool, str]:
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
            import dataclasses

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
        m = 1.0 / n if existential else float(check.get("min_fraction", 1.0))
        ok = k / n >= m
        if ok and (m >= 1.0 and not existential):
            return False, ""
        if ok and (k - 1) / n < m:
            return True, f"{k} of {n} points, threshold {_fmt(m)}: one point fewer changes the verdict"
        if not ok and (k + 1) / n >= m:
            return True, f"{k} of {n} points, threshold {_fmt(m)}: one point more changes the verdict"
    return False, ""


def load_claims(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    """The claims, schema-checked (see :func:`validate_claims`)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ClaimsError(f"{path}: cannot read the claims: {exc}") from exc
    claims = data.get("claims") if isinstance(data, Mapping) else None
    if not isinstance(claims, list):
        raise ClaimsError(f"{path}: expected a mapping with a list under 'claims'")
    problems = validate_claims(claims)
    if problems:
        raise ClaimsError(f"{path}: " + "; ".join(problems[:10]))
    return claims


def _check_problems(cid: str, check: Any) -> list[str]:
    if not isinstance(check, Mapping) or check.get("fn") not in CHECKS:
        return [f"{cid}: check.fn must be one of {', '.join(CHECKS)}"]
    out = []
    for k in VERDICT_KEYS:
        if k in check and check[k] not in VERDICTS:
            out.append(f"{cid}: check.{k} {check[k]!r} is not a verdict ({', '.join(VERDICTS)})")
    if check["fn"] == "reading":
        if check.get("verdict") not in VERDICTS:
            out.append(f"{cid}: reading verdict {check.get('verdict')!r} not in {', '.join(VERDICTS)}")
        for k in ("reason", "source"):
            if not check.get(k):
                out.append(f"{cid}: a reading check needs a {k}")
    if check["fn"] == "measured" and not check.get("variable"):
        out.append(f"{cid}: a measured check needs a variable of train/summary.nc")
    out += _measured_problems(cid, check)
    if check["fn"] == "pending" and not (check.get("stage") and check.get("reason")):
        out.append(f"{cid}: a pending check needs stage and reason")
    if check["fn"] == "needs_gpu" and not check.get("reason"):
        out.append(f"{cid}: a needs_gpu check needs a reason")
    if check["fn"] == "any_of":
        subs = check.get("checks")
        if not isinstance(subs, list) or len(subs) < 2:
            out.append(f"{cid}: any_of needs a list of at least two checks")
        else:
            for s in subs:
                if not isinstance(s, Mapping) or not s.get("label"):
                    out.append(f"{cid}: every any_of check needs a label")
                else:
                    out += _check_problems(cid, s)
    return out


# Arguments each measured or boundary check needs (beyond fn).
REQUIRED_ARGS: dict[str, tuple[str, ...]] = {
    "probe_memory": ("lhs", "against"),
    "probe_estimate": ("lhs", "against"),
    "probe_throughput": ("plans", "op", "value"),
    "bench_compare": ("lhs", "rhs", "op"),
    "bench_trend": ("op",),
    "bench_value": ("of", "op", "value"),
    "boundary_moves": ("boundary", "factor", "hardware", "to", "direction"),
}


def _measured_problems(cid: str, check: Mapping[str, Any]) -> list[str]:
    """Problems of a measured-file, boundary or first_decided check: its required arguments and their values."""
    fn, out = check["fn"], []
    for k in REQUIRED_ARGS.get(fn, ()):
        if k not in check:
            out.append(f"{cid}: a {fn} check needs {k}")
    if fn in ("probe_memory", "probe_estimate") and not ("op" in check or "low" in check or "high" in check):
        out.append(f"{cid}: a {fn} check needs op/value or low/high")
    if fn == "boundary_moves":
        kinds = check.get("boundary")
        for k in kinds if isinstance(kinds, list) else [kinds]:
            if k not in BOUNDARIES:
                out.append(f"{cid}: boundary {k!r} not in {', '.join(BOUNDARIES)}")
        if check.get("factor") not in FACTORS:
            out.append(f"{cid}: factor {check.get('factor')!r} not in {', '.join(FACTORS)}")
        if check.get("direction") not in DIRECTIONS:
            out.append(f"{cid}: direction {check.get('direction')!r} not in {', '.join(DIRECTIONS)}")
        if check.get("factor") == "dtype":
            if not check.get("rate") or not check.get("source"):
                out.append(f"{cid}: a number-format change needs its rates (rate) and their source")
            for to in check.get("to") or []:
                if to not in FORMAT_BYTES:
                    out.append(f"{cid}: format {to!r} not in {', '.join(FORMAT_BYTES)}")
    if fn == "first_decided":
        subs = check.get("checks")
        if not isinstance(subs, list) or len(subs) < 2:
            out.append(f"{cid}: first_decided needs a list of at least two checks")
        else:
            if not any(isinstance(s, Mapping) and s.get("fn") in MEASURED_CHECKS for s in subs[:-1]):
                out.append(f"{cid}: first_decided tries a measured check before its last one")
            for s in subs:
                if not isinstance(s, Mapping) or not s.get("label"):
                    out.append(f"{cid}: every first_decided check needs a label")
                elif s.get("fn") == "first_decided":
                    out.append(f"{cid}: first_decided does not nest")
                else:
                    out += _check_problems(cid, s)
            for k in VERDICT_KEYS:
                if k in check:
                    out.append(f"{cid}: first_decided takes its mapping from each sub-check, not check.{k}")
    return out


def validate_claims(claims: Sequence[Any]) -> list[str]:
    """Problems of the claims list: required fields, unique ids, valid kinds, check names and verdicts."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, c in enumerate(claims):
        if not isinstance(c, Mapping):
            problems.append(f"claim #{i}: not a mapping")
            continue
        cid = str(c.get("id", f"#{i}"))
        missing = [f for f in REQUIRED_FIELDS if not c.get(f)]
        if missing:
            problems.append(f"{cid}: missing {', '.join(missing)}")
        if cid in seen:
            problems.append(f"{cid}: duplicate id")
        seen.add(cid)
        if c.get("kind") not in KINDS:
            problems.append(f"{cid}: kind {c.get('kind')!r} not in {', '.join(KINDS)}")
        if "check" in c:
            problems += _check_problems(cid, c["check"])
        if c.get("kind") == "finding" and not c.get("refines"):
            problems.append(f"{cid}: a finding names the claim it refines (refines: ID)")
        if c.get("refines") and c.get("kind") != "finding":
            problems.append(f"{cid}: only a finding (kind: finding) refines another claim")
        if approximate(c.get("zh", "")) and not c.get("about"):
            problems.append(f"{cid}: the quote says 约/大约/左右; state the tolerance (about: ...)")
        if c.get("by_construction"):
            r = c.get("reading")
            if not isinstance(r, Mapping) or r.get("verdict") not in VERDICTS or not r.get("reason"):
                problems.append(
                    f"{cid}: by_construction evidence needs a reading verdict (reading: verdict, reason)"
                )
            elif not r.get("source"):
                problems.append(f"{cid}: a reading verdict needs a source")
    ids = {str(c.get("id")) for c in claims if isinstance(c, Mapping)}
    kind_of = {str(c.get("id")): c.get("kind") for c in claims if isinstance(c, Mapping)}
    for c in claims:
        if isinstance(c, Mapping) and c.get("refines"):
            target = str(c["refines"])
            if target not in ids:
                problems.append(f"{c.get('id')}: refines {target!r}, which is not a claim")
            elif kind_of[target] == "finding":
                problems.append(f"{c.get('id')}: refines {target!r}, itself a finding")
    return problems


def config_keys(claims: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """Config keys the claims read (the audit rule passes exactly these to ``hsitp audit claims``)."""
    keys: set[str] = set()

    def walk(check: Mapping[str, Any]) -> None:
        if check.get("fn") == "config_value":
            keys.add(check["key"])
        if check.get("fn") == "measured":
            keys.add("audit.accuracy_run")
        if check.get("fn") in RUN_MEASURED_CHECKS:
            keys.add("audit.measured_run")
        for sub in check.get("checks") or []:
            walk(sub)

    for c in claims if claims is not None else load_claims():
        walk(c["check"])
    return sorted(keys)


def circular(check: Mapping[str, Any]) -> bool:
    """Rule 11: the check evaluates the paper's own formulas at the paper's own numbers (a formula identity or value,
    a quote its own formulas and parameters recompute, a preset copied from the paper, or a stated-model table
    limited to the paper's presets), so
    agreement says the paper is consistent with its own assumptions, not that it holds."""
    fn = str(check.get("fn", ""))
    if fn in CIRCULAR_CHECKS:
        return True
    if fn == "quote":
        return str(check.get("key")) in OWN_QUOTES
    if fn == "any_of":
        return bool(check.get("checks")) and all(circular(sub) for sub in check["checks"])
    if (
        fn == "boundary_moves"
    ):  # the paper's formulas on the paper's presets, moved by the paper's own numbers
        named = set(check.get("hardware") or [])
        if check.get("factor") in ("beta", "preset"):
            named |= {t for t in check.get("to") or [] if isinstance(t, str)}
        return check.get("factor") in CIRCULAR_FACTORS and bool(named) and named <= PAPER_PRESETS
    sel = check.get("sel") or {}
    hw = sel.get("hardware")
    hardware = set(hw if isinstance(hw, list) else [hw]) if hw is not None else set()
    return (
        (fn.startswith("table_") or fn == "split_regime")
        and sel.get("model") == "stated"
        and bool(hardware)
        and hardware <= PAPER_PRESETS
    )


def evaluate_claim(ctx: Context, c: Mapping[str, Any]) -> tuple[Outcome, str, str]:
    """(outcome, verdict, basis) of one claim. Evidence that holds by our own construction (``by_construction``) is
    shown but does not decide: the claim's ``reading`` verdict does (rule 3). A computed claim whose check is
    circular (rule 11) has basis ``circular``, and says ``consistent`` where it would say ``holds``."""
    try:
        o = evaluate_check(ctx, c["check"])
    except (KeyError, TypeError) as exc:
        raise ClaimsError(f"claim {c['id']}: check {c['check'].get('fn')!r} is missing {exc}") from exc
    if reading_decides(c, o):
        r = c["reading"]
        return o, r["verdict"], "reading"
    verdict, basis = decide(o, c["check"], possibility_hedged(c["zh"]))
    if basis == "computed" and circular(deciding_check(o, c["check"])):
        return o, "consistent" if verdict == "holds" else verdict, "circular"
    return o, verdict, basis


def measured_decided(o: Outcome) -> bool:
    """The outcome is a measurement that decided (basis measured, not pending)."""
    return o.basis == "measured" and o.verdict != "pending"


def reading_decides(c: Mapping[str, Any], o: Outcome) -> bool:
    """Rule 3: a claim whose computed evidence holds by our own construction is decided by its reading, unless a
    measured sub-check of it decided (a measurement is not our construction)."""
    return bool(c.get("by_construction")) and not measured_decided(o)


def evaluate_claims(ctx: Context, claims: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per claim (:data:`COLUMNS`), verdicts computed where a number decides them."""
    rows = []
    for c in claims if claims is not None else load_claims():
        o, verdict, basis = evaluate_claim(ctx, c)
        existential = possibility_hedged(c["zh"])
        reason = o.reason or str(c.get("reason", "")).strip()
        if o.decided_by:  # first_decided: say which sub-check decided, and what the others said
            said = f"Decided by {o.decided_by} (basis {basis})" + (f"; {o.others}" if o.others else "") + "."
            reason = " ".join(x for x in (said, o.reason, str(c.get("reason", "")).strip()) if x)
        how, source, tolerance = o.how, o.source, o.tolerance
        by_reading = reading_decides(c, o)
        if by_reading:
            r = c["reading"]
            reason = str(r["reason"]).strip() + (f" (Other sub-checks: {o.others}.)" if o.others else "")
            how = f"by construction ({c['by_construction']}): {o.how}"
            source = f"{r['source']}; evidence: {o.source}"
        elif o.parts and verdict in ("conditional", "holds") and basis != "reading":
            held = [lbl for lbl, po, pc in o.parts if _holds(po, pc)]
            if verdict == "conditional" or (existential and len(held) < len(o.parts)):
                reason = (f"holds only under: {', '.join(held)}. " + reason).strip()
        if c.get("about"):
            tolerance = f"about: {c['about']}; {tolerance}".strip("; ")
        if (
            existential
            and basis in ("computed", "circular", "measured")
            and (o.parts or o.fraction is not None)
        ):
            tolerance = f"{tolerance}; hedged (可能): holds if it occurs at one point or more".strip("; ")
        knife, edge = (False, "") if by_reading else knife_edge(o, c["check"], existential)
        number = (
            o.value
            if isinstance(o.value, int | float | np.number) and not isinstance(o.value, bool)
            else None
        )
        rows.append(
            {
                "id": c["id"],
                "section": str(c["section"]),
                "kind": c["kind"],
                "zh": c["zh"].strip(),
                "en": c["en"].strip(),
                "paper_value": str(c.get("paper_value", "") or o.paper_value),
                "pipeline_value": _fmt(o.value) if not isinstance(o.value, list) else str(o.value),
                "pipeline_number": float(number) if number is not None else math.nan,
                "how": how,
                "source": source,
                "tolerance": tolerance,
                "verdict": verdict,
                "basis": basis,
                "reason": reason,
                "hedged": hedged(c["zh"]),
                "knife_edge": knife,
                "edge": edge,
                "refines": str(c.get("refines", "") or ""),
            }
        )
    return rows


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
    """Verdicts of the findings alone (what the refined model says of the claims they refine)."""
    found = [r for r in rows if r["kind"] == "finding"]
    return {v: n for v in VERDICTS if (n := sum(r["verdict"] == v for r in found))}

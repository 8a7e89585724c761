"""What every part of the claims audit shares: the vocabularies (kinds, verdicts, bases, the measured files), the
:class:`Outcome` a check returns, the :class:`Context` it reads, and the helpers the checks use to select, format
and compare values and to evaluate the paper's formulas."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp import contracts
from hsitp.audit.claims.checks import MEASURED_CHECKS, Check, ClaimsError, Sel
from hsitp.cost import paper, stated
from hsitp.outcomes import Basis, Claim
from hsitp.settings import AuditSettings
from hsitp.shape import n_tokens

CLAIMS_FILE = Path(__file__).parent.with_name("claims.yaml")  # hsitp/audit/claims.yaml
KINDS = (
    "number",
    "formula",
    "directional_rule",
    "dataset_fact",
    "design_parameter",
    "estimate",
    "conclusion",
    "reference_fact",
    "finding",  # a modelled, half-measured or measured answer bearing on claims it does not judge (``refines``)
)
# The claim verdicts and the bases, as the table writes them (their meanings: hsitp.outcomes).
VERDICTS = tuple(v.value for v in Claim)
# How a verdict was reached: computed from cached results, read from a source, waiting on a stage, or decided by
# measurements: the run's own probe and bench files (results/<audit.measured_run or the audited run>/probe/*.nc,
# bench/*.nc) or the accuracy run's results/<audit.accuracy_run>/train/summary.nc; a measured check is pending while
# its file (or a point in its scope) is absent.
# "half-measured": one half of the compared value measured, the other modelled (the GPU shards: compute timed,
# communication from a preset); such an outcome is a finding, never a verdict (docs/audit.md, "measured means fully
# measured").
BASES = tuple(b.value for b in Basis)
# What a claim's sentence rests on (field ``rests_on``, docs/audit.md rule 2): the paper's formulas under the
# constants its sentence or section sets, or what real hardware or real training does (a full measurement).
RESTS_ON = ("formulas", "measurement")
# The measured (and modelled) files a check may read, relative to the measured run's folder: (path, contract, stage).
MEASURED_FILES: dict[str, tuple[str, contracts.Contract, str]] = {
    "memory": ("probe/memory.nc", contracts.PROBE_MEMORY, "probe"),
    "throughput": ("probe/throughput.nc", contracts.PROBE_THROUGHPUT, "probe"),
    "estimate": ("probe/estimate.nc", contracts.PROBE_ESTIMATE, "probe"),
    "microbench": ("bench/microbench.nc", contracts.MICROBENCH, "bench"),
    "model_vs_measured": ("bench/model_vs_measured.nc", contracts.MODEL_VS_MEASURED, "bench"),
}
# Checks whose every compared quantity is measured in one run, under rule 8's guard against run-to-run spread (>= 3
# launches for the bench, interleaved rounds for the probe's tokens/s, partitions for accuracy; memory is counted
# from the tensors the run allocates). Only these may decide a claim that rests on a measurement.
HALF_MEASURED_CHECKS = frozenset({"shard_compare", "shard_value"})  # compute timed, communication modelled
MODELLED_CHECKS = frozenset({"probe_estimate"})  # fake tensors: the model's allocations counted, nothing run
FULLY_MEASURED_CHECKS = MEASURED_CHECKS - HALF_MEASURED_CHECKS - MODELLED_CHECKS
# Checks that never decide a measurement claim but may close its first_decided list (what it waits for).
WAITING_CHECKS = frozenset({"pending", "needs_gpu", "reading"})
# The paper's own presets: a stated-model table selection limited to these evaluates the paper with itself.
PAPER_PRESETS = frozenset({"paper-intra", "paper-inter"})
# Cost-table variables only our refined model computes (no ``model`` coordinate to select): a check reading one reads
# the refined model whatever its ``sel`` says (rule 2: a finding, or by-construction evidence whose reading decides).
REFINED_VARIABLES: dict[str, frozenset[str]] = {
    "ccr": frozenset(
        {"ccr_worst_layer", "mesh", "layer_ccr", "layer_t_comp", "layer_t_comm", "scheme_memory"}
    ),
    "scale": frozenset(
        {"memory", "memory_total", "t_step", "t_dp_sync", "relative_throughput", "scaling_efficiency"}
    ),
    "boundary": frozenset({"ccr_refined", "region_refined"}),
}
# Checks that evaluate the paper's own formulas at the paper's own numbers (rule 11).
CIRCULAR_CHECKS = frozenset({"formula_identity", "formula_value", "preset_value"})
DEFAULT_ACCURACY_RUN = "cpu-places"  # audit.accuracy_run's schema default: the fair matrix on 5 partitions
# The committed one-GPU check (results/reference/h200-check/): its shard files (kind bench_shard) time rank 0's
# shard on one GPU and model the communication (half-measured); the shard checks read them.
GPU_REFERENCE = "h200-check"
# The paper's own token cases of cost/ccr.nc (§7.4, §8.1: N = 324 and 5776); every other case is a registry scene.
PAPER_CASES = frozenset({"paper_N324", "paper_N5776"})
# The probe files a run's own copy of may be toy-size (smaller model than the headline run's): it then defers.
PROBE_FILES = ("memory", "throughput")
# The size keys of a probe's model (its ``probe`` attribute) that decide whether a file is at a claim's sizes.
SIZE_KEYS = ("dim", "depth", "L", "N")
COST_TABLES = tuple(contracts.COST)


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
    parts: list[tuple[str, Outcome, Check]] = field(default_factory=list)  # any_of: label, outcome, check
    basis: str | None = None  # "measured" for a check reading a measured file (probe, bench, accuracy run)
    # first_decided: the label and the check of the sub-check that decided (the verdict mapping, min_fraction and
    # band of the outcome are that sub-check's); empty for any other check.
    decided_by: str = ""
    decides_with: Check | None = None
    others: str = ""  # first_decided: what the sub-checks that did not decide said (a pending one: why)
    # rule 11 by data: a table check's evidence is the paper's own (stated model at the paper's inputs)
    paper_own: bool | None = None


def pending(source: str | Path, reason: str, basis: str = Basis.MEASURED) -> Outcome:
    """A check that waits on a file or a stage: verdict pending, ``reason`` saying what for."""
    return Outcome(verdict=Claim.PENDING, basis=basis, how="-", source=str(source), reason=reason)


def share(
    frac: float,
    n: int,
    a: Check,
    how: str,
    source: str,
    basis: str | None = None,
    reason: str = "",
) -> Outcome:
    """A share outcome: ``frac`` of ``n`` points hold; the claim holds from ``min_fraction`` (default every point)."""
    return Outcome(
        value=frac,
        how=how,
        source=source,
        fraction=frac,
        n_points=n,
        tolerance=f"holds if share ≥ {a.min_fraction}",
        basis=basis,
        reason=reason,
    )


class Context:
    """Cached inputs of one audit: the run's cost tables (read once), the registry, the audit's settings, and (for
    measured-basis checks) the measured run's probe/ and bench/ files (``audit.measured_run``, default the audited
    run) and ``results/<audit.accuracy_run>/train/summary.nc`` beside the run's folder."""

    def __init__(
        self, cost_dir: Path, settings: AuditSettings | None = None, results_root: Path | None = None
    ) -> None:
        self.cost_dir = Path(cost_dir)
        # no settings: the schema's defaults and no config (a config_value check then fails, naming its key)
        self.settings = settings or AuditSettings(accuracy_run=DEFAULT_ACCURACY_RUN)
        # results/ (the run folder's parent): where the accuracy run's folder sits
        self.results_root = Path(results_root) if results_root is not None else self.cost_dir.parent.parent
        self._tables: dict[str, xr.Dataset] = {}
        self._measured: dict[str, xr.Dataset] = {}
        self._measured_path: dict[str, Path] = {}
        # name -> where a measured file came from when it is not the run's own at the run's sizes: the committed
        # reference (the run's file absent, or toy-size) and why; shown in every check reading it
        self.measured_notes: dict[str, str] = {}
        self.inputs: dict[str, Path] = {}

    @property
    def measured_run(self) -> str:
        """The run whose probe/ and bench/ files the measured checks read: ``audit.measured_run``, else the audited
        run itself (the folder above ``cost/``)."""
        name = self.settings.measured_run
        return str(name) if name else self.cost_dir.parent.name

    @property
    def measured_dir(self) -> Path:
        name = self.settings.measured_run
        return self.results_root / str(name) if name else self.cost_dir.parent

    def reference_dir(self, run: str) -> Path:
        """``results/reference/<run>`` beside the audited run (the committed reference of a headline run); when the
        audited run is itself under ``results/reference/`` (the committed smoke reference), its sibling."""
        here = self.results_root / "reference" / run
        if not here.exists() and self.results_root.name == "reference" and (self.results_root / run).exists():
            return self.results_root / run
        return here

    def measured(self, name: str) -> tuple[xr.Dataset | None, Path, Outcome | None]:
        """(dataset, path, None) of a measured file (:data:`MEASURED_FILES`), or (None, path, a pending outcome
        naming the file and the stage that writes it) while no copy of it is here.

        Which copy: the measured run's own file, at the sizes of the headline run; where it is absent,
        or toy-size (its probe model smaller than the headline run's, as the smoke run's: it tests the machinery,
        it does not decide a claim), the headline run's committed reference
        ``results/reference/<audit.accuracy_run>/<file>``; :attr:`measured_notes` says which and why."""
        if name in self._measured:
            return self._measured[name], self._measured_path[name], None
        from hsitp.io import read_netcdf

        rel, contract, stage = MEASURED_FILES[name]  # by kind: a check names the variable it lacks
        path = self.measured_dir / rel
        ref = self.reference_dir(self.accuracy_run) / rel
        use_ref = name in PROBE_FILES and ref.exists() and ref.resolve() != path.resolve()
        if path.exists():
            ds = read_netcdf(path, kind=contract.kind)
            if use_ref:
                ref_ds = read_netcdf(ref, kind=contract.kind)
                small = smaller_model(probe_sizes(ds), probe_sizes(ref_ds))
                if small:
                    self.measured_notes[name] = (
                        f"the run's own {path} is toy-size ({small}): it tests the machinery and decides nothing; "
                        f"the headline run's committed reference {ref} decides, not re-run here"
                    )
                    ds, path = ref_ds, ref
        elif use_ref:
            ds = read_netcdf(ref, kind=contract.kind)
            self.measured_notes[name] = (
                f"no {path} here: the headline run's committed reference {ref} decides, not re-run here"
            )
            path = ref
        else:
            why = (
                f"pending: no {path} (the {stage} stage of run `{self.measured_run}`; "
                "audit.measured_run names another run)"
            )
            return None, path, pending(path, why, Basis.PENDING if name == "estimate" else Basis.MEASURED)
        self._measured[name], self._measured_path[name] = ds, path
        self.inputs[f"measured_{name}"] = path
        return ds, path, None

    def measured_label(self, name: str) -> str:
        """Where a measured file was read: "in run `RUN`", or the committed reference and why."""
        note = self.measured_notes.get(name)
        return f"from the committed reference ({note})" if note else f"in run `{self.measured_run}`"

    @property
    def accuracy_run(self) -> str:
        return self.settings.accuracy_run

    @property
    def accuracy_summary(self) -> Path:
        """``results/<audit.accuracy_run>/train/summary.nc``: the input of measured-basis claims; when that run is
        absent here, its committed reference ``results/reference/<audit.accuracy_run>/train/summary.nc`` (the
        headline run read from the reference, the verdict saying so)."""
        run = self.results_root / self.accuracy_run / "train" / "summary.nc"
        ref = self.results_root / "reference" / self.accuracy_run / "train" / "summary.nc"
        return ref if not run.exists() and ref.exists() else run

    @property
    def accuracy_from_reference(self) -> bool:
        """Whether the accuracy claims read the committed reference (the run is not here)."""
        return self.accuracy_summary.parent.parent.parent.name == "reference"

    def table(self, name: str) -> xr.Dataset:
        """``cost/NAME.nc`` (:data:`hsitp.contracts.COST`; a check names no other: checks.CostTable)."""
        if name not in self._tables:
            path = self.cost_dir / f"{name}.nc"
            self._tables[name] = contracts.COST[name].read(path)
            self.inputs[name] = path
        return self._tables[name]


def probe_config(ds: xr.Dataset) -> dict[str, Any]:
    """A probe file's ``probe`` attribute (the probe's settings as JSON); {} when absent or unreadable."""
    import json

    try:
        return json.loads(ds.attrs.get("probe", "{}"))
    except ValueError:
        return {}


def probe_sizes(ds: xr.Dataset) -> dict[str, int]:
    """The model sizes of a probe file (its ``probe`` attribute): dim, depth and the largest L and N."""
    p = probe_config(ds)
    return {k: int(max(v) if isinstance(v, list) else v) for k in SIZE_KEYS if (v := p.get(k)) is not None}


def smaller_model(run: Mapping[str, int], ref: Mapping[str, int]) -> str:
    """What makes the ``run`` model smaller than ``ref`` (e.g. "dim 32 < 64, depth 2 < 4"), or "" if it is not."""
    return ", ".join(
        f"{k} {run[k]} < {ref[k]}" for k in SIZE_KEYS if k in run and k in ref and run[k] < ref[k]
    )


# The comparisons a check may name (checks.Op: any other is refused as claims.yaml loads).
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _sel(da: xr.DataArray, sel: Sel | None) -> xr.DataArray:
    if not sel:
        return da
    try:
        return da.sel({k: v for k, v in sel.items()})
    except (KeyError, ValueError) as exc:
        raise ClaimsError(f"selection {dict(sel)} not in {da.name!r} (dims {dict(da.sizes)}): {exc}") from exc


def _sel_text(sel: Sel | None) -> str:
    if not sel:
        return ""
    return "[" + ", ".join(f"{k}={v}" for k, v in sel.items()) + "]"


def _fmt(x: Any) -> str:
    if isinstance(x, float | np.floating):
        return f"{float(x):.6g}"
    return str(x)


def _bounds(args: Check) -> tuple[float, float, str]:
    """``low``/``high`` bounds, or ``expect`` with ``rtol`` (default 1e-12: exact up to rounding)."""
    if "expect" in args.model_fields_set:
        e, rtol = float(args.expect), args.rtol
        return e - abs(e) * rtol, e + abs(e) * rtol, f"{_fmt(e)} (rtol {rtol:g})"
    low, high = float(args.low), float(args.high)
    return low, high, f"[{_fmt(low)}, {_fmt(high)}]"


# The names a formula may use: the paper's formulas and constants, the token grid, math.

FORMULA_NAMES: dict[str, Any] = {
    "ccr_channel": lambda *a: float(stated.ccr_channel(*a)),
    "ccr_token": lambda *a: float(stated.ccr_token(*a)),
    "threshold": lambda *a: float(stated.threshold(*a)),
    "relative_throughput": lambda *a: float(stated.relative_throughput(*a)),
    "ccr_2d": lambda *a: float(stated.ccr_2d(*a)),
    "rho": lambda *a: float(stated.rho(*a)),
    "n_tokens": n_tokens,
    "F": paper.PAPER_F,
    "beta_intra": paper.PAPER_BETA_INTRA,
    "beta_inter": paper.PAPER_BETA_INTER,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
    "abs": abs,
}


def _eval(expr: str, extra: dict[str, Any] | None = None) -> float:
    names = {**FORMULA_NAMES, **(extra or {})}
    try:
        return float(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - names are the whitelist above
    except Exception as exc:  # a typo in claims.yaml: say which expression
        raise ClaimsError(f"formula {expr!r} cannot be evaluated: {exc}") from exc

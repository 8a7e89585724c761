"""The file kinds the stages hand on: per kind its name, dimensions, required variables and attributes, and reader
(docs/contracts.md says what each file holds beyond them). ``X.read(path)`` refuses, in one line naming the file and
the stage that writes it, another schema version or kind, or a file lacking what the contract lists: what every file
of the kind this hsitp writes holds (``tests/test_contracts.py`` reads every committed one through its contract).
Writers stamp ``X.kind``; report pages open ``X.kind`` only, and name what a figure lacks. :func:`summary_cells`
indexes a training summary by its :class:`Cell`, the one lookup of a cell for report, audit and reproduce.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

from hsitp.errors import HsitpError
from hsitp.io import read_netcdf
from hsitp.names import COLLECTIVES


@dataclass(frozen=True)
class Contract:
    """One file kind: the ``kind`` attribute its writer stamps, and what every such file holds."""

    kind: str
    dims: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()  # data variables and coordinates
    attrs: tuple[str, ...] = ()
    check: Callable[[xr.Dataset, Path], None] | None = None  # value checks beyond presence (calibration)

    def read(self, path: str | os.PathLike[str], *, load: bool = True) -> xr.Dataset:
        """The file, its schema version, kind, dimensions, variables and attributes checked (``ResultFileError``,
        one line naming the file and its stage, otherwise)."""
        ds = read_netcdf(
            path, kind=self.kind, load=load, require_dims=self.dims, require_vars=self.variables,
            require_attrs=self.attrs,
        )  # fmt: skip
        if self.check is not None:
            self.check(ds, Path(path))
        return ds


# --- data, baseline ---------------------------------------------------------------------------------------------
# `hsitp data prepare`: the prepared scene (the cube too: train and baseline read it; a file without it, such as the
# smoke reference's reduced copy, is no scene to train on)
DATASET = Contract("dataset", ("y", "x"), ("cube", "labels", "partition"))
# `hsitp baseline`: the classical classifiers on one protocol's partition
BASELINE = Contract(
    "baseline",
    ("classifier",),
    ("overall_accuracy", "average_accuracy", "kappa"),
    ("dataset", "protocol", "partition_index"),
)


def dataset_name(path: str | os.PathLike[str]) -> str:
    """The prepared file's ``dataset`` attribute (its stem when it has none), without loading the cube."""
    with DATASET.read(path, load=False) as ds:
        return str(ds.attrs.get("dataset", Path(path).stem))


# --- cost model (modelled, not measured): `hsitp cost TABLE`, one kind per table ------------------------------------
COST = {
    "rho": Contract("cost_rho", ("dataset", "patch", "c_def", "hardware", "P"), ("rho", "threshold", "ccr")),
    "ccr": Contract("cost_ccr", ("case", "P", "hardware", "split", "model"), ("ccr", "relative_throughput")),
    "boundary": Contract("cost_boundary", ("D", "rho", "threshold", "split"), ("region_stated", "region_refined")),
    "scale": Contract("cost_scale", ("tp", "scheme", "hardware", "model"), ("memory", "ccr")),
    "plan": Contract("cost_plan", ("hardware", "dataset", "plan", "P", "checkpointing"), ("peak_memory", "tokens_per_s")),
}  # fmt: skip

# --- bench (measured) -------------------------------------------------------------------------------------------
# `hsitp bench run` (one P), `hsitp bench merge`: what the fits read beyond the dimensions
MICROBENCH = Contract(
    "microbench",
    ("op", "P", "N", "D", "L", "dtype", "mode", "rep"),
    ("time", "time_mean", "coll_time_mean", "coll_bytes", "trace_count", "trace_bytes", "group_size"),
    ("head_padding", "layer_shape"),
)
# `hsitp bench compare`; benchmarks/gpu_check.sh (one GPU)
MODEL_VS_MEASURED = Contract("model_vs_measured", ("op", "P", "N", "D", "L", "dtype"), ("ccr_measured", "held_out"), ("summary",))  # fmt: skip
BENCH_SHARD = Contract("bench_shard", ("op", "P", "rep"), ("time", "t_comp_measured", "ccr_half_measured"))
BENCH_ROOFLINE = Contract("bench_roofline", ("shape", "rep"), ("time", "achieved_flops", "roofline_ratio"))

# The calibration (`hsitp bench calibrate`; read as hardware by `--hardware measured:PATH`): the ring model
# t = alpha + factor(P) * bytes / beta per collective, the achieved FLOP/s per op, and optionally per op the compute
# time model t = overhead + FLOPs / rate + traffic / bandwidth with the collectives' sequence factor (all or none).
COMPUTE_MODEL_VARS = ("compute_overhead", "compute_rate", "mem_bandwidth", "sequence_factor")
BACKENDS = ("gloo", "nccl")


class CalibrationError(HsitpError, ValueError):
    """A calibration that cannot be made or read: a calibration file that does not follow the schema (the message
    names the file and the field), or microbenchmarks too thin to fit one (raised by :mod:`hsitp.bench.calibrate`)."""


def validate_calibration(ds: xr.Dataset, where: str | Path) -> None:
    """Raise CalibrationError naming the file and field where a calibration's values cannot be: a field on other
    dimensions, an unknown collective, beta or a rate not positive, alpha or an overhead negative, half a compute
    model, an unknown backend, world sizes not positive ints."""
    problems = [f"{v} has dims {ds[v].dims}, expected ({d!r},)" for v, d in (
        ("alpha", "collective"), ("beta", "collective"), ("achieved_flops", "op"),
        *((v, "op") for v in COMPUTE_MODEL_VARS)) if v in ds and ds[v].dims != (d,)]  # fmt: skip
    unknown = (
        sorted(set(map(str, ds["collective"].values)) - set(COLLECTIVES)) if "collective" in ds.coords else []
    )
    if unknown:
        problems.append(f"unknown collectives {unknown}; allowed {list(COLLECTIVES)}")
    for var, ok, rule in (
        ("beta", lambda v: v > 0, "> 0 for every collective"),
        ("alpha", lambda v: v >= 0, ">= 0 for every collective"),
        ("achieved_flops", lambda v: v > 0, "> 0 for every op"),
        ("compute_overhead", lambda v: np.isfinite(v) & (v >= 0), "finite and >= 0 for every op"),
        ("sequence_factor", lambda v: np.isfinite(v) & (v > 0), "finite and > 0 for every op"),
        ("compute_rate", lambda v: v > 0, "> 0 (inf allowed) for every op"),
        ("mem_bandwidth", lambda v: v > 0, "> 0 (inf allowed) for every op"),
    ):
        if var in ds and not bool(np.all(ok(np.asarray(ds[var], dtype=float)))):
            problems.append(f"{var} must be {rule}")
    present = [v for v in COMPUTE_MODEL_VARS if v in ds]
    if present and len(present) < len(COMPUTE_MODEL_VARS):
        problems.append(f"has {present} but not all of {list(COMPUTE_MODEL_VARS)} (give all or none)")
    if ds.attrs.get("backend") not in (None, *BACKENDS):
        problems.append(f"backend {ds.attrs['backend']!r} is not one of {BACKENDS}")
    try:
        sizes = json.loads(ds.attrs.get("world_sizes", "[1]"))
        if not sizes or not all(isinstance(p, int) and p >= 1 for p in sizes):
            raise ValueError
    except (ValueError, TypeError):
        problems.append(f"world_sizes must be a JSON list of positive ints, got {ds.attrs['world_sizes']!r}")
    if problems:
        raise CalibrationError(
            f"{where}: not a valid calibration file:\n  "
            + "\n  ".join(problems)
            + "\n(contract: hsitp.contracts."
            "CALIBRATION; the microbenchmark stage writes it, e.g. results/paper/bench/calibration.nc)"
        )


CALIBRATION = Contract(
    "calibration",
    ("collective", "op"),
    ("alpha", "beta", "achieved_flops"),
    ("device", "backend", "dtype", "world_sizes", "fit_points"),
    check=validate_calibration,
)

# --- probe (measured; the estimate with fake tensors) -----------------------------------------------------------
_POINT = ("plan", "P", "g", "L", "N", "checkpointing")
# `hsitp probe run` (one P), `hsitp probe merge`, `hsitp probe estimate`
PROBE_PARTIAL = Contract("probe_partial", (*_POINT, "rank"), ("memory", "peak_allocated"))
PROBE_MEMORY = Contract("probe_memory", (*_POINT, "part", "kind", "rank"), ("memory", "memory_model", "peak_allocated", "device"), ("attention_kernel",))  # fmt: skip
PROBE_THROUGHPUT = Contract(
    "probe_throughput",
    (*_POINT, "repeat"),
    ("sample_time", "ratio_vs_tp", "ratio_vs_tp_median", "ratio_vs_tp_min", "ratio_vs_tp_max", "oversubscribed_note"),
)  # fmt: skip
PROBE_ESTIMATE = Contract(
    "probe_estimate", ("config", "part", "kind"), ("memory", "memory_model", "peak_model")
)
# benchmarks/kernel_check.py: tp under both single-query attention kernels
KERNEL_CHECK = Contract("kernel_check", ("kernel", "rank", "repeat"), ("peak_allocated", "tokens_per_s", "ratio_exact_vs_sdpa"), ("P",))  # fmt: skip

# --- tune, train --------------------------------------------------------------------------------------------------
# `hsitp tune`: one study, read by `hsitp train --recipe` for its best trial
TUNE_STUDY = Contract("tune_study", ("trial",), ("score",), ("plan", "protocol", "best_params"))
# `hsitp train`: one training run (what its summary reads)
TRAIN = Contract(
    "train",
    ("epoch",),
    (
        "oa", "oa_summary", "aa_summary", "kappa_summary", "tokens_per_s_summary", "peak_allocated_summary",
        "ccr_inline_summary",
    ),
    ("dataset", "plan", "P", "g", "protocol", "seed", "partition_index", "steps_per_epoch", "attention_kernel"),
)  # fmt: skip


class Cell(NamedTuple):
    """A training summary's cell: what its replicates (partition, seed) share, the summary's coordinates."""

    dataset: str
    plan: str
    P: int
    g: int
    protocol: str
    N: int  # the crop's spatial tokens (the record's ``tokens``, an entry of train.crops)


# `hsitp train summary`: train/summary.nc, and train/control_summary.nc (the untuned control)
TRAIN_SUMMARY = Contract(
    "train_summary", ("cell",), (*Cell._fields, "oa_mean", "oa_std", "seeds", "oa_verdict")
)
# `hsitp train check`; the ingredients ablation (python -m hsitp.train.ingredients, not in the DAG)
TRAIN_EQUIVALENCE = Contract("train_equivalence", ("check",), ("plan", "P", "g", "oa_check", "oa_equivalent", "d_oa", "passed"))  # fmt: skip
TRAIN_INGREDIENTS = Contract("train_ingredients", ("row",), ("oa_mean", "d_oa_mean", "verdict"))
# `hsitp report reference`: train/runs.nc, one row per training record of a reference
REFERENCE_RUNS = Contract(
    "reference_runs",
    ("run",),
    (
        "name", *Cell._fields, "seed", "partition_index", "control", "recipe", "recipe_hash", "steps", "summary_epochs",
        "ranks", "attention_kernel",
    ),
)  # fmt: skip


def summary_cells(summary: xr.Dataset) -> pd.DataFrame:
    """A training summary's per-cell variables as one table in file order, indexed by :class:`Cell` (a MultiIndex),
    each cell's position on the dimension ``cell`` in column ``i``: ``.loc[cell]`` looks one up, and
    ``.reset_index().itertuples()`` walks the cells with their coordinates and variables as attributes."""
    names = [v for v in summary.data_vars if summary[v].dims == ("cell",)]
    table = pd.DataFrame({k: summary[k].values for k in (*Cell._fields, *names)})
    return table.assign(i=np.arange(summary.sizes["cell"])).set_index(list(Cell._fields))


def flag_meanings(da: xr.DataArray) -> list[str]:
    """A CF flag variable's values by name (``flag_values`` -> ``flag_meanings``; ``oa_verdict`` -> equal, better,
    ...), flattened; a value without a meaning, or a text variable, as its text."""
    values = np.atleast_1d(da.attrs.get("flag_values", [])).tolist()
    names = dict(zip(values, str(da.attrs.get("flag_meanings", "")).split(), strict=False))
    return [names.get(v, str(v)) for v in np.asarray(da.values).ravel().tolist()]

"""The layout of ``microbench.nc``: one partial file per torchrun launch (one P; ``bench.launches`` independent
launches per P), merged along P, the launches at one P pooled (their repeats concatenated) and each launch's own
CCR kept in ``ccr_measured_launch`` (launch, op, P, N, D, L, dtype).

Dims: op, P, N, D, L, dtype, mode (full | compute | comm), rep for layer timings; collective, nbytes, rep for the
collective sweep; traced_collective and traced_group for what each layer issued. A point that was not run (e.g.
an op that does not depend on L, at every L but the first) is NaN. Means, medians, IQRs, exposed communication,
the compute + comm vs full sanity ratio and the measured CCR are derived here, in one place, so a merged file and
a partial file always agree. Every derived time and ratio uses the mean over repeats
(:func:`hsitp.bench.timing.mean_over_repeats`: the estimate that stays consistent between points under the
changing load of a shared machine); the median and IQR say how much the repeats spread.

The file holds measurements (times, and the collectives the layers issued) and the settings they were taken
with: the layer-shape fields the coordinates do not hold (``layer_shape``) and ``head_padding``. Modelled
quantities (FLOPs, memory traffic, ring-model times) are computed where used, from :func:`point_at` and
:func:`trace_records`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.predict import Point
from hsitp.bench.timing import mean_over_repeats, median_iqr
from hsitp.contracts import MICROBENCH, Contract
from hsitp.errors import HsitpError
from hsitp.io import ResultFileError, describe, provenance, variable, write_netcdf
from hsitp.names import COLLECTIVES
from hsitp.settings import BenchSettings
from hsitp.shape import LayerShape

log = logging.getLogger(__name__)

MODES = ("full", "compute", "comm")
TITLE = "hsitp microbenchmarks: measured times of tensor-parallel layers (full, compute-only, comm-only) and collectives"
POINT_DIMS = ("op", "P", "N", "D", "L", "dtype")
# the LayerShape fields that are coordinates; the rest are attrs["layer_shape"]
SWEPT = ("N", "D", "L", "dtype")
# The process groups a layer communicates on, named as the cost model names them: all P ranks, or the channel
# and token axes of the attn_2d mesh.
TRACED_GROUPS = ("tp", "channel", "token")

# Coordinates of a benchmark point, as every bench file (microbench, model_vs_measured, bench_shard) labels them.
POINT_COORD_ATTRS: dict[str, dict[str, str]] = {
    "op": {"long_name": "parallel layer (hsitp.names.OP_NAMES)"},
    "P": {"units": "1", "long_name": "ranks the layer is split over"},
    "N": {"units": "1", "long_name": "spatial tokens"},
    "D": {"units": "1", "long_name": "embedding (feature) dimension"},
    "L": {"units": "1", "long_name": "spectral bands (aggregation ops)"},
    "dtype": {"long_name": "tensor dtype of the layer"},
}
# Everything else a microbench file holds that its builder does not describe where it creates it.
MICROBENCH_ATTRS: dict[str, dict[str, str]] = {
    **POINT_COORD_ATTRS,
    "mode": {
        "long_name": "full = fwd+bwd; compute = collectives replaced by same-shape no-ops; "
        "comm = the traced collectives replayed alone"
    },
    "rep": {"units": "1", "long_name": "repeat index (repeats of all points interleaved)"},
    "collective": {"long_name": "collective of the sweep"},
    "traced_collective": {"long_name": "collective a layer issued"},
    "traced_group": {
        "long_name": "process group a layer communicated on (tp: all P; channel, token: the attn_2d mesh axes)"
    },
    "nbytes": {"units": "B", "long_name": "requested full tensor size"},
    "coll_rep": {"units": "1", "long_name": "repeat index of the collective sweep"},
    "device": {"long_name": "device the launch measured on"},
    "backend": {"long_name": "process-group backend (none at P = 1)"},
    "threads_per_rank": {"units": "1", "long_name": "torch threads per rank"},
    "cores": {"units": "1", "long_name": "cores the launch could run on"},
    "oversubscribed": {
        "long_name": "1 when ranks x threads per rank exceed the cores (or ranks > GPUs)",
        "flag_values": [0, 1],
        "flag_meanings": "no yes",
    },
    "time": {"units": "s", "long_name": "measured wall time per repeat, slowest rank"},
    "bytes_moved": {
        "units": "B",
        "long_name": "bytes of the full tensors of the traced collectives, fwd+bwd",
    },
    "n_collectives": {"units": "1", "long_name": "collective calls traced, fwd+bwd"},
    "trace_count": {"units": "1", "long_name": "traced calls of each collective on each group, fwd+bwd"},
    "trace_bytes": {
        "units": "B",
        "long_name": "full-tensor bytes of the traced calls of each collective on each group",
    },
    "group_size": {
        "units": "1",
        "long_name": "ranks in each process group the layers used (tp: all P; channel, token: the attn_2d mesh)",
    },
    "coll_time": {"units": "s", "long_name": "measured collective time per repeat, slowest rank"},
    "coll_bytes": {"units": "B", "long_name": "full (unsharded) tensor bytes actually moved"},
}


class MergeError(HsitpError):
    """Partial microbenchmark files that cannot be merged (overlapping P or different sweeps)."""


class BenchInputError(HsitpError):
    """An input file of a bench step is missing or was written by something else."""


def read_input(path: str | Path, contract: Contract) -> xr.Dataset:
    """A bench step's input read through its contract (a file an older hsitp wrote is refused naming what it
    lacks), with a user-facing error naming the file and the step that writes it."""
    try:
        return contract.read(path)
    except ResultFileError as exc:
        raise BenchInputError(
            f"{exc} (expected a {contract.kind!r} file: microbench <- `hsitp bench run` + `merge`, "
            "calibration <- `hsitp bench calibrate`)"
        ) from exc


def empty_partial(
    *,
    ops: Sequence[str],
    world_size: int,
    N: Sequence[int],
    D: Sequence[int],
    L: Sequence[int],
    dtypes: Sequence[str],
    repeats: int,
    collectives: Sequence[str],
    sizes_bytes: Sequence[int],
    coll_repeats: int,
    layer_shape: Mapping[str, int],
    head_padding: bool,
) -> xr.Dataset:
    """A one-P dataset of NaNs with every variable in place, filled in by the run.

    ``layer_shape``: the LayerShape fields every point shares (all but N, D, L, dtype); ``head_padding``: the
    ``parallel.head_padding`` the layers were built with. Both are recorded so the file alone says what it timed.
    """
    unknown = set(layer_shape) ^ (set(LayerShape.__dataclass_fields__) - set(SWEPT))
    if unknown:
        raise ValueError(
            f"layer_shape must give exactly the LayerShape fields but {SWEPT}; differs in {unknown}"
        )
    coords = dict(
        zip(POINT_DIMS, (list(ops), [world_size], list(N), list(D), list(L), list(dtypes)), strict=True)
    )
    coords |= {"mode": list(MODES), "rep": np.arange(repeats), "collective": list(collectives)}
    coords |= {"traced_collective": list(COLLECTIVES), "traced_group": list(TRACED_GROUPS)}
    coords |= {"nbytes": list(sizes_bytes), "coll_rep": np.arange(coll_repeats)}
    trace, coll = (*POINT_DIMS, "traced_collective", "traced_group"), ("collective", "P", "nbytes")
    layout = {  # variable: dims
        "time": (*POINT_DIMS, "mode", "rep"),
        "bytes_moved": POINT_DIMS,
        "n_collectives": POINT_DIMS,
        "trace_count": trace,
        "trace_bytes": trace,
        "group_size": ("P", "traced_group"),
        "coll_time": (*coll, "coll_rep"),
        "coll_bytes": coll,
    }
    nan = {k: (dims, np.full([len(coords[d]) for d in dims], np.nan)) for k, dims in layout.items()}
    ds = xr.Dataset(nan, coords=coords)
    ds.attrs["layer_shape"] = dict(layer_shape)
    ds.attrs["head_padding"] = bool(head_padding)
    return describe(ds, MICROBENCH_ATTRS)


def add_summaries(ds: xr.Dataset) -> xr.Dataset:
    """Means, medians, IQRs and the quantities derived from the means (recomputed, never merged)."""
    ds = ds.copy()
    _repeat_stats(ds, "time", "mean over repeats (measured; the estimate every derived quantity uses)",
                  "median over repeats (measured)")  # fmt: skip
    full = ds["time_mean"].sel(mode="full", drop=True)
    comp = ds["time_mean"].sel(mode="compute", drop=True)
    comm = ds["time_mean"].sel(mode="comm", drop=True)
    ds["exposed_comm"] = (full - comp).assign_attrs(
        units="s", long_name="exposed communication = full - compute-only (measured)"
    )
    # Ratios of times: xarray would carry the operands' units ("s") over, so every ratio names its own.
    ds["sanity_ratio"] = ((comp + comm) / full).assign_attrs(
        units="1", long_name="(compute-only + collective-only) / full; near 1 when the decomposition holds"
    )
    ds["ccr_measured"] = (comm / comp).assign_attrs(
        units="1", long_name="measured CCR = collective-only time / compute-only time"
    )
    ds["ccr_exposed"] = (ds["exposed_comm"] / comp).assign_attrs(
        units="1", long_name="exposed-communication CCR = (full - compute-only) / compute-only"
    )
    # Spread of the CCR itself: each repeat times compute and comm back to back, so their ratio is a sample.
    with np.errstate(divide="ignore", invalid="ignore"):
        per_rep = ds["time"].sel(mode="comm", drop=True) / ds["time"].sel(mode="compute", drop=True)
    _, ccr_iqr = median_iqr(per_rep.values, axis=-1)
    what = "inter-quartile range over repeats of the per-repeat CCR (comm / compute)"
    ds["ccr_measured_iqr"] = variable(per_rep.dims[:-1], ccr_iqr, what)
    _repeat_stats(ds, "coll_time", "mean collective time over repeats (the calibration's estimate)",
                  "median collective time over repeats")  # fmt: skip
    return ds


def _repeat_stats(ds: xr.Dataset, var: str, mean: str, median: str) -> None:
    """``{var}_mean``, ``_median`` and ``_iqr`` over the last dimension (the repeats) of ``var``, in place."""
    med, iqr = median_iqr(ds[var].values, axis=-1)
    dims = ds[var].dims[:-1]
    ds[f"{var}_mean"] = variable(dims, mean_over_repeats(ds[var].values, axis=-1), mean, "s")
    ds[f"{var}_median"] = variable(dims, med, median, "s")
    ds[f"{var}_iqr"] = variable(dims, iqr, "inter-quartile range over repeats", "s")


def write_partial(
    ds: xr.Dataset, path: str | Path, *, settings: BenchSettings, attrs: Mapping[str, Any]
) -> Path:
    """Write one torchrun launch's results; per-run facts become P-indexed variables so they survive the merge."""
    ds = add_summaries(ds)
    p = int(ds["P"].values[0])
    for key in ("device", "backend"):
        ds[key] = ("P", np.array([str(attrs[key])], dtype=object))
    for key in ("threads_per_rank", "cores", "oversubscribed"):
        ds[key] = ("P", np.array([int(attrs[key])]))
    describe(ds, MICROBENCH_ATTRS)
    ds.attrs.update({"world_size": p, "measured": "yes", **{k: attrs[k] for k in ("device", "backend")}})
    title = f"{TITLE}, one launch at P = {p}"
    prov = provenance(config=settings.config, extra={"run": dict(attrs)})
    return write_netcdf(ds, path, kind=MICROBENCH.kind, prov=prov, title=title)


def _launch(ds: xr.Dataset) -> int:
    """Which independent launch at its P a partial file is (files from before ``bench.launches``: launch 0)."""
    return int(ds.attrs.get("launch", 0))


def _pool_launches(launches: Sequence[xr.Dataset]) -> xr.Dataset:
    """One P's launches as one partial: their raw repeats concatenated (``rep``, ``coll_rep`` renumbered), the
    traces and per-launch facts of the first launch (traces are the same in every launch), oversubscribed if any
    launch was."""
    raw = [
        ds.drop_vars([v for v in ds.data_vars if v.startswith(("time_", "coll_time_", "ccr_measured_"))])
        for ds in launches
    ]
    if len(raw) == 1:
        return raw[0]
    time = xr.concat([r["time"] for r in raw], dim="rep", combine_attrs="override")
    coll = xr.concat([r["coll_time"] for r in raw], dim="coll_rep", combine_attrs="override")
    pooled = raw[0].drop_vars(["time", "coll_time", "rep", "coll_rep"])
    pooled["time"] = time.assign_coords(rep=np.arange(time.sizes["rep"]))
    pooled["coll_time"] = coll.assign_coords(coll_rep=np.arange(coll.sizes["coll_rep"]))
    pooled["oversubscribed"] = xr.concat([r["oversubscribed"] for r in raw], dim="launch").max("launch")
    return describe(pooled, MICROBENCH_ATTRS)


def _ccr_by_launch(by_p: Mapping[int, Sequence[xr.Dataset]]) -> xr.DataArray:
    """(launch, op, P, N, D, L, dtype): each launch's own measured CCR (its comm mean / compute mean), as its
    partial file already holds it (:func:`write_partial` derived it with :func:`add_summaries`)."""
    per_p = []
    for launches in by_p.values():
        ccr = [ds["ccr_measured"] for ds in launches]
        per_p.append(xr.concat(ccr, dim="launch").assign_coords(launch=[_launch(ds) for ds in launches]))
    out = xr.concat(per_p, dim="P").sortby("P")
    return out.assign_attrs(
        units="1",
        long_name="measured CCR of each independent launch (comm mean / compute mean over that launch's repeats)",
    )


def merge_partials(paths: Sequence[str | Path], out: str | Path, settings: BenchSettings) -> Path:
    """Merge the partial files (one per P and launch) into ``microbench.nc``; the sweeps must match exactly.

    Launches at one P (``bench.launches``, each its own torchrun) are pooled: every summary is over all their
    repeats. ``ccr_measured_launch`` keeps each launch's own CCR: the run-to-run spread that the repeats inside one
    launch do not show, and that the audit's bench sub-checks decide by (docs/audit.md).
    """
    if not paths:
        raise MergeError("bench merge: no partial files given")
    parts = [read_input(p, MICROBENCH) for p in paths]
    by_p = _launches_by_p(paths, parts)
    _check_same_sweep(paths, parts, by_p)
    # combine_attrs="override": every variable keeps the first file's units and long_name (the files' own
    # attributes are replaced below).
    raw = [_pool_launches(v) for v in by_p.values()]
    merged = xr.concat(raw, dim="P", data_vars="minimal", coords="minimal", combine_attrs="override")
    merged = add_summaries(merged.sortby("P"))
    merged["ccr_measured_launch"] = _ccr_by_launch(by_p)
    merged["launch"].attrs.update(units="1", long_name="independent launch (its own torchrun) at each P")
    merged.attrs = _merged_attrs(merged, by_p, parts)
    _log_merged(merged.attrs)
    prov = provenance(config=settings.config, inputs={Path(p).name: p for p in paths})
    sizes = ", ".join(str(p) for p in merged.attrs["world_sizes"])
    path = write_netcdf(merged, out, kind=MICROBENCH.kind, prov=prov, title=f"{TITLE}, P = {sizes}")
    log.info("wrote %s (P = %s, %d launch(es) each)", path, sizes, merged.attrs["launches"])
    return path


def _launches_by_p(paths: Sequence[str | Path], parts: Sequence[xr.Dataset]) -> dict[int, list[xr.Dataset]]:
    """The partial files by P (ascending), each P's launches in launch order; one P per file, each launch once,
    the same launches at every P."""
    seen: dict[tuple[int, int], str] = {}
    by_p: dict[int, list[xr.Dataset]] = {}
    for path, ds in zip(paths, parts, strict=True):
        measured = int(np.isfinite(ds["time"].sel(mode="full")).any("rep").sum())
        where = (",".join(str(int(p)) for p in ds["P"].values), _launch(ds), ds.attrs.get("device", "?"))
        log.info("read %s: P=%s launch %d on %s, %d layer points measured", path, *where, measured)
        if ds.sizes["P"] != 1:
            raise MergeError(f"{path}: holds P = {ds['P'].values.tolist()}; a partial file holds one P")
        key = (int(ds["P"].values[0]), _launch(ds))
        if key in seen:
            raise MergeError(
                f"P={key[0]} launch {key[1]} appears in both {seen[key]} and {path}; pass each launch's file once"
            )
        seen[key] = str(path)
        by_p.setdefault(key[0], []).append(ds)
    by_p = {p: sorted(v, key=_launch) for p, v in sorted(by_p.items())}
    launch_sets = {p: [_launch(ds) for ds in v] for p, v in by_p.items()}
    if len({tuple(v) for v in launch_sets.values()}) > 1:
        raise MergeError(
            f"bench merge: every P needs the same launches (bench.launches); got {launch_sets} (P: launches)"
        )
    return by_p


def _check_same_sweep(
    paths: Sequence[str | Path], parts: Sequence[xr.Dataset], by_p: Mapping[int, Sequence[xr.Dataset]]
) -> None:
    """Refuse partials of different sweeps, layer shapes or padding, and launches at one P on different devices."""
    ref = parts[0]
    for path, ds in zip(paths[1:], parts[1:], strict=True):
        for dim in ("op", "N", "D", "L", "dtype", "mode", "rep", "collective", "nbytes", "coll_rep"):
            if not np.array_equal(ds[dim].values, ref[dim].values):
                raise MergeError(
                    f"{path}: its {dim} coordinate {ds[dim].values.tolist()} differs from {paths[0]}'s "
                    f"{ref[dim].values.tolist()}; re-run every P with the same bench config"
                )
        for key in ("layer_shape", "head_padding"):
            if ds.attrs.get(key) != ref.attrs.get(key):
                raise MergeError(
                    f"{path}: its {key} {ds.attrs.get(key)} differs from {paths[0]}'s {ref.attrs.get(key)}; "
                    "re-run every P with the same bench and parallel config"
                )
    for p, launches in by_p.items():
        devices = {str(ds["device"].values[0]) for ds in launches}
        if len(devices) > 1:
            raise MergeError(
                f"P={p}: its launches ran on different devices {sorted(devices)}; pool like with like"
            )


def _merged_attrs(
    merged: xr.Dataset, by_p: Mapping[int, Sequence[xr.Dataset]], parts: Sequence[xr.Dataset]
) -> dict[str, Any]:
    """The merged file's attributes: devices, backends and sizes over every P, each P's sanity-ratio spread,
    the skipped points (the sweep is the same in every launch: once, from each P's first launch)."""
    sanity = {}
    for p in merged["P"].values.tolist():
        r = merged["sanity_ratio"].sel(P=p).values
        r = r[np.isfinite(r)]
        if r.size:
            q10, q50, q90 = np.percentile(r, [10, 50, 90])
            sanity[str(p)] = {"median": float(q50), "q10": float(q10), "q90": float(q90), "n": int(r.size)}
    backends = sorted(set(merged["backend"].values.tolist()) - {"none"}) or ["none"]
    return {
        "device": "; ".join(sorted(set(merged["device"].values.tolist()))),
        "backend": ",".join(backends),
        "world_sizes": [int(p) for p in merged["P"].values],
        "threads_per_rank": sorted({int(t) for t in merged["threads_per_rank"].values}),
        "oversubscribed_P": [
            int(p) for p in merged["P"].values[merged["oversubscribed"].values.astype(bool)]
        ],
        "sanity_ratio_by_P": sanity,
        "skipped_points": [
            pt for v in by_p.values() for pt in json.loads(v[0].attrs.get("skipped_points", "[]"))
        ],
        "mesh_2d": {str(int(ds["P"].values[0])): json.loads(ds.attrs.get("mesh_2d", "null")) for ds in parts},
        "layer_shape": json.loads(parts[0].attrs["layer_shape"]),
        "head_padding": int(parts[0].attrs["head_padding"]),
        "launches": len(next(iter(by_p.values()))),
        "measured": "yes",
        "note": "timings and traced collectives are measured on the device named above; nothing here is modelled",
    }


def _log_merged(attrs: Mapping[str, Any]) -> None:
    """Log each P's sanity ratio, and warn of skipped points and oversubscribed P."""
    for p, s in attrs["sanity_ratio_by_P"].items():
        log.info(
            "P=%s: sanity ratio (compute + comm) / full median %.2f (10-90 %%: %.2f-%.2f) over %d points",
            *(p, s["median"], s["q10"], s["q90"], s["n"]),
        )
    if attrs["skipped_points"]:
        n = len(attrs["skipped_points"])
        log.warning("%d points were skipped by the runs (listed in the skipped_points attribute)", n)
    if attrs["oversubscribed_P"]:
        log.warning("oversubscribed (ranks x threads > cores) at P = %s", attrs["oversubscribed_P"])


def point_at(mb: xr.Dataset, *, op: str, P: int, N: int, D: int, L: int, dtype: str) -> Point:
    """The benchmark point at these coordinates of a microbench file, with the shape fields its run fixed (a file
    without them is refused when read: :data:`hsitp.contracts.MICROBENCH` requires ``layer_shape``)."""
    fixed = mb.attrs["layer_shape"]  # a mapping in memory, JSON once written
    fixed = json.loads(fixed) if isinstance(fixed, str) else fixed
    shape = LayerShape(N=int(N), D=int(D), L=int(L), dtype=str(dtype), **fixed)
    return Point(str(op), int(P), shape)


def head_padding(mb: xr.Dataset) -> bool:
    """The ``parallel.head_padding`` the file's layers were built with."""
    return bool(int(mb.attrs["head_padding"]))


def trace_records(point: xr.Dataset) -> list[tuple[str, int, float, int]]:
    """(collective, group size, full-tensor bytes, calls) of every collective and group one point's layer issued
    (``point``: the file at one op, P, N, D, L, dtype), as :func:`hsitp.cost.refined.collectives_time` takes."""
    out = []
    for c in point["traced_collective"].values.tolist():
        for g in point["traced_group"].values.tolist():
            calls = float(point["trace_count"].sel(traced_collective=c, traced_group=g))
            if np.isfinite(calls) and calls > 0:
                nbytes = float(point["trace_bytes"].sel(traced_collective=c, traced_group=g))
                size = int(point["group_size"].sel(traced_group=g))
                out.append((str(c), size, nbytes, int(calls)))
    return out

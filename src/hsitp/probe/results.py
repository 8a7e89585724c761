"""The probe's files: one partial file per torchrun launch (``probe_partial``), merged into ``memory.nc``
(``probe_memory``: measured per-rank memory by part and kind beside the memory model's) and ``throughput.nc``
(``probe_throughput``: every plan at one P timed interleaved in one run, tokens/s and its ratio to tp as median,
min and max over rounds; per point, step time and time per part in both modes, collectives = full - compute)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.contracts import PROBE_MEMORY, PROBE_PARTIAL, PROBE_THROUGHPUT
from hsitp.errors import HsitpError
from hsitp.io import describe, provenance, write_netcdf
from hsitp.names import DCHAG_PLANS
from hsitp.probe.grid import Point
from hsitp.probe.tracker import KINDS, PARTS, PHASES
from hsitp.settings import ProbeModel, ProbeSettings

TIME_PARTS = (*PARTS, "other")
MODES = ("full", "compute")


@dataclass(frozen=True)
class RankResult:
    """One rank's numbers for one point: its step's memory and peaks (``measure_step``; None: not measured on
    this device) and its timed steps."""

    memory: np.ndarray  # (part, kind) bytes
    peak_allocated: int | None
    peak_reserved: int | None
    transient: int | None
    peak_part: str
    peak_phase: str
    peak_categories: dict[str, int]
    method: str
    part_time: np.ndarray  # (mode, part incl. other, phase, step) s
    step_time: np.ndarray  # (mode, step) s


@dataclass(frozen=True)
class PointResult:
    """One point's results (rank 0 writes them): every rank's, the dtype it ran in, the tokens of one step, and
    its throughput-phase samples (s per step, slowest rank) once that phase ran."""

    point: Point
    ranks: list[RankResult]
    dtype: str
    tokens_per_step: int
    sample_time: list[float] | None = None


# units and long_name of the variables and coordinates of the probe's files (partial, memory, throughput,
# estimate) that their writers do not describe where they make them (io.describe, keep=True: a writer's own stays).
ATTRS: dict[str, dict[str, str]] = {
    # coordinates: one measured (or estimated) point
    "plan": {"long_name": "parallel plan (dense, tp, dchag_l, dchag_c, token)"},
    "P": {"units": "1", "long_name": "ranks in the tensor-parallel group"},
    "g": {"units": "1", "long_name": "D-CHAG band groups per rank (plans without groups: repeated)"},
    "L": {"units": "1", "long_name": "spectral bands of the input"},
    "N": {"units": "1", "long_name": "spatial tokens per crop"},
    "D": {"units": "1", "long_name": "token width"},
    "depth": {"units": "1", "long_name": "transformer blocks"},
    "batch": {"units": "1", "long_name": "crops per step"},
    "dtype": {"long_name": "parameter and activation dtype"},
    "checkpointing": {"long_name": "activation-checkpointing policy"},
    "config": {"long_name": "estimated configuration (grid/plan/P/g/L/N/policy or dchag/name/plan/policy)"},
    "part": {"long_name": "model part (tokenisation, aggregation, blocks, head)"},
    "kind": {"long_name": "kind of memory (parameters, gradients, optimizer, activations, transient)"},
    "rank": {"units": "1", "long_name": "rank in the group"},
    "time_part": {"long_name": "model part a time is spent in ('other': the rest of the step)"},
    "phase": {"long_name": "training-step phase (forward, backward, update)"},
    "mode": {"long_name": "'full': the step as run; 'compute': the same step on a no-op twin group"},
    "step": {"units": "1", "long_name": "timed step (after warm-up)"},
    "repeat": {
        "units": "1",
        "long_name": "interleaved round of the throughput phase (every plan timed once per round)",
    },
    # memory
    "memory": {
        "units": "bytes",
        "long_name": "measured per-rank memory of one training step by part and kind",
    },
    "peak_allocated": {"units": "bytes", "long_name": "peak memory allocated during the step"},
    "peak_reserved": {"units": "bytes", "long_name": "CUDA only"},  # the allocator's max_memory_reserved
    "transient": {"units": "bytes", "long_name": "peak minus steady memory: temporaries of the step"},
    "peak_part": {"long_name": "part/phase in which the peak was reached"},
    "peak_model": {"units": "bytes", "long_name": "memory model's step peak, rank 0"},
    # time
    "part_time": {"units": "s", "long_name": "median time per part, phase and rank"},
    "step_time": {"units": "s", "long_name": "step time of the slowest rank"},
    "tokens_per_step": {"units": "1", "long_name": "tokens per step (batch x N)"},
    "sample_time": {
        "units": "s",
        "long_name": "seconds per training step (slowest rank) of each interleaved round",
    },
    # the launch, per P
    "device": {"long_name": "device the launch ran on"},
    "backend": {"long_name": "process-group backend"},
    "threads_per_rank": {"units": "1", "long_name": "torch threads per rank"},
    "cores": {"units": "1", "long_name": "CPU cores available to the launch"},
    "oversubscribed": {"units": "1", "long_name": "1 when ranks x threads exceeded the cores"},
}


POINT_DIMS = ("plan", "P", "g", "L", "N", "checkpointing")  # one measured point of a partial file
PARTIAL_DIMS: dict[str, tuple[str, ...]] = {  # a partial file's variables: their dimensions after the point's
    "memory": ("part", "kind", "rank"),
    "peak_allocated": ("rank",),
    "peak_reserved": ("rank",),
    "transient": ("rank",),
    "peak_part": ("rank",),
    "part_time": ("mode", "time_part", "phase", "rank"),
    "step_time": ("mode", "step"),
    "tokens_per_step": (),
    "sample_time": ("repeat",),
}
# per P: how its launch ran
LAUNCH_VARS = ("device", "backend", "threads_per_rank", "cores", "oversubscribed")


class ProbeMergeError(HsitpError, ValueError):
    """Partial probe files that cannot be merged (same P twice, different grids)."""


def _coords(results: list[PointResult], pc: ProbeSettings, P: int) -> dict[str, list]:  # noqa: N803
    return {
        "plan": [p for p in pc.plans if any(r.point.plan == p for r in results)],
        "P": [P],
        "g": [int(g) for g in pc.groups],
        "L": [int(v) for v in pc.L],
        "N": [int(v) for v in pc.N],
        "checkpointing": list(pc.checkpointing),
        "part": list(PARTS),
        "kind": list(KINDS),
        "rank": list(range(P)),
        "time_part": list(TIME_PARTS),
        "phase": list(PHASES),
        "mode": list(MODES),
        "step": list(range(int(pc.steps))),
        "repeat": list(range(int(pc.throughput.repeats))),
    }


def write_partial(
    results: list[PointResult],
    *,
    settings: ProbeSettings,
    attrs: Mapping[str, Any],
    out: Path,
    world_size: int,
) -> Path:
    """One launch's points as a dataset with a length-1 P dimension; plans without band groups (dense, tp,
    token) are measured once and repeated along g."""
    P = world_size  # noqa: N806
    c = _coords(results, settings, P)
    shape = tuple(len(c[d]) for d in POINT_DIMS)
    arrays = {k: np.full((*shape, *(len(c[d]) for d in dims)), np.nan) for k, dims in PARTIAL_DIMS.items()}
    arrays["peak_part"] = np.full((*shape, P), "", dtype=object)
    methods: set[str] = set()
    categories: dict[str, Any] = {}
    for res in results:
        pt = res.point
        for g in [pt.g] if pt.plan in DCHAG_PLANS else c["g"]:
            point = (pt.plan, 0, g, pt.L, pt.N, pt.checkpointing)
            idx = tuple(0 if d == "P" else c[d].index(v) for d, v in zip(POINT_DIMS, point, strict=True))
            _fill_point(arrays, idx, res)
            for r, rr in enumerate(res.ranks):
                methods.add(rr.method)
                key = f"{pt.plan}/P{P}/g{g}/L{pt.L}/N{pt.N}/{pt.checkpointing}/rank{r}"
                categories[key] = rr.peak_categories
    arrays["peak_part"] = arrays["peak_part"].astype(str)
    section = {**settings.config.probe.as_json(), "attention_kernel": settings.attention_kernel}
    data = {k: ((*POINT_DIMS, *PARTIAL_DIMS[k]), v) for k, v in arrays.items()}
    per_p = {k: ("P", np.array([attrs[k]])) for k in ("device", "backend", "threads_per_rank", "cores")}
    per_p["oversubscribed"] = ("P", np.array([int(attrs["oversubscribed"])]))
    ds = xr.Dataset(
        {**data, **per_p},
        coords=c,
        attrs={
            "probe": json.dumps(section, default=str),
            "method": "; ".join(sorted(methods)),
            "peak_categories": json.dumps(categories),
            "dtype": results[0].dtype if results else "",
            "world_size": P,
            "interleave_orders": json.dumps(attrs.get("interleave_orders", {})),
        },
    )
    run = {k: v for k, v in attrs.items() if k != "interleave_orders"}
    # the section as the runner resolved it: the kernel of this device
    prov = provenance(config={**settings.config.as_json(), "probe": section}, extra={"run": run})
    describe(ds, ATTRS, keep=True)
    return write_netcdf(
        ds, out, kind=PROBE_PARTIAL.kind, prov=prov, title=f"memory probe, one launch at P = {P}"
    )


def _fill_point(arrays: Mapping[str, np.ndarray], idx: tuple[int, ...], res: PointResult) -> None:
    """Write one measured point's numbers at ``idx`` (its position on the point dimensions) of the partial's
    arrays: per rank its memory, peaks and median part times; the slowest rank's step and sample times."""
    arrays["tokens_per_step"][idx] = res.tokens_per_step
    for r, rr in enumerate(res.ranks):
        arrays["memory"][idx][..., r] = rr.memory
        for key in ("peak_allocated", "peak_reserved", "transient"):  # None: not measured on this device
            value = getattr(rr, key)
            arrays[key][idx][r] = np.nan if value is None else value
        arrays["peak_part"][idx][r] = f"{rr.peak_part}/{rr.peak_phase}"
        arrays["part_time"][idx][..., r] = np.median(rr.part_time, axis=-1)
    arrays["step_time"][idx] = np.max([rr.step_time for rr in res.ranks], axis=0)  # slowest rank per step
    if res.sample_time is not None:  # the throughput phase (slowest rank already)
        arrays["sample_time"][idx] = res.sample_time


def _read(path: str | Path) -> xr.Dataset:
    try:
        return PROBE_PARTIAL.read(path)
    except HsitpError as exc:
        raise ProbeMergeError(f"{exc} (expected a partial file of `hsitp probe run`)") from exc


def merge(
    paths: Sequence[str | Path],
    *,
    memory_out: str | Path,
    throughput_out: str | Path,
    settings: ProbeSettings,
) -> tuple[Path, Path]:
    """Concatenate the per-P files along P (rank padded with NaN to the largest P), add the memory model beside
    the measurement, and split memory from throughput."""
    if not paths:
        raise ProbeMergeError("probe merge: no partial files given")
    parts = [_read(p) for p in paths]
    merged = _concat(paths, parts, settings.plans)
    pc = json.loads(parts[0].attrs["probe"])
    common = _merged_attrs(merged, parts, pc)
    mem = _memory(merged, parts, pc, common)
    orders = {int(ds["P"].values[0]): json.loads(ds.attrs.get("interleave_orders", "{}")) for ds in parts}
    thr = _throughput(merged, orders)
    tc = pc.get("throughput", {})
    thr.attrs["interleave"] = (
        f"per P, every plan built at once; {tc.get('warmup')} untimed warm-up step(s) per plan, then "
        f"{tc.get('repeats')} rounds of one sample of {tc.get('steps')} step(s) per plan, the order reversed every "
        "other round; same process, same threads"
    )
    thr.attrs.update(common)
    prov = provenance(config=settings.config, inputs={str(p): p for p in paths})
    describe(mem, ATTRS, keep=True)
    describe(thr, ATTRS, keep=True)
    m = write_netcdf(
        mem, memory_out, kind=PROBE_MEMORY.kind, prov=prov, title="per-rank memory by part and kind"
    )
    t = write_netcdf(thr, throughput_out, kind=PROBE_THROUGHPUT.kind, prov=prov, title="probe throughput")
    return m, t


def _concat(paths: Sequence[str | Path], parts: Sequence[xr.Dataset], plans: Sequence[str]) -> xr.Dataset:
    """The partial files along P, sorted, rank padded with NaN to the largest P, plans in the config's order;
    refused when a P comes twice or the grids differ."""
    seen: dict[int, str] = {}
    for path, ds in zip(paths, parts, strict=True):
        p = int(ds["P"].values[0])
        if p in seen:
            raise ProbeMergeError(f"P={p} appears in both {seen[p]} and {path}; pass each launch's file once")
        seen[p] = str(path)
        for dim in ("g", "L", "N", "checkpointing", "step", "repeat"):
            if not np.array_equal(ds[dim].values, parts[0][dim].values):
                raise ProbeMergeError(
                    f"{path}: its {dim} coordinate {ds[dim].values.tolist()} differs from {paths[0]}'s "
                    f"{parts[0][dim].values.tolist()}; re-run every P with the same probe config"
                )
    # strings as objects: numpy would cut every label to the shortest file's width ('dense' -> 'dchag')
    padded = [
        ds.assign_coords(
            plan=ds["plan"].values.astype(object), checkpointing=ds["checkpointing"].values.astype(object)
        )
        .assign(peak_part=ds["peak_part"].astype(object))
        .reindex(rank=list(range(max(seen))))
        for ds in parts
    ]
    merged = xr.concat(padded, dim="P", join="outer", combine_attrs="drop_conflicts", fill_value=np.nan)
    merged = merged.sortby("P")
    for var in merged.variables.values():  # the first file's string widths would cut longer labels on write
        var.encoding = {}
    return merged.reindex(plan=[p for p in plans if p in merged["plan"].values])


def _merged_attrs(merged: xr.Dataset, parts: Sequence[xr.Dataset], pc: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes memory.nc and throughput.nc share: the probe's settings, dtype, sizes, method and launches."""
    run_attrs = {k: merged[k].values.tolist() for k in LAUNCH_VARS}
    return {
        "probe": json.dumps(pc),
        "dtype": parts[0].attrs.get("dtype", "float32"),
        "world_sizes": merged["P"].values.tolist(),
        "method": "; ".join(sorted({str(ds.attrs.get("method", "")) for ds in parts})),
        "run": json.dumps(run_attrs),
        "measured": "yes (real tensors under torchrun)",
        "attention_kernel": ProbeModel.of(pc).attention_kernel,  # the single-query attentions' kernel
    }


def _memory(
    merged: xr.Dataset, parts: Sequence[xr.Dataset], pc: Mapping[str, Any], common: Mapping[str, Any]
) -> xr.Dataset:
    """memory.nc: the measured memory beside the memory model's, each rank's peak categories, the launches."""
    from hsitp.probe.model import add_model

    mem = merged[["memory", "peak_allocated", "peak_reserved", "transient", "peak_part", "tokens_per_step"]]
    devices = {int(P): str(d) for P, d in zip(merged["P"].values, merged["device"].values, strict=True)}  # noqa: N806
    mem = add_model(mem, ProbeModel.of(pc), common["dtype"], devices)
    mem.attrs.update(common)
    mem.attrs["peak_categories"] = json.dumps(
        {k: v for ds in parts for k, v in json.loads(ds.attrs.get("peak_categories", "{}")).items()}
    )
    for key in LAUNCH_VARS:
        mem[key] = merged[key]
    return mem


def oversubscribed_note(P: int, threads_per_rank: int, cores: int) -> str:  # noqa: N803
    """'oversubscribed: 4 ranks on 2 cores' where P ranks x threads exceed the cores, else ''."""
    if P * threads_per_rank <= cores:
        return ""
    threads = f" x {threads_per_rank} threads" if threads_per_rank > 1 else ""
    return f"oversubscribed: {P} ranks{threads} on {cores} core{'s' if cores != 1 else ''}"


def _throughput(merged: xr.Dataset, orders: Mapping[int, Any]) -> xr.Dataset:
    """The interleaved throughput (every plan at one P timed in one run: tokens/s and its ratio to tp per round,
    median with min and max), and per point the step time and time per part with collectives, compute alone and
    the difference (one point at a time: compare within a point only)."""
    step = merged["step_time"]
    med = step.median("step")
    part = merged["part_time"].sum("phase")  # (…, mode, time_part, rank)
    full, comp = part.sel(mode="full"), part.sel(mode="compute")
    sample = merged["sample_time"]
    rate = merged["tokens_per_step"] / sample  # tokens/s per round (all ranks together)
    has_tp = "tp" in [str(p) for p in merged["plan"].values]
    # tp is repeated along g, so every g of a D-CHAG plan has its reference
    ratio = rate / rate.sel(plan="tp", drop=True) if has_tp else xr.full_like(rate, np.nan)
    rnote = "tokens/s of the plan / tokens/s of tp at the same P, L, N and checkpointing, in the same round"
    within = "interleaved in one run with every plan at this P (hsitp.bench.interleave)"
    notes = [
        oversubscribed_note(int(P), int(t), int(c))
        for P, t, c in zip(  # noqa: N806
            merged["P"].values, merged["threads_per_rank"].values, merged["cores"].values, strict=True
        )
    ]
    ds = xr.Dataset(
        {
            "sample_time": sample,
            "sample_time_median": sample.median("repeat").assign_attrs(
                units="s", long_name="median over interleaved rounds of seconds per step (slowest rank)"
            ),
            "tokens_per_s": (merged["tokens_per_step"] / sample.median("repeat")).assign_attrs(
                units="1/s",
                long_name="B N / median interleaved step time (all ranks together)",
                comparable=f"across plans at one P: {within}",
            ),
            "ratio_vs_tp": ratio.assign_attrs(units="1", long_name=f"{rnote}, per round"),
            "ratio_vs_tp_median": ratio.median("repeat").assign_attrs(
                units="1", long_name=f"median over rounds of {rnote}", comparable=within
            ),
            "ratio_vs_tp_min": ratio.min("repeat").assign_attrs(units="1", long_name=f"min over rounds of {rnote}"),
            "ratio_vs_tp_max": ratio.max("repeat").assign_attrs(units="1", long_name=f"max over rounds of {rnote}"),
            "oversubscribed_note": ("P", np.array(notes, dtype=object), {
                "long_name": "'oversubscribed: P ranks on C cores' where ranks x threads exceed the cores: no "
                "conclusion rests on these timings",
            }),
            "step_time": step.assign_attrs(comparable="within one point only (full vs compute mode)"),
            "step_time_median": med.assign_attrs(
                units="s",
                long_name="median over steps of the slowest rank (one point at a time)",
                comparable="within one point only (full vs compute mode)",
            ),
            "part_time": merged["part_time"],
            "time_with_collectives": full.assign_attrs(units="s"),
            "time_compute": comp.assign_attrs(units="s", long_name="the same step on the no-op twin group"),
            "time_collectives": (full - comp).assign_attrs(
                units="s", long_name="full - compute per part: collectives as they show in the step"
            ),
        }
    )  # fmt: skip
    for key in LAUNCH_VARS:
        ds[key] = merged[key]
    ds.attrs["interleave_orders"] = json.dumps({str(k): v for k, v in orders.items()})
    return ds

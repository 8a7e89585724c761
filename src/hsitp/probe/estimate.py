"""``hsitp probe estimate``: per-rank memory of configurations far beyond this machine, estimated with fake tensors.

The probe's own step (``probe.build``) runs under ``FakeTensorMode`` on a fake process group (``torch.testing.
_internal.distributed.fake_pg``: collectives return at once without moving data) as rank 0 of P, in one process:
shapes, dtypes and every allocation are real, no byte is allocated. ``measure_step`` then reports state bytes,
saved activations by part and MemTracker's peak exactly as on real tensors. What the estimate does not include:
the CUDA caching allocator's fragmentation and rounding (``max_memory_reserved`` is above the allocated peak),
the CUDA context and NCCL's buffers, and kernel workspaces (cuBLAS, flash attention) that do not go through
PyTorch's allocator as tensors. Beside each estimate: the memory model (``cost/memory.py``), and for D-CHAG's
synthetic configs the paper's reported rank-0 ``max_memory_reserved``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.contracts import PROBE_ESTIMATE
from hsitp.cost.paper import DCHAG_SETTINGS
from hsitp.io import describe, provenance, variable, write_netcdf
from hsitp.models.config import config_attention_kernel
from hsitp.names import DCHAG_PLANS
from hsitp.probe.grid import Point, estimate_points
from hsitp.probe.results import ATTRS
from hsitp.probe.tracker import KINDS, PARTS
from hsitp.settings import ProbeModel, ProbeSettings

log = logging.getLogger(__name__)


def estimate_one(pt: Point, sec: ProbeModel, seed: int = 0) -> Any:
    """StepMemory of rank 0 of ``pt`` with fake tensors on a fake process group of size P."""
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    from hsitp.parallel.groups import TPGroup
    from hsitp.probe.build import build_point
    from hsitp.probe.tracker import measure_step

    dtype = getattr(torch, sec.dtype)
    started = False
    if pt.P > 1:
        if dist.is_initialized():
            raise RuntimeError("probe estimate: a process group already exists in this process")
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=pt.P)
        started = True
    try:
        tp = TPGroup.from_process_group(dist.group.WORLD) if pt.P > 1 else TPGroup.single()
        with FakeTensorMode():
            built = build_point(pt, sec, tp, dtype=dtype, device=None, seed=seed, fake=True)
            built.step()  # AdamW's state
            return measure_step(
                built.model, built.step, optimizer=built.optimizer, device=torch.device("cpu")
            )
    finally:
        if started:
            dist.destroy_process_group()


def run_estimate(s: ProbeSettings, out: str | Path) -> Path:
    """Estimate every point of ``probe.estimate`` with fake tensors, beside the memory model; write ``out``."""
    pts = estimate_points(s.estimate)
    # the estimate prices the paper's GPUs: "auto" is the kernel CUDA runs
    kernel = config_attention_kernel(s.config, "cuda")
    ds = _dataset(pts, _estimate_all(pts, kernel, seed=s.seed), kernel)
    describe(ds, ATTRS, keep=True)
    prov = provenance(config=s.config)
    return write_netcdf(ds, out, kind=PROBE_ESTIMATE.kind, prov=prov, title="probe estimate (fake tensors)")


def _estimate_all(pts: list[tuple[str, Point, ProbeModel]], kernel: str, seed: int) -> dict[str, np.ndarray]:
    """Per point: memory by (part, kind) and peak, estimated and modelled, and the D-CHAG paper's reported peak."""
    from hsitp.cost.memory import plan_memory
    from hsitp.cost.paper import DCHAG_REFERENCE
    from hsitp.probe.model import size_of

    n = len(pts)
    mem = np.full((n, len(PARTS), len(KINDS)), np.nan)
    model = np.full_like(mem, np.nan)
    peak, peak_model, reported = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    peak_part = np.full(n, "", dtype=object)
    reported_by = {name: rep for name, _d, _b, _tp, rep in DCHAG_REFERENCE}
    for i, (label, pt, sec) in enumerate(pts):
        sec = sec.model_copy(update={"attention_kernel": kernel})
        sm = estimate_one(pt, sec, seed=seed)
        mem[i] = [[sm.by_part[p][k] for k in KINDS] for p in PARTS]
        peak[i] = sm.peak_allocated
        peak_part[i] = f"{sm.peak_part}/{sm.peak_phase}"
        g = pt.g if pt.plan in DCHAG_PLANS else 1
        m = plan_memory(pt.plan, size_of(sec, pt.L, pt.N, sec.dtype), pt.P, g, pt.checkpointing)
        model[i] = [[m[(p, k)] for k in KINDS] for p in PARTS]
        peak_model[i] = m[("step", "peak")]
        if label.startswith("dchag/"):
            reported[i] = reported_by.get(label.split("/")[1], {}).get(pt.plan, np.nan)
        log.info("estimate %s: peak %.2f GiB (model %.2f GiB)", label, peak[i] / 2**30, peak_model[i] / 2**30)
    return dict(
        mem=mem, model=model, peak=peak, peak_model=peak_model, reported=reported, peak_part=peak_part
    )


def _dataset(pts: list[tuple[str, Point, ProbeModel]], a: dict[str, np.ndarray], kernel: str) -> xr.Dataset:
    part_kind = ("config", "part", "kind")
    reported = "D-CHAG paper: rank-0 max_memory_reserved on 64 GiB MI250X GCDs (no FSDP info)"
    return xr.Dataset(
        {
            "memory": variable(part_kind, a["mem"], "estimated with fake tensors, rank 0", "bytes"),
            "peak_allocated": variable(
                "config", a["peak"], "MemTracker peak, estimated with fake tensors", "bytes"
            ),
            "peak_part": ("config", a["peak_part"].astype(str)),
            "memory_model": variable(part_kind, a["model"], "cost/memory.py plan_memory", "bytes"),
            "peak_model": ("config", a["peak_model"], {"units": "bytes"}),
            "reported_reserved_gib": variable("config", a["reported"], reported, "GiB"),
            **{k: ("config", [getattr(p, k) for _, p, _ in pts]) for k in ("plan", "P", "g", "L", "N")},
            "D": ("config", [int(s.dim) for _, _, s in pts]),
            **{k: ("config", [int(getattr(s, k)) for _, _, s in pts]) for k in ("depth", "batch")},
            "dtype": ("config", [str(s.dtype) for _, _, s in pts]),
            "checkpointing": ("config", [p.checkpointing for _, p, _ in pts]),
        },
        coords={"config": [lbl for lbl, _, _ in pts], "part": list(PARTS), "kind": list(KINDS)},
        attrs={
            "estimated": "estimated with fake tensors (FakeTensorMode + fake process group, rank 0 of P, one process)",
            "includes": "parameters, gradients, AdamW state (in the parameter dtype, no fp32 master copy), saved "
            "activations, the batch and every transient tensor PyTorch allocates in one step; not the caching "
            "allocator's rounding/fragmentation, CUDA context, NCCL buffers or library workspaces",
            "dchag_settings": str(DCHAG_SETTINGS),
            "attention_kernel": kernel,
        },
    )

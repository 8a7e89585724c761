"""The memory model (``hsitp.cost.memory.plan_memory``, pure arithmetic) beside a probe's measurement."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from hsitp.cost.memory import PlanSize, plan_memory
from hsitp.io import variable
from hsitp.names import DCHAG_PLANS
from hsitp.probe.tracker import KINDS, PARTS
from hsitp.settings import ProbeModel
from hsitp.shape import DTYPE_BYTES


def size_of(pc: ProbeModel, L: int, N: int, dtype: str, device: str = "cpu") -> PlanSize:  # noqa: N803
    """The model's size for a probe section; ``device`` where the step was measured (a CUDA device: the allocator's
    counters and the foreach AdamW; anything else: the CPU tracker and the for-loop AdamW)."""
    sizes = {k: int(getattr(pc, k)) for k in ("heads", "depth", "patch", "classes", "mlp_ratio")}
    return PlanSize(
        B=int(pc.batch),
        N=int(N),
        D=int(pc.dim),
        L=int(L),
        **sizes,
        dtype_bytes=DTYPE_BYTES[dtype],
        device="cuda" if str(device).startswith("cuda") else "cpu",
        attention_kernel=pc.attention_kernel,
    )


def add_model(
    ds: xr.Dataset, pc: ProbeModel, dtype: str, devices: Mapping[int, str] | None = None
) -> xr.Dataset:
    """Add ``memory_model`` (…, part, kind), ``peak_model`` and the relative errors against rank 0's measurement
    (the model prices rank 0; D-CHAG's uneven band counts make other ranks differ by one band at most).
    ``devices``: the device each world size ran on (P -> "cpu" / "cuda:0"; default CPU)."""
    dims = ("plan", "P", "g", "L", "N", "checkpointing")
    shape = tuple(ds.sizes[d] for d in dims)
    mem = np.full((*shape, len(PARTS), len(KINDS)), np.nan)
    peak = np.full(shape, np.nan)
    for idx in np.ndindex(*shape):
        plan, P, g, L, N, ck = (ds[d].values[i] for d, i in zip(dims, idx, strict=True))  # noqa: N806
        if not np.isfinite(ds["memory"].values[idx]).any():
            continue  # not run (dense at P > 1)
        gg = int(g) if str(plan) in DCHAG_PLANS else 1
        device = (devices or {}).get(int(P), "cpu")
        m = plan_memory(str(plan), size_of(pc, int(L), int(N), dtype, device), int(P), gg, str(ck))
        mem[idx] = [[m[(p, k)] for k in KINDS] for p in PARTS]
        peak[idx] = m[("step", "peak")]
    out = ds.copy()
    what = "memory model (cost/memory.py plan_memory), rank 0"
    out["memory_model"] = variable((*dims, "part", "kind"), mem, what, "bytes")
    out["peak_model"] = (dims, peak, {"units": "bytes"})
    meas = ds["memory"].sel(rank=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (out["memory_model"] - meas) / meas
        rel = rel.where(meas != 0, 0.0 * rel.where(out["memory_model"] == 0))
    out["rel_err"] = rel.assign_attrs(
        long_name="(model - measured) / measured, rank 0; NaN where one is zero"
    )
    out["peak_rel_err"] = (
        (out["peak_model"] - ds["peak_allocated"].sel(rank=0)) / ds["peak_allocated"].sel(rank=0)
    ).assign_attrs(long_name="(model - measured) / measured peak, rank 0")
    return out

"""GEMM roofline check on one device: is the achieved FLOP rate where memory bandwidth and peak compute say?

Both roofs are *measured* here (the largest square GEMM gives the compute roof, a large device copy the memory
roof), so the check needs no vendor number: each GEMM's achieved rate is compared with
min(F_roof, arithmetic_intensity x BW_roof). A ratio far below 1 means the benchmark (or the device) is not
behaving, and layer timings from the same device should not be trusted either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.timing import median_iqr, time_region
from hsitp.contracts import BENCH_ROOFLINE
from hsitp.io import device_description, provenance, write_netcdf


def gemm_flops(m: int, n: int, k: int) -> float:
    """2mnk: one multiply and one add per term of (m x k) @ (k x n)."""
    return 2.0 * m * n * k


def gemm_bytes(m: int, n: int, k: int, itemsize: int) -> float:
    """Compulsory traffic: read A and B once, write C once."""
    return float(itemsize * (m * k + k * n + m * n))


def measure_copy_bandwidth(*, device: Any, nbytes: int, warmup: int, repeats: int) -> float:
    """Achieved device memory bandwidth in B/s from a device-to-device copy (counts read + write)."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = time_region(lambda: dst.copy_(src), device=device, warmup=warmup, repeats=repeats)
    return 2.0 * nbytes / float(np.median(t))


def run_roofline(
    *,
    device: str,
    dtype: str,
    shapes: Sequence[Sequence[int]],
    copy_bytes: int,
    warmup: int,
    repeats: int,
    seed: int,
) -> xr.Dataset:
    """Time every (m, n, k) GEMM and the copy; return achieved rates beside the measured roofline."""
    import torch

    from hsitp.parallel.runtime import dtype_name, resolve_device, resolve_dtype

    dev = resolve_device(device, key="bench.device")
    dt = resolve_dtype(dtype, dev, key="bench.dtypes")
    itemsize = torch.empty((), dtype=dt).element_size()
    gen = torch.Generator(device="cpu").manual_seed(seed)
    times = np.full((len(shapes), repeats), np.nan)
    for i, (m, n, k) in enumerate(shapes):
        a = torch.randn(m, k, generator=gen).to(dev, dt)
        b = torch.randn(k, n, generator=gen).to(dev, dt)
        c = torch.empty(m, n, device=dev, dtype=dt)
        times[i] = time_region(
            lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), device=dev, warmup=warmup, repeats=repeats
        )
        del a, b, c
    bw = measure_copy_bandwidth(device=dev, nbytes=copy_bytes, warmup=warmup, repeats=repeats)
    med, iqr = median_iqr(times)
    flops = np.array([gemm_flops(*s) for s in shapes])
    intensity = flops / np.array([gemm_bytes(*s, itemsize) for s in shapes])
    achieved = flops / med
    f_roof = float(np.nanmax(achieved))
    attainable = np.minimum(f_roof, intensity * bw)
    shape_label = [f"{m}x{n}x{k}" for m, n, k in shapes]
    ds = xr.Dataset(
        {
            "time": (("shape", "rep"), times, {"units": "s", "long_name": "measured GEMM time"}),
            "time_median": ("shape", med, {"units": "s", "long_name": "median GEMM time over repeats"}),
            "time_iqr": ("shape", iqr, {"units": "s", "long_name": "inter-quartile range over repeats"}),
            "m": ("shape", [s[0] for s in shapes], {"units": "1", "long_name": "rows of A and C"}),
            "n": ("shape", [s[1] for s in shapes], {"units": "1", "long_name": "columns of B and C"}),
            "k": ("shape", [s[2] for s in shapes], {"units": "1", "long_name": "contraction length"}),
            "flops": ("shape", flops, {"units": "FLOP", "long_name": "2mnk"}),
            "intensity": ("shape", intensity, {"units": "FLOP/B", "long_name": "arithmetic intensity"}),
            "achieved_flops": (
                "shape",
                achieved,
                {"units": "FLOP/s", "long_name": "measured GEMM rate (FLOPs / median time)"},
            ),
            "attainable_flops": (
                "shape",
                attainable,
                {"units": "FLOP/s", "long_name": "min(compute roof, intensity x memory roof), both measured"},
            ),
            "roofline_ratio": (
                "shape",
                achieved / attainable,
                {"units": "1", "long_name": "achieved / attainable"},
            ),
        },
        coords={
            "shape": ("shape", shape_label, {"long_name": "GEMM shape MxNxK"}),
            "rep": ("rep", np.arange(repeats), {"units": "1", "long_name": "repeat index"}),
        },
    )
    ds.attrs = {
        "title": "hsitp GEMM roofline: measured GEMM rates against the measured compute and memory roofs",
        "device": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else f"CPU: {device_description()['cpu']} ({torch.get_num_threads()} threads)",
        "dtype": dtype_name(dt),
        "compute_roof_flops": f_roof,
        "memory_roof_bytes_per_s": bw,
        "measured": "yes: both roofs and every rate are measured on this device",
        "threads": torch.get_num_threads(),
    }
    return ds


def write_roofline(out: str | Path, *, config: Mapping[str, Any], **kwargs: Any) -> Path:
    ds = run_roofline(**kwargs)
    prov = provenance(config=config, extra={"roofline": kwargs})
    return write_netcdf(ds, out, kind=BENCH_ROOFLINE.kind, prov=prov)

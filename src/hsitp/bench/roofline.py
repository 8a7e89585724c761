"""GEMM roofline check on one device: is the achieved FLOP rate where memory bandwidth and peak compute say?

Both roofs are *measured* here (the largest square GEMM gives the compute roof, a large device copy the memory
roof), so the check needs no vendor number: each GEMM's achieved rate is compared with
min(F_roof, arithmetic_intensity x BW_roof). A ratio far below 1 means the benchmark (or the device) is not
behaving, and layer timings from the same device should not be trusted either.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.timing import median_iqr, time_interleaved
from hsitp.contracts import BENCH_ROOFLINE
from hsitp.cost.budget import ANY_MACHINE_BYTES, check_bench_sizes, host_bytes
from hsitp.io import describe, device_description, provenance, write_netcdf
from hsitp.settings import BenchSettings


def measure_copy_bandwidth(*, device: Any, nbytes: int, warmup: int, repeats: int) -> float:
    """Achieved device memory bandwidth in B/s from a device-to-device copy (counts read + write)."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    t = time_interleaved([lambda: dst.copy_(src)], device=device, warmup=warmup, repeats=repeats)[0]
    return 2.0 * nbytes / float(np.median(t))


ROOFLINE_ATTRS: dict[str, dict[str, str]] = {
    "time": {"units": "s", "long_name": "measured GEMM time"},
    "time_median": {"units": "s", "long_name": "median GEMM time over repeats"},
    "time_iqr": {"units": "s", "long_name": "inter-quartile range over repeats"},
    "m": {"units": "1", "long_name": "rows of A and C"},
    "n": {"units": "1", "long_name": "columns of B and C"},
    "k": {"units": "1", "long_name": "contraction length"},
    "flops": {"units": "FLOP", "long_name": "2mnk"},
    "intensity": {"units": "FLOP/B", "long_name": "arithmetic intensity"},
    "achieved_flops": {"units": "FLOP/s", "long_name": "measured GEMM rate (FLOPs / median time)"},
    "attainable_flops": {
        "units": "FLOP/s",
        "long_name": "min(compute roof, intensity x memory roof), both measured",
    },
    "roofline_ratio": {"units": "1", "long_name": "achieved / attainable"},
    "shape": {"long_name": "GEMM shape MxNxK"},
    "rep": {"units": "1", "long_name": "repeat index"},
}


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
    memory = ANY_MACHINE_BYTES if dev.type == "cuda" else host_bytes()
    check_bench_sizes([list(s) for s in shapes], copy_bytes, [], memory)
    dt = resolve_dtype(dtype, dev, key="bench.dtypes")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    times = np.full((len(shapes), repeats), np.nan)
    for i, (m, n, k) in enumerate(shapes):
        a = torch.randn(m, k, generator=gen).to(dev, dt)
        b = torch.randn(k, n, generator=gen).to(dev, dt)
        c = torch.empty(m, n, device=dev, dtype=dt)
        step = [lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)]
        times[i] = time_interleaved(step, device=dev, warmup=warmup, repeats=repeats)[0]
        del a, b, c
    bw = measure_copy_bandwidth(device=dev, nbytes=copy_bytes, warmup=warmup, repeats=repeats)
    ds = roofline_dataset(shapes, times, itemsize=torch.empty((), dtype=dt).element_size(), bandwidth=bw)
    ds.attrs = {
        "title": "hsitp GEMM roofline: measured GEMM rates against the measured compute and memory roofs",
        "device": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else f"CPU: {device_description()['cpu']} ({torch.get_num_threads()} threads)",
        "dtype": dtype_name(dt),
        "compute_roof_flops": float(np.nanmax(ds["achieved_flops"].values)),
        "memory_roof_bytes_per_s": bw,
        "measured": "yes: both roofs and every rate are measured on this device",
        "threads": torch.get_num_threads(),
    }
    return ds


def roofline_dataset(
    shapes: Sequence[Sequence[int]], times: np.ndarray, *, itemsize: int, bandwidth: float
) -> xr.Dataset:
    """Each GEMM's measured times and rate beside its attainable rate: the compute roof is the fastest GEMM's
    rate, the memory roof ``bandwidth`` (both measured)."""
    med, iqr = median_iqr(times)
    m, n, k = np.array(shapes, dtype=float).T
    flops = 2.0 * m * n * k  # 2mnk: one multiply and one add per term of (m x k) @ (k x n)
    intensity = flops / (itemsize * (m * k + k * n + m * n))  # compulsory traffic: read A and B, write C once
    achieved = flops / med
    attainable = np.minimum(float(np.nanmax(achieved)), intensity * bandwidth)
    per_shape = {
        "time_median": med,
        "time_iqr": iqr,
        **{d: [s[i] for s in shapes] for i, d in enumerate("mnk")},
    }
    per_shape |= {"flops": flops, "intensity": intensity, "achieved_flops": achieved}
    per_shape |= {"attainable_flops": attainable, "roofline_ratio": achieved / attainable}
    ds = xr.Dataset(
        {"time": (("shape", "rep"), times), **{k: ("shape", v) for k, v in per_shape.items()}},
        coords={"shape": [f"{m}x{n}x{k}" for m, n, k in shapes], "rep": np.arange(times.shape[1])},
    )
    return describe(ds, ROOFLINE_ATTRS)


def write_roofline(out: str | Path, s: BenchSettings) -> Path:
    """Run the roofline check as bench.roofline (and bench's device, first dtype, warmup and repeats) ask."""
    kwargs = dict(device=s.device, dtype=s.dtypes[0], shapes=s.roofline.shapes, copy_bytes=s.roofline.copy_bytes,
                  warmup=s.warmup, repeats=s.repeats, seed=s.seed)  # fmt: skip
    ds = run_roofline(**kwargs)
    prov = provenance(config=s.config, extra={"roofline": kwargs})
    return write_netcdf(ds, out, kind=BENCH_ROOFLINE.kind, prov=prov)

"""Timing one region of work across ranks: warm-ups, repeats, and the slowest rank's time per repeat.

CUDA work is asynchronous, so on GPU each repeat is bracketed by CUDA events on the current stream; on CPU the
region is synchronous and ``perf_counter`` is exact. Ranks meet at a barrier before every repeat so they start
together, and a repeat's time is the maximum over ranks: a layer is only done when its slowest rank is.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np


def synchronize(device: Any) -> None:
    """Wait for queued device work (no-op on CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def barrier(group: Any, device: Any) -> None:
    """All ranks of ``group`` reach this point (no-op for a single rank); device work is drained first."""
    import torch.distributed as dist

    synchronize(device)
    if group is not None and dist.get_world_size(group) > 1:
        if device.type == "cuda":
            dist.barrier(group=group, device_ids=[device.index])
        else:
            dist.barrier(group=group)
    synchronize(device)


def _time_once(fn: Callable[[], Any], device: Any) -> float:
    import torch

    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3  # ms -> s
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_region(
    fn: Callable[[], Any], *, device: Any, group: Any = None, warmup: int = 3, repeats: int = 10
) -> np.ndarray:
    """Seconds per repeat of ``fn()``, the maximum over the ranks of ``group``; shape (repeats,).

    Every rank must call this with the same warm-up and repeat counts (it contains collectives).
    """
    import torch
    import torch.distributed as dist

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        barrier(group, device)
        times.append(_time_once(fn, device))
    out = torch.tensor(times, dtype=torch.float64)
    if group is not None and dist.get_world_size(group) > 1:
        # gloo and nccl both reduce on the device of the tensor; NCCL needs it on the GPU.
        out = out.to(device)
        dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
    return out.cpu().numpy()


def median_iqr(times: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Median and inter-quartile range (q75 - q25) along ``axis``, ignoring NaN (points not measured)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices are unmeasured points
        med = np.nanmedian(times, axis=axis)
        q25, q75 = np.nanpercentile(times, [25, 75], axis=axis)
    return med, q75 - q25

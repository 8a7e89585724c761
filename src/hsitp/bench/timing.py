"""Timing one region of work across ranks: warm-ups, repeats, and the slowest rank's time per repeat.

CUDA work is asynchronous, so on GPU each repeat is bracketed by CUDA events on the current stream; on CPU the
region is synchronous and ``perf_counter`` is exact. Ranks meet at a barrier before every repeat so they start
together, and a repeat's time is the maximum over ranks: a layer is only done when its slowest rank is. A repeat
may time several back-to-back calls (``min_region_s``) so that barrier skew does not dominate short calls.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
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


def calls_per_repeat(
    fn: Callable[[], Any], *, device: Any, group: Any, min_region_s: float, max_calls: int = 1000
) -> int:
    """Back-to-back calls per timed repeat so one repeat lasts at least ``min_region_s``; the same on every rank.

    One call of a small layer lasts less than the skew with which ranks leave a barrier (a scheduler time slice
    on a busy CPU), so timing single calls would measure that skew; k calls per repeat amortise it.
    """
    import torch
    import torch.distributed as dist

    if min_region_s <= 0:
        return 1
    barrier(group, device)
    one = _time_once(fn, device)
    k = torch.tensor([min(max_calls, max(1, math.ceil(min_region_s / max(one, 1e-9))))], dtype=torch.int64)
    if group is not None and dist.get_world_size(group) > 1:
        k = k.to(device)
        dist.all_reduce(k, op=dist.ReduceOp.MAX, group=group)
    return int(k.item())


def time_interleaved(
    fns: Sequence[Callable[[], Any]],
    *,
    device: Any,
    group: Any = None,
    warmup: int = 3,
    repeats: int = 10,
    min_region_s: float = 0.0,
) -> np.ndarray:
    """Seconds per call of each ``fns[i]``, shape (len(fns), repeats), the maximum over the ranks of ``group``.

    Repeat r times every function once, in turn, so a burst of foreign load on a shared machine hits all of
    them alike and their ratio (the CCR) stays meaningful. With ``min_region_s`` > 0 each timed region runs k
    back-to-back calls (k per function, see :func:`calls_per_repeat`) and reports their mean. Every rank must
    call this with the same arguments (it contains collectives).
    """
    import torch
    import torch.distributed as dist

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for fn in fns:
        for _ in range(warmup):
            fn()
    ks = [calls_per_repeat(fn, device=device, group=group, min_region_s=min_region_s) for fn in fns]

    def batch(fn: Callable[[], Any], k: int) -> Callable[[], None]:
        def region() -> None:
            for _ in range(k):
                fn()

        return region

    regions = [batch(fn, k) for fn, k in zip(fns, ks, strict=True)]
    times = np.empty((len(fns), repeats))
    for r in range(repeats):
        for i, region in enumerate(regions):
            barrier(group, device)
            times[i, r] = _time_once(region, device) / ks[i]
    out = torch.from_numpy(times)
    if group is not None and dist.get_world_size(group) > 1:
        # gloo reduces CPU tensors; NCCL needs the tensor on the GPU.
        out = out.to(device)
        dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
    return out.cpu().numpy()


def mean_over_repeats(times: np.ndarray, axis: int = -1) -> np.ndarray:
    """A point's time: the mean of its repeats along ``axis``, ignoring NaN (points not measured).

    Each repeat is already the mean of k back-to-back calls, so this is the time per call averaged over all the
    calls timed, as nccl-tests and the OSU benchmarks report it. On a shared machine foreign load comes and goes;
    a point's repeats are spread over the whole run (``bench.passes``), so their mean sees the run's average load,
    as every other point's mean does, and the ratios and fits between points stay consistent. The fastest repeat
    is instead whichever window happened to be quiet (a different luck for every point), and the median of a few
    repeats jumps between load levels; on a busy 2-core VM both gave larger held-out errors of the calibrated
    model than the mean.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices are unmeasured points
        return np.nanmean(times, axis=axis)


def median_iqr(times: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Median and inter-quartile range (q75 - q25) along ``axis``, ignoring NaN (points not measured)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices are unmeasured points
        med = np.nanmedian(times, axis=axis)
        q25, q75 = np.nanpercentile(times, [25, 75], axis=axis)
    return med, q75 - q25

"""Interleaved A/B timing shared by the tp-vs-torch benchmarks (tp_vs_torch_mlp.py, tp_vs_torch_model.py).

Each sample times ``steps`` calls of one side between barriers; the slowest rank's time sets it (all-reduce MAX on
the rank's device: NCCL reduces CUDA tensors only). Samples alternate A-B then B-A so slow drifts of a shared
machine hit both sides equally; the ratio is taken per pair.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

Side = tuple[Callable[[], None], Callable[[], None]]  # (one step, wait for its results)


def timed(
    step: Callable[[], None], finish: Callable[[], None], steps: int, device: torch.device | None
) -> float:
    """Seconds per step of ``step``, the slowest rank's."""
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    finish()  # read the input gradient: waits for the device and any collective still in flight
    elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed) / steps


def interleaved(
    ours: Side, theirs: Side, *, warmup: int, repeats: int, steps: int, device: torch.device | None
) -> dict[str, Any]:
    """Warm both sides up, then ``repeats`` interleaved pairs: medians and the min/median/max of ours / theirs."""
    for _ in range(warmup):
        ours[0]()
        theirs[0]()
    t_ours, t_theirs, ratios = [], [], []
    for rep in range(repeats):
        if rep % 2 == 0:
            a = timed(*ours, steps, device)
            b = timed(*theirs, steps, device)
        else:
            b = timed(*theirs, steps, device)
            a = timed(*ours, steps, device)
        t_ours.append(a)
        t_theirs.append(b)
        ratios.append(a / b)
    return {
        "ours_median_s": statistics.median(t_ours),
        "torch_median_s": statistics.median(t_theirs),
        "ratio_min": min(ratios),
        "ratio_median": statistics.median(ratios),
        "ratio_max": max(ratios),
        "ratios": ratios,
    }


def time_backward(
    ours: Callable[[torch.Tensor], torch.Tensor],
    theirs: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    grad_out: torch.Tensor,
    *,
    warmup: int,
    repeats: int,
    steps: int,
    device: torch.device | None,
) -> dict[str, Any]:
    """:func:`interleaved` on forward + backward of two modules from the same input and output gradient."""
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    return interleaved(
        (lambda: ours(xa).backward(grad_out), lambda: float(xa.grad.view(-1)[0])),
        (lambda: theirs(xb).backward(grad_out), lambda: float(xb.grad.view(-1)[0])),
        warmup=warmup,
        repeats=repeats,
        steps=steps,
        device=device,
    )

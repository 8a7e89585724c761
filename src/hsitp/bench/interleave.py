"""Interleaved timing of several sides in one run: the only way two timings on a shared machine may be divided.

A side is a pair of callables: one step, and a ``finish`` that waits for that step's results (the device, any
collective still in flight). After ``warmup`` untimed steps of every side (excluded from every sample), each of
``repeats`` rounds takes one sample of every side, the order reversed on every other round (A-B-C, C-B-A, ...),
so a slow drift of the machine's load hits every side alike. A sample is ``steps`` back-to-back steps between a
barrier and a ``finish``; its time per step is the slowest rank's (all-reduce MAX over the process group, on the
rank's device: NCCL reduces CUDA tensors only). Ratios are taken per round (the sides of one round ran within
seconds of each other), then summarised as median with min and max.

Model-agnostic: used by the probe's throughput phase (every plan at one P), the tp-vs-torch benchmarks
(``benchmarks/tp_vs_torch_*.py``: ours vs PyTorch's tensor parallelism) and the planner's validation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

Side = tuple[Callable[[], Any], Callable[[], Any]]  # (one step, wait for its results)


def _group(group: Any) -> Any:
    """The process group to meet on, or None in a single process (no distributed run initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    group = group if group is not None else dist.group.WORLD
    return group if dist.get_world_size(group) > 1 else None


def timed(
    step: Callable[[], Any],
    finish: Callable[[], Any],
    steps: int,
    device: torch.device | None = None,
    group: Any = None,
) -> float:
    """Seconds per step of ``steps`` calls of ``step`` then one ``finish``: the slowest rank's (group: default the
    whole world; nothing to meet in a single process)."""
    pg = _group(group)
    if pg is not None:
        dist.barrier(group=pg)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    finish()
    elapsed = time.perf_counter() - t0
    if pg is not None:
        t = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=pg)
        elapsed = float(t)
    return elapsed / steps


def round_order(names: Sequence[str], rnd: int) -> list[str]:
    """The order of the sides in round ``rnd``: as given on even rounds, reversed on odd ones."""
    return list(names) if rnd % 2 == 0 else list(names)[::-1]


@dataclass
class Interleaved:
    """Per side, seconds per step of each round's sample (slowest rank), and the order each round ran in."""

    names: list[str]
    times: dict[str, list[float]]
    orders: list[list[str]] = field(default_factory=list)

    @property
    def repeats(self) -> int:
        return len(self.orders)

    def median(self, name: str) -> float:
        return statistics.median(self.times[name])

    def ratios(self, num: str, den: str) -> list[float]:
        """time(num) / time(den) per round."""
        return [a / b for a, b in zip(self.times[num], self.times[den], strict=True)]

    def summary(self, num: str, den: str) -> dict[str, float]:
        """min, median and max over rounds of time(num) / time(den)."""
        r = self.ratios(num, den)
        return {"ratio_min": min(r), "ratio_median": statistics.median(r), "ratio_max": max(r)}


def interleave(
    sides: Mapping[str, Side],
    *,
    warmup: int,
    repeats: int,
    steps: int,
    device: torch.device | None = None,
    group: Any = None,
) -> Interleaved:
    """Warm every side up (untimed), then ``repeats`` rounds of one sample per side in alternating order."""
    if repeats < 1 or steps < 1 or warmup < 0:
        raise ValueError(
            f"interleave: repeats {repeats} and steps {steps} must be >= 1, warmup {warmup} >= 0"
        )
    names = list(sides)
    for name in names:
        step, finish = sides[name]
        for _ in range(warmup):
            step()
        if warmup:
            finish()  # wait for the warm-up's device work (nothing to wait for, maybe nothing to read, without)
    out = Interleaved(names, {n: [] for n in names})
    for rnd in range(repeats):
        order = round_order(names, rnd)
        for name in order:
            out.times[name].append(timed(*sides[name], steps, device, group))
        out.orders.append(order)
    return out


def interleaved(
    ours: Side,
    theirs: Side,
    *,
    warmup: int,
    repeats: int,
    steps: int,
    device: torch.device | None = None,
    group: Any = None,
) -> dict[str, Any]:
    """Two sides (ours, PyTorch's): medians and the min / median / max of ours / theirs per round."""
    res = interleave({"ours": ours, "torch": theirs}, warmup=warmup, repeats=repeats, steps=steps,
                     device=device, group=group)  # fmt: skip
    return {
        "ours_median_s": res.median("ours"),
        "torch_median_s": res.median("torch"),
        **res.summary("ours", "torch"),
        "ratios": res.ratios("ours", "torch"),
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
    device: torch.device | None = None,
    group: Any = None,
) -> dict[str, Any]:
    """:func:`interleaved` on forward + backward of two modules from the same input and output gradient; reading
    the input gradient waits for the device."""
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    return interleaved(
        (lambda: ours(xa).backward(grad_out), lambda: float(xa.grad.view(-1)[0])),
        (lambda: theirs(xb).backward(grad_out), lambda: float(xb.grad.view(-1)[0])),
        warmup=warmup,
        repeats=repeats,
        steps=steps,
        device=device,
        group=group,
    )

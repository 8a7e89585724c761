"""Time spent inside collectives during training (``ccr_inline``), by timing every collective the parallel layers
issue.

While :func:`timed_collectives` is active, the three raw collectives of ``hsitp.parallel.collectives``
(all-reduce, all-gather, reduce-scatter; every parallel layer and ``reduce_grads`` go through them) are wrapped:
on CPU by ``perf_counter`` around the call (gloo's collectives are synchronous: the call returns when the data
is there), on CUDA by events recorded on the current stream before and after (the stream waits on NCCL's).

This is a different quantity from the bench stage's CCR (``ccr_measured`` = collectives replayed alone /
compute with no-op collectives, per layer): here the comm time is measured inside real training steps, so it
includes waiting for the slowest rank (load imbalance, stragglers) and any overlap is not subtracted; the
compute time is the rest of the step (step time - comm time, optimizer included).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist


class CommTimer:
    """Accumulates seconds spent inside collectives since the last :meth:`reset`."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.calls = 0
        self._seconds = 0.0
        self._events: list[tuple[Any, Any]] = []

    def reset(self) -> None:
        self.calls, self._seconds, self._events = 0, 0.0, []

    def seconds(self) -> float:
        """Total so far (on CUDA: synchronises, then sums the event pairs)."""
        if self._events:
            self._events[-1][1].synchronize()
            self._seconds += sum(a.elapsed_time(b) for a, b in self._events) / 1e3
            self._events = []
        return self._seconds

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                out = fn(*args, **kwargs)
                b.record()
                self._events.append((a, b))
                return out
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            self._seconds += time.perf_counter() - t0
            return out

        return timed


class _TimedDist:
    """``torch.distributed`` with ``all_reduce`` timed; every other attribute passes through."""

    def __init__(self, timer: CommTimer) -> None:
        self.all_reduce = timer.wrap(dist.all_reduce)

    def __getattr__(self, name: str) -> Any:
        return getattr(dist, name)


@contextlib.contextmanager
def timed_collectives(timer: CommTimer) -> Iterator[CommTimer]:
    """Time every collective of ``hsitp.parallel.collectives`` into ``timer`` inside the block."""
    from hsitp.parallel import collectives as coll

    saved = (coll.dist, coll._all_gather_single, coll._reduce_scatter_single)
    coll.dist = _TimedDist(timer)  # type: ignore[assignment]
    coll._all_gather_single = timer.wrap(saved[1])
    coll._reduce_scatter_single = timer.wrap(saved[2])
    try:
        yield timer
    finally:
        coll.dist, coll._all_gather_single, coll._reduce_scatter_single = saved

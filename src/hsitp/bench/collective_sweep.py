"""Collectives timed alone: the sweep that calibrates alpha and beta, and the replay of a layer's traced collectives.

Sizes are always the *full* (unsharded) tensor in bytes, as the ring model of docs/contracts.md counts them:
all_reduce moves a full tensor, all_gather assembles a full tensor from P shards, reduce_scatter reduces a full
tensor into P shards.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hsitp.bench.timing import time_interleaved


def full_elements(nbytes: int, itemsize: int, world_size: int) -> int:
    """Elements of a full tensor of about ``nbytes``, rounded to a positive multiple of P so it shards evenly."""
    elems = max(1, round(nbytes / itemsize))
    return max(world_size, round(elems / world_size) * world_size)


@dataclass
class CollectiveCall:
    """One collective with its buffers allocated once, so a timed call does no allocation."""

    name: str
    full_bytes: int  # bytes of the full (unsharded) tensor
    run: Callable[[], None]


def make_call(
    name: str, full_elems: int, *, dtype: Any, device: Any, group: Any, world_size: int
) -> CollectiveCall:
    """Allocate buffers for ``name`` on a full tensor of ``full_elems`` elements and return the timed call
    (``name``: one of :data:`hsitp.names.COLLECTIVES`, as the config's ``bench.collectives.names`` and the layers'
    traces give it)."""
    import torch
    import torch.distributed as dist

    if full_elems % world_size:
        raise ValueError(f"{name}: {full_elems} elements do not split over P={world_size}")
    shard = full_elems // world_size
    full_bytes = full_elems * torch.empty((), dtype=dtype).element_size()
    if name == "all_reduce":  # in place, on one full buffer
        buf = torch.ones(full_elems, dtype=dtype, device=device)
        return CollectiveCall(name, full_bytes, functools.partial(dist.all_reduce, buf, group=group))
    # all_gather: a shard into a full tensor; reduce_scatter: a full tensor into a shard (torch >= 2.13 renamed
    # all_gather_into_tensor and reduce_scatter_tensor; older releases only have those)
    gather = name == "all_gather"
    if gather:
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    else:
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    src = torch.ones(shard if gather else full_elems, dtype=dtype, device=device)
    dst = torch.empty(full_elems if gather else shard, dtype=dtype, device=device)
    return CollectiveCall(name, full_bytes, functools.partial(fn, dst, src, group=group))


def sweep_collectives(
    rt: Any,
    *,
    names: Sequence[str],
    sizes_bytes: Sequence[int],
    dtype: Any,
    warmup: int,
    repeats: int,
    min_region_s: float = 0.0,
    on_step: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Time every collective at every size on ``rt``'s group.

    Returns ``times`` (collective, size, rep) in seconds and ``full_bytes`` (collective, size) actually moved
    (sizes are rounded to whole elements divisible by P). At P = 1 nothing is communicated and both are NaN.
    ``on_step(what)`` is called after each collective and size (progress, and a safe point to stop).
    """
    import torch

    times = np.full((len(names), len(sizes_bytes), repeats), np.nan)
    full_bytes = np.full((len(names), len(sizes_bytes)), np.nan)
    if rt.world_size < 2 or repeats < 1:
        return times, full_bytes
    itemsize = torch.empty((), dtype=dtype).element_size()
    for i, name in enumerate(names):
        for j, nbytes in enumerate(sizes_bytes):
            elems = full_elements(int(nbytes), itemsize, rt.world_size)
            call = make_call(
                name, elems, dtype=dtype, device=rt.device, group=rt.group, world_size=rt.world_size
            )
            times[i, j] = time_interleaved(
                [call.run],
                device=rt.device,
                group=rt.group,
                warmup=warmup,
                repeats=repeats,
                min_region_s=min_region_s,
            )[0]
            full_bytes[i, j] = call.full_bytes
            if on_step is not None:
                on_step(f"{name} {int(nbytes)} B")
    return times, full_bytes

"""Collectives as small autograd functions (Megatron-LM's f and g, plus the one all-gather that token
parallelism, D-CHAG and output collection share). Each takes its TPGroup explicitly, returns at once when P = 1, records a CommRecord when the group traces,
and becomes a local op of the same output shape and dtype when ``tp.comm == "noop"``.

Megatron-LM (Shoeybi et al. 2019, Fig. 3) names the two conjugate operators of a column/row pair:
``f`` = identity forward / all-reduce backward (before a column-parallel layer), and
``g`` = all-reduce forward / identity backward (after a row-parallel layer).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

from hsitp.parallel.groups import TPGroup

# newer torch (2.13 here) names these all_gather_single / reduce_scatter_single (the *_tensor names warn FutureWarning).
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
# what the collectives below call; hsitp.train.ccr.timed_collectives swaps these for timed wrappers
_all_gather_single = ALL_GATHER_SINGLE
_reduce_scatter_single = REDUCE_SCATTER_SINGLE


# --- raw collectives (no autograd), honouring comm="noop" and tracing --------------------------------------------


def all_reduce_(x: torch.Tensor, tp: TPGroup, phase: str = "forward") -> torch.Tensor:
    """Sum ``x`` over the group in place (x must be contiguous); noop mode leaves it unchanged."""
    tp.record("all_reduce", x, x.dtype, phase)
    if tp.comm == "real":
        dist.all_reduce(x, group=tp.group)
    return x


def all_gather(x: torch.Tensor, tp: TPGroup, dim: int, phase: str = "forward") -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` (all ranks hold the same shape)."""
    dim = dim % x.dim()
    out_shape = list(x.shape)
    out_shape[dim] *= tp.size
    tp.record("all_gather", torch.Size(out_shape), x.dtype, phase)
    if tp.comm == "noop":
        return torch.cat([x] * tp.size, dim=dim)
    x = x.contiguous()
    buf = x.new_empty((tp.size * x.shape[0], *x.shape[1:]))  # ranks concatenated along dim 0 (all backends)
    _all_gather_single(buf, x, group=tp.group)
    if dim == 0:
        return buf
    return buf.view(tp.size, *x.shape).movedim(0, dim).reshape(out_shape)


def reduce_scatter(x: torch.Tensor, tp: TPGroup, dim: int, phase: str = "backward") -> torch.Tensor:
    """Sum ``x`` over the group and keep this rank's 1/P chunk along ``dim``."""
    dim = dim % x.dim()
    tp.record("reduce_scatter", x, x.dtype, phase)
    chunk = x.shape[dim] // tp.size
    if tp.comm == "noop":
        return x.narrow(dim, tp.rank * chunk, chunk).contiguous()
    # rank-major layout (P, ...) so that chunk r lands on rank r
    src = x.unflatten(dim, (tp.size, chunk)).movedim(dim, 0).contiguous()  # (P, ...) rank-major
    out = x.new_empty(src.shape[1:])  # x's shape with ``chunk`` at ``dim``
    _reduce_scatter_single(out, src.flatten(0, 1) if src.dim() > 1 else src, group=tp.group)
    return out


# --- autograd functions -------------------------------------------------------------------------------------------


class _AllReduce(torch.autograd.Function):
    """A sum over the group in the pass(es) that need it: ``forward`` is "" (identity), "in_place" or "copy";
    ``backward`` says whether the input gradient is all-reduced. The three uses:

    - Megatron's f ("", True): before a column-parallel layer whose input is replicated; each rank's partial input
      gradient comes from its own output columns, so the true gradient is their sum.
    - Megatron's g ("in_place", False): after a row-parallel layer; each rank holds a partial sum over its slice of
      the contraction dim.
    - A sum of partials that every rank then consumes for its own sharded outputs ("copy", True): LayerNorm
      statistics over a sharded D, where each rank's gradient w.r.t. the global statistics is partial.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp: TPGroup, forward: str, backward: bool) -> torch.Tensor:
        ctx.tp, ctx.backward = tp, backward
        if not forward:
            return x
        if forward == "in_place":
            ctx.mark_dirty(x)
        else:
            x = x.clone(memory_format=torch.contiguous_format)
        return all_reduce_(x, tp, "forward")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        if ctx.backward:
            # Copy: autograd may hand the same gradient tensor to other consumers (e.g. AddBackward); never reduce
            # it in place.
            grad = all_reduce_(grad.clone(memory_format=torch.contiguous_format), ctx.tp, "backward")
        return grad, None, None, None


class _Gather(torch.autograd.Function):
    """All-gather of a tensor sharded along ``dim``; the flag says what the output gradient is (Megatron-LM's
    ``tensor_parallel_output_grad``).

    ``reduce_grad=True``: forward: all-gather along ``dim``; backward: reduce-scatter along ``dim``. Each rank's
    output gradient is a partial sum (token-parallel K/V: every rank's local queries touched every key), so the
    gradients are summed and each rank keeps its own slice.

    ``reduce_grad=False``: forward: all-gather along ``dim``; backward: this rank's slice of the gradient, no
    communication. Every rank already holds the full output gradient: the consumer is replicated (collecting a
    sharded output) or enters through f, which all-reduces its input gradient (D-CHAG's gathered tokens).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, tp: TPGroup, dim: int, reduce_grad: bool) -> torch.Tensor:
        ctx.tp, ctx.dim, ctx.chunk, ctx.reduce_grad = tp, dim, x.shape[dim], reduce_grad
        return all_gather(x, tp, dim, "forward")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        if ctx.reduce_grad:
            return reduce_scatter(grad, ctx.tp, ctx.dim, "backward"), None, None, None
        local = grad.narrow(ctx.dim, ctx.tp.rank * ctx.chunk, ctx.chunk).contiguous()
        return local, None, None, None


# --- public wrappers ---------------------------------------------------------------------------------------------


def copy_to_tp(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """Megatron f: forward identity, backward all-reduce."""
    return x if tp.size == 1 else _AllReduce.apply(x, tp, "", True)


def reduce_from_tp(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """Megatron g: forward all-reduce (overwrites ``x``, autograd-aware), backward identity."""
    if tp.size == 1:
        return x
    if x.is_leaf and x.requires_grad:
        x = x.clone()  # never overwrite a user's leaf
    elif not x.is_contiguous():
        x = x.contiguous()
    return _AllReduce.apply(x, tp, "in_place", False)


def all_reduce_sum(x: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """forward all-reduce, backward all-reduce (partials consumed by sharded outputs, e.g. LayerNorm stats)."""
    return x if tp.size == 1 else _AllReduce.apply(x, tp, "copy", True)


def gather_seq(x: torch.Tensor, tp: TPGroup, dim: int = 1) -> torch.Tensor:
    """Token-parallel K/V gather: forward all-gather along ``dim``, backward reduce-scatter (partial grads)."""
    return x if tp.size == 1 else _Gather.apply(x, tp, dim, True)


def gather_from_tp(x: torch.Tensor, tp: TPGroup, dim: int) -> torch.Tensor:
    """Collect a sharded tensor whose every rank gets the full gradient back (a replicated consumer, or one
    entered through f as D-CHAG's tokens): forward all-gather along ``dim``, backward local slice, no traffic."""
    return x if tp.size == 1 else _Gather.apply(x, tp, dim, False)


@torch.no_grad()
def all_reduce_grads(params: Iterable[torch.nn.Parameter], tp: TPGroup) -> None:
    """Sum the gradients of weights replicated across ``tp`` whose inputs were split across it (token split).

    Each rank's gradient covers only its own tokens (as data parallelism): call after backward. The grads are
    flattened into one buffer so this is a single all-reduce.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if tp.size == 1 or not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    all_reduce_(flat, tp, "backward")
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()

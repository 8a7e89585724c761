"""``build_op``: one parallel op, ready to time or test, by its shared name (hsitp.names).

Returns ``BuiltOp(module, make_input)``: ``module(*make_input())`` runs this rank's share of the op; inputs that
are activations require grad, so a backward pass issues the same collectives as inside a network (e.g. the f
all-reduce of the input gradient). Raw image cubes (aggregators) do not. ``module.padding_report()`` lists the
padded fraction of every split dimension.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import nn

from hsitp.names import BY_OP, OP_NAMES
from hsitp.parallel.aggregation import DCHAGAggregator, TPAggregator
from hsitp.parallel.dense import BandTokenizer, dense_layernorm, seeded
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import Mesh2D, TPGroup
from hsitp.parallel.tensor_parallel import (
    HeadParallelAttention,
    ParallelMLP,
    ReplicatedLayerNorm,
    ShardedLayerNorm,
)
from hsitp.parallel.token_parallel import TokenParallelAttention
from hsitp.parallel.two_d import Attention2D
from hsitp.shape import LayerShape

# Per-rank input streams: seed * INPUT_SEED_STRIDE + rank, a 2-D mesh rank numbered
# channel_rank * MESH_RANK_STRIDE + token_rank. Both strides exceed any rank index in use, so distinct
# (seed, rank) pairs seed distinct generators.
INPUT_SEED_STRIDE = 100_003
MESH_RANK_STRIDE = 7919


class BuiltOp(NamedTuple):
    module: nn.Module
    make_input: Callable[[], tuple[torch.Tensor, ...]]


def token_grid(n_tokens: int) -> tuple[int, int]:
    """(h, w) with h * w = N and h the largest divisor <= sqrt(N) (324 -> 18 x 18, 3192 -> 56 x 57)."""
    h = max(d for d in range(1, math.isqrt(n_tokens) + 1) if n_tokens % d == 0)
    return h, n_tokens // h


def build_op(
    op_name: str,
    *,
    tp: TPGroup | Mesh2D,
    shape: LayerShape,
    head_padding: bool = False,
    device: torch.device | str | None = None,
    seed: int = 0,
    attention_kernel: str = "exact",
) -> BuiltOp:
    """Build op ``op_name`` for this rank (``tp``: a TPGroup, or a Mesh2D for ``attn_2d``) at ``shape``, in its
    dtype. ``head_padding``: heads the ranks do not divide are padded with zero heads (else an error naming
    ``parallel.head_padding``). ``layernorm_sharded`` takes and returns the local D/P slice; every other op the
    full D. ``attention_kernel``: the aggregators' single-query attention kernel (exact or sdpa).
    """
    if op_name not in OP_NAMES:
        raise ShardingError(f"unknown op {op_name!r}; expected one of {', '.join(OP_NAMES)}")
    if (op_name == "attn_2d") != isinstance(tp, Mesh2D):
        want = "a Mesh2D (P_c x P_t)" if op_name == "attn_2d" else "a TPGroup"
        raise ShardingError(f"op {op_name!r} needs tp={want}, got {type(tp).__name__}")
    dtype = getattr(torch, shape.dtype)
    rank = tp.channel.rank * MESH_RANK_STRIDE + tp.token.rank if isinstance(tp, Mesh2D) else tp.rank
    kw = {"seed": seed, "dtype": dtype, "device": device}
    mod, dims = _module(op_name, tp, shape, head_padding, attention_kernel, kw)
    grad = op_name not in (*BY_OP, "tokenize")  # activations require grad, raw image cubes do not

    def make() -> tuple[torch.Tensor, ...]:
        gen = torch.Generator().manual_seed(seed * INPUT_SEED_STRIDE + rank)
        x = torch.randn(*dims, generator=gen).to(device=device, dtype=dtype)
        return (x.requires_grad_(grad),)

    return BuiltOp(mod, make)


def _module(
    op_name: str,
    tp: TPGroup | Mesh2D,
    shape: LayerShape,
    head_padding: bool,
    attention_kernel: str,
    kw: dict[str, Any],
) -> tuple[nn.Module, tuple[int, ...]]:
    """This rank's module of ``op_name`` and the shape of its input (``kw``: seed, dtype, device)."""
    B, N, D, L, heads, patch = shape.batch, shape.N, shape.D, shape.L, shape.heads, shape.patch
    if op_name == "mlp":
        return ParallelMLP(D, shape.mlp_ratio * D, tp, **kw), (B, N, D)
    if op_name == "attn_channel":
        return HeadParallelAttention(D, heads, tp, head_padding=head_padding, **kw), (B, N, D)
    if op_name == "attn_token":
        mod = TokenParallelAttention(D, heads, tp, n_tokens=N, **kw)
        return mod, (B, mod.token_split.local, D)
    if op_name == "attn_2d":
        mod = Attention2D(D, heads, tp, n_tokens=N, head_padding=head_padding, **kw)
        return mod, (B, mod.token_split.local, D)
    if op_name == "layernorm_sharded":
        mod = ShardedLayerNorm(D, tp, **kw)
        return mod, (B, N, mod.split.local)
    if op_name == "layernorm_replicated":
        dense = dense_layernorm(D, seed=kw["seed"]).to(device=kw["device"], dtype=kw["dtype"])
        return ReplicatedLayerNorm.from_dense(dense), (B, N, D)
    h, w = token_grid(N)
    if op_name == "tokenize":  # replicated: no collective; timed apart so the aggregators' fit excludes it
        with seeded(kw["seed"]):
            mod = BandTokenizer(L, D, patch)
        return mod.to(device=kw["device"], dtype=kw["dtype"]), (B, L, h * patch, w * patch)
    agg = {"head_padding": head_padding, "kernel": attention_kernel, **kw}
    if op_name == "agg_tp":
        return TPAggregator(L, D, heads, patch, tp, **agg), (B, L, h * patch, w * patch)
    mod = DCHAGAggregator(L, D, heads, patch, tp, variant=BY_OP[op_name].variant, groups=shape.groups, **agg)
    return mod, (B, mod.band_count, h * patch, w * patch)

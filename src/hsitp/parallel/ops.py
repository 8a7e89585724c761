"""``build_op``: one parallel op, ready to time or test, by its shared name (hsitp.names).

Returns ``BuiltOp(module, make_input)``: ``module(*make_input())`` runs this rank's share of the op; inputs that
are activations require grad, so a backward pass issues the same collectives as inside a network (e.g. the f
all-reduce of the input gradient). Raw image cubes (aggregators) do not. ``module.padding_report()`` lists the
padded fraction of every split dimension.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from hsitp.names import OP_NAMES
from hsitp.parallel.aggregation import DCHAGAggregator, TPAggregator
from hsitp.parallel.dense import dense_layernorm
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
    N: int,
    D: int,
    L: int | None = None,
    heads: int = 8,
    groups: int = 1,
    batch: int = 1,
    patch: int = 4,
    mlp_ratio: int = 4,
    layernorm: str = "sharded",
    head_padding: bool = False,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    seed: int = 0,
) -> BuiltOp:
    """Build op ``op_name`` for this rank (``tp``: a TPGroup, or a Mesh2D for ``attn_2d``).

    N spatial tokens, D features, L bands (aggregators), ``groups`` = D-CHAG's g, ``layernorm`` = placement
    ("sharded": D split, statistics all-reduced; "replicated": Megatron, no communication).
    """
    if op_name not in OP_NAMES:
        raise ShardingError(f"unknown op {op_name!r}; expected one of {', '.join(OP_NAMES)}")
    if (op_name == "attn_2d") != isinstance(tp, Mesh2D):
        want = "a Mesh2D (P_c x P_t)" if op_name == "attn_2d" else "a TPGroup"
        raise ShardingError(f"op {op_name!r} needs tp={want}, got {type(tp).__name__}")
    kw = {"seed": seed, "dtype": dtype, "device": device}
    rank = tp.channel.rank * MESH_RANK_STRIDE + tp.token.rank if isinstance(tp, Mesh2D) else tp.rank

    def randn(*shape: int, grad: bool = True) -> Callable[[], tuple[torch.Tensor, ...]]:
        def make() -> tuple[torch.Tensor, ...]:
            gen = torch.Generator().manual_seed(seed * INPUT_SEED_STRIDE + rank)
            x = torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)
            return (x.requires_grad_(grad),)

        return make

    if op_name == "mlp":
        return BuiltOp(ParallelMLP(D, mlp_ratio * D, tp, **kw), randn(batch, N, D))
    if op_name == "attn_channel":
        return BuiltOp(
            HeadParallelAttention(D, heads, tp, head_padding=head_padding, **kw), randn(batch, N, D)
        )
    if op_name == "attn_token":
        mod = TokenParallelAttention(D, heads, tp, n_tokens=N, **kw)
        return BuiltOp(mod, randn(batch, mod.token_split.local, D))
    if op_name == "attn_2d":
        mod = Attention2D(D, heads, tp, n_tokens=N, head_padding=head_padding, **kw)
        return BuiltOp(mod, randn(batch, mod.token_split.local, D))
    if op_name == "layernorm":
        if layernorm == "sharded":
            mod = ShardedLayerNorm(D, tp, **kw)
            return BuiltOp(mod, randn(batch, N, mod.split.local))
        if layernorm == "replicated":
            mod = ReplicatedLayerNorm.from_dense(dense_layernorm(D, seed=seed).to(device=device, dtype=dtype))
            return BuiltOp(mod, randn(batch, N, D))
        raise ShardingError(f"layernorm placement must be 'sharded' or 'replicated', got {layernorm!r}")
    if L is None:
        raise ShardingError(f"op {op_name!r} needs L (number of bands)")
    h, w = token_grid(N)
    if op_name == "agg_tp":
        mod = TPAggregator(L, D, heads, patch, tp, head_padding=head_padding, **kw)
        return BuiltOp(mod, randn(batch, L, h * patch, w * patch, grad=False))
    variant = op_name[-1].upper()
    mod = DCHAGAggregator(
        L, D, heads, patch, tp, variant=variant, groups=groups, head_padding=head_padding, **kw
    )
    return BuiltOp(mod, randn(batch, mod.band_count, h * patch, w * patch, grad=False))

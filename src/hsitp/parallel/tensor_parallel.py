"""Channel-split (Megatron) tensor parallelism: the MLP pair, head-parallel attention and LayerNorm in its two
placements. ColumnParallelLinear / RowParallelLinear live in linear.py and are re-exported here.

LayerNorm placements (each class says which it is in ``placement``):
- ReplicatedLayerNorm: Megatron's placement. The activations entering LayerNorm are replicated (full D on every
  rank, right after the g all-reduce), so LayerNorm runs locally with no communication.
- ShardedLayerNorm: the paper's assumption (sections 4.3 and 10.4): D itself is sharded, so the per-token mean
  and variance need an all-reduce of partial sums (forward and backward).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hsitp.parallel.collectives import all_reduce_sum, gather_from_tp
from hsitp.parallel.dense import DenseMLP, dense_layernorm, move
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import Mesh2D, TPGroup
from hsitp.parallel.linear import ColumnParallelLinear, Partition, RowParallelLinear
from hsitp.parallel.padding import Split, zero_pad_grads
from hsitp.parallel.two_d import Attention2D

__all__ = [
    "ColumnParallelLinear",
    "HeadParallelAttention",
    "ParallelMLP",
    "ReplicatedLayerNorm",
    "RowParallelLinear",
    "ShardedLayerNorm",
]


class ParallelMLP(nn.Module):
    """Megatron MLP pair: fc1 column-parallel (hidden split), GELU, fc2 row-parallel. One f before fc1 and one
    g after fc2, i.e. one all-reduce forward and one backward. Input and output (B, N, D) replicated.
    """

    op_name = "mlp"

    def __init__(
        self,
        dim: int,
        hidden: int,
        tp: TPGroup,
        *,
        seed: int = 0,
        master: DenseMLP | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        master = master if master is not None else DenseMLP(dim, hidden, seed=seed)
        self.hidden_split = Split("hidden", hidden, tp.size)
        part = Partition(self.hidden_split)
        kw = {"dtype": dtype, "device": device}
        self.fc1 = ColumnParallelLinear.from_dense(master.fc1, tp, partition=part, **kw)
        self.fc2 = RowParallelLinear.from_dense(master.fc2, tp, partition=part, **kw)

    @classmethod
    def from_dense(cls, dense: DenseMLP, tp: TPGroup, **kwargs: object) -> ParallelMLP:
        return cls(dense.fc1.in_features, dense.fc1.out_features, tp, master=dense, **kwargs)

    def padding_report(self) -> list[dict[str, float | int | str]]:
        return [self.hidden_split.report()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))  # (B, N, D) -> (B, N, hidden/P) -> (B, N, D)


class HeadParallelAttention(Attention2D):
    """The channel split of attention: whole heads per rank (qkv column-parallel, proj row-parallel), full
    sequence on every rank; input and output (B, N, D) replicated. Heads not divisible by P are an error unless
    ``head_padding`` adds zero heads.
    """

    op_name = "attn_channel"

    def __init__(
        self, dim: int, heads: int, tp: TPGroup, *, head_padding: bool = False, **kwargs: object
    ) -> None:
        mesh = Mesh2D(channel=tp, token=TPGroup.single())
        super().__init__(dim, heads, mesh, head_padding=head_padding, **kwargs)


class ReplicatedLayerNorm(nn.LayerNorm):
    """LayerNorm, Megatron placement: replicated (B, N, D) input, replicated weights, no communication."""

    placement = "replicated"
    label = "LayerNorm replicated on every TP rank (Megatron): full D local, no communication"
    op_name = "layernorm_replicated"

    @classmethod
    def from_dense(cls, ln: nn.LayerNorm, tp: TPGroup | None = None) -> ReplicatedLayerNorm:
        out = cls(ln.normalized_shape, eps=ln.eps, elementwise_affine=ln.elementwise_affine)
        out.load_state_dict(ln.state_dict())
        return out.to(ln.weight.device, ln.weight.dtype)


class ShardedLayerNorm(nn.Module):
    """LayerNorm over a D sharded across P ranks (paper section 4.3): per-token sum and sum of squares of the
    local slice are all-reduced (one all-reduce of (..., 2) forward, one backward), statistics in >= float32.
    Input and output (..., D/P) with zero padding when D does not divide (padded columns stay zero).
    """

    placement = "sharded"
    label = "LayerNorm over a sharded D (paper 4.3): statistics all-reduced forward and backward"
    op_name = "layernorm_sharded"

    def __init__(
        self,
        dim: int,
        tp: TPGroup,
        *,
        eps: float = 1e-5,
        seed: int = 0,
        master: nn.LayerNorm | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        master = master if master is not None else dense_layernorm(dim, seed=seed, eps=eps)
        if tuple(master.normalized_shape) != (dim,):
            raise ShardingError(
                f"master LayerNorm normalises {tuple(master.normalized_shape)}, expected ({dim},)"
            )
        self.tp, self.dim, self.eps = tp, dim, master.eps
        self.split = Split("dim", dim, tp.size)
        valid = self.split.valid_mask(tp.rank)  # (D/P,)
        self.weight = nn.Parameter(self.split.shard(master.weight.detach(), tp.rank, 0).clone())  # (D/P,)
        self.bias = nn.Parameter(self.split.shard(master.bias.detach(), tp.rank, 0).clone())  # (D/P,)
        pad_mask = valid if self.split.pads(tp.rank) else None
        zero_pad_grads(self.weight, pad_mask)
        zero_pad_grads(self.bias, pad_mask)
        self.register_buffer("valid", valid.float() if self.split.is_padded else None, persistent=False)
        move(self, device, dtype)

    @classmethod
    def from_dense(cls, ln: nn.LayerNorm, tp: TPGroup, **kwargs: object) -> ShardedLayerNorm:
        return cls(ln.normalized_shape[0], tp, master=ln, **kwargs)

    def local_from_full(self, name: str, full: torch.Tensor) -> torch.Tensor:
        return self.split.shard(full, self.tp.rank, 0)

    def shard(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's (zero padded) slice of a full (..., D) tensor."""
        return self.split.shard(x, self.tp.rank, -1)

    def gather(self, y: torch.Tensor) -> torch.Tensor:
        """Full (..., D) from every rank's slices, padding dropped."""
        return self.split.unpad(gather_from_tp(y, self.tp, dim=-1), dim=-1)

    def padding_report(self) -> list[dict[str, float | int | str]]:
        return [self.split.report()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.split.local:
            raise ShardingError(
                f"expected the local slice of D ({self.split.local} features), got {x.shape[-1]}"
            )
        if self.valid is not None:
            x = x * self.valid.to(x.dtype)  # padded columns must not enter the statistics
        xf = x.to(torch.promote_types(x.dtype, torch.float32))  # (..., D/P), stats in >= float32
        stats = torch.stack([xf.sum(-1), xf.square().sum(-1)], dim=-1)  # (..., 2) local partial sums
        stats = all_reduce_sum(stats, self.tp)  # (..., 2) sums over the full D
        mean = stats[..., :1] / self.dim  # (..., 1)
        var = (stats[..., 1:] / self.dim - mean.square()).clamp_min(0.0)  # (..., 1) biased, as nn.LayerNorm
        y = ((xf - mean) * torch.rsqrt(var + self.eps)).to(x.dtype)  # (..., D/P)
        return y * self.weight + self.bias

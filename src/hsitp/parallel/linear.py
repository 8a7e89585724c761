"""Megatron-LM column- and row-parallel linear layers (Shoeybi et al. 2019, section 3).

Master weights are initialised whole (from a seed, or taken from a dense ``nn.Linear``) and then sliced, so a
sharded layer equals the dense one for the same seed. A :class:`Partition` says which rows (column parallel) or
columns (row parallel) go to which rank: the split is over ``units`` (output features, hidden units or heads) of
``unit`` consecutive features each, repeated in ``blocks`` interleaved blocks (3 for a fused qkv, 2 for kv).
Units that do not divide by P are zero padded (see padding.Split); padded entries get masked gradients so they
stay zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import torch
import torch.nn.functional as F
from torch import nn

from hsitp.parallel.collectives import copy_to_tp, gather_from_tp, reduce_from_tp
from hsitp.parallel.dense import move, seeded
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.padding import Split, zero_pad_grads


@dataclass(frozen=True)
class Partition:
    """Feature axis of size ``blocks * split.size * unit`` split over ``split.parts`` ranks by units."""

    split: Split
    blocks: int = 1
    unit: int = 1

    @property
    def full(self) -> int:
        return self.blocks * self.split.size * self.unit

    @property
    def local(self) -> int:
        return self.blocks * self.split.local * self.unit

    def shard(self, full: torch.Tensor, rank: int, dim: int) -> torch.Tensor:
        """This rank's (zero padded) features of ``full`` along ``dim`` (weights, biases or their grads)."""
        dim = dim % full.dim()
        if full.shape[dim] != self.full:
            raise ShardingError(
                f"partition expects {self.full} features along dim {dim}, got {full.shape[dim]}"
            )
        shape = list(full.shape)
        view = full.reshape(*shape[:dim], self.blocks, self.split.size, self.unit, *shape[dim + 1 :])
        local = self.split.shard(view, rank, dim + 1)  # (..., blocks, local_units, unit, ...)
        return local.reshape(*shape[:dim], self.local, *shape[dim + 1 :])

    def valid(self, rank: int) -> torch.Tensor:
        """(local,) bool: True at real features."""
        mask = self.split.valid_mask(rank)  # (local_units,)
        return mask[None, :, None].expand(self.blocks, -1, self.unit).reshape(-1)

    def padding_mask(self, rank: int) -> torch.Tensor | None:
        """``valid(rank)``, or None when this rank holds no padded feature (for zero_pad_grads)."""
        return self.valid(rank) if self.split.pads(rank) else None


def plain_partition(name: str, features: int, parts: int) -> Partition:
    return Partition(Split(name, features, parts))


class _ShardedLinear(nn.Module):
    """A linear layer whose weight is split over P along ``dim`` (0: output rows, column parallel; 1: input
    columns, row parallel), sliced from a master ``nn.Linear`` (given, or drawn from ``seed``); padded entries get
    masked gradients. The bias is split with the rows, or replicated when the split is over the inputs."""

    dim: int  # the weight's split axis
    kind: str  # "column" | "row", for the error

    def __init__(
        self,
        in_features: int,
        out_features: int,
        tp: TPGroup,
        *,
        bias: bool = True,
        partition: Partition | None = None,
        seed: int = 0,
        master: nn.Linear | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.tp = tp
        self.in_features, self.out_features = in_features, out_features
        name, features = ("out_features", out_features) if self.dim == 0 else ("in_features", in_features)
        self.partition = partition or plain_partition(name, features, tp.size)
        if self.partition.full != features or self.partition.split.parts != tp.size:
            raise ShardingError(
                f"{self.kind} partition {self.partition} does not fit {name}={features}, P={tp.size}"
            )
        if master is None:
            with seeded(seed):
                master = nn.Linear(in_features, out_features, bias=bias)
        valid = self.partition.padding_mask(tp.rank)  # (features/P,) or None
        # (out, in) / P
        self.weight = nn.Parameter(self.local_from_full("weight", master.weight.detach()).clone())
        zero_pad_grads(self.weight, None if valid is None else valid.unsqueeze(1 - self.dim))
        if master.bias is not None:  # (out/P,) column parallel, (out,) row parallel
            self.bias = nn.Parameter(self.local_from_full("bias", master.bias.detach()).clone())
            if self.dim == 0:
                zero_pad_grads(self.bias, valid)
        else:
            self.register_parameter("bias", None)
        move(self, device, dtype)

    @classmethod
    def from_dense(cls, linear: nn.Linear, tp: TPGroup, **kwargs: Any) -> Self:
        return cls(
            linear.in_features, linear.out_features, tp, bias=linear.bias is not None, master=linear, **kwargs
        )

    def local_from_full(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """Slice a full-size tensor (a dense weight or its gradient) as this rank's parameter ``name``."""
        if self.dim == 1 and name != "weight":
            return full  # the row-parallel bias is replicated
        return self.partition.shard(full, self.tp.rank, self.dim)


class ColumnParallelLinear(_ShardedLinear):
    """Y_r = X A_r^T + b_r: output features split over P; input replicated, entered through Megatron's f.

    ``gather_output`` all-gathers the shards (backward: local slice) and drops padding, giving (..., out).
    """

    dim, kind = 0, "column"

    def __init__(self, *args: Any, gather_output: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gather_output = gather_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = copy_to_tp(x, self.tp)  # (..., in), replicated
        y = F.linear(x, self.weight, self.bias)  # (..., out/P)
        if not self.gather_output:
            return y
        y = gather_from_tp(y, self.tp, dim=-1)  # (..., P * out/P)
        if self.partition.blocks == 1 and self.partition.unit == 1:
            return self.partition.split.unpad(y, dim=-1)  # (..., out)
        raise ShardingError("gather_output is only supported for plain (unit = 1, blocks = 1) partitions")


class RowParallelLinear(_ShardedLinear):
    """Y = sum_r X_r A_r^T + b: input features split over P (input already sharded), partial products summed
    by Megatron's g (all-reduce); the replicated bias is added once, after the reduction.
    """

    dim, kind = 1, "row"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight)  # (..., out), partial sum over this rank's inputs
        y = reduce_from_tp(y, self.tp)  # (..., out), full sum on every rank
        return y if self.bias is None else y + self.bias

"""Self-attention split over a 2-D mesh P = P_c x P_t: heads over the channel group (Megatron column/row: qkv
column-parallel, proj row-parallel, one all-reduce) and spatial tokens over the token group (local queries,
keys and values all-gathered, whose backward is a reduce-scatter). P_t = 1 is head-parallel attention (the
channel split); P_c = 1 is token-parallel attention (the N split); both are subclasses of this one.

Weights are sharded over the channel group and replicated over the token group; their gradients are partial
over the token group (each rank saw only its tokens): call :meth:`Attention2D.reduce_replicated_grads` after
backward, as data parallelism would.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from hsitp.parallel.attention_kernels import attend
from hsitp.parallel.collectives import all_reduce_grads, gather_from_tp, gather_seq
from hsitp.parallel.dense import DenseAttention, head_dim
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import Mesh2D
from hsitp.parallel.linear import ColumnParallelLinear, Partition, RowParallelLinear
from hsitp.parallel.padding import Split, split_heads


class Attention2D(nn.Module):
    """Heads x tokens split attention. Input: this rank's tokens (B, N_local, D), replicated over the channel
    group; output: the same tokens' attention output (B, N_local, D). Padded tokens (N not divisible by P_t)
    are masked as keys and their output rows are zero.
    """

    op_name = "attn_2d"

    def __init__(
        self,
        dim: int,
        heads: int,
        mesh: Mesh2D,
        *,
        n_tokens: int | None = None,
        head_padding: bool = False,
        seed: int = 0,
        master: DenseAttention | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.mesh, self.dim, self.heads = mesh, dim, heads
        self.head_dim = head_dim(dim, heads)
        self.head_split = split_heads(heads, mesh.channel.size, head_padding=head_padding)
        if mesh.token.size > 1 and n_tokens is None:
            raise ShardingError(
                "token-split attention needs n_tokens (the unsplit N) to place and mask padding"
            )
        self.token_split = Split("tokens", n_tokens, mesh.token.size) if n_tokens is not None else None
        master = master if master is not None else DenseAttention(dim, heads, seed=seed)
        if (master.dim, master.heads) != (dim, heads):
            raise ShardingError(
                f"master attention is D={master.dim}, heads={master.heads}; expected {dim}, {heads}"
            )
        kw = {"dtype": dtype, "device": device}
        whole_heads = Partition(self.head_split, unit=self.head_dim)  # qkv: q, k and v blocks
        self.qkv = ColumnParallelLinear.from_dense(
            master.qkv, mesh.channel, partition=replace(whole_heads, blocks=3), **kw
        )
        self.proj = RowParallelLinear.from_dense(master.proj, mesh.channel, partition=whole_heads, **kw)
        ts = self.token_split
        padded = ts is not None and ts.is_padded
        key_valid = ts.padded_valid_mask() if padded else None  # (N_pad,)
        query_valid = ts.valid_mask(mesh.token.rank)[:, None].to(dtype or torch.float32) if padded else None
        self.register_buffer("key_valid", key_valid, persistent=False)
        self.register_buffer("query_valid", query_valid, persistent=False)  # (N_local, 1)
        if device is not None:
            self.to(device)

    def padding_report(self) -> list[dict[str, float | int | str]]:
        return [s.report() for s in (self.head_split, self.token_split) if s is not None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape  # (B, N_local, D)
        if self.token_split is not None and n != self.token_split.local:
            raise ShardingError(
                f"expected this rank's {self.token_split.local} tokens (N = {self.token_split.size} over "
                f"P_t = {self.token_split.parts}), got {n}; use shard_tokens()"
            )
        h, hd = self.head_split.local, self.head_dim
        qkv = self.qkv(x).view(b, n, 3, h, hd)  # (B, N_local, 3, h_local, hd)
        q = qkv[:, :, 0].transpose(1, 2)  # (B, h_local, N_local, hd)
        kv = gather_seq(qkv[:, :, 1:], self.mesh.token, dim=1)  # (B, N_pad, 2, h_local, hd)
        k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, h_local, N_pad, hd) each
        o = attend(q, k, v, self.key_valid)  # (B, h_local, N_local, hd)
        y = self.proj(o.transpose(1, 2).reshape(b, n, h * hd))  # (B, N_local, D)
        return y if self.query_valid is None else y * self.query_valid

    def shard_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's (zero padded) tokens of a full (B, N, D) tensor."""
        if self.token_split is None:
            return x
        return self.token_split.shard(x, self.mesh.token.rank, dim=1)  # (B, N_local, D)

    def gather_tokens(self, y: torch.Tensor) -> torch.Tensor:
        """All ranks' outputs, padding dropped: (B, N_local, D) -> (B, N, D)."""
        if self.token_split is None:
            return y
        return self.token_split.unpad(gather_from_tp(y, self.mesh.token, dim=1), dim=1)

    def reduce_replicated_grads(self) -> None:
        """Sum weight gradients over the token group (each rank saw only its tokens); no-op when P_t = 1."""
        all_reduce_grads(self.parameters(), self.mesh.token)

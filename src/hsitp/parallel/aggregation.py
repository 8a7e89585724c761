"""Cross-band aggregation: the TP baseline and D-CHAG (Tsaris et al., arXiv 2506.21411).

Both turn a (B, L, H, W) cube into one token per spatial location, (B, N, D), N = H W / p^2:

- TPAggregator (baseline, "TP alone"): every rank tokenises all L bands (replicated), then a head-sharded
  single-query cross-attention over the L band tokens (q: D -> D/P, kv: D -> 2D/P, proj: D/P -> D, then one
  all-reduce). Backward all-reduces the gradient of the whole (B N, L, D) token tensor (Megatron's f), plus
  a (1, 1, D) all-reduce for the replicated learned query's gradient (also in D-CHAG's final attention).
- DCHAGAggregator: rank r tokenises only its bands, aggregates them locally with rank-local (unsynchronised)
  weights (-L: a Linear over the channel axis; -C: a full single-query cross-attention; g groups per rank with a
  shared-weight aggregator per group), all-gathers the P partial tokens (backward: local slice, no
  communication), then the same head-sharded cross-attention over the P gathered tokens.

Choice made here where the D-CHAG description leaves it open: with g > 1 groups the g group tokens are
aggregated by a second aggregator of the same variant (its own weights) before the all-gather.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import nn

from hsitp.names import BY_VARIANT, PLANS
from hsitp.parallel.attention_kernels import single_query_attention
from hsitp.parallel.collectives import copy_to_tp, gather_from_tp
from hsitp.parallel.dense import (
    DenseDCHAG,
    DenseTPAggregator,
    SingleQueryCrossAttention,
    clone_module,
    move,
    pad_slots,
)
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.linear import ColumnParallelLinear, Partition, RowParallelLinear
from hsitp.parallel.padding import Split, split_heads


class HeadParallelCrossAttention(nn.Module):
    """Single learned query cross-attending over S tokens, sharded by heads (Megatron column/row).

    tokens (M, S, D) replicated -> (M, D) replicated. The query parameter is replicated and enters q through f.
    """

    def __init__(
        self,
        master: SingleQueryCrossAttention,
        tp: TPGroup,
        *,
        head_padding: bool = False,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.tp, self.dim, self.heads, self.head_dim = tp, master.dim, master.heads, master.head_dim
        self.kernel = master.kernel  # exact or sdpa, as the dense master's
        self.head_split = split_heads(master.heads, tp.size, head_padding=head_padding)
        kw = {"dtype": dtype, "device": device}
        whole_heads = Partition(self.head_split, unit=self.head_dim)  # kv: k and v blocks
        self.query = nn.Parameter(master.query.detach().clone().to(device=device, dtype=dtype))  # (1, 1, D)
        self.q = ColumnParallelLinear.from_dense(master.q, tp, partition=whole_heads, **kw)
        self.kv = ColumnParallelLinear.from_dense(
            master.kv, tp, partition=replace(whole_heads, blocks=2), **kw
        )
        self.proj = RowParallelLinear.from_dense(master.proj, tp, partition=whole_heads, **kw)

    @classmethod
    def from_dense(
        cls, dense: SingleQueryCrossAttention, tp: TPGroup, **kwargs: Any
    ) -> HeadParallelCrossAttention:
        """This rank's head shard of ``dense`` (the name every parallel layer built from its master has)."""
        return cls(dense, tp, **kwargs)

    def forward(self, tokens: torch.Tensor, key_valid: torch.Tensor | None = None) -> torch.Tensor:
        h, hd = self.head_split.local, self.head_dim
        q = self.q(self.query).view(h, hd)  # (h_local, hd)
        tokens = copy_to_tp(tokens, self.tp)  # Megatron's f, as the kv linear's: backward all-reduces dtokens
        kv = self.kv  # column-parallel: this rank's heads of k and v
        # (M, h_local hd)
        o = single_query_attention(tokens, q, kv.weight, kv.bias, key_valid, kernel=self.kernel)
        return self.proj(o)  # (M, D)


class TPAggregator(nn.Module):
    """TP baseline: replicated tokenisation of all L bands + head-sharded cross-attention over bands.

    Input (B, L, H, W), identical on every rank (broadcast by the data loader); output (B, N, D) replicated.
    """

    op_name = PLANS["tp"].op

    def __init__(
        self,
        bands: int,
        dim: int,
        heads: int,
        patch: int,
        tp: TPGroup,
        *,
        head_padding: bool = False,
        seed: int = 0,
        master: DenseTPAggregator | None = None,
        kernel: str = "exact",
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if master is None:  # kernel: the single-query attention's (a given master brings its own)
            master = DenseTPAggregator(bands, dim, heads, patch, seed=seed, kernel=kernel)
        self.tp, self.bands, self.dim, self.patch = tp, bands, dim, patch
        self.tokenizer = move(clone_module(master.tokenizer), device, dtype)
        self.attn = HeadParallelCrossAttention.from_dense(
            master.attn, tp, head_padding=head_padding, dtype=dtype, device=device
        )

    def padding_report(self) -> list[dict[str, float | int | str]]:
        return [self.attn.head_split.report()]

    # every rank tokenises every band, then the dense reference's steps with the head-sharded attention
    forward = DenseTPAggregator.forward


class DCHAGAggregator(nn.Module):
    """D-CHAG on TP rank r: local bands -> local tokens -> rank-local partial aggregation (variant "L" or "C",
    ``groups`` = g per rank) -> all-gather of P tokens (backward: local slice) -> head-sharded cross-attention.

    The band partition (``band_parts``, a padding.Split of the bands over P, padded to a multiple of P g): rank r
    owns ``band_count`` bands from ``band_start``; padded slots are zero tokens, masked. Input: this rank's bands (B, band_count, H, W)
    (``local_bands`` slices a full cube); output (B, N, D) replicated.
    """

    def __init__(
        self,
        bands: int,
        dim: int,
        heads: int,
        patch: int,
        tp: TPGroup,
        *,
        variant: str = "L",
        groups: int = 1,
        head_padding: bool = False,
        seed: int = 0,
        master: DenseDCHAG | None = None,
        kernel: str = "exact",
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if master is None:  # kernel: the single-query attentions' (a given master brings its own)
            master = DenseDCHAG(
                bands, dim, heads, patch, tp.size, variant=variant, groups=groups, seed=seed, kernel=kernel
            )
        if master.band_parts.parts != tp.size:
            raise ShardingError(
                f"master D-CHAG emulates P = {master.band_parts.parts} ranks, the group has {tp.size}"
            )
        self.op_name = BY_VARIANT[master.variant].op
        self.tp, self.bands, self.dim, self.patch = tp, bands, dim, patch
        self.variant, self.groups = master.variant, master.groups
        self.band_parts: Split = master.band_parts  # the band partition over the P ranks
        self.band_start, self.band_count = self.band_parts.start(tp.rank), self.band_parts.count(tp.rank)
        self.tokenizer = move(master.tokenizer.subset(self.band_start, self.band_count), device, dtype)
        self.partial = move(clone_module(master.partials[tp.rank]), device, dtype)
        self.final = HeadParallelCrossAttention.from_dense(
            master.final, tp, head_padding=head_padding, dtype=dtype, device=device
        )
        # made where the master's weights live: parallelising a model already on a GPU must not leave this mask on
        # the CPU (the first CUDA forward of a D-CHAG plan failed on exactly that)
        master_device = next(master.parameters()).device
        valid = master.slot_valid(tp.rank, master_device)  # (slots,) or None
        self.register_buffer("slot_valid", valid, persistent=False)
        if device is not None:
            self.to(device)

    def padding_report(self) -> list[dict[str, float | int | str]]:
        return [self.band_parts.report(), self.final.head_split.report()]

    def local_bands(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's bands of a full (B, L, H, W) cube."""
        return x[:, self.band_start : self.band_start + self.band_count]

    def local_from_full(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """Slice full tokenizer tensors (dense weights or grads) to this rank's bands; others pass through."""
        if name in ("tokenizer.proj.weight", "tokenizer.proj.bias"):
            return full[self.band_start * self.dim : (self.band_start + self.band_count) * self.dim]
        if name == "tokenizer.band_embed":
            return full[self.band_start : self.band_start + self.band_count]
        return full

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tok = self.tokenizer(x)  # (B, N, L_r, D): only this rank's bands
        b, n, count, d = tok.shape
        tok = pad_slots(tok.reshape(b * n, count, d), self.band_parts.local)  # (B*N, slots, D)
        part = self.partial(tok, self.slot_valid)  # (B*N, D), rank-local weights
        gathered = gather_from_tp(part.unsqueeze(1), self.tp, dim=1)  # (B*N, P, D), backward local slice
        return self.final(gathered).view(b, n, d)  # (B, N, D)

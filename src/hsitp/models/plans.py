"""Parallel plans: turn a dense SpectralSpatialTransformer into this rank's parallel model without editing it
(torchtitan style: copy the model, then swap submodules for the ``hsitp.parallel`` layers sliced from its weights).

| plan      | rank r's input            | tokenise + aggregate                                    | blocks         | output     |
|-----------|---------------------------|---------------------------------------------------------|----------------|------------|
| dense     | the cube                  | as the model (P = 1)                                    | as the model   | full       |
| tp        | the cube (replicated)     | all L bands; head-sharded cross-attention               | Megatron       | replicated |
| dchag_l/c | its bands (padding.Split) | its bands, rank-local partial, all-gather, head-sharded | Megatron       | replicated |
| token     | its N/P locations         | its locations, replicated weights                       | token-parallel | its part   |

Megatron: head-parallel attention and the column/row MLP pair (one all-reduce each, forward and backward);
token-parallel: local queries, keys and values all-gathered (backward: reduce-scatter).

LayerNorms, the position embedding and the head are replicated in every plan. Under ``token`` every weight is
replicated and sees only this rank's locations: ``reduce_grads()`` sums the gradients (one all-reduce) after
backward, as data parallelism would. Under ``tp`` / ``dchag_*`` the replicated weights already get full gradients
(their inputs are replicated; Megatron's f and g handle the rest); D-CHAG's partial aggregators are rank-local by
design (``partials[r]`` of the dense model lives on rank r only).

Token layout: the N locations (row-major over the (H/p, W/p) grid) are split by ``padding.Split`` (zero padding
when P does not divide N). Rank r's pixels travel as a strip image (B, C, p, N_r p) of its patches side by side,
so the model's own tokenizer (kernel = stride = p) and un-patchify run on it unchanged.
"""

from __future__ import annotations

import torch
from torch import nn

from hsitp.models.config import PLANS, ModelConfig, check_plan
from hsitp.models.model import PositionEmbedding, SpectralSpatialTransformer
from hsitp.names import DCHAG_PLANS
from hsitp.parallel.aggregation import DCHAGAggregator, TPAggregator
from hsitp.parallel.collectives import all_reduce_grads, gather_from_tp
from hsitp.parallel.dense import clone_module, move
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.padding import Split, local_state_from_full
from hsitp.parallel.tensor_parallel import HeadParallelAttention, ParallelMLP
from hsitp.parallel.token_parallel import TokenParallelAttention

__all__ = ["PLANS", "ParallelModel", "check_plan", "parallelize"]


class ParallelModel(nn.Module):
    """This rank's share of a SpectralSpatialTransformer under ``plan`` (input and output replicated here; the
    band and token plans override where data lives).

    - ``shard_input(x)``: this rank's part of a full (B, L, H, W) cube, what ``forward`` takes;
    - ``forward(x_local)``: this rank's part of the (B, classes, H, W) logits;
    - ``shard_output(y)``: this rank's part of a full (B, classes, H, W) tensor (targets, loss weights), laid out
      as ``forward``'s output; ``output_valid()`` masks its padding (None: none);
    - ``gather_output(y_local)``: the full logits (a collective under ``token``: every rank must call it);
    - ``reduce_grads()``: after backward, before the optimizer step;
    - ``local_state(full)``: dense-model tensors (weights or gradients, by the dense parameter names) mapped to
      this rank's parameters, keyed by this module's parameter names.
    """

    def __init__(self, model: SpectralSpatialTransformer, plan: str, tp: TPGroup) -> None:
        super().__init__()
        self.model, self.plan, self.tp = model, plan, tp
        self.config: ModelConfig = model.config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def shard_input(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def shard_output(self, y: torch.Tensor) -> torch.Tensor:
        return y

    def output_valid(self) -> torch.Tensor | None:
        return None

    def gather_output(self, y: torch.Tensor) -> torch.Tensor:
        return y

    def reduce_grads(self) -> None:
        """Nothing to reduce: every parameter already holds its full gradient."""

    def dense_name(self, name: str) -> str:
        """The dense model's parameter that this module's parameter ``name`` is (a slice of)."""
        return name.removeprefix("model.")

    def local_state(self, full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        renamed = {name: full[self.dense_name(name)] for name, _ in self.named_parameters()}
        return local_state_from_full(self, renamed)


class BandParallelModel(ParallelModel):
    """D-CHAG: rank r takes its own bands (B, L_r, H, W); output replicated."""

    def shard_input(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.aggregate.local_bands(x)  # (B, L_r, H, W)

    def dense_name(self, name: str) -> str:
        name = super().dense_name(name)
        prefix = "aggregate.partial."  # rank r's aggregator is the dense model's partials[r]
        if name.startswith(prefix):
            return f"aggregate.partials.{self.tp.rank}." + name.removeprefix(prefix)
        return name


class TokenParallelModel(ParallelModel):
    """Token split: rank r holds N/P locations as a strip of patches (B, C, p, N_r p), in and out."""

    def __init__(self, model: SpectralSpatialTransformer, plan: str, tp: TPGroup, split: Split) -> None:
        super().__init__(model, plan, tp)
        self.split = split

    def _strip(self, full: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> this rank's locations as a strip (B, C, p, N_local p), zeros at padded locations."""
        b, c = full.shape[:2]
        (h, w), p = self.config.grid, self.config.patch
        patches = full.reshape(b, c, h, p, w, p).permute(0, 1, 2, 4, 3, 5).reshape(b, c, h * w, p, p)
        local = self.split.shard(patches, self.tp.rank, dim=2)  # (B, C, N_local, p, p)
        return local.permute(0, 1, 3, 2, 4).reshape(b, c, p, self.split.local * p)  # (B, C, p, N_local p)

    def shard_input(self, x: torch.Tensor) -> torch.Tensor:
        return self._strip(x)  # (B, L, p, N_local p)

    def shard_output(self, y: torch.Tensor) -> torch.Tensor:
        return self._strip(y)  # (B, classes, p, N_local p)

    def output_valid(self) -> torch.Tensor:
        """(1, 1, p, N_local p) bool, on the model's device: False at this rank's padded locations (a loss must
        ignore them)."""
        h, w = self.config.height, self.config.width
        return self._strip(torch.ones(1, 1, h, w, dtype=torch.bool, device=self.model.head.weight.device))

    def gather_output(self, y: torch.Tensor) -> torch.Tensor:
        """Every rank's strip -> (B, classes, H, W); backward: this rank's slice (no communication)."""
        b, c = y.shape[:2]
        (h, w), p = self.config.grid, self.config.patch
        local = y.reshape(b, c, p, self.split.local, p).permute(0, 1, 3, 2, 4)  # (B, C, N_local, p, p)
        full = self.split.unpad(gather_from_tp(local, self.tp, dim=2), dim=2)  # (B, C, N, p, p)
        return full.reshape(b, c, h, w, p, p).permute(0, 1, 2, 4, 3, 5).reshape(b, c, h * p, w * p)

    def reduce_grads(self) -> None:
        """Every weight is replicated and saw only this rank's locations: sum the gradients (one all-reduce)."""
        all_reduce_grads(self.parameters(), self.tp)


class TokenPositionEmbedding(nn.Module):
    """The full (N, D) position embedding (replicated weight) added to this rank's N/P locations."""

    def __init__(self, dense: PositionEmbedding, split: Split, rank: int) -> None:
        super().__init__()
        self.split, self.rank = split, rank
        self.weight = nn.Parameter(dense.weight.detach().clone())  # (N, D)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        local = self.split.shard(self.weight, self.rank, dim=0)  # (N_local, D), zero rows at padding
        return tokens + local  # (B, N_local, D)


def _megatron_blocks(model: SpectralSpatialTransformer, tp: TPGroup, **kw: object) -> None:
    """Head-parallel attention and the Megatron MLP pair in every block (LayerNorms stay replicated)."""
    c = model.config
    for block in model.blocks:
        block.attn = HeadParallelAttention(c.dim, c.heads, tp, master=block.attn, **kw)
        block.mlp = ParallelMLP.from_dense(block.mlp, tp, **kw)


def parallelize(
    model: SpectralSpatialTransformer,
    plan: str,
    tp: TPGroup,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> ParallelModel:
    """This rank's model under ``plan`` over ``tp``, its weights sliced from ``model`` (left unchanged).

    Every rank must pass the same dense model (same config and seed). Raises PlanError before building anything
    when the plan does not fit (see ``check_plan``).
    """
    c = model.config
    check_plan(c, plan, tp.size)
    kw = {"dtype": dtype, "device": device}
    local = clone_module(model)
    if plan == "dense":
        out = ParallelModel(local, plan, tp)
    elif plan == "tp":
        local.aggregate = TPAggregator(c.bands, c.dim, c.heads, c.patch, tp, master=local.aggregate, **kw)
        _megatron_blocks(local, tp, **kw)
        out = ParallelModel(local, plan, tp)
    elif plan in DCHAG_PLANS:
        local.aggregate = DCHAGAggregator(c.bands, c.dim, c.heads, c.patch, tp, master=local.aggregate, **kw)
        _megatron_blocks(local, tp, **kw)
        out = BandParallelModel(local, plan, tp)
    else:  # token
        split = Split("tokens", c.n_tokens, tp.size)
        local.pos = TokenPositionEmbedding(local.pos, split, tp.rank)
        for block in local.blocks:
            block.attn = TokenParallelAttention(
                c.dim, c.heads, tp, n_tokens=c.n_tokens, master=block.attn, **kw
            )
        out = TokenParallelModel(local, plan, tp, split)
    move(out, device, dtype)
    return out

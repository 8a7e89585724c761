"""The spectral-spatial transformer, in one readable file (nanoGPT style). It knows nothing of parallelism:
``hsitp.models.plans`` turns it into a parallel model by swapping submodules, never by editing this file.

    x (B, L, H, W) hyperspectral crop, L bands
    -> aggregate.tokenizer: one patch embedding per band (kernel = stride = p) + band embedding   (B, N, L, D)
    -> aggregate: cross-band aggregation to one token per location                                (B, N, D)
         "attention":    one learned query cross-attends over the L band tokens (the TP baseline)
         "hierarchical": D-CHAG. Bands in ``parts`` chunks of ``groups`` groups; per chunk a partial aggregator
                         ("linear" over the band axis, or a "cross-attention") shared by its groups, then one
                         more to merge the chunk's group tokens; a cross-attention over the ``parts`` chunk tokens
    -> pos: + learned spatial position embedding                                                  (B, N, D)
    -> blocks: depth x pre-norm block, x + attn(ln1(x)) then x + mlp(ln2(x))                      (B, N, D)
    -> norm, head: per-token linear to p * p * classes, un-patchified                   (B, classes, H, W)

N = (H / p)(W / p). The building blocks are the dense reference modules of ``hsitp.parallel.dense`` (the same
ones every parallel layer is sliced from), so a plan can build its layers from this model's weights.
"""

from __future__ import annotations

import random

import torch
from torch import nn

from hsitp.models.config import ModelConfig, ModelConfigError
from hsitp.parallel.dense import (
    DenseAttention,
    DenseDCHAG,
    DenseMLP,
    DenseTPAggregator,
    seeded,
    trunc_normal_,
)


def _next(stream: random.Random) -> int:
    """The next sub-seed of a submodule (each draws its weights under its own seed; ``stream`` is plain Python, so
    it also runs under FakeTensorMode and on the meta device)."""
    return stream.getrandbits(62)


class PositionEmbedding(nn.Module):
    """Learned spatial position embedding, one D-vector per location (ViT initialisation, std 0.02)."""

    def __init__(self, n_tokens: int, dim: int, *, seed: int) -> None:
        super().__init__()
        with seeded(seed):
            self.weight = nn.Parameter(trunc_normal_(torch.empty(n_tokens, dim), std=0.02))  # (N, D)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.shape[1] != self.weight.shape[0]:
            raise ModelConfigError(
                f"the crop has {tokens.shape[1]} locations but the model was built for N = {self.weight.shape[0]} "
                "(model.height / model.patch x model.width / model.patch)"
            )
        return tokens + self.weight  # (B, N, D)


class Block(nn.Module):
    """Pre-norm transformer block: multi-head self-attention over the N locations, then a GELU MLP."""

    def __init__(self, config: ModelConfig, *, seeds: random.Random) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.attn = DenseAttention(config.dim, config.heads, seed=_next(seeds))
        self.ln2 = nn.LayerNorm(config.dim, eps=config.norm_eps)
        self.mlp = DenseMLP(config.dim, config.hidden, seed=_next(seeds))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # (B, N, D)
        return x + self.mlp(self.ln2(x))  # (B, N, D)


def unpatchify(logits: torch.Tensor, grid: tuple[int, int], patch: int, classes: int) -> torch.Tensor:
    """(B, N, classes * p * p) per-location logits -> (B, classes, h p, w p) per-pixel logits, N = h w."""
    b = logits.shape[0]
    h, w = grid
    x = logits.view(b, h, w, classes, patch, patch)  # (B, h, w, C, p, p)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, classes, h * patch, w * patch)  # (B, C, H, W)


class SpectralSpatialTransformer(nn.Module):
    """Per-pixel classifier of a hyperspectral crop: (B, L, H, W) -> (B, classes, H, W) logits.

    Weights are drawn from ``seed`` (each submodule from its own sub-seed), not from the global RNG, so two
    processes building the same config and seed hold the same master weights.
    """

    def __init__(self, config: ModelConfig, *, seed: int = 0) -> None:
        super().__init__()
        self.config = c = config
        seeds = random.Random(seed)  # the submodules' sub-seeds (_next)
        if c.aggregation == "attention":
            self.aggregate: nn.Module = DenseTPAggregator(
                c.bands, c.dim, c.heads, c.patch, seed=_next(seeds), kernel=c.attention_kernel
            )
        else:
            self.aggregate = DenseDCHAG(
                c.bands,
                c.dim,
                c.heads,
                c.patch,
                c.parts,
                variant=c.variant,
                groups=c.groups,
                seed=_next(seeds),
                kernel=c.attention_kernel,
            )
        self.pos = PositionEmbedding(c.n_tokens, c.dim, seed=_next(seeds))
        self.blocks = nn.ModuleList([Block(c, seeds=seeds) for _ in range(c.depth)])
        self.norm = nn.LayerNorm(c.dim, eps=c.norm_eps)
        with seeded(_next(seeds)):
            self.head = nn.Linear(c.dim, c.classes * c.patch * c.patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, _, height, width = x.shape  # (B, L, H, W)
        p = self.config.patch
        t = self.aggregate(x)  # (B, N, D): tokenise every band, aggregate the bands of each location
        t = self.pos(t)  # (B, N, D)
        for block in self.blocks:
            t = block(t)  # (B, N, D)
        logits = self.head(self.norm(t))  # (B, N, classes * p * p)
        return unpatchify(logits, (height // p, width // p), p, self.config.classes)  # (B, classes, H, W)

"""Self-supervised masked-band reconstruction before fine-tuning (``train.pretrain``), for every plan.

Each step draws ``train.batch`` random crops of the whole scene (the crop sampler's positions, flips and rot90,
from a generator of its own: the fine-tuning sampler's stream is not touched), sets a random ``mask_ratio`` share of
each crop's bands to 0 (their train mean in the standardised cube), and trains the model's encoder (tokeniser,
aggregation, position embedding, blocks, final norm) with a temporary per-pixel linear head (D -> L p p, replicated
on every rank as the classification head is) to reconstruct the masked bands: mean squared error over the masked
bands of every pixel. No label is read: the loss sees only spectra. It sees **every** pixel's spectrum, the test
pixels' included, so it is transductive, and the run's record says so (attribute ``transductive``). The head is
dropped afterwards and fine-tuning starts from the encoder (the classification head keeps its seeded
initialisation).

Parallel plans: the loss is normalised by the whole batch's masked values, as the classification loss by its train
pixels, so under ``token`` the ranks' partial losses sum to the full loss and ``reduce_grads`` (plus one all-reduce
of the temporary head's gradients) gives every rank the full gradient; under tp and D-CHAG every rank holds the full
loss and Megatron's collectives do the rest. :func:`encode` is the model's forward without its head
(``tests/test_train_places.py`` checks that the two agree, so a change of the model's forward cannot drift apart
from it unnoticed).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from hsitp.errors import HsitpError
from hsitp.models.model import unpatchify
from hsitp.parallel.collectives import all_reduce_grads
from hsitp.parallel.dense import seeded
from hsitp.train.record import PretrainAttrs
from hsitp.train.steps import global_loss, lr_lambda

# the pretraining stream's seed is the job's seed plus this (the fine-tuning sampler is seeded by the job's seed)
SEED_OFFSET = 1_000_003


class PretrainError(HsitpError):
    """Pretraining cannot go on (a non-finite loss)."""


@dataclass(frozen=True)
class PretrainResult:
    """What a pretraining did: its steps, every step's loss (the record keeps the first and the mean of the last
    10), and its wall time."""

    steps: int
    losses: tuple[float, ...]
    seconds: float

    @property
    def first_loss(self) -> float:
        return self.losses[0]

    @property
    def last_loss(self) -> float:
        tail = self.losses[-10:]
        return float(sum(tail) / len(tail))

    def attrs(self) -> PretrainAttrs:
        return PretrainAttrs(steps=self.steps, first_loss=self.first_loss, last_loss_mean_of_10=self.last_loss,
                             seconds=self.seconds)  # fmt: skip


def encode(model: Any, x_local: torch.Tensor) -> torch.Tensor:
    """(B, N_local, D) normed token features of a parallel model (``hsitp.models.plans.ParallelModel``) on this
    rank's input: ``SpectralSpatialTransformer.forward`` without ``head`` and un-patchify."""
    m = model.model
    t = m.aggregate(x_local)
    t = m.pos(t)
    for block in m.blocks:
        t = block(t)
    return m.norm(t)


def reconstruction_head(model: Any, seed: int, device: torch.device) -> nn.Linear:
    """The temporary head D -> L p p, drawn from ``seed`` (the same on every rank)."""
    c = model.config
    with seeded(seed):
        head = nn.Linear(c.dim, c.bands * c.patch * c.patch)
    return head.to(device)


def mask_bands(x: torch.Tensor, ratio: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked input, (B, L) bool mask): round(ratio x L) bands (at least 1) of each crop set to 0."""
    b, bands = x.shape[:2]
    k = max(1, int(round(ratio * bands)))
    mask = torch.zeros(b, bands, dtype=torch.bool)
    for i in range(b):
        mask[i, torch.randperm(bands, generator=gen)[:k]] = True
    return x.masked_fill(mask[:, :, None, None], 0.0), mask


def pretrain(setup: Any, settings: Any, seed: int) -> PretrainResult:
    """Run ``settings.pretrain.steps`` reconstruction steps on ``setup.model`` (every rank of the group calls it
    with the same arguments); the encoder's weights are updated in place."""
    from hsitp.train.data import CropSampler

    model, device = setup.model, setup.device
    c = model.config
    steps = settings.pretrain.steps
    head = reconstruction_head(model, seed + SEED_OFFSET, device)
    sampler = CropSampler(setup.scene, c.height, settings.batch, seed + SEED_OFFSET, augment=settings.augment)
    gen = torch.Generator().manual_seed(seed + SEED_OFFSET + 1)  # the band masks
    params = [*model.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=settings.pretrain.lr, weight_decay=settings.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(max(1, steps // 10), steps))
    losses: list[float] = []
    t0 = time.perf_counter()
    was_training = model.training
    model.train()
    try:
        for _ in range(steps):
            x, _labels = sampler.next()  # the labels are dropped: the loss sees spectra only
            del _labels
            losses.append(_step(setup, head, opt, sched, x, settings.pretrain.mask_ratio, gen))
    finally:
        model.train(was_training)
    del head, opt, sched
    return PretrainResult(steps, tuple(losses), time.perf_counter() - t0)


def _step(
    setup: Any,
    head: nn.Linear,
    opt: torch.optim.Optimizer,
    sched: Any,
    x: torch.Tensor,
    ratio: float,
    gen: torch.Generator,
) -> float:
    """One reconstruction step of ``setup.model`` on its group ``setup.tp``; the whole batch's loss."""
    model, tp = setup.model, setup.tp
    c = model.config
    masked, mask = mask_bands(x, ratio, gen)  # (B, L, S, S), (B, L)
    n_values = int(mask.sum()) * x.shape[-2] * x.shape[-1]  # masked values of the whole batch
    weight = mask[:, :, None, None].expand_as(x).float()
    x_local = model.shard_input(masked.to(setup.device))
    target = model.shard_output(x.to(setup.device))  # this rank's pixels, laid out as its outputs
    weight = model.shard_output(weight.to(setup.device))
    if setup.valid is not None:
        weight = weight * setup.valid
    opt.zero_grad(set_to_none=True)
    with setup.autocast:
        tokens = encode(model, x_local)  # (B, N_local, D)
        rec = head(tokens)  # (B, N_local, L p p)
    h, w = target.shape[-2:]
    rec = unpatchify(rec.float(), (h // c.patch, w // c.patch), c.patch, c.bands)  # (B, L, h, w)
    loss = (((rec - target) ** 2) * weight).sum() / max(n_values, 1)
    value = global_loss(loss, model.plan, tp)
    if not math.isfinite(value):
        raise PretrainError(f"the masked-band pretraining's loss is {value}; stopped (train.pretrain.lr?)")
    loss.backward()
    model.reduce_grads()
    if model.plan == "token" and tp.size > 1:  # the head saw only this rank's locations
        all_reduce_grads(head.parameters(), tp)
    opt.step()
    sched.step()
    return value

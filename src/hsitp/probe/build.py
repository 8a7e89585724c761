"""One probe point: the model of a plan at one size, its optimizer, a synthetic batch and the training step.

Shared by the measured probe (``hsitp probe run``, real tensors under torchrun) and the estimate (``hsitp probe
estimate``, FakeTensorMode on a fake process group): both run exactly this step, so what the estimate reports is
what the measured run would hold.

The step is one training iteration as the training stage runs it: ``zero_grad(set_to_none=True)`` (PyTorch's
default: gradients are allocated during backward, so they are "in flight" at the peak), forward on this rank's
input, a mean-squared error against a random target (masked at the token plan's padding), backward, the plan's
gradient reduction, an AdamW step. The batch is cloned inside the step so its bytes belong to the step.

Activation checkpointing (``checkpointing``): ``none``, or ``blocks``: every transformer block wrapped in
``torch.utils.checkpoint.checkpoint(use_reentrant=False)`` by the probe (the model is not edited), as D-CHAG's
artifact does for its blocks. Only each block's input is then kept; the block recomputes its forward in backward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from hsitp.probe.grid import Point, point_architecture
from hsitp.probe.tracker import PartTimeline
from hsitp.settings import ProbeModel


class CheckpointedBlock(nn.Module):
    """A transformer block whose forward is recomputed in backward (only its input is kept)."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def apply_checkpointing(model: nn.Module, policy: str) -> None:
    """Wrap the blocks of a (parallel) SpectralSpatialTransformer in place under ``policy`` ``blocks`` (``none``,
    the config's other policy: leave them)."""
    if policy == "blocks":
        inner = model.model if hasattr(model, "model") else model
        for i, block in enumerate(inner.blocks):
            inner.blocks[i] = CheckpointedBlock(block)


@dataclass
class Built:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    step: Callable[[], None]
    tokens_per_step: int  # B * N: the tokens one step trains on (all ranks together)


def build_point(
    point: Point,
    pc: ProbeModel,
    tp: Any,
    *,
    dtype: torch.dtype,
    device: torch.device | None,
    seed: int,
    fake: bool = False,
) -> Built:
    """This rank's model, AdamW and step for ``point`` on group ``tp`` (a TPGroup; its size is P).

    ``fake``: called under FakeTensorMode (build in place: no ``.to``, which FakeTensorMode cannot do)."""
    from hsitp.models import SpectralSpatialTransformer, parallelize

    arch = point_architecture(pc, point)
    dense = SpectralSpatialTransformer(arch, seed=seed)
    if fake:
        if dtype != torch.float32:
            for p in dense.parameters():
                p.data = p.data.to(dtype)
        model = parallelize(dense, point.plan, tp)
    else:
        model = parallelize(dense, point.plan, tp, dtype=dtype, device=device)
    del dense
    apply_checkpointing(model, point.checkpointing)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    b = int(pc.batch)
    gen = None if fake else torch.Generator().manual_seed(seed)
    # real tensors: drawn on the CPU (a CPU generator, the same numbers on every device), then moved; fake ones:
    # made in place, FakeTensorMode cannot move
    kw = {"dtype": dtype, "device": device if fake else None}
    x_full = torch.randn(b, arch.bands, arch.height, arch.width, generator=gen, **kw)  # (B, L, H, W)
    t_full = torch.randn(b, arch.classes, arch.height, arch.width, generator=gen, **kw)  # (B, classes, H, W)
    if not fake and device is not None:
        x_full, t_full = x_full.to(device), t_full.to(device)
    x_src = model.shard_input(x_full).contiguous()
    target = model.shard_output(t_full).contiguous()
    valid = model.output_valid()
    del x_full, t_full

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        x = x_src.clone()  # the batch is part of the step's memory
        out = model(x)
        err = (out - target).square()
        if valid is not None:
            err = err * valid.to(err.dtype)
        err.mean().backward()
        PartTimeline.mark_active("update")
        model.reduce_grads()
        opt.step()

    return Built(model, opt, step, b * arch.n_tokens)

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

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from hsitp.config import ConfigError
from hsitp.models import ModelConfig, architecture_for, check_plan, config_keys
from hsitp.probe.memory import PartTimeline

CHECKPOINTING = ("none", "blocks")
DCHAG_PLANS = ("dchag_l", "dchag_c")


@dataclass(frozen=True)
class Point:
    """One probed configuration: plan at P ranks, g groups (D-CHAG), L bands, N tokens, checkpointing policy."""

    plan: str
    P: int
    g: int
    L: int
    N: int
    checkpointing: str


def crop_side(N: int, patch: int, *, key: str = "probe.N") -> int:  # noqa: N803
    """Pixels per side of a square crop of N = (side / patch)^2 tokens."""
    root = math.isqrt(N)
    if root * root != N:
        raise ConfigError(
            f"{key}: N = {N} is not a square number of tokens (square crops: N = (side / patch)^2)"
        )
    return root * patch


def section_keys(section: str) -> dict[str, str]:
    """ModelConfig field -> the key of a probe section (``probe``, ``probe.estimate.grid``) that sets it, for
    errors that name the key as the user writes it."""
    fields = ("dim", "heads", "depth", "mlp_ratio", "patch", "classes")
    return {k: f"{section}.{k}" for k in fields} | {"bands": f"{section}.L"}


def base_config(pc: Mapping[str, Any], L: int, N: int) -> ModelConfig:  # noqa: N803
    """The dense model of a probe section at L bands and N tokens (architecture_for then picks the plan's); a
    section with ``height`` and ``width`` (the estimate's D-CHAG configs) gives the crop itself."""
    if "height" in pc:
        height, width = int(pc["height"]), int(pc["width"])
    else:
        height = width = crop_side(N, int(pc["patch"]))
    return ModelConfig(
        bands=L,
        height=height,
        width=width,
        classes=int(pc["classes"]),
        patch=int(pc["patch"]),
        dim=int(pc["dim"]),
        heads=int(pc["heads"]),
        depth=int(pc["depth"]),
        mlp_ratio=int(pc["mlp_ratio"]),
    )


def points(pc: Mapping[str, Any], P: int) -> list[Point]:  # noqa: N803
    """Every point of the probe grid at P (dense only at P = 1; plans without groups once, at the first g).

    Raises ConfigError, naming the key, when a plan cannot split the model at P."""
    out = []
    for plan in pc["plans"]:
        if (plan == "dense") != (P == 1):
            continue
        groups = pc["groups"] if plan in DCHAG_PLANS else pc["groups"][:1]
        for L in pc["L"]:
            for N in pc["N"]:
                for g in groups:
                    try:
                        with config_keys(section_keys("probe")):
                            base = base_config(pc, L, N)
                            check_plan(
                                architecture_for(base, plan, P, g if plan in DCHAG_PLANS else 1), plan, P
                            )
                    except Exception as exc:
                        raise ConfigError(
                            f"probe: plan {plan!r} at P = {P}, L = {L}, N = {N}, g = {g}: {exc}"
                        ) from exc
                    for ck in pc["checkpointing"]:
                        out.append(Point(plan, P, int(g), int(L), int(N), ck))
    return out


class CheckpointedBlock(nn.Module):
    """A transformer block whose forward is recomputed in backward (only its input is kept)."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def apply_checkpointing(model: nn.Module, policy: str) -> None:
    """Wrap the blocks of a (parallel) SpectralSpatialTransformer in place according to ``policy``."""
    if policy not in CHECKPOINTING:
        raise ConfigError(f"probe.checkpointing: {policy!r} is not one of {CHECKPOINTING}")
    if policy == "none":
        return
    inner = model.model if hasattr(model, "model") else model
    for i, block in enumerate(inner.blocks):
        inner.blocks[i] = CheckpointedBlock(block)


@dataclass
class Built:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    step: Callable[[], None]
    config: ModelConfig
    tokens_per_step: int  # B * N: the tokens one step trains on (all ranks together)


def build_point(
    point: Point,
    pc: Mapping[str, Any],
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

    g = point.g if point.plan in DCHAG_PLANS else 1
    arch = architecture_for(base_config(pc, point.L, point.N), point.plan, point.P, g)
    if fake:
        dense = SpectralSpatialTransformer(arch, seed=seed)
        if dtype != torch.float32:
            for p in dense.parameters():
                p.data = p.data.to(dtype)
        model = parallelize(dense, point.plan, tp)
    else:
        dense = SpectralSpatialTransformer(arch, seed=seed)
        model = parallelize(dense, point.plan, tp, dtype=dtype, device=device)
    del dense
    apply_checkpointing(model, point.checkpointing)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    b = int(pc["batch"])
    gen = None if fake else torch.Generator().manual_seed(seed)
    kw = {"dtype": dtype, "device": device}
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

    return Built(model, opt, step, arch, b * arch.n_tokens)

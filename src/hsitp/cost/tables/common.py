"""What every cost table shares: layer sizes, switches and the training setup from the cost
config, and the attributes that say a table is modelled and with which hardware presets."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hsitp.cost.hardware import Hardware, get_hardware
from hsitp.cost.memory import TrainingSetup
from hsitp.cost.refined import BLOCK_SPLITS, block_cost
from hsitp.sections.cost import Scale
from hsitp.settings import CostSettings
from hsitp.shape import DTYPE_BYTES, LayerShape

ORIGIN = "modelled (hsitp.cost), not measured"

# Coordinates several tables share, described once (each table adds its own with hsitp.io.describe).
COORD_ATTRS: dict[str, dict[str, str]] = {
    "P": {"units": "1", "long_name": "devices the layer or block is split over"},
    "hardware": {"long_name": "hardware preset (hsitp.cost.hardware) or measured:PATH"},
    "split": {"long_name": "split of a block: channel (hidden dim and heads), token (sequence) or 2d (both)"},
    "model": {"long_name": "cost model: stated (the paper's formulas) or refined (per-layer model)"},
    "scheme": {
        "long_name": "pure TP (tp) or D-CHAG with linear (dchag_l) or cross-attention (dchag_c) aggregators"
    },
    "dataset": {"long_name": "registry dataset"},
    "patch": {"units": "1", "long_name": "patch size p (pixels per side of a token)"},
    "D": {"units": "1", "long_name": "embedding dimension"},
}


def hardware_list(names: Iterable[str]) -> list[Hardware]:
    """Presets or ``measured:PATH`` hardware, in the config's order."""
    return [get_hardware(n) for n in names]


def _hardware_attrs(hws: Sequence[Hardware]) -> dict[str, str]:
    """Each preset's scalar fields (peaks, efficiencies, latencies, node size, memory, sources), by name; a
    measured calibration's per-op and per-collective fits stay in its own file."""
    return {
        "hardware_presets": json.dumps(
            {
                hw.name: {
                    f.name: getattr(hw, f.name)
                    for f in dataclasses.fields(hw)
                    if f.name != "name" and not isinstance(getattr(hw, f.name), Mapping | tuple)
                }
                for hw in hws
            }
        )
    }


def common_attrs(cost: CostSettings, hws: Sequence[Hardware]) -> dict[str, Any]:
    """Attributes every table carries: modelled-not-measured, switches, overlap, dtype and the presets used."""
    return {
        "origin": ORIGIN,
        "switches_on": json.dumps(cost.switches.on()),
        "overlap_fraction": float(cost.overlap),
        "dtype": cost.dtype,
        **_hardware_attrs(hws),
    }


def layer_shape(
    cost: CostSettings, *, N: int, D: int | None = None, groups: int = 1, patch: int | None = None
) -> LayerShape:
    """Layer sizes from the cost config (D, L, B, heads, MLP ratio, dtype), with N and optionally D, g, p given."""
    return LayerShape(
        N=int(N),
        D=int(D or cost.embed_dim),
        L=int(cost.bands),
        batch=int(cost.batch),
        heads=int(cost.heads),
        mlp_ratio=int(cost.mlp_ratio),
        dtype=cost.dtype,
        groups=int(groups),
        patch=int(patch or cost.ccr.patch),
    )


def block_costs(shape: LayerShape, P: int, hw: Hardware, cost: CostSettings) -> dict[str, Any]:
    """One block's cost per split (channel, token, 2-D), with the config's overlap and gradient accumulation."""
    return {
        split: block_cost(
            split,
            shape,
            P,
            hw,
            cost.switches,
            overlap=float(cost.overlap),
            grad_accumulation=int(cost.grad_accumulation),
        )
        for split in BLOCK_SPLITS
    }


def training_setup(cost: CostSettings, scale: Scale | None = None) -> TrainingSetup:
    """Precision and optimizer from the cost config; FSDP and checkpointing from ``scale`` (off without it)."""
    return TrainingSetup(
        dtype_bytes=DTYPE_BYTES[cost.dtype],
        master_fp32=bool(cost.master_fp32),
        optimizer=cost.optimizer,
        fsdp=bool(scale and scale.fsdp),
        activation_checkpointing=bool(scale and scale.activation_checkpointing),
    )

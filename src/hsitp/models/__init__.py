"""The spectral-spatial transformer (``model``) and the plans that parallelise it (``plans``).

``hsitp.models.config`` (ModelConfig, check_plan, architecture_for) is pure Python: importing this package does
not import torch; the torch modules load on first use of their names.
"""

from __future__ import annotations

import importlib
from typing import Any

from hsitp.models.config import (
    PLANS,
    ModelConfig,
    ModelConfigError,
    PlanError,
    architecture_for,
    check_plan,
    config_keys,
)

_LAZY = {
    "SpectralSpatialTransformer": "hsitp.models.model",
    "ParallelModel": "hsitp.models.plans",
    "parallelize": "hsitp.models.plans",
}

__all__ = [
    "PLANS",
    "ModelConfig",
    "ModelConfigError",
    "ParallelModel",
    "PlanError",
    "SpectralSpatialTransformer",
    "architecture_for",
    "check_plan",
    "config_keys",
    "parallelize",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

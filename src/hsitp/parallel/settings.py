"""The ``parallel`` section of the pipeline config as a typed object."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParallelSettings:
    backend: str = "auto"
    timeout_s: float = 300.0
    heads: int = 8
    head_padding: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ParallelSettings:
        """Read ``config["parallel"]`` (already schema-validated; defaults fill absent keys)."""
        par = dict(config.get("parallel", {}))
        return cls(**{k: par[k] for k in cls.__dataclass_fields__ if k in par})

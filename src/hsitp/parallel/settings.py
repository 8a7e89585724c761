"""The layer settings of the pipeline config's ``parallel`` section as a typed object.

The section's process-group keys (backend, timeout_s) are read by :class:`hsitp.parallel.runtime.RuntimeSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hsitp.parallel.errors import DistributedSetupError


@dataclass(frozen=True)
class ParallelSettings:
    """How the parallel layers split; errors name the config key."""

    # Attention heads of every attention and cross-attention layer (parallel.heads).
    heads: int = 8
    # Heads not divisible by the channel split: False = error, True = pad with zero heads (parallel.head_padding).
    head_padding: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.heads, bool) or not isinstance(self.heads, int) or self.heads < 1:
            raise DistributedSetupError(f"parallel.heads must be an integer >= 1, got {self.heads!r}")
        if not isinstance(self.head_padding, bool):
            raise DistributedSetupError(
                f"parallel.head_padding must be true or false, got {self.head_padding!r}"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ParallelSettings:
        """Read ``config["parallel"]`` (defaults fill absent keys; the process-group keys are RuntimeSettings')."""
        par = config.get("parallel", {})
        return cls(**{k: par[k] for k in cls.__dataclass_fields__ if k in par})

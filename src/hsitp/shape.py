"""The one description of a layer's input that every stage shares: the cost model prices it, the parallel layers
build it, the microbenchmarks time it. Torch-free, so the cost model can import it.

Notation of the project: N tokens, D features, L bands. The parallel degree P and the 2-D mesh are not part of a
shape (they say how it is split): every function that needs them takes them as arguments.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

from hsitp.errors import HsitpError

# Bytes per element of each dtype a layer can run in; the names are torch's (``getattr(torch, name)``).
DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}

# Elements of one chunk of products in D-CHAG-L's level-1 weight gradient (hsitp.parallel.dense._SlotMix): the
# layer and the memory model (hsitp.cost.memory) both read the chunk's rows from here.
SLOT_PRODUCT_ELEMENTS = 1 << 18


def slot_product_rows(groups: int, slots: int, dim: int) -> int:
    """Rows of tokens per chunk of the (rows, groups, slots, D) products: within ``SLOT_PRODUCT_ELEMENTS``, at
    least one."""
    return max(1, SLOT_PRODUCT_ELEMENTS // max(1, groups * slots * dim))


class ShapeError(HsitpError, ValueError):
    """A layer shape with a size that is not a positive integer, or an unknown dtype."""


@dataclass(frozen=True)
class LayerShape:
    """Sizes of one layer's input, and its element type."""

    N: int  # spatial tokens per sample (H/p x W/p patches)
    D: int  # features per token (embedding dimension)
    L: int = 1  # spectral bands (tokenisation and aggregation; other layers do not depend on it)
    batch: int = 1  # samples per step (B)
    heads: int = 8  # attention heads of every attention and cross-attention layer
    mlp_ratio: int = 4  # MLP hidden size as a multiple of D
    dtype: str = "bfloat16"  # element type, a key of DTYPE_BYTES
    groups: int = 1  # D-CHAG groups per rank (g)
    patch: int = 8  # patch side p of tokenisation, in pixels

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "dtype":
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ShapeError(f"LayerShape.{f.name} must be an integer, got {value!r}")
            if value < 1:
                raise ShapeError(f"LayerShape.{f.name} must be >= 1, got {value}")
            object.__setattr__(self, f.name, int(value))  # numpy integers become plain ints (JSON, hashing)
        if self.dtype not in DTYPE_BYTES:
            raise ShapeError(f"LayerShape.dtype must be one of {', '.join(DTYPE_BYTES)}, got {self.dtype!r}")

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element."""
        return DTYPE_BYTES[self.dtype]


def n_tokens(rows: int, cols: int, patch: int, grid: str = "crop") -> int:
    """N, the spatial tokens of an H x W scene at patch p: floor(H/p)·floor(W/p) (crop, the default) or
    ceil(H/p)·ceil(W/p) (pad)."""
    if patch < 1:
        raise ShapeError(f"patch must be >= 1, got {patch}")
    if grid == "crop":
        return (rows // patch) * (cols // patch)
    if grid == "pad":
        return math.ceil(rows / patch) * math.ceil(cols / patch)
    raise ShapeError(f"token grid must be 'crop' or 'pad', got {grid!r}")

"""The ``parallel`` section: the tensor-parallel layers' process group and heads."""

from __future__ import annotations

from typing import Literal

from hsitp.sections.base import Section, number, sized


class ParallelSection(Section):
    """Tensor-parallel layers (src/hsitp/parallel): process-group backend and timeout, attention heads and head
    padding. The microbenchmarks build every layer with these (LayerNorm's two placements are two bench ops,
    layernorm_replicated and layernorm_sharded, not a setting)."""

    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Process-group backend; auto = nccl when CUDA is available, gloo on CPU."""
    timeout_s: number(gt=0) = 300  # type: ignore[valid-type]
    """Process-group timeout in seconds; a dead or stuck rank makes the others raise after this, never hang."""
    heads: sized("heads", 4096) = 8  # type: ignore[valid-type]
    """Attention heads of every attention and cross-attention layer the bench builds and its cost model prices
    (attn_channel, attn_token, attn_2d, agg_*)."""
    head_padding: bool = False
    """Heads the ranks splitting them do not divide (attn_channel, agg_* over P; attn_2d over P_c): false = the bench
    refuses the run before timing, with an error naming this key; true = pad with zero heads, which are computed and
    communicated (larger traced bytes, and the cost model prices the padded heads)."""

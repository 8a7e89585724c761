"""The ``model`` section: how every stage computes the model."""

from __future__ import annotations

from typing import Literal

from hsitp.sections.base import Section


class ModelSection(Section):
    """How every stage computes the model (train, tune, probe, bench): choices that change no number beyond
    rounding. The sizes are each stage's own (train.model, probe, bench)."""

    attention_kernel: Literal["auto", "exact", "sdpa"] = "auto"
    """Kernel of the single-query cross-attentions (the TP baseline's band aggregation, D-CHAG's final and D-CHAG-C's
    partial ones). exact: an exact reformulation that never forms k or v (per head the scores are the tokens times
    W_k^T q, the output (sum_l p_l x_l) W_v^T + b_v; the backward is rank-structured), the same output and gradients
    up to rounding, with a lower memory peak; sdpa: the kv projection of every token, then PyTorch's
    scaled_dot_product_attention (what the committed references before it ran). auto: exact on the CPU, sdpa on
    CUDA (flash), until benchmarks/gpu_check.sh has timed both on a GPU. Every train, probe and bench file records
    the kernel that ran."""

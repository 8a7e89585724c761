"""The ``probe`` section: the measured memory probe's grid and model, its throughput phase, and the fake-tensor
estimate's paper grid and D-CHAG configs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hsitp.sections.base import Section, distinct, named, sized

Checkpointing = Literal["none", "blocks"]


class ThroughputSection(Section):
    """The throughput phase's rounds."""

    repeats: int = Field(7, ge=5)
    """Rounds of one sample per plan; the ratio to tp is summarised over them (median, min, max), so at least 5."""
    steps: int = Field(2, ge=1)
    """Training steps per sample (back to back between a barrier and the slowest rank's clock)."""
    warmup: int = Field(2, ge=1)
    """Untimed steps of every plan before the first round (excluded from every sample: AdamW's lazy state, allocator
    growth)."""


class ModelShape(Section):
    """The transformer a probe point builds, but for its bands L and tokens N (the point's): shared by the measured
    probe, the estimate's paper grid and the model a probe file records."""

    patch: sized("pixels") = 4  # type: ignore[valid-type]
    """Patch side p in pixels."""
    dim: sized("dim") = 256  # type: ignore[valid-type]
    """Token width D."""
    depth: sized("depth") = 12  # type: ignore[valid-type]
    """Transformer blocks."""
    heads: sized("heads") = 8  # type: ignore[valid-type]
    """Attention heads (divisible by every P of tp and dchag plans)."""
    mlp_ratio: sized("mlp_ratio") = 4  # type: ignore[valid-type]
    """MLP hidden width as a multiple of D."""
    classes: sized("classes") = 16  # type: ignore[valid-type]
    """Classes predicted per pixel (the head's width is classes x p x p)."""
    batch: sized("batch") = 1  # type: ignore[valid-type]
    """Crops per step (B)."""


class EstimateGridSection(ModelShape):
    """The paper grid of the fake-tensor estimate."""

    plans: distinct(named("plan"), 0) = ("dense", "tp", "dchag_l", "dchag_c", "token")  # type: ignore[valid-type]
    """Plans estimated (dense at P = 1)."""
    world_sizes: distinct(sized("world_size"), 0) = (2, 4, 8)  # type: ignore[valid-type]
    """P of the estimated grid."""
    groups: distinct(sized("groups"), 0) = (4, 8)  # type: ignore[valid-type]
    """D-CHAG groups per rank (g)."""
    L: distinct(sized("bands"), 0) = (200,)  # type: ignore[valid-type]
    """Spectral bands."""
    N: distinct(sized("tokens"), 0) = (324, 5776)  # type: ignore[valid-type]
    """Spatial tokens per crop (square numbers)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """Parameter and activation dtype of the estimate."""
    checkpointing: distinct(Checkpointing, 0) = ("none", "blocks")  # type: ignore[valid-type]
    """Checkpointing policies estimated."""


class DchagConfig(Section):
    """One of D-CHAG's synthetic configs."""

    name: str
    """Label of the config (D-CHAG's naming)."""
    dim: sized("dim")  # type: ignore[valid-type]
    """Token width D."""
    bands: sized("bands")  # type: ignore[valid-type]
    """Channels (bands)."""
    tp: sized("world_size")  # type: ignore[valid-type]
    """TP degree (P)."""


DCHAG_CONFIGS = (
    DchagConfig(name="1.7B_512ch_TP2", dim=2048, bands=512, tp=2),
    DchagConfig(name="6.6B_256ch_TP4", dim=4096, bands=256, tp=4),
    DchagConfig(name="26.2B_128ch_TP16", dim=8192, bands=128, tp=16),
)


class EstimateSection(Section):
    """The fake-tensor estimate's configs."""

    grid: EstimateGridSection = EstimateGridSection()
    """The paper grid: every plan x P x g x N at L bands, D, depth, heads (dense at P = 1)."""
    dchag: distinct(DchagConfig, 0) = DCHAG_CONFIGS  # type: ignore[valid-type]
    """D-CHAG-style synthetic configs (128 x 256 input, patch 4, depth 32, 32 heads, batch 2, bf16, AdamW, blocks
    checkpointed): name, D, channels, TP."""
    dchag_plans: distinct(named("compared_plan"), 0) = ("tp", "dchag_l", "dchag_c")  # type: ignore[valid-type]
    """Plans estimated for each D-CHAG config."""
    dchag_checkpointing: distinct(Checkpointing, 0) = ("blocks",)  # type: ignore[valid-type]
    """Checkpointing policies of the D-CHAG configs (theirs: blocks)."""


class ProbeSection(ModelShape):
    """The memory probe (results/<run>/probe/): a few forward+backward+AdamW steps of each plan under torchrun, one
    launch per P; per-rank memory by part and kind and the peak, step time and time per part with and without
    collectives; and paper-scale estimates with fake tensors (probe estimate). Backend and timeout are the parallel
    section's."""

    plans: distinct(named("plan")) = ("dense", "tp", "dchag_l", "dchag_c", "token")  # type: ignore[valid-type]
    """Plans probed (dense runs at P = 1 only, the others at every P of world_sizes above 1)."""
    world_sizes: distinct(sized("world_size")) = (1, 2, 4, 8)  # type: ignore[valid-type]
    """P; one torchrun launch (one Snakemake job) per P."""
    groups: distinct(sized("groups")) = (4, 8)  # type: ignore[valid-type]
    """D-CHAG groups per rank (g); plans without groups are run once and repeated along g."""
    L: distinct(sized("bands")) = (200,)  # type: ignore[valid-type]
    """Spectral bands."""
    N: distinct(sized("tokens")) = (324, 5776)  # type: ignore[valid-type]
    """Spatial tokens per crop; square numbers (crop side = sqrt(N) x patch)."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Parameter and activation dtype; auto = bfloat16 on CUDA, float32 on CPU."""
    warmup: int = Field(1, ge=1)
    """Untimed steps before measuring (AdamW creates its state at the first)."""
    steps: int = Field(3, ge=1)
    """Timed steps per mode (full and compute-only, interleaved)."""
    throughput: ThroughputSection = ThroughputSection()
    """The throughput phase: at each P, per (L, N, checkpointing), every plan of the grid is built at once and timed
    in one run by hsitp.bench.interleave, the order reversed every other round, so that the tokens/s ratio to tp
    (median, min, max over rounds) holds on a shared machine; timings taken at different moments cannot be
    divided."""
    match_train: bool = False
    """Check when the DAG is built that the probe measures the trained models: dim, heads, depth and mlp_ratio equal
    train.model's, batch train.batch, patch and N train.crops', L and classes the trained scenes', and none (the trained
    models' policy) among checkpointing (a one-line error names both keys otherwise); whether or not train is a
    stage."""
    checkpointing: distinct(Checkpointing) = ("none", "blocks")  # type: ignore[valid-type]
    """Activation-checkpointing policies probed: none, or blocks (torch.utils.checkpoint around each block, as
    D-CHAG)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto = CUDA when torch sees a GPU, else CPU."""
    threads_per_rank: int = Field(1, ge=1)
    """torch.set_num_threads per rank (recorded; ranks x threads > cores is flagged)."""
    estimate: EstimateSection = EstimateSection()
    """`hsitp probe estimate`: the probe step under FakeTensorMode on a fake process group (rank 0's view, one
    process, nothing allocated): per-rank memory of configs beyond this machine, labelled estimated with fake
    tensors."""

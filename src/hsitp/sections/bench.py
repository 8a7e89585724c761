"""The ``bench`` section: the microbenchmark sweep, its collective sweep and fit, and the one-device checks."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hsitp.sections.base import Section, distinct, named, sized

WORLD_SIZES = distinct(sized("world_size", 65536))
OPS = (
    "mlp", "attn_channel", "attn_token", "attn_2d", "layernorm_replicated", "layernorm_sharded",
    "agg_tp", "agg_dchag_l", "agg_dchag_c", "tokenize",
)  # fmt: skip
SHAPES = (
    (8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (16384, 256, 256), (16384, 1024, 256),
    (324, 1024, 256), (5776, 1024, 256), (5776, 4096, 1024),
)  # fmt: skip
Collective = Literal["all_reduce", "all_gather", "reduce_scatter"]
# An [m, n, k] GEMM shape (typed as a tuple of ints: the length is the schema's minItems = maxItems = 3).
Shape = Annotated[tuple[Annotated[int, Field(ge=1)], ...], Field(min_length=3, max_length=3)]


class Collectives(Section):
    """Collective sweep used to fit alpha and beta."""

    names: distinct(Collective) = ("all_reduce", "all_gather", "reduce_scatter")  # type: ignore[valid-type]
    """Collectives swept."""
    sizes_bytes: distinct(Annotated[int, Field(ge=1)], 3) = (  # type: ignore[valid-type]
        4096, 65536, 1048576, 4194304, 16777216, 67108864, 268435456,
    )  # fmt: skip
    """Full (unsharded) tensor sizes in bytes; at least three so alpha and beta are both identified on a training
    subset."""
    warmup: int = Field(5, ge=0)
    """Untimed calls before each size."""
    repeats: int = Field(20, ge=1)
    """Timed repeats per size (each of many back-to-back calls, see min_region_s), spread over the passes; their mean
    is the size's time."""
    min_region_s: float = Field(0.02, ge=0)
    """Each timed repeat of a collective runs k back-to-back calls, k chosen (same on every rank) so a repeat lasts
    at least this long, and reports the mean per call, as nccl-tests and the OSU benchmarks average many iterations:
    a small message's time is shorter than the skew with which ranks leave a barrier. 0 = one call."""


class Fit(Section):
    """How calibration.nc is fitted."""

    holdout_fraction: float = Field(0.34, ge=0, lt=1)
    """Fraction of points per (op, P) and (collective, P) held out of the fit and used only to test it (chosen by a
    seeded hash of each point)."""


class Shard(Section):
    """Single-device shard mode."""

    world_sizes: WORLD_SIZES = (1, 2, 4, 8)  # type: ignore[valid-type]
    """Parallel degrees P whose rank-0 shard is timed."""
    hardware: str = "h200-nvlink-ib"
    """Cost-model hardware preset (or measured:PATH) whose ring model costs the traced collectives."""


class Roofline(Section):
    """GEMM roofline check on one device."""

    shapes: distinct(Shape, 2) = SHAPES  # type: ignore[valid-type]
    """GEMM shapes [m, n, k]; include skinny ones (memory-bound) and large squares (compute roof)."""
    copy_bytes: int = Field(1073741824, ge=1)
    """Size of the device-to-device copy that measures the memory roof."""


class BenchSection(Section):
    """The microbenchmark stage: per-layer fwd+bwd, compute-only and collective-only timings under torchrun, the
    collective sweep that calibrates alpha and beta, and model-vs-measured CCR (results/<run>/bench/). Backend,
    timeout and attention heads are the parallel section's."""

    world_sizes: WORLD_SIZES = (1, 2, 4, 8)  # type: ignore[valid-type]
    """Parallel degrees P; one torchrun launch (one Snakemake job) per P, never two at once."""
    threads_per_rank: int = Field(1, ge=1)
    """torch.set_num_threads for every rank, fixed for every P and recorded; ranks x threads > cores is flagged
    oversubscribed."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto = CUDA when torch sees a GPU, else CPU; cpu or cuda to force (cuda without a GPU is an error)."""
    dtypes: distinct(Literal["auto", "float32", "bfloat16", "float16"]) = ("auto",)  # type: ignore[valid-type]
    """Element types timed; auto = bfloat16 on CUDA (the paper's setting), float32 on CPU. The first is the one
    calibrated."""
    ops: distinct(named("op")) = OPS  # type: ignore[valid-type]
    """Layer types timed (op names of hsitp/names.py and docs/contracts.md). LayerNorm in both placements:
    layernorm_replicated (full D on every rank, Megatron, no communication) and layernorm_sharded (D split,
    statistics all-reduced, paper 4.3). tokenize: the per-band tokeniser alone, so the aggregations (which include
    it) are calibrated without it."""
    N: distinct(sized("tokens", 1048576)) = (324, 3192, 5776, 16384)  # type: ignore[valid-type]
    """Spatial tokens per sample (324 = Indian Pines at patch 8, 5776 = the paper's large case)."""
    D: distinct(sized("dim", 65536)) = (256, 1024)  # type: ignore[valid-type]
    """Feature (embedding) dimension."""
    L: distinct(sized("bands", 65536)) = (103, 200)  # type: ignore[valid-type]
    """Spectral bands; only the aggregation ops depend on L (the others are timed at the first L only)."""
    batch: sized("batch", 65536) = 1  # type: ignore[valid-type]
    """Batch size B of every timed layer."""
    groups: sized("groups", 65536) = 2  # type: ignore[valid-type]
    """D-CHAG partial-aggregation groups per rank (g)."""
    patch: sized("pixels", 65536) = 4  # type: ignore[valid-type]
    """Patch side p of the aggregation ops' per-band tokeniser (their input is an (h p) x (w p) band cube with h w =
    N)."""
    mlp_ratio: sized("mlp_ratio", 64) = 4  # type: ignore[valid-type]
    """Hidden width of the MLP pair as a multiple of D."""
    warmup: int = Field(3, ge=0)
    """Untimed fwd+bwd calls before each timed series."""
    repeats: int = Field(10, ge=1)
    """Timed repeats per point and mode, spread over the passes. Their mean is the point's time (every point's mean
    then sees the same average load of a shared machine); the median and IQR are reported as their spread."""
    passes: int = Field(1, ge=1)
    """Round-robin passes over the whole sweep: each times the collectives and every point with repeats/passes of the
    repeats, so slow load drifts on a shared machine hit the calibration and all points alike. More passes spread
    each point over more of the run (each pass rebuilds the layers and repeats the warm-up)."""
    launches: int = Field(3, ge=1)
    """Independent launches of the whole sweep at each P (each its own torchrun, its own job): merge pools their
    repeats and keeps each launch's CCR (microbench.nc `ccr_measured_launch`). The repeats inside one launch do not
    show the run-to-run spread (two smoke runs ordered the same two ops oppositely, each consistently), so the
    audit's bench sub-checks decide only from at least 3 launches, at points where the launches' values lie wholly
    apart (docs/audit.md); with fewer they stay pending."""
    min_region_s: float = Field(0.01, ge=0)
    """Each timed repeat of a layer runs k back-to-back calls, k chosen (same on every rank) so a repeat lasts at
    least this long, and reports the mean per call; amortises the skew with which ranks leave a barrier. 0 = one
    call."""
    collectives: Collectives = Collectives()
    """Collective sweep used to fit alpha and beta (only at P >= 2)."""
    fit: Fit = Fit()
    """How calibration.nc is fitted."""
    shard: Shard = Shard()
    """Single-device shard mode (benchmarks/gpu_check.sh): rank 0's shard of every op timed for each P on one
    device, paired with communication modelled from a hardware preset (half-measured)."""
    roofline: Roofline = Roofline()
    """GEMM roofline check on one device (benchmarks/gpu_check.sh); both roofs are measured."""

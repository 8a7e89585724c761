"""The ``cost`` section: the analytic cost model's sizes, its refined model's switches and each table's grid."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from hsitp.sections.base import BOUNDS, DEF_MARKER, Section, distinct, sized

# A hardware preset of hsitp.cost.hardware or a measured calibration file (measured:PATH).
HARDWARE = (
    r"^(paper-intra|paper-inter|a100-nvlink-ib|h100-nvlink-ib|h200-nvlink-ib|mi250x-frontier|measured:.+)$"
)
HardwareName = Annotated[str, Field(pattern=HARDWARE)]
Dim = sized("dim")
Bands = sized("bands")
Heads = sized("heads")
Depth = sized("depth")
Batch = sized("batch")
Pixels = sized("pixels")
Groups = sized("groups")
WorldSize = sized("world_size")
Devices = sized("devices")
# An increasing [min, max] of a log grid's axis.
Range = Annotated[tuple[Annotated[float, Field(gt=0)], ...], Field(min_length=2, max_length=2)]


class Switches(Section):
    """Simplifications of the stated model; True applies one. ``Switches.stated()`` = all on = the paper's model."""

    one_flop_per_mac: bool = False
    """Count a multiply-add as one FLOP (refined counts two)."""
    forward_only: bool = False
    """No backward compute or collectives (refined: backward = 2 x forward)."""
    one_collective: bool = False
    """Only the collective the paper pairs with each layer, counted once."""
    no_padding: bool = False
    """Fractional shards instead of padding to a multiple of P."""
    no_overlap: bool = False
    """Ignore the overlap fraction."""
    one_bandwidth_level: bool = False
    """A group spanning nodes runs a flat ring at the inter-node bandwidth (refined is hierarchical)."""
    alpha_zero: bool = False
    """No per-collective latency."""
    factor_one: bool = False
    """Ring factors 2(P-1)/P and (P-1)/P replaced by 1."""
    one_byte_per_element: bool = False
    """Bytes = elements (refined multiplies by the dtype size)."""
    no_attention_n2: bool = False
    """Head-split attention without its N x N score and value products."""
    paired_term_only: bool = False
    """Only the compute term the derivation pairs with the collective (the GEMM producing it; the score product for
    token split)."""

    @classmethod
    def stated(cls) -> Switches:
        """Every simplification on: the paper's stated model."""
        return cls(**dict.fromkeys(cls.model_fields, True))

    def on(self) -> list[str]:
        """The simplifications applied, in field order."""
        return [k for k in type(self).model_fields if getattr(self, k)]


class Rho(Section):
    patch_sizes: distinct(Pixels) = (4, 8, 16)  # type: ignore[valid-type]
    """Patch sizes p."""
    parallel_degrees: distinct(WorldSize) = (2, 4, 8)  # type: ignore[valid-type]
    """Parallel degrees P."""
    pca_k: Bands = 30  # type: ignore[valid-type]
    """PCA components k, one definition of C (paper 2.3)."""
    hardware: distinct(HardwareName) = (  # type: ignore[valid-type]
        "paper-intra",
        "paper-inter",
        "a100-nvlink-ib",
        "h100-nvlink-ib",
        "h200-nvlink-ib",
        "mi250x-frontier",
    )
    """Hardware presets (see `hsitp advise --help`) or measured:PATH to a calibration file."""


class Ccr(Section):
    tokens: distinct(sized("tokens")) = (324, 5776)  # type: ignore[valid-type]
    """The paper's N values (besides every registry dataset's real N at `patch`)."""
    patch: Pixels = 8  # type: ignore[valid-type]
    """Patch size for the datasets' real N (and the tokeniser)."""
    parallel_degrees: distinct(WorldSize) = (4, 8)  # type: ignore[valid-type]
    """Parallel degrees P."""
    hardware: distinct(HardwareName) = ("paper-intra", "paper-inter")  # type: ignore[valid-type]
    """Hardware presets or measured:PATH."""
    groups: distinct(Groups) = (4, 8)  # type: ignore[valid-type]
    """D-CHAG groups per rank g (paper 7.4 uses 4 and 8; 8.2 uses 8)."""


class Boundary(Section):
    # The world_size bound, and at least 2: one device has no boundary.
    P: Annotated[
        int, Field(ge=2, le=BOUNDS["world_size"][1]), WithJsonSchema({DEF_MARKER: "world_size", "minimum": 2})
    ] = 8
    """Parallel degree of the refined boundary (beta is varied to sweep P F/beta)."""
    hardware: HardwareName = "paper-intra"
    """Preset giving F and alpha for the refined boundary."""
    point_hardware: distinct(HardwareName) = (  # type: ignore[valid-type]
        "paper-intra",
        "paper-inter",
        "h100-nvlink-ib",
        "mi250x-frontier",
    )
    """Presets placed on the boundary as points (with every registry dataset)."""
    patch: Pixels = 8  # type: ignore[valid-type]
    """Patch size for the datasets' points."""
    rho_range: Range = (0.01, 100.0)
    """[min, max] of rho (log grid)."""
    threshold_range: Range = (10.0, 1000000.0)
    """[min, max] of P F/beta (log grid)."""
    points: int = Field(41, ge=2, le=512)
    """Grid points per axis; at most 512 (the table's time grows as its square; 401 took 80 s on 2 cores,
    2026-12-05)."""
    embed_dims: distinct(Dim) = (256,)  # type: ignore[valid-type]
    """D values (a coordinate of the table)."""


class PlanTable(Section):
    hardware: distinct(Literal["a100-nvlink-ib", "h100-nvlink-ib", "h200-nvlink-ib", "mi250x-frontier"]) = (  # type: ignore[valid-type]
        "h100-nvlink-ib",
        "h200-nvlink-ib",
        "mi250x-frontier",
    )
    """GPU presets (they give a device memory)."""
    datasets: distinct(str) = ("indian_pines", "pavia_university")  # type: ignore[valid-type]
    """Registry datasets (bands, grid and classes of the scene)."""
    patch: Pixels = 8  # type: ignore[valid-type]
    """Patch size p (8 gives Indian Pines N = 324)."""
    nodes: Devices = 1  # type: ignore[valid-type]
    """Nodes in the allocation."""
    devices_per_node: Devices = 8  # type: ignore[valid-type]
    """Devices per node; P runs over the divisors of nodes x devices_per_node."""
    groups: Groups = 4  # type: ignore[valid-type]
    """D-CHAG groups per rank g (paper 7.4 uses 4)."""


class Headroom(Section):
    fraction: float = Field(0.1, ge=0, lt=1)
    """Share of device memory kept for allocator fragmentation and rounding (reserved vs allocated)."""
    fixed_gb: float = Field(1.5, ge=0)
    """GB (1e9 B) kept per device for the CUDA context and NCCL buffers, whatever the model."""

    def usable(self, memory_gb: float) -> float:
        """Bytes a model's peak may reach on a device of ``memory_gb`` GB."""
        return memory_gb * 1e9 * (1.0 - self.fraction) - self.fixed_gb * 1e9


class Advise(Section):
    headroom: Headroom = Headroom()
    """Device memory the model's peak may not use: the allocated-bytes model leaves out the CUDA context, NCCL's
    communication buffers and the caching allocator's fragmentation and rounding (reserved > allocated); usable =
    memory x (1 - fraction) - fixed_gb."""
    time_error: float = Field(0.15, ge=0)
    """The time model's relative error (bench compare's held-out median |error|); candidates within it of the best
    are called ties."""
    dp_overlap: float = Field(0.0, ge=0, le=1)
    """Fraction of the data-parallel gradient all-reduce hidden behind backward (0 = none, DDP buckets hide some)."""
    groups: distinct(Groups) = (2, 4, 8)  # type: ignore[valid-type]
    """D-CHAG groups per rank g tried by `hsitp advise plan` (paper 7.4 uses 4 and 8)."""


class Scale(Section):
    devices: Devices = 1024  # type: ignore[valid-type]
    """Total devices."""
    devices_per_node: Devices = 8  # type: ignore[valid-type]
    """Devices per node (overrides the presets' value)."""
    tp_degrees: distinct(WorldSize) = (1, 2, 4, 8)  # type: ignore[valid-type]
    """TP degrees inside a node; the rest is data/FSDP parallel."""
    hardware: distinct(HardwareName) = (  # type: ignore[valid-type]
        "paper-intra",
        "a100-nvlink-ib",
        "h100-nvlink-ib",
        "h200-nvlink-ib",
        "mi250x-frontier",
    )
    """Hardware presets or measured:PATH."""
    image: Annotated[tuple[Pixels, ...], Field(min_length=2, max_length=2)] = (128, 256)  # type: ignore[valid-type]
    """[H, W] of one sample (default: D-CHAG's synthetic 128 x 256 benchmark input)."""
    patch: Pixels = 4  # type: ignore[valid-type]
    """Patch size p."""
    bands: Bands = 256  # type: ignore[valid-type]
    """Spectral bands L."""
    embed_dim: Dim = 4096  # type: ignore[valid-type]
    """Embedding dimension D (4096 with depth 32 is about 6.5B parameters, D-CHAG's 6.6B model)."""
    depth: Depth = 32  # type: ignore[valid-type]
    """Transformer blocks."""
    heads: Heads = 32  # type: ignore[valid-type]
    """Attention heads."""
    micro_batch: Batch = 2  # type: ignore[valid-type]
    """Samples per TP group per micro-batch."""
    groups: Groups = 1  # type: ignore[valid-type]
    """D-CHAG groups per rank g."""
    fsdp: bool = True
    """Shard parameters, gradients and optimizer state across the data-parallel group (ZeRO-3); false = DDP."""
    activation_checkpointing: bool = False
    """Keep only each block's input and recompute the block in backward."""
    dp_overlap: float = Field(0.8, ge=0, le=1)
    """Fraction of data-parallel (FSDP/DDP) traffic hidden behind compute."""


class CostSection(Section):
    """The analytic cost model (results/<run>/cost/{rho,ccr,boundary,scale,plan}.nc and `hsitp advise split/plan`):
    the paper's stated CCR formulas and a refined per-layer model. Pure arithmetic; grid sizes come from the dataset
    registry."""

    embed_dim: Dim = 256  # type: ignore[valid-type]
    """Feature (embedding) dimension D; the paper's C in its sections 3 and 8 (C = 256)."""
    bands: Bands = 256  # type: ignore[valid-type]
    """Spectral bands L entering the cross-band aggregation (ccr.nc D-CHAG schemes); the paper's C = 256."""
    heads: Heads = 8  # type: ignore[valid-type]
    """Attention heads (paper 7.4 uses 8)."""
    mlp_ratio: sized("mlp_ratio") = 4  # type: ignore[valid-type]
    """MLP hidden size / D."""
    depth: Depth = 12  # type: ignore[valid-type]
    """Transformer blocks for whole-model costs and memory (paper 7.4 uses 12)."""
    batch: Batch = 1  # type: ignore[valid-type]
    """Batch B per device for per-layer costs (the stated model does not depend on it; alpha and weight-gradient
    sync do)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """Element type of activations, collectives and parameters (bytes per element)."""
    master_fp32: bool = True
    """Mixed precision keeps an fp32 master copy of the weights (4 more bytes per parameter in 16-bit training)."""
    optimizer: Literal["adamw", "adam", "sgd_momentum", "sgd"] = "adamw"
    """Optimizer whose state counts in memory (adam/adamw 8 B per parameter, sgd_momentum 4, sgd 0)."""
    overlap: float = Field(0.0, ge=0, le=1)
    """Fraction of tensor-parallel communication hidden behind compute in the refined model (0 = none; the paper's
    3.4 says 0.6-0.85 is reachable)."""
    grad_accumulation: int = Field(1, ge=1)
    """Micro-batches per optimizer step; weight-gradient syncs (token split, data parallel) are paid once per
    step."""
    token_grid: Literal["crop", "pad"] = "crop"
    """N from the image: crop = floor(H/p) floor(W/p) (the paper's 145//8 = 18, 18^2 = 324); pad = ceil."""
    switches: Switches = Switches()
    """Simplifications of the stated model to apply in the refined model (all true reproduces the stated model)."""
    rho: Rho = Rho()
    """results/<run>/cost/rho.nc, rho = C/N per registry dataset and the lower-CCR split (paper 2.2)."""
    ccr: Ccr = Ccr()
    """results/<run>/cost/ccr.nc, the paper's 8.1/8.2 grid under both models, D-CHAG schemes and its quoted
    numbers."""
    boundary: Boundary = Boundary()
    """results/<run>/cost/boundary.nc, the decision boundary over (rho, P F/beta)."""
    plan: PlanTable = PlanTable()
    """results/<run>/cost/plan.nc, `hsitp advise plan` over P (per-rank memory, tokens/s) for the cost page's
    figure."""
    advise: Advise = Advise()
    """`hsitp advise plan`: which plan, P, g and checkpointing fit in device memory and train fastest
    (modelled)."""
    scale: Scale = Scale()
    """results/<run>/cost/scale.nc, projection to many devices (TP in a node x data/FSDP across nodes)."""

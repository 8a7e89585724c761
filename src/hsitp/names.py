"""Names every stage shares (torch-free, so the cost model can import them).

Plans are the ways the model is split over P ranks, each named once here with everything another stage spells
for it (its display label, the model's aggregation and D-CHAG variant, the op the bench times, which P and g it
accepts); every list of plans in the code is derived from :data:`PLANS`. Op names are the layers the parallel
stage builds, the cost model prices and the microbenchmarks time; collective names are the ring collectives the
cost model and the calibration know; cost-model names are the two variants every cost table and the
model-vs-measured comparison report side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which P a plan accepts (Plan.ranks).
ONE_RANK = "P = 1"  # one device
WHOLE_HEADS = "P divides the heads"  # heads and hidden units sharded: every rank holds whole heads
TOKEN_RANKS = "P <= N"  # the N spatial tokens split over the ranks: every rank owns at least one


@dataclass(frozen=True)
class Plan:
    """One parallel plan: how the model is split over P ranks (``hsitp.models.plans`` builds it)."""

    # in configs, file names, netCDF coordinates and on the command line: "dchag_l"
    name: str
    # for a reader (titles, prose): "TP"
    label: str
    # the cross-band aggregation it splits: "attention" (TP baseline), "hierarchical" (D-CHAG); None: the model's
    # own, whichever it is
    aggregation: str | None
    # D-CHAG's partial aggregator, "linear" or "cross-attention"; None for the other plans
    partial: str | None
    # D-CHAG's letter for that aggregator (the model's and the paper's): "L" or "C"
    variant: str | None
    # the aggregation op the bench times and the cost model prices for it (in OP_NAMES); None: a plan not
    # compared by its aggregation
    op: str | None
    # which P it accepts: ONE_RANK, WHOLE_HEADS or TOKEN_RANKS
    ranks: str
    # accepts g > 1 band groups per rank (D-CHAG); every other plan runs at g = 1
    groups: bool
    # its weights (heads, hidden units) are split over the P ranks; else every rank holds them whole
    sharded: bool


PLANS: dict[str, Plan] = {
    p.name: p
    for p in (
        Plan("dense", "Dense", None, None, None, None, ONE_RANK, groups=False, sharded=False),
        Plan("tp", "TP", "attention", None, None, "agg_tp", WHOLE_HEADS, groups=False, sharded=True),
        Plan(
            "dchag_l",
            "D-CHAG-L",
            "hierarchical",
            "linear",
            "L",
            "agg_dchag_l",
            WHOLE_HEADS,
            groups=True,
            sharded=True,
        ),
        Plan(
            "dchag_c",
            "D-CHAG-C",
            "hierarchical",
            "cross-attention",
            "C",
            "agg_dchag_c",
            WHOLE_HEADS,
            groups=True,
            sharded=True,
        ),
        Plan("token", "Token", None, None, None, None, TOKEN_RANKS, groups=False, sharded=False),
    )
}

PLAN_NAMES: tuple[str, ...] = tuple(PLANS)  # every plan, in the order of every table and enum
PARALLEL_PLANS: tuple[str, ...] = tuple(p for p, v in PLANS.items() if v.ranks != ONE_RANK)  # P > 1
SHARDED_PLANS: tuple[str, ...] = tuple(p for p, v in PLANS.items() if v.sharded)  # tp and the D-CHAG plans
DCHAG_PLANS: tuple[str, ...] = tuple(p for p, v in PLANS.items() if v.groups)  # the plans with band groups g
# Pure TP against D-CHAG, the paper's comparison: the plans with an aggregation op (the cost model's per-plan CCR
# and memory, the bench's aggregation layers, the tuned plans)
COMPARED_PLANS: tuple[str, ...] = tuple(p for p, v in PLANS.items() if v.op)
BY_OP: dict[str, Plan] = {v.op: v for v in PLANS.values() if v.op}  # "agg_dchag_l" -> dchag_l
BY_VARIANT: dict[str, Plan] = {v.variant: v for v in PLANS.values() if v.variant}  # "L" -> dchag_l
AGG_OPS: tuple[str, ...] = tuple(BY_OP)  # the aggregation ops: agg_tp, agg_dchag_l, agg_dchag_c
# D-CHAG's aggregation ops: agg_dchag_l, agg_dchag_c
DCHAG_OPS: tuple[str, ...] = tuple(op for op, v in BY_OP.items() if v.groups)


OP_NAMES: tuple[str, ...] = (
    "mlp",  # Megatron MLP pair: column- then row-parallel linear
    "attn_channel",  # head-parallel attention (channel split)
    "attn_token",  # token-parallel attention (N split)
    "attn_2d",  # heads x tokens
    "layernorm_replicated",  # LayerNorm on the full D, replicated on every rank (Megatron): no communication
    "layernorm_sharded",  # LayerNorm over a D split across ranks (paper §4.3): statistics all-reduced
    *BY_OP,  # cross-band aggregation of each compared plan: agg_tp (TP baseline), agg_dchag_l, agg_dchag_c
    "tokenize",  # per-band patch embedding alone, every band on every rank (what the TP baseline replicates)
)

COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")

COST_MODELS: tuple[str, ...] = (
    "stated",  # the paper's formulas as written
    "refined",  # per-layer FLOPs and traffic, α-β collectives, overlap (hsitp.cost.refined)
)

PROTOCOLS: tuple[str, ...] = (  # the accuracy protocols: how the train/test partition is drawn
    "random",  # stratified random pixels (leaks through overlapping windows; the usual protocol)
    "block",  # spatially disjoint blocks of the scene
)

# the single-query cross-attentions' kernels: the same numbers, two ways
ATTENTION_KERNELS: tuple[str, ...] = (
    "exact",  # rank-structured: scores from a (D, h) matrix, neither k nor v formed (hsitp.parallel.attention_kernels)
    "sdpa",  # the kv projection of every token, then PyTorch's scaled-dot-product attention
)

# One accuracy protocol draws K partitions (data.partition.draws); a replicate is (partition, training seed). Index 0
# adds no tag, so a run of one draw names its files without one (as the committed references are named); index
# k >= 1 adds "_k{k}" after the protocol.
PARTITION_TAG_PATTERN = r"(_k[1-9]\d*)?"  # the Snakemake wildcard of the tag: empty, or _k1, _k2, ...


def partition_tag(index: int) -> str:
    """The file-name tag of partition ``index``: "" for 0, "_k{index}" otherwise."""
    if index < 0:
        raise ValueError(f"partition index {index}: must be >= 0")
    return f"_k{index}" if index else ""


def partition_of_tag(tag: str) -> int:
    """The partition index a file-name tag names ("" -> 0, "_k3" -> 3); the inverse of :func:`partition_tag`."""
    if not tag:
        return 0
    if not tag.startswith("_k") or not tag[2:].isdigit() or tag[2] == "0":
        raise ValueError(f"partition tag {tag!r}: expected '' or '_k<index >= 1>'")
    return int(tag[2:])

"""Names every stage shares (torch-free, so the cost model can import them).

Op names are the layers the parallel stage builds, the cost model prices and the microbenchmarks time;
collective names are the ring collectives the cost model and the calibration know; cost-model names are the two
variants every cost table and the model-vs-measured comparison report side by side.
"""

OP_NAMES: tuple[str, ...] = (
    "mlp",  # Megatron MLP pair: column- then row-parallel linear
    "attn_channel",  # head-parallel attention (channel split)
    "attn_token",  # token-parallel attention (N split)
    "attn_2d",  # heads x tokens
    "layernorm_replicated",  # LayerNorm on the full D, replicated on every rank (Megatron): no communication
    "layernorm_sharded",  # LayerNorm over a D split across ranks (paper §4.3): statistics all-reduced
    "agg_tp",  # cross-band aggregation, TP baseline
    "agg_dchag_l",  # D-CHAG with linear partial aggregators
    "agg_dchag_c",  # D-CHAG with cross-attention partial aggregators
    "tokenize",  # per-band patch embedding alone, every band on every rank (what the TP baseline replicates)
)

COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter")

COST_MODELS: tuple[str, ...] = (
    "stated",  # the paper's formulas as written
    "refined",  # per-layer FLOPs and traffic, α-β collectives, overlap (hsitp.cost.refined)
)

SPLIT_PROTOCOLS: tuple[str, ...] = (
    "random",  # stratified random pixels (leaks through overlapping windows; the usual protocol)
    "block",  # spatially disjoint blocks of the scene
)

"""Tensor-parallel layers for the channel-vs-token split study: Megatron column/row TP, head-, token- and 2-D
parallel attention, LayerNorm in both placements, and the cross-band aggregators (TP baseline, D-CHAG).

Process groups are passed explicitly (TPGroup / Mesh2D); nothing here reads globals or env-var switches except
``init_distributed``, which reads torchrun's RANK / WORLD_SIZE / LOCAL_RANK.
"""

from hsitp.parallel.aggregation import DCHAGAggregator, HeadParallelCrossAttention, TPAggregator
from hsitp.parallel.collectives import (
    all_reduce_grads,
    all_reduce_sum,
    copy_to_tp,
    gather_from_tp,
    gather_seq,
    reduce_from_tp,
)
from hsitp.parallel.dense import (
    BandTokenizer,
    DenseAttention,
    DenseDCHAG,
    DenseMLP,
    DenseTPAggregator,
    PartialAggregator,
    SingleQueryCrossAttention,
    dense_layernorm,
)
from hsitp.parallel.errors import DistributedSetupError, ShardingError
from hsitp.parallel.groups import (
    CommRecord,
    Mesh2D,
    TPGroup,
    destroy_distributed,
    init_distributed,
    init_from_config,
    make_mesh_2d,
    resolve_backend,
)
from hsitp.parallel.linear import ColumnParallelLinear, Partition, RowParallelLinear
from hsitp.parallel.ops import OP_NAMES, BuiltOp, build_op
from hsitp.parallel.padding import Split, local_state_from_full, split_heads
from hsitp.parallel.settings import ParallelSettings
from hsitp.parallel.tensor_parallel import (
    HeadParallelAttention,
    ParallelMLP,
    ReplicatedLayerNorm,
    ShardedLayerNorm,
)
from hsitp.parallel.token_parallel import TokenParallelAttention
from hsitp.parallel.two_d import Attention2D

__all__ = [
    "OP_NAMES",
    "Attention2D",
    "BandTokenizer",
    "BuiltOp",
    "ColumnParallelLinear",
    "CommRecord",
    "DCHAGAggregator",
    "DenseAttention",
    "DenseDCHAG",
    "DenseMLP",
    "DenseTPAggregator",
    "DistributedSetupError",
    "HeadParallelAttention",
    "HeadParallelCrossAttention",
    "Mesh2D",
    "ParallelMLP",
    "ParallelSettings",
    "PartialAggregator",
    "Partition",
    "ReplicatedLayerNorm",
    "RowParallelLinear",
    "ShardedLayerNorm",
    "ShardingError",
    "SingleQueryCrossAttention",
    "Split",
    "TPAggregator",
    "TPGroup",
    "TokenParallelAttention",
    "all_reduce_grads",
    "all_reduce_sum",
    "build_op",
    "copy_to_tp",
    "dense_layernorm",
    "destroy_distributed",
    "gather_from_tp",
    "gather_seq",
    "init_distributed",
    "init_from_config",
    "local_state_from_full",
    "make_mesh_2d",
    "reduce_from_tp",
    "resolve_backend",
    "split_heads",
]

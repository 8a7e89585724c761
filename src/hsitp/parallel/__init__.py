"""Tensor-parallel layers for the channel-vs-token split study: Megatron column/row TP, head-, token- and 2-D
parallel attention, LayerNorm in both placements, and the cross-band aggregators (TP baseline, D-CHAG).

Process groups are passed explicitly (TPGroup / Mesh2D); nothing here reads globals or env-var switches except
``runtime.start``, the one way a rank starts (it reads torchrun's RANK / WORLD_SIZE / LOCAL_RANK / MASTER_*).
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
from hsitp.parallel.groups import AxisTrace, CommRecord, Mesh2D, TPGroup, make_mesh_2d
from hsitp.parallel.linear import ColumnParallelLinear, Partition, RowParallelLinear
from hsitp.parallel.ops import OP_NAMES, BuiltOp, build_op
from hsitp.parallel.padding import Split, local_state_from_full, split_heads
from hsitp.parallel.runtime import Runtime, RuntimeSettings
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
    "AxisTrace",
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
    "Runtime",
    "RuntimeSettings",
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
    "gather_from_tp",
    "gather_seq",
    "local_state_from_full",
    "make_mesh_2d",
    "reduce_from_tp",
    "split_heads",
]

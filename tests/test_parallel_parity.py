"""Sharded layers equal their dense references (output, input grad, weight grads) at P = 2 and P = 4 on gloo.

One spawned world per P runs every check (tests/parallel_checks.py) in float64 and float32, to keep CI fast.
"""

from __future__ import annotations

import pytest
from dist_utils import run_world
from parallel_checks import parity_suite

pytestmark = pytest.mark.slow

EXPECTED = {
    "gather_seq",
    "gather_from_tp",
    "copy_to_tp",
    "reduce_from_tp",
    "trace_mlp",
    "trace_token_attn",
    "noop_mlp",
    "column_gather[out=10]",
    "mlp[h=64]",
    "mlp[h=31]",
    "attn_channel[h=4]",
    "attn_channel[h=5]",
    "attn_channel_indivisible_error",
    "attn_token[N=8]",
    "attn_token[N=7]",
    "layernorm_sharded[D=16]",
    "layernorm_sharded[D=9]",
    "layernorm_replicated",
    "agg_tp[exact]",  # the single-query attention's exact kernel (no k or v formed)
    "agg_tp[sdpa]",  # and PyTorch's SDPA, each against its own dense reference
    "xattn_heads_padded",  # the head-sharded single-query attention with zero-padded heads
    "agg_dchag_l[L=8,g=1,exact]",
    "agg_dchag_l[L=8,g=2,exact]",
    "agg_dchag_l[L=9,g=2,exact]",
    "agg_dchag_c[L=8,g=1,exact]",
    "agg_dchag_c[L=8,g=2,exact]",
    "agg_dchag_c[L=9,g=2,exact]",
    "agg_dchag_c[L=9,g=2,sdpa]",
}
MESHES = {2: {"attn_2d[2x1]", "attn_2d[1x2]"}, 4: {"attn_2d[2x2]"}}


@pytest.mark.parametrize("world", [2, 4])
def test_parity_all_layers(world: int) -> None:
    """Catches any sharding bug that changes results: a wrong weight slice, a missing or doubled all-reduce
    (Megatron f/g), a K/V gather whose backward does not reduce-scatter, a D-CHAG gather whose backward
    communicates or drops the local slice, padding (hidden 31, N 7, D 9, heads 5, L 9) leaking into results,
    LayerNorm statistics taken over the local slice only, and a 2-D mesh with swapped channel/token groups.
    """
    results = run_world(parity_suite, world, timeout_s=60.0, deadline_s=420.0)
    want = {f"{dt}:{name}" for dt in ("float64", "float32") for name in EXPECTED | MESHES[world]}
    for rank, done in enumerate(results):
        assert set(done) == want, f"rank {rank} ran {sorted(set(done) ^ want)} differently from expected"

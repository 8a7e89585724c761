"""The refined model's collectives are the ones the parallel layers issue: same calls, same full-tensor bytes.

One process, no communication: a ``comm="noop"`` TPGroup of size P without a process group runs every layer's
local share and records each collective it would issue (``TPGroup.trace``), forward and backward.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from hsitp.bench.ops import OpBuild, trace_point  # noqa: E402
from hsitp.bench.predict import Point, op_work  # noqa: E402
from hsitp.cost.refined import default_mesh, op_cost  # noqa: E402
from hsitp.names import OP_NAMES  # noqa: E402
from hsitp.parallel.errors import ShardingError  # noqa: E402
from hsitp.parallel.groups import TPGroup, make_mesh_2d  # noqa: E402
from hsitp.parallel.ops import build_op  # noqa: E402
from hsitp.sections.cost import Switches  # noqa: E402
from hsitp.shape import LayerShape  # noqa: E402

PHASE = {"forward": "fwd", "backward": "bwd"}


def _group(pt: Point):
    world = TPGroup(None, pt.P, 0, comm="noop")
    return make_mesh_2d(world, *default_mesh(pt.P)) if pt.op == "attn_2d" else world


def traced_calls(pt: Point, *, head_padding: bool = False) -> Counter:
    """(collective, phase, full bytes, group size) of every collective one fwd+bwd step of the layer issues."""
    return Counter(
        (r.name, PHASE[r.phase], int(r.nbytes), r.group_size)
        for _, recs in trace_point(pt.op, _group(pt), OpBuild(pt.shape, head_padding))
        for r in recs
    )


def modelled_calls(pt: Point, *, head_padding: bool = False, switches: Switches | None = None) -> Counter:
    cost = op_cost(pt.op, pt.shape, P=pt.P, per_step_alpha=True, head_padding=head_padding, switches=switches)
    return Counter((c.collective, c.phase, int(c.bytes), c.group_size) for c in cost.collectives)


@pytest.mark.parametrize(
    ("P", "N", "D", "L", "groups"),
    [
        (2, 36, 32, 8, 1),
        (4, 36, 32, 8, 2),
        (4, 30, 32, 10, 2),  # N and L not divisible by P (P g): padded tokens and band slots
    ],
)
@pytest.mark.parametrize("op", OP_NAMES)
def test_refined_collectives_equal_the_layers_trace(op: str, P: int, N: int, D: int, L: int, groups: int):
    """Catches a refined model whose collective list drifts from the implementation: K and V costed as two
    gathers when the layer gathers them as one tensor, the learned query's gradient all-reduce missing from the
    aggregators, a collective over a group of one counted, LayerNorm statistics costed for the wrong placement,
    or padded sizes that differ."""
    shape = LayerShape(N=N, D=D, L=L, heads=4, groups=groups, patch=2, dtype="float32")
    pt = Point(op, P, shape)
    assert modelled_calls(pt) == traced_calls(pt)


def test_tokenisation_backward_is_weight_gradient_only():
    """Catches tokenisation backward costed at 2 x forward: the image cube needs no gradient, so backward is the
    weight gradient alone (1 x forward), unlike a layer whose input is an activation."""
    shape = LayerShape(N=36, D=32, L=8, batch=1, heads=4, patch=2)
    tok = op_cost("tokenize", shape, P=2, split="replicated")
    assert tok.flops_bwd == pytest.approx(tok.flops_fwd)
    mlp = op_cost("mlp", shape, P=2)
    assert mlp.flops_bwd == pytest.approx(2 * mlp.flops_fwd)


def test_head_padding_off_refuses_and_on_pads_in_layers_and_model_alike():
    """Catches parallel.head_padding being dead: heads = 3 on the channel axis P_c = 2 of a 2 x 2 mesh must be
    refused by the layer and the model with an error naming the key when off; when on, the layer gathers K and V
    of 2 (padded) heads per channel rank, so its traced all-gather / reduce-scatter bytes are 4/3 of the unpadded
    (fractional) share, exactly as the model prices them, and the model's FLOPs grow too."""
    shape = LayerShape(N=16, D=24, heads=3, dtype="float32")
    pt = Point("attn_2d", 4, shape)
    with pytest.raises(ShardingError, match=r"parallel\.head_padding"):
        build_op("attn_2d", tp=_group(pt), shape=shape, head_padding=False)
    with pytest.raises(ValueError, match=r"parallel\.head_padding"):
        op_work(pt, head_padding=False)

    traced = traced_calls(pt, head_padding=True)
    assert traced == modelled_calls(pt, head_padding=True)
    fractional = modelled_calls(pt, switches=Switches(no_padding=True))  # 1.5 heads per channel rank
    for coll in ("all_gather", "reduce_scatter"):
        padded_bytes = sum(b * k for (c, _, b, _), k in traced.items() if c == coll)
        unpadded_bytes = sum(b * k for (c, _, b, _), k in fractional.items() if c == coll)
        assert padded_bytes == pytest.approx(unpadded_bytes * 4 / 3)
    # the channel all-reduces carry (B, N/P_t, D): unchanged; the token-axis weight-gradient sync grows with the
    # padded heads' weights (4 D d_l + 3 d_l + D elements, d_l = 16 padded vs 12)
    act = 1 * 8 * 24 * 4
    assert traced[("all_reduce", "fwd", act, 2)] == fractional[("all_reduce", "fwd", act, 2)] == 1
    assert traced[("all_reduce", "bwd", (4 * 24 * 16 + 3 * 16 + 24) * 4, 2)] == 1
    padded_flops = op_work(pt, head_padding=True)[0]
    unpadded = op_cost("attn_2d", shape, P=4, per_step_alpha=True, switches=Switches(no_padding=True))
    assert padded_flops > unpadded.flops


def test_layernorm_placements_are_two_ops_with_their_own_collectives():
    """Catches the LayerNorm placement reduced to one op: replicated LayerNorm issues nothing and keeps D, the
    sharded one all-reduces (B, N, 2) statistics forward and backward on its D / P slice, in layers and model."""
    shape = LayerShape(N=12, D=16, dtype="float32")
    rep, shd = Point("layernorm_replicated", 4, shape), Point("layernorm_sharded", 4, shape)
    assert traced_calls(rep) == modelled_calls(rep) == Counter()
    stats = 1 * 12 * 2 * 4  # (B, N, 2) float32
    assert (
        traced_calls(shd)
        == modelled_calls(shd)
        == Counter({("all_reduce", "fwd", stats, 4): 1, ("all_reduce", "bwd", stats, 4): 1})
    )
    assert op_work(rep, head_padding=False)[0] == pytest.approx(4 * op_work(shd, head_padding=False)[0])
    narrow = dataclasses.replace(shape, D=4)
    assert op_work(Point("layernorm_sharded", 4, shape), head_padding=False) == pytest.approx(
        op_work(Point("layernorm_replicated", 1, narrow), head_padding=False)
    )

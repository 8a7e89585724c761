"""The refined model's collectives are the ones the parallel layers issue: same calls, same full-tensor bytes.

One process, no communication: a ``comm="noop"`` TPGroup of size P without a process group runs every layer's
local share and records each collective it would issue (``TPGroup.trace``), forward and backward.
"""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")

from hsitp.bench.model import Point, mesh_2d  # noqa: E402
from hsitp.bench.ops import build_kwargs, trace_point  # noqa: E402
from hsitp.cost.refined import op_cost  # noqa: E402
from hsitp.parallel.groups import TPGroup, make_mesh_2d  # noqa: E402

OPS = ("mlp", "attn_channel", "attn_token", "attn_2d", "agg_tp", "agg_dchag_l", "agg_dchag_c")
PHASE = {"forward": "fwd", "backward": "bwd"}


def traced_calls(pt: Point) -> Counter:
    """(collective, phase, full bytes, group size) of every collective one fwd+bwd step of the layer issues."""
    world = TPGroup(None, pt.P, 0, comm="noop")
    tp = make_mesh_2d(world, *mesh_2d(pt.P)) if pt.op == "attn_2d" else world
    kw = build_kwargs(pt, dtype=torch.float32, device=None, seed=0)
    return Counter(
        (r.name, PHASE[r.phase], int(r.nbytes), r.group_size)
        for _, recs in trace_point(pt.op, tp, kw)
        for r in recs
    )


def modelled_calls(pt: Point) -> Counter:
    cost = op_cost(pt.op, per_step_alpha=True, **pt.cost_kwargs())
    return Counter((c.collective, c.phase, int(c.bytes), c.group_size) for c in cost.collectives)


@pytest.mark.parametrize(
    ("P", "N", "D", "L", "groups"),
    [
        (2, 36, 32, 8, 1),
        (4, 36, 32, 8, 2),
        (4, 30, 32, 10, 2),  # N and L not divisible by P (P g): padded tokens and band slots
    ],
)
@pytest.mark.parametrize("op", OPS)
def test_refined_collectives_equal_the_layers_trace(op: str, P: int, N: int, D: int, L: int, groups: int):
    """Catches a refined model whose collective list drifts from the implementation: K and V costed as two
    gathers when the layer gathers them as one tensor, the learned query's gradient all-reduce missing from the
    aggregators, a collective over a group of one counted, or padded sizes that differ."""
    pt = Point(op, P, N, D, L, "float32", heads=4, groups=groups, patch=2)
    assert modelled_calls(pt) == traced_calls(pt)


def test_tokenisation_backward_is_weight_gradient_only():
    """Catches tokenisation backward costed at 2 x forward: the image cube needs no gradient, so backward is the
    weight gradient alone (1 x forward), unlike a layer whose input is an activation."""
    kw = {"P": 2, "N": 36, "D": 32, "L": 8, "B": 1, "heads": 4, "patch": 2, "hardware": "paper-intra"}
    tok = op_cost("tokenize", split="replicated", **kw)
    assert tok.flops_bwd == pytest.approx(tok.flops_fwd)
    mlp = op_cost("mlp", **kw)
    assert mlp.flops_bwd == pytest.approx(2 * mlp.flops_fwd)

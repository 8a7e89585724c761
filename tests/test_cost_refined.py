"""The refined per-layer model: reduction to the stated model, hand-computed terms, switches, D-CHAG terms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hsitp.cost import stated
from hsitp.cost.hardware import get_hardware
from hsitp.cost.refined import (
    block_cost,
    collective_time,
    collectives_time,
    model_cost,
    op_cost,
    ring_factor,
)
from hsitp.sections.cost import Switches
from hsitp.shape import LayerShape

PRESETS = ("paper-intra", "paper-inter", "h100-nvlink-ib", "mi250x-frontier")


@pytest.mark.parametrize("hw_name", PRESETS)
@pytest.mark.parametrize("P", [2, 3, 4, 8, 16])
@pytest.mark.parametrize(("N", "D"), [(324, 256), (5776, 256), (100, 103), (3192, 1000)])
def test_all_switches_reproduce_stated_model(hw_name: str, P: int, N: int, D: int):
    """Catches any drift between the refined model with every simplification on and the paper's formulas:
    column linear and attention head split give P·F/(β·C_in) (C_in = D; the MLP's fc2 contracts over 4D), token
    split attention gives P·F/(β·N), and relative throughput is P/(1+CCR); B must cancel."""
    hw = get_hardware(hw_name)
    F, beta = hw.flops, hw.beta_for(P)
    expected = {
        "linear_column": stated.ccr_channel(P, F, beta, D),
        "mlp": stated.ccr_channel(P, F, beta, 4 * D),
        "attn_channel": stated.ccr_channel(P, F, beta, D),
        "attn_token": stated.ccr_token(P, F, beta, N),
    }
    for op, want in expected.items():
        shape = LayerShape(N=N, D=D, batch=3, heads=8)
        c = op_cost(op, shape, P=P, hardware=hw, switches=Switches.stated(), overlap=0.7)
        assert c.ccr == pytest.approx(float(want), rel=1e-12), op
        assert c.ccr_stated == pytest.approx(float(want), rel=1e-12), op
        assert c.relative_throughput == pytest.approx(
            float(stated.relative_throughput(P, want)), rel=1e-12
        ), op


def test_attn_channel_hand_computed():
    """Catches a wrong FLOP or byte count: head-split attention, P = 8, N = 324, D = 256, 8 heads, bf16, B = 1,
    paper-intra (α = 0, β = 3e11, F = 3e14), every term written out."""
    N, D, P = 324, 256, 8
    d_l = D // P  # one head of 32 features per rank
    macs = N * D * 3 * d_l + N * N * d_l + N * N * d_l + N * d_l * D  # qkv, scores, attn·v, proj
    elementwise = 3 * N * d_l + 6 * 1 * N * N + N * D  # qkv bias, softmax (1 head), proj bias
    fwd = 2 * macs + elementwise
    comm_bytes = N * D * 2  # all-reduce of (1, N, D) bf16, forward and backward
    t_comm = 2 * (2 * (P - 1) / P) * comm_bytes / 3e11
    shape = LayerShape(N=N, D=D, batch=1, heads=8, dtype="bfloat16")
    c = op_cost("attn_channel", shape, P=P, hardware="paper-intra")
    assert c.flops_fwd == pytest.approx(fwd)
    assert c.flops_bwd == pytest.approx(2 * fwd)
    assert c.t_comp == pytest.approx(3 * fwd / 3e14)
    assert c.t_comm == pytest.approx(t_comm)
    assert c.ccr == pytest.approx(t_comm / (3 * fwd / 3e14))
    assert c.bytes_by_collective() == {"all_reduce": 2 * comm_bytes}
    assert c.count_by_collective() == {"all_reduce": 2}


def test_ring_factors_and_two_level_allreduce():
    """Catches wrong ring factors or a flat ring where the model promises a hierarchical one: 16 ranks, 8 per
    node on paper-intra: reduce-scatter in node, all-reduce of 1/8 across 2 nodes, all-gather in node."""
    assert ring_factor("all_reduce", 8) == pytest.approx(1.75)
    assert ring_factor("all_gather", 8) == pytest.approx(0.875)
    assert ring_factor("reduce_scatter", 1) == 0.0
    hw = get_hardware("paper-intra")
    S = 1e8
    two = collective_time("all_reduce", S, 16, 8, hw, Switches())
    assert two == pytest.approx(2 * 0.875 * S / 3e11 + 1.0 * (S / 8) / 2.5e10)
    flat = collective_time("all_reduce", S, 16, 8, hw, Switches(one_bandwidth_level=True))
    assert flat == pytest.approx(2 * 15 / 16 * S / 2.5e10)
    assert collective_time("all_gather", S, 8, 8, hw, Switches()) == pytest.approx(0.875 * S / 3e11)
    assert collective_time("all_reduce", S, 1, 1, hw, Switches()) == 0.0


@pytest.mark.parametrize("op", ["mlp", "attn_channel", "attn_token", "linear_column"])
def test_monotone_in_P(op: str):
    """Catches per-rank work that does not shrink with P or traffic that does: with divisible shapes the
    per-rank compute time falls and the CCR rises as P goes 2 -> 4 -> 8."""
    shape = LayerShape(N=512, D=512, batch=2, heads=8)
    costs = [op_cost(op, shape, P=P, hardware="paper-intra") for P in (2, 4, 8)]
    assert all(a.t_comp > b.t_comp for a, b in zip(costs, costs[1:], strict=False))
    assert all(a.ccr < b.ccr for a, b in zip(costs, costs[1:], strict=False))


def test_padding_computes_the_padded_shard():
    """Catches padding ignored: D = 103 over P = 8 pads to 13 columns per rank (§4.3's 104), so the column
    linear's per-rank GEMM is 13/12.875 of the fractional one."""
    shape = LayerShape(N=100, D=103)
    pad = op_cost("linear_column", shape, P=8, hardware="paper-intra")
    frac = op_cost("linear_column", shape, P=8, hardware="paper-intra", switches=Switches(no_padding=True))
    gemm = 2 * 100 * 103
    assert pad.flops_fwd == pytest.approx(gemm * 13 + 100 * 13)
    assert frac.flops_fwd == pytest.approx(gemm * 103 / 8 + 100 * 103 / 8)


def test_every_switch_changes_something():
    """Catches a dead switch: each simplification, applied alone to the refined model, changes some layer's cost
    in a setting where it must (non-divisible D, P beyond a node, α > 0, overlap > 0)."""
    shape = LayerShape(N=324, D=100, batch=2, heads=8)
    hw = get_hardware("h100-nvlink-ib")
    base = Switches()
    for name in Switches.model_fields:
        sw = base.model_copy(update={name: True})
        changed = False
        for op, split in (("mlp", "channel"), ("attn_channel", "channel"), ("attn_token", "token")):
            a = op_cost(op, shape, P=16, hardware=hw, split=split, switches=base, overlap=0.5)
            b = op_cost(op, shape, P=16, hardware=hw, split=split, switches=sw, overlap=0.5)
            fields_a = (a.flops, a.t_comm, a.t_comm_exposed, a.ccr)
            fields_b = (b.flops, b.t_comm, b.t_comm_exposed, b.ccr)
            changed |= not np.allclose(fields_a, fields_b, rtol=1e-12, atol=0)
        assert changed, name


def test_dchag_terms():
    """Catches D-CHAG terms that do not follow the method: it tokenises only L/P bands, adds a forward
    all-gather of B·N·D per rank (full tensor B·N·P·D), has no backward traffic for that gather, and shrinks the
    aggregation's backward all-reduce from B·N·L·D to B·N·P·D; the agg ops hold no tokeniser terms."""
    shape = LayerShape(N=324, D=256, L=200, batch=2, heads=8)
    kw = {"P": 4, "hardware": "paper-intra"}
    tp = op_cost("agg_tp", shape, **kw)
    dl = op_cost("agg_dchag_l", shape, **kw)
    by_name = {c.name: c for c in tp.collectives}
    assert by_name["grad_tokens"].elements == 2 * 324 * 200 * 256
    dl_names = {c.name: c for c in dl.collectives}
    assert dl_names["gather_tokens"].elements == 2 * 324 * 4 * 256
    assert dl_names["gather_tokens"].phase == "fwd"
    assert dl_names["final_grad_tokens"].elements == 2 * 324 * 4 * 256
    assert not any(c.collective == "all_gather" and c.phase == "bwd" for c in dl.collectives)
    # agg_* exclude the tokeniser (hsitp.bench.predict adds `tokenize` to compare with the parallel layers).
    p4, p16 = (dataclasses.replace(shape, patch=p) for p in (4, 16))
    assert op_cost("agg_tp", p4, **kw).flops == op_cost("agg_tp", p16, **kw).flops
    tok_tp = op_cost("tokenize", shape, split="replicated", **kw)
    tok_dc = op_cost("tokenize", shape, split="dchag", **kw)
    assert tok_dc.flops == pytest.approx(tok_tp.flops / 4)  # 200 bands over 4 ranks, no padding needed
    g = op_cost("agg_dchag_c", dataclasses.replace(shape, groups=4), **kw)
    g1 = op_cost("agg_dchag_c", dataclasses.replace(shape, groups=1), **kw)
    assert g.flops > g1.flops  # g > 1 adds the second-level aggregator
    assert stated.ccr_dchag(stated.ccr_channel(4, 3e14, 3e11, 256), 4) == pytest.approx(g.ccr_stated)


def test_block_2d_picks_a_true_factorisation():
    """Catches a 2-D split degenerating to 1-D: P = 2 has none (NaN with a note); P = 8 uses (4, 2) or (2, 4)."""
    hw = get_hardware("paper-intra")
    shape = LayerShape(N=324, D=256)
    none = block_cost("2d", shape, 2, hw)
    assert np.isnan(none.ccr) and "factorisation" in none.note
    b = block_cost("2d", shape, 8, hw)
    assert b.mesh in ((4, 2), (2, 4)) and np.isfinite(b.ccr)
    assert b.ccr_stated == pytest.approx(np.sqrt(31.25 * 8000 / 324))


def test_model_cost_reference_is_pure_tp_single_device():
    """Catches per-scheme single-device references (which would hide D-CHAG's saved work): every scheme's
    relative throughput is measured against the same pure-TP one-device time."""
    hw = get_hardware("paper-intra")
    shape = LayerShape(N=324, D=256, L=200, heads=8, groups=2)
    costs = {s: model_cost(s, shape, 4, hw, depth=2) for s in ("tp", "dchag_l", "dchag_c")}
    assert len({c.t_single for c in costs.values()}) == 1
    assert costs["dchag_l"].ccr_stated == pytest.approx(costs["tp"].ccr_stated / 2)


def test_bad_arguments_are_named():
    """Catches silent acceptance of an unknown op or split."""
    with pytest.raises(ValueError, match="unknown op 'conv'"):
        op_cost("conv", LayerShape(N=4, D=4), P=2)
    with pytest.raises(ValueError, match="cannot be costed under split 'token'"):
        op_cost("attn_channel", LayerShape(N=4, D=4), P=2, split="token")


def test_head_padding_pads_heads_or_refuses_naming_the_key():
    """Catches head padding ignored by the model: heads = 6 over P = 4 either pads to 8 heads (2 per rank, so
    the local head-feature width is 2·D/6 instead of D/4 and the head-split GEMMs grow by 8/6) or, with padding
    off, is refused with the config key to change, as the layers do; a dividing head count is unaffected."""
    shape = LayerShape(N=16, D=24, heads=6)
    with pytest.raises(ValueError, match=r"parallel\.head_padding"):
        op_cost("attn_channel", shape, P=4, head_padding=False)
    padded = op_cost("attn_channel", shape, P=4, head_padding=True)
    frac = op_cost("attn_channel", shape, P=4, switches=Switches(no_padding=True))
    qkv = 2 * 16 * 24 * 3  # MACs of the qkv GEMM per local feature, x 2 FLOPs
    assert padded.flops_fwd - frac.flops_fwd == pytest.approx(
        (qkv + 2 * 16 * 16 * 2 + 2 * 16 * 24 + 3 * 16)
        * (2 * 24 / 6 - 24 / 4)  # qkv, scores+attn·v, proj, bias
        + 6 * 16 * 16 * (2 - 6 / 4)  # softmax over the padded heads
    )
    for op in ("attn_2d", "agg_tp", "agg_dchag_l"):
        with pytest.raises(ValueError, match=r"parallel\.head_padding"):
            op_cost(op, shape, P=4 if op != "attn_2d" else 8, mesh=(4, 2) if op == "attn_2d" else None,
                    split="2d" if op == "attn_2d" else None, head_padding=False)  # fmt: skip
    divisible = LayerShape(N=16, D=24, heads=8)
    assert op_cost("attn_channel", divisible, P=4, head_padding=False) == op_cost(
        "attn_channel", divisible, P=4, head_padding=True
    )


def test_collectives_time_hand_computed():
    """Catches the one alpha-beta function (used by calibrate, compare and shard mode) summing wrongly: α per
    call, ring factor of the record's group size, bytes over β at the intra-node level, and a group wider than a
    node split into an inter-node phase on 1/m of the data plus an intra-node phase."""

    @dataclasses.dataclass(frozen=True)
    class TwoLevels:
        devices_per_node: int = 4

        def link(self, collective: str, level: str) -> tuple[float, float]:
            alpha = {"all_reduce": 1e-5, "all_gather": 2e-5}[collective]
            return (alpha, 1e9) if level == "intra" else (10 * alpha, 1e8)

    records = [
        ("all_reduce", 4, 2e6, 2),  # two calls of 1 MB over 4 ranks in one node
        ("all_gather", 2, 4e5, 1),  # one call of 400 kB over 2 ranks
        ("all_gather", 8, 8e5, 1),  # 8 ranks, 4 per node: across 2 nodes on 1/4 of the data, then in node
        ("all_reduce", 4, 0.0, 0),  # no call: nothing
    ]
    want = (
        2 * (1e-5 + 1.5 * 1e6 / 1e9)
        + (2e-5 + 0.5 * 4e5 / 1e9)
        + (10 * 2e-5 + 0.5 * 2e5 / 1e8)
        + (2e-5 + 0.75 * 8e5 / 1e9)
    )
    assert collectives_time(records, TwoLevels()) == pytest.approx(want, rel=1e-12)
    assert collectives_time([("all_reduce", 1, 1e6, 3)], TwoLevels()) == 0.0  # a group of one issues nothing

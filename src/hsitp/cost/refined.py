"""The refined per-layer cost model: exact FLOPs and bytes, ring collectives, overlap, two bandwidth levels.

Each layer's terms come from :mod:`hsitp.cost.layers`; this module turns them into times:

* compute: 2 FLOPs per multiply-add, backward = 2 × forward (1 × for tokenisation, whose input image needs no
  gradient), at the hardware's rate for that op;
* each collective: α + factor(n) · bytes / β, ring factors all-reduce 2(n−1)/n, all-gather and reduce-scatter
  (n−1)/n, bytes = elements × dtype size of the full tensor; a group spanning nodes runs hierarchically
  (intra-node phases at β_intra, the inter-node phase on 1/m of the data at β_inter, m members per node);
* an overlap fraction hides that share of communication behind compute (CCR itself is T_comm / T_comp, §3.1);
* padding when a dimension is not divisible by its parallel degree.

Every simplification the paper's stated model makes is a field of :class:`hsitp.sections.cost.Switches` (the
config's ``cost.switches``); ``Switches.stated()`` turns
them all on, and then ``linear_column``, ``mlp``, ``attn_channel`` (channel split, C_in = the contraction
dimension of the GEMM whose output is communicated) and ``attn_token`` reproduce :mod:`hsitp.cost.stated`
exactly (tests/test_cost_refined.py).

Public entry points: :func:`op_cost` (one layer; what the microbenchmark compares against), :func:`block_cost`
(a transformer block under one split), :func:`model_cost` (tokenisation + aggregation + blocks, pure TP or
D-CHAG+TP).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from hsitp.cost import stated
from hsitp.cost.hardware import Hardware, get_hardware
from hsitp.cost.layers import SPLITS, Terms, build_terms
from hsitp.names import COMPARED_PLANS, DCHAG_OPS, PLANS
from hsitp.sections.cost import Switches
from hsitp.shape import LayerShape

BLOCK_SPLITS = ("channel", "token", "2d")
# The ops of one transformer block under each split: (op, split).
BLOCK_LAYERS: dict[str, tuple[tuple[str, str], ...]] = {
    "channel": (
        ("layernorm", "replicated"),
        ("attn_channel", "channel"),
        ("layernorm", "replicated"),
        ("mlp", "channel"),
    ),
    "token": (("layernorm", "token"), ("attn_token", "token"), ("layernorm", "token"), ("mlp", "token")),
    "2d": (("layernorm", "2d"), ("attn_2d", "2d"), ("layernorm", "2d"), ("mlp", "2d")),
}
# The layers in front of the blocks under each compared plan (pure TP, D-CHAG): the tokeniser's split (every band
# on every rank, or each rank its own bands) and the aggregation op (the blocks are Megatron channel split in all).
FRONT_LAYERS: dict[str, tuple[str, str]] = {
    p: ("dchag" if PLANS[p].groups else "replicated", str(PLANS[p].op)) for p in COMPARED_PLANS
}


@dataclass(frozen=True)
class CollectiveCost:
    name: str
    collective: str
    phase: str
    group_size: int
    elements: float  # full (unsharded) tensor
    bytes: float  # elements × dtype bytes (what the calibration's ring model takes)
    time_s: float
    per_step: bool


@dataclass(frozen=True)
class OpCost:
    """Cost of one layer on one rank under both models. Times in seconds, FLOPs per rank (``t_single``: the
    same layer on one device)."""

    op: str
    split: str
    P: int
    mesh: tuple[int, int]
    hardware: str
    flops_fwd: float
    flops_bwd: float
    traffic_bytes: float  # forward + backward memory traffic estimate (operands and results) [B]
    t_comp: float
    t_comm: float
    t_comm_exposed: float
    t_single: float
    ccr: float
    relative_throughput: float
    ccr_stated: float
    collectives: tuple[CollectiveCost, ...] = field(default_factory=tuple)

    @property
    def flops(self) -> float:
        return self.flops_fwd + self.flops_bwd

    @property
    def relative_throughput_stated(self) -> float:
        return float(stated.relative_throughput(self.P, self.ccr_stated))

    def bytes_by_collective(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for c in self.collectives:
            out[c.collective] = out.get(c.collective, 0.0) + c.bytes
        return out

    def count_by_collective(self) -> dict[str, int]:
        return dict(Counter(c.collective for c in self.collectives))


def ring_factor(collective: str, n: int) -> float:
    """Bytes each rank sends, as a multiple of the full tensor, in a ring collective over n ranks."""
    if n <= 1:
        return 0.0
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    raise ValueError(f"unknown collective {collective!r}")


class Links(Protocol):
    """What a collective's time needs of the hardware: (α, β) per collective at a bandwidth level ('intra' or
    'inter' node), and how many devices share a node. :class:`Hardware` is one; so is a fit of α and β."""

    devices_per_node: int

    def link(self, collective: str, level: str) -> tuple[float, float]: ...


def collective_time(collective: str, nbytes: float, n: int, per_node: int, hw: Links, sw: Switches) -> float:
    """Time of one collective over n ranks with ``per_node`` of them in each node (see module docstring)."""
    if n <= 1 or nbytes <= 0:
        return 0.0

    def phase(kind: str, size: float, ranks: int, level: str) -> float:
        if ranks <= 1:
            return 0.0
        alpha, beta = hw.link(kind, level)
        factor = 1.0 if sw.factor_one else ring_factor(kind, ranks)
        return (0.0 if sw.alpha_zero else alpha) + factor * size / beta

    per_node = max(1, min(per_node, n))
    if n <= per_node:
        return phase(collective, nbytes, n, "intra")
    if sw.one_bandwidth_level or per_node == 1:
        return phase(collective, nbytes, n, "inter")
    m, k = per_node, math.ceil(n / per_node)
    if collective == "all_reduce":  # reduce-scatter in node, all-reduce 1/m across nodes, all-gather in node
        return (
            phase("reduce_scatter", nbytes, m, "intra")
            + phase("all_reduce", nbytes / m, k, "inter")
            + phase("all_gather", nbytes, m, "intra")
        )
    # all-gather: across nodes on 1/m of the tensor, then in node; reduce-scatter mirrors it.
    return phase(collective, nbytes / m, k, "inter") + phase(collective, nbytes, m, "intra")


def collectives_time(
    records: Iterable[tuple[str, int, float, int]], hw: Links, sw: Switches | None = None
) -> float:
    """Ring-model time of a sequence of collectives: Σ :func:`collective_time` over (collective, group size,
    full-tensor bytes, calls) records, a group of n ranks keeping min(n, devices per node) in one node (one
    bandwidth level inside a node, hierarchical across nodes).

    ``calls`` calls of one collective on one group size may share a record with their bytes summed: each call
    pays α once and the rest is linear in bytes, so the sum is exact. The one place where a list of collectives
    (a layer's trace, or its modelled list) becomes a time.
    """
    sw = sw or Switches()
    total = 0.0
    for collective, n, nbytes, calls in records:
        if calls > 0:
            per_node = min(n, hw.devices_per_node)
            total += calls * collective_time(collective, nbytes / calls, n, per_node, hw, sw)
    return total


def group_layout(group: str, P: int, mesh: tuple[int, int], devices_per_node: int) -> tuple[int, int]:
    """(ranks, ranks per node) of a collective group: 'tp' all P ranks (contiguous), the mesh's 'channel' axis
    (contiguous ranks) or 'token' axis (stride P_c)."""
    G = devices_per_node
    if group == "tp":
        return P, min(P, G)
    P_c, P_t = mesh
    if group == "channel":
        return P_c, min(P_c, G)
    if group == "token":
        return P_t, max(1, min(P_t, G // P_c))
    raise ValueError(f"unknown group {group!r}")


def _stated_ccr(op: str, split: str, s: LayerShape, P: int, hw: Hardware) -> float:
    """The stated CCR of one layer; NaN where the paper gives no formula."""
    F, beta = hw.flops, hw.beta_for(P)
    if split == "channel":
        c_in = {
            "linear_column": s.D,
            "mlp": s.mlp_ratio * s.D,  # fc2, whose output is all-reduced, contracts over the hidden dim
            "attn_channel": s.D,  # the output projection contracts over D
            "agg_tp": s.D,
        }
        if op in c_in:
            return float(stated.ccr_channel(P, F, beta, c_in[op]))
        if op in DCHAG_OPS:
            return float(stated.ccr_dchag(stated.ccr_channel(P, F, beta, s.D), s.groups))
    if split == "token":
        if op == "attn_token":
            return float(stated.ccr_token(P, F, beta, s.N))
        return 0.0  # §3.3: token-wise layers need no communication under a token split
    if split == "2d" and op == "attn_2d":
        return float(stated.ccr_2d(stated.ccr_channel(P, F, beta, s.D), stated.ccr_token(P, F, beta, s.N)))
    return np.nan


def _compute(op: str, terms: Terms, hw: Hardware, sw: Switches, elem_bytes: int) -> tuple[float, ...]:
    """(forward FLOPs, backward FLOPs, fwd+bwd memory traffic in bytes, compute time) per rank after the compute
    switches (backward: each term's ``bwd`` multiple of its forward work and traffic)."""
    per_mac = 1.0 if sw.one_flop_per_mac else 2.0
    fwd = bwd = traffic = 0.0
    for c in terms.computes:
        if sw.paired_term_only and not c.paired:
            continue
        amount = c.amount * (per_mac if c.kind == "gemm" else 1.0)
        back = 0.0 if sw.forward_only else c.bwd
        fwd += amount
        bwd += back * amount
        traffic += (1.0 + back) * c.traffic
    return fwd, bwd, traffic * elem_bytes, hw.compute_time(op, fwd + bwd, traffic * elem_bytes)


def default_mesh(P: int) -> tuple[int, int]:
    """The most square (P_c, P_t) with P_c ≥ P_t and P_c · P_t = P."""
    P_t = max(d for d in range(1, int(math.isqrt(P)) + 1) if P % d == 0)
    return P // P_t, P_t


def meshes_2d(P: int) -> list[tuple[int, int]]:
    """Every (P_c, P_t) with both degrees > 1 (a true 2-D split)."""
    return [(P // t, t) for t in range(2, P // 2 + 1) if P % t == 0]


def _mesh(split: str, P: int, mesh: tuple[int, int] | None) -> tuple[int, int]:  # noqa: N803
    """(P_c, P_t) of a layer on P ranks: the 2-D split's given (or most square) mesh, (P, 1) otherwise."""
    if P < 1:
        raise ValueError(f"P must be >= 1, got {P}")
    if split != "2d":
        return P, 1
    mesh = mesh or default_mesh(P)
    if mesh[0] * mesh[1] != P:
        raise ValueError(f"mesh {mesh} does not multiply to P = {P}")
    return mesh


def op_cost(
    op: str,
    shape: LayerShape,
    *,
    P: int,
    hardware: str | Hardware = "paper-intra",
    split: str | None = None,
    mesh: tuple[int, int] | None = None,
    switches: Switches | None = None,
    overlap: float = 0.0,
    grad_accumulation: int = 1,
    per_step_alpha: bool = False,
    head_padding: bool = True,
) -> OpCost:
    """Forward+backward FLOPs, collectives (bytes, count, time), compute time and CCR of one layer on one rank.

    ``op`` is a contract op name (or ``linear_column``/``tokenize``/``layernorm``); ``split`` defaults to the op's
    own (``mlp`` → channel, ``layernorm`` → channel-sharded, ...); ``mesh`` = (P_c, P_t) for 2-D, default the
    most square factorisation. ``hardware``: a preset name, ``measured:PATH`` or a :class:`Hardware`.
    ``per_step_alpha``: the layer is the whole training step (a microbenchmark), so its weight-gradient sync is a
    bucket of its own and pays the per-call latency α (default: bucketed with the rest of the model, no α).
    ``head_padding``: heads the ranks do not divide are padded (on) or refused (off), as the layers do.
    """
    hw = get_hardware(hardware)
    sw = switches or Switches()
    split = split or SPLITS.get(op, ("channel",))[0]
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap fraction must be in [0, 1], got {overlap}")
    mesh = _mesh(split, P, mesh)
    kw = {"pad": not sw.no_padding, "drop_n2": sw.no_attention_n2}
    terms = build_terms(op, split, shape, P, mesh, head_padding=head_padding, **kw)
    single = build_terms(op, split, shape, 1, (1, 1), **kw)
    elem_bytes = 1 if sw.one_byte_per_element else shape.dtype_bytes
    f_fwd, f_bwd, traffic, t_comp = _compute(op, terms, hw, sw, elem_bytes)
    t_single = _compute(op, single, hw, sw, elem_bytes)[3]
    costs = _collective_costs(op, terms, P, mesh, hw, sw, elem_bytes, grad_accumulation, per_step_alpha)
    t_comm = sum(c.time_s for c in costs)
    hidden = 0.0 if sw.no_overlap else overlap
    exposed = (1.0 - hidden) * t_comm
    return OpCost(
        op=op,
        split=split,
        P=P,
        mesh=mesh,
        hardware=hw.name,
        flops_fwd=f_fwd,
        flops_bwd=f_bwd,
        traffic_bytes=traffic,
        t_comp=t_comp,
        t_comm=t_comm,
        t_comm_exposed=exposed,
        t_single=t_single,
        ccr=t_comm / t_comp if t_comp > 0 else np.inf,
        relative_throughput=t_single / (t_comp + exposed) if t_comp + exposed > 0 else np.nan,
        ccr_stated=_stated_ccr(op, split, shape, P, hw),
        collectives=tuple(costs),
    )


def _collective_costs(
    op: str,
    terms: Terms,
    P: int,
    mesh: tuple[int, int],
    hw: Hardware,
    sw: Switches,
    elem_bytes: int,
    grad_accumulation: int,
    per_step_alpha: bool,
) -> list[CollectiveCost]:
    """The cost of each collective of ``terms`` that is issued (a group of more than one rank) after the
    switches; gradient syncs are bucketed (no α, once per ``grad_accumulation`` steps) unless ``per_step_alpha``."""
    comms = [c for c in terms.comms if not (sw.forward_only and c.phase == "bwd")]
    if sw.one_collective:
        comms = [c for c in comms if c.paired][:1]
    costs = []
    for c in comms:
        n, per_node = group_layout(c.group, P, mesh, hw.devices_per_node)
        if n <= 1:
            continue  # a collective over a group of one (e.g. the token axis of a P_c x 1 mesh) is not issued
        elements = c.elements * (c.paired_share if sw.one_collective else 1.0)
        nbytes = elements * elem_bytes
        if c.per_step and not per_step_alpha:
            # gradient syncs are bucketed (as DDP/FSDP do): no per-layer latency, paid once a step
            t = collective_time(
                c.collective, nbytes, n, per_node, hw, sw.model_copy(update={"alpha_zero": True})
            )
            t /= grad_accumulation
        else:
            t = collective_time(c.collective, nbytes, n, per_node, hw, sw)
        # 1 except for measured hardware (collectives back to back in a layer)
        t *= hw.sequence_factor_for(op)
        costs.append(CollectiveCost(c.name, c.collective, c.phase, n, elements, nbytes, t, c.per_step))
    return costs


@dataclass(frozen=True)
class StackCost:
    """A stack of layers (a block, or a whole model) on one rank: sums and the worst layer."""

    name: str
    P: int
    mesh: tuple[int, int]
    layers: tuple[OpCost, ...]
    t_single: float  # one device running the reference (for a whole model: the pure-TP one) [s]
    ccr_stated: float
    note: str = ""

    @property
    def t_comp(self) -> float:
        return sum(x.t_comp for x in self.layers)

    @property
    def t_comm(self) -> float:
        return sum(x.t_comm for x in self.layers)

    @property
    def t_comm_exposed(self) -> float:
        return sum(x.t_comm_exposed for x in self.layers)

    @property
    def ccr(self) -> float:
        """Σ T_comm / Σ T_comp: the compute-weighted aggregate of per-layer CCRs (§3.1)."""
        return self.t_comm / self.t_comp if self.t_comp > 0 else np.nan

    @property
    def ccr_worst_layer(self) -> float:
        vals = [x.ccr for x in self.layers if x.t_comp > 0]
        return max(vals) if vals else np.nan

    @property
    def relative_throughput(self) -> float:
        step = self.t_comp + self.t_comm_exposed
        return self.t_single / step if step > 0 else np.nan

    @property
    def relative_throughput_stated(self) -> float:
        return float(stated.relative_throughput(self.P, self.ccr_stated))


def block_cost(
    split: str,
    shape: LayerShape,
    P: int,
    hw: Hardware,
    sw: Switches | None = None,
    *,
    overlap: float = 0.0,
    mesh: tuple[int, int] | None = None,
    grad_accumulation: int = 1,
) -> StackCost:
    """One transformer block (LayerNorm, attention, LayerNorm, MLP) under a channel, token or 2-D split.

    For '2d' without a mesh, the factorisation P = P_c·P_t (both > 1) with the lowest refined CCR is used; P
    without one gives a NaN result with a note. The stated CCR is the paper's block-level formula with C_in = D.
    """
    sw = sw or Switches()
    if split not in BLOCK_LAYERS:
        raise ValueError(f"split must be one of {BLOCK_SPLITS}, got {split!r}")
    if split == "2d" and mesh is None:
        options = meshes_2d(P)
        if not options:
            note = f"P = {P} has no 2-D factorisation with both degrees > 1"
            return StackCost("2d", P, (P, 1), (), np.nan, np.nan, note)
        stacks = [
            block_cost("2d", shape, P, hw, sw, overlap=overlap, mesh=m, grad_accumulation=grad_accumulation)
            for m in options
        ]
        return min(stacks, key=lambda x: x.ccr)
    layers = tuple(
        op_cost(
            op,
            shape,
            P=P,
            hardware=hw,
            split=sp,
            switches=sw,
            overlap=overlap,
            mesh=mesh,
            grad_accumulation=grad_accumulation,
        )
        for op, sp in BLOCK_LAYERS[split]
    )
    # the block's stated CCR is its attention's (the paper's block-level formula)
    return StackCost(split, P, layers[1].mesh, layers, sum(x.t_single for x in layers), layers[1].ccr_stated)


def model_cost(
    plan: str,
    shape: LayerShape,
    P: int,
    hw: Hardware,
    depth: int,
    sw: Switches | None = None,
    *,
    overlap: float = 0.0,
    grad_accumulation: int = 1,
) -> StackCost:
    """Tokenisation + cross-band aggregation + ``depth`` channel-split blocks, as pure TP or D-CHAG+TP.

    ``t_single`` is the *pure-TP* model on one device for every plan, so relative throughput compares samples/s
    (the D-CHAG notes warn that per-variant FLOP counts differ). Stated CCR: P·F/(β·D), divided by g for D-CHAG.
    """
    sw = sw or Switches()
    if plan not in FRONT_LAYERS:
        raise ValueError(f"plan must be one of {COMPARED_PLANS}, got {plan!r}")

    def layers_for(name: str, p: int) -> list[OpCost]:
        kw = {
            "P": p,
            "hardware": hw,
            "switches": sw,
            "overlap": overlap,
            "grad_accumulation": grad_accumulation,
        }
        tok_split, agg = FRONT_LAYERS[name]
        out = [op_cost("tokenize", shape, split=tok_split, **kw), op_cost(agg, shape, split="channel", **kw)]
        block = [op_cost(op, shape, split=sp, **kw) for op, sp in BLOCK_LAYERS["channel"]]
        return out + block * depth

    t_single = sum(x.t_comp for x in layers_for("tp", 1))
    layers = tuple(layers_for(plan, P))
    # the model's stated CCR is its aggregation's: the channel formula with C_in = D, divided by g for D-CHAG
    return StackCost(plan, P, (P, 1), layers, t_single, layers[1].ccr_stated)

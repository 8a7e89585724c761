"""The cost model as the bench asks it: a benchmark point (op, P, layer shape), its modelled work, and the two
models' predictions of its CCR.

The bench's aggregation ops are the parallel layers as built (``hsitp.parallel.build_op``): they take the raw
band cube, so they *include* the per-band tokenisation. The cost model keeps tokenisation as its own op
(``tokenize``), so an aggregation point here is ``tokenize`` (replicated for the TP baseline, the rank's own bands
for D-CHAG) plus the aggregation op. The bench also times ``tokenize`` alone; where the calibration fitted it a
compute model of its own, an aggregation point's compute time is the aggregation's model on its own work plus
``tokenize``'s on the tokeniser's (the split the planner sums, ``hsitp.cost.refined``), else the bench op's model
on the sum (calibrations without the ``tokenize`` op).
Everything else is :func:`hsitp.cost.refined.op_cost` with default switches (the refined model, no overlap);
LayerNorm's two bench ops are the cost model's LayerNorm under its one placement.

Modelled quantities are computed here, where they are used (the calibration's compute-model fit, the
comparison, shard mode), never stored in ``microbench.nc``, which holds measurements only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hsitp.config import ConfigError
from hsitp.cost.budget import ANY_MACHINE_BYTES, bench_point_bytes, check_fits
from hsitp.cost.refined import OpCost, op_cost
from hsitp.names import AGG_OPS, BY_OP
from hsitp.settings import BenchSettings
from hsitp.shape import LayerShape

TOKENIZE = "tokenize"  # timed alone too, so that the aggregators' compute models can be fitted without it
L_DEPENDENT_OPS = (*AGG_OPS, TOKENIZE)  # the other ops' cost and layers do not depend on the band count


@dataclass(frozen=True)
class Point:
    """One benchmark point: an op on P ranks at one layer shape (``attn_2d`` on the cost model's mesh
    ``default_mesh(P)``, so the bench and the model describe the same split)."""

    op: str
    P: int
    shape: LayerShape


def bench_shape(s: BenchSettings, *, N: int, D: int, L: int, dtype: str) -> LayerShape:
    """The layer shape of a bench point: N, D, L and dtype from the sweep; heads from the ``parallel`` section
    (the layers' own setting); batch, D-CHAG groups, patch and MLP ratio from ``bench``."""
    return LayerShape(N=N, D=D, L=L, dtype=dtype, batch=s.batch, heads=s.heads, groups=s.groups, patch=s.patch,
                      mlp_ratio=s.mlp_ratio)  # fmt: skip


def _parts(pt: Point, hardware: Any, head_padding: bool) -> list[OpCost]:
    # per_step_alpha: the timed step is this one layer, so its weight-gradient sync is a bucket of its own.
    kw = {"P": pt.P, "hardware": hardware}
    parts = [op_cost(pt.op, pt.shape, per_step_alpha=True, head_padding=head_padding, **kw)]
    if pt.op in AGG_OPS:
        split = "dchag" if BY_OP[pt.op].groups else "replicated"  # D-CHAG: each rank tokenises its own bands
        parts.append(op_cost("tokenize", pt.shape, split=split, **kw))
    return parts


def _work(pt: Point, parts: list[OpCost]) -> tuple[tuple[float, float], tuple[float, float]]:
    """(FLOPs, traffic) of all the parts, and of the tokenisation among them ((0, 0) but for aggregations)."""
    total = (float(sum(c.flops for c in parts)), float(sum(c.traffic_bytes for c in parts)))
    tok = (float(parts[1].flops), float(parts[1].traffic_bytes)) if pt.op in AGG_OPS else (0.0, 0.0)
    return total, tok


def work_split(pt: Point, *, head_padding: bool) -> tuple[tuple[float, float], tuple[float, float]]:
    """(FLOPs, memory traffic [B]) per rank, forward + backward, of the op as the bench times it (refined
    model's counts; padded heads included when ``head_padding`` is on), and of the tokenisation inside it
    ((0, 0) for ops other than the aggregations)."""
    return _work(pt, _parts(pt, "paper-intra", head_padding))


def op_work(pt: Point, *, head_padding: bool) -> tuple[float, float]:
    """(FLOPs, memory traffic [B]) of the op as the bench times it (:func:`work_split`'s first pair)."""
    return work_split(pt, head_padding=head_padding)[0]


def check_points(points: Iterable[Point], *, head_padding: bool, memory: float = ANY_MACHINE_BYTES) -> None:
    """Refuse, before anything is timed, a sweep the layers would refuse: with ``parallel.head_padding`` off, a
    head count that the ranks splitting it do not divide raises the cost model's error naming ``parallel.heads``
    (the bench's heads) and that key; a point whose layer cannot fit in ``memory`` bytes (any machine's, or this
    one's) names bench.N, D, L and batch."""
    from hsitp.cost.layers import HeadSplitError

    for pt in points:
        sh = pt.shape
        check_fits(f"bench: {pt.op} at N = {sh.N}, D = {sh.D}, L = {sh.L}", bench_point_bytes(sh),
                   "bench.N, bench.D, bench.L or bench.batch", memory)  # fmt: skip
        held = -(-pt.shape.L // pt.P)  # the bands the fullest rank holds
        if pt.op in AGG_OPS and BY_OP[pt.op].groups and pt.shape.L < pt.P:
            raise ConfigError(
                f"bench.L = {pt.shape.L} bands over P = {pt.P} ranks ({pt.op}): D-CHAG gives every rank a chunk of "
                f"bands, so bench.L must be at least the largest of bench.world_sizes"
            )
        if pt.op in AGG_OPS and BY_OP[pt.op].groups and pt.shape.groups > held:
            raise ConfigError(
                f"bench.groups = {pt.shape.groups} D-CHAG groups per rank, but at L = {pt.shape.L}, P = {pt.P} a "
                f"rank holds at most {held} bands ({pt.op}): every group needs a band (bench.groups <= {held})"
            )
        try:
            _parts(pt, "paper-intra", head_padding)
        except HeadSplitError as exc:
            raise exc.keyed("parallel.heads") from None


@dataclass(frozen=True)
class Prediction:
    t_comp: float  # s, refined
    t_comm: float  # s, refined (sum of the op's collectives, no overlap)
    ccr_refined: float
    ccr_stated: float  # the paper's formula with the same hardware's F and beta
    bytes: float  # refined model's bytes over all collectives (full tensors)
    n_collectives: int  # refined model's collective calls, fwd+bwd


def predict(pt: Point, hardware: Any, *, head_padding: bool) -> Prediction:
    """Both models' CCR for ``pt`` on ``hardware`` (a preset name, ``measured:PATH`` or a Hardware)."""
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(hardware)
    parts = _parts(pt, hw, head_padding)
    work, tok = _work(pt, parts)  # (FLOPs, traffic) in all, and the tokeniser's
    # the two compute models summed where hw has one for the tokeniser: the op's on its own work, else one on all
    if tok[0] > 0 and TOKENIZE in hw.op_compute_rate:
        t_comp = hw.compute_time(pt.op, work[0] - tok[0], work[1] - tok[1]) + hw.compute_time(TOKENIZE, *tok)
    else:
        t_comp = hw.compute_time(pt.op, *work)
    t_comm = float(sum(c.t_comm for c in parts))
    nbytes = float(sum(k.bytes for c in parts for k in c.collectives if k.group_size > 1))
    # a collective over a group of one (e.g. the token axis of a P_c x 1 mesh) is not issued
    count = sum(1 for c in parts for k in c.collectives if k.group_size > 1)
    return Prediction(t_comp, t_comm, t_comm / t_comp, float(parts[0].ccr_stated), nbytes, count)

"""The cost model as the bench stage asks it: FLOPs of a timed op, and the two models' predictions of its CCR.

The bench's aggregation ops are the parallel layers as built (``hsitp.parallel.build_op``): they take the raw
band cube, so they *include* the per-band tokenisation. The cost model keeps tokenisation as its own op
(``tokenize``), so an aggregation point here is ``tokenize`` (replicated for the TP baseline, the rank's own bands
for D-CHAG) plus the aggregation op, and its compute time uses the compute model calibrated for the bench op.
Everything else is :func:`hsitp.cost.refined.op_cost` with default switches (the refined model, no overlap).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hsitp.cost.refined import default_mesh, op_cost

AGG_OPS = ("agg_tp", "agg_dchag_l", "agg_dchag_c")
L_DEPENDENT_OPS = AGG_OPS  # the other ops' cost and layers do not depend on the band count
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class Point:
    """One benchmark point: op and shapes as both the parallel layers and the cost model take them."""

    op: str
    P: int
    N: int
    D: int
    L: int
    dtype: str
    batch: int = 1
    heads: int = 8
    groups: int = 1
    patch: int = 4
    mlp_ratio: int = 4

    def cost_kwargs(self) -> dict[str, Any]:
        return {
            "P": self.P,
            "N": self.N,
            "D": self.D,
            "L": self.L,
            "B": self.batch,
            "heads": self.heads,
            "dtype_bytes": DTYPE_BYTES[self.dtype],
            "groups": self.groups,
            "mlp_ratio": self.mlp_ratio,
            "patch": self.patch,
        }


def op_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The shape settings shared by every timed point: ``heads`` from the ``parallel`` section (the layers'
    own setting), the rest from ``bench``."""
    bc = config["bench"]
    return {
        "batch": bc["batch"],
        "heads": config["parallel"]["heads"],
        "groups": bc["groups"],
        "patch": bc["patch"],
        "mlp_ratio": bc["mlp_ratio"],
    }


def mesh_2d(P: int) -> tuple[int, int]:
    """(P_c, P_t) the bench builds for ``attn_2d``: the cost model's default, so both describe the same split."""
    return default_mesh(P)


def _parts(pt: Point, hardware: Any) -> list[Any]:
    kw = pt.cost_kwargs()
    # per_step_alpha: the timed step is this one layer, so its weight-gradient sync is a bucket of its own.
    parts = [op_cost(pt.op, hardware=hardware, per_step_alpha=True, **kw)]
    if pt.op in AGG_OPS:
        split = "replicated" if pt.op == "agg_tp" else "dchag"
        parts.append(op_cost("tokenize", split=split, hardware=hardware, **kw))
    return parts


def op_flops(pt: Point) -> float:
    """Per-rank forward+backward FLOPs of the op as the bench times it (refined model's count)."""
    return float(sum(c.flops for c in _parts(pt, "paper-intra")))


def op_traffic(pt: Point) -> float:
    """Per-rank forward+backward memory traffic estimate [B] of the op as the bench times it."""
    return float(sum(c.traffic_bytes for c in _parts(pt, "paper-intra")))


@dataclass(frozen=True)
class Prediction:
    t_comp: float  # s, refined
    t_comm: float  # s, refined (sum of the op's collectives, no overlap)
    ccr_refined: float
    ccr_stated: float  # the paper's formula with the same hardware's F and beta
    bytes: float  # refined model's bytes over all collectives (full tensors)
    n_collectives: int  # refined model's collective calls, fwd+bwd


def predict(pt: Point, hardware: Any) -> Prediction:
    """Both models' CCR for ``pt`` on ``hardware`` (a preset name, ``measured:PATH`` or a Hardware)."""
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(hardware) if isinstance(hardware, str) else hardware
    parts = _parts(pt, hw)
    flops = sum(c.flops for c in parts)
    t_comp = hw.compute_time(pt.op, flops, sum(c.traffic_bytes for c in parts))
    t_comm = float(sum(c.t_comm for c in parts))
    nbytes = float(sum(k.bytes for c in parts for k in c.collectives if k.group_size > 1))
    # a collective over a group of one (e.g. the token axis of a P_c x 1 mesh) is not issued
    count = sum(1 for c in parts for k in c.collectives if k.group_size > 1)
    return Prediction(t_comp, t_comm, t_comm / t_comp, float(parts[0].ccr_stated), nbytes, count)

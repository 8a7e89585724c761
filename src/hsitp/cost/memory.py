"""Per-device training memory of pure TP and D-CHAG+TP, by part (tokenisation, aggregation, blocks) and by kind
(parameters, gradients, optimizer state, activations).

Parameters and saved activations of the tokeniser and aggregators come from :mod:`hsitp.cost.layers`. Block
activations use Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
(arXiv 2205.05198, eq. 2): per layer s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes for 16-bit activations with tensor
parallel degree t and no sequence parallelism (s tokens, b batch, h hidden, a heads), scaled by dtype/2 bytes.
With FSDP (ZeRO-3) over the data-parallel group, parameters, gradients and optimizer state are sharded dp ways and
the largest unit (one block, the tokeniser or the aggregator) is gathered whole while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from hsitp.cost.layers import build_terms
from hsitp.cost.refined import BLOCK_LAYERS, SCHEME_PARTS
from hsitp.shape import LayerShape

PARTS = ("tokenisation", "aggregation", "blocks")
KINDS = ("parameters", "gradients", "optimizer", "activations")
OPTIMIZERS = ("adamw", "adam", "sgd_momentum", "sgd")


@dataclass(frozen=True)
class TrainingSetup:
    """How training stores state: element size, fp32 master weights, optimizer, FSDP, activation checkpointing."""

    dtype_bytes: int = 2
    master_fp32: bool = True
    optimizer: str = "adamw"
    fsdp: bool = True
    activation_checkpointing: bool = False

    def optimizer_bytes_per_param(self) -> float:
        """Optimizer state per parameter: Adam m and v in fp32 (8 B), momentum 4 B, plus a 4 B fp32 master copy
        when training in 16 bit with master weights (as in ZeRO's 16-byte-per-parameter accounting)."""
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        state = {"adamw": 8.0, "adam": 8.0, "sgd_momentum": 4.0, "sgd": 0.0}[self.optimizer]
        master = 4.0 if self.master_fp32 and self.dtype_bytes < 4 else 0.0
        return state + master


def block_activation_bytes(shape: LayerShape, P: int) -> float:
    """Korthikanti et al. eq. 2 for one block, scaled from 16-bit to ``dtype_bytes``."""
    s, b, h, a = shape.N, shape.batch, shape.D, shape.heads
    return s * b * h * (10 + 24 / P + 5 * a * s / (h * P)) * shape.dtype_bytes / 2


def memory_breakdown(
    scheme: str, shape: LayerShape, P: int, dp: int, depth: int, setup: TrainingSetup, *, pad: bool = True
) -> dict[tuple[str, str], float]:
    """Bytes per device for (part, kind) with TP degree P and data-parallel (or FSDP) degree dp."""
    tok_split, agg = SCHEME_PARTS[scheme]
    mesh = (P, 1)
    tok = build_terms("tokenize", tok_split, shape, P, mesh, pad=pad)
    aggr = build_terms(agg, "channel", shape, P, mesh, pad=pad)
    block_params = sum(
        build_terms(op, sp, shape, P, mesh, pad=pad).params for op, sp in BLOCK_LAYERS["channel"]
    )
    params = {"tokenisation": tok.params, "aggregation": aggr.params, "blocks": depth * block_params}
    e = shape.dtype_bytes
    if setup.activation_checkpointing:  # keep each block's input, recompute one block at a time
        blocks_act = depth * shape.batch * shape.N * shape.D * e + block_activation_bytes(shape, P)
    else:
        blocks_act = depth * block_activation_bytes(shape, P)
    acts = {"tokenisation": tok.activations * e, "aggregation": aggr.activations * e, "blocks": blocks_act}
    shard = dp if (setup.fsdp and dp > 1) else 1
    per_param = {"parameters": e, "gradients": e, "optimizer": setup.optimizer_bytes_per_param()}
    out: dict[tuple[str, str], float] = {}
    for part in PARTS:
        for kind, nbytes in per_param.items():
            out[(part, kind)] = params[part] * nbytes / shard
        out[(part, "activations")] = acts[part]
    if shard > 1:  # the unit being run is gathered whole
        units = {"tokenisation": tok.params, "aggregation": aggr.params, "blocks": block_params}
        biggest = max(units, key=units.get)
        out[(biggest, "parameters")] += units[biggest] * e * (1 - 1 / shard)
    return out


def parameter_count(scheme: str, shape: LayerShape, P: int, depth: int) -> float:
    """Parameters held by one TP rank (no FSDP) — the model size a P-way TP group holds per rank."""
    tok_split, agg = SCHEME_PARTS[scheme]
    mesh = (P, 1)
    blocks = sum(build_terms(op, sp, shape, P, mesh).params for op, sp in BLOCK_LAYERS["channel"])
    return (
        build_terms("tokenize", tok_split, shape, P, mesh).params
        + build_terms(agg, "channel", shape, P, mesh).params
        + depth * blocks
    )

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


# --- The probe's model: what this code keeps for one training step, by part and kind ---------------------------
# The scheme-level breakdown above prices the paper's setting (Megatron's activation formula, 16-bit with fp32
# master weights). The model below prices what ``hsitp.models`` actually keeps, so it can be checked against the
# memory probe (``hsitp probe``) part by part: every tensor autograd saves in each part, counted from the modules'
# code (``hsitp.parallel.dense`` / ``aggregation``): scaled-dot-product attention keeps q, k, v, its output and
# the log-sum-exp (B, h, N) in fp32, never the N x N scores (CPU and CUDA kernels alike); LayerNorm keeps its
# input and two fp32 statistics per row; a linear layer keeps its input; GELU its input. Parameters, gradients
# and AdamW state (exp_avg, exp_avg_sq in the parameter dtype, one fp32 ``step`` per tensor) are exact.

PLAN_PARTS = ("tokenisation", "aggregation", "blocks", "head")
PLAN_KINDS = ("parameters", "gradients", "optimizer", "activations", "transient")
PLANS = ("dense", "tp", "dchag_l", "dchag_c", "token")
CHECKPOINTING = ("none", "blocks")
STAT_BYTES = 4  # LayerNorm mean / rstd and the attention log-sum-exp are fp32 whatever the activation dtype


@dataclass(frozen=True)
class PlanSize:
    """The transformer of ``hsitp.models`` at one size (B crops of N = (H/p)(W/p) tokens, L bands, D features)."""

    B: int
    N: int
    D: int
    L: int
    heads: int
    depth: int
    patch: int
    classes: int
    mlp_ratio: int = 4
    dtype_bytes: int = 4
    # LayerNorm's saved mean / rstd: fp32 on CUDA and for fp32 inputs; the CPU kernel keeps them in a 16-bit
    # input's dtype (2)
    ln_stat_bytes: int = 4

    @property
    def hidden(self) -> int:
        return self.mlp_ratio * self.D


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def band_slots(L: int, P: int, g: int) -> tuple[int, int]:  # noqa: N803
    """D-CHAG on rank 0: (band slots, real bands): slots padded to a multiple of g (``padding.Split``)."""
    slots = _ceil(_ceil(L, P), g) * g
    return slots, L // P + (L % P > 0)


def _check(plan: str, P: int, checkpointing: str) -> None:  # noqa: N803
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {PLANS}, got {plan!r}")
    if plan == "dense" and P != 1:
        raise ValueError("plan 'dense' runs at P = 1")
    if checkpointing not in CHECKPOINTING:
        raise ValueError(f"checkpointing must be one of {CHECKPOINTING}, got {checkpointing!r}")


def plan_parameters(plan: str, m: PlanSize, P: int, g: int = 1) -> dict[str, tuple[float, int]]:  # noqa: N803
    """(elements, tensors) of rank 0's parameters per part."""
    _check(plan, P, "none")
    D, p2 = m.D, m.patch**2
    sharded = plan in ("tp", "dchag_l", "dchag_c")
    tp = P if sharded else 1
    bands = band_slots(m.L, P, g)[1] if plan.startswith("dchag") else m.L
    full_xattn = 4 * D * D + 5 * D  # query, q, kv, proj of a single-query cross-attention
    shard_xattn = (
        4 * D * D / tp + 3 * D / tp + 2 * D
    )  # head-sharded: q, kv column; proj row (bias, query whole)
    if plan == "dchag_l":
        slots = band_slots(m.L, P, g)[0]
        agg = (slots / g + 1 + (g + 1 if g > 1 else 0), 2 + (2 if g > 1 else 0))
        agg = (agg[0] + shard_xattn, agg[1] + 7)
    elif plan == "dchag_c":
        n = 2 if g > 1 else 1
        agg = (n * full_xattn + shard_xattn, 7 * n + 7)
    elif sharded:
        agg = (shard_xattn, 7)
    else:
        agg = (full_xattn, 7)
    h = m.hidden
    block = 4 * D + (3 * D * D + 3 * D) / tp + D * D / tp + D + (h * D + h) / tp + D * h / tp + D
    out = m.classes * p2
    return {
        "tokenisation": (bands * D * p2 + 2 * bands * D, 3),
        "aggregation": agg,
        "blocks": (m.N * D + m.depth * block, 1 + 12 * m.depth),
        "head": (2 * D + D * out + out, 4),
    }


def plan_activations(
    plan: str, m: PlanSize, P: int, g: int = 1, checkpointing: str = "none"
) -> dict[str, float]:  # noqa: N803
    """Bytes autograd keeps for backward on rank 0, per part (what the probe's saved-tensor hook counts)."""
    _check(plan, P, checkpointing)
    e, f, ln = m.dtype_bytes, STAT_BYTES, m.ln_stat_bytes
    D, h, r = m.D, m.heads, m.mlp_ratio
    n_loc = _ceil(m.N, P) if plan == "token" else m.N
    M = m.B * n_loc  # (B N_local) rows
    tp = P if plan in ("tp", "dchag_l", "dchag_c") else 1
    bands = band_slots(m.L, P, g)[1] if plan.startswith("dchag") else m.L
    tok = e * m.B * bands * m.patch**2 * n_loc  # the conv's input

    def xattn(rows: float, keys: float, shards: int) -> float:
        """Single-query cross-attention over ``keys`` tokens per row, heads split ``shards`` ways: kv input,
        k and v, the expanded query, the output and the fp32 log-sum-exp."""
        return (
            e * (rows * keys * D + 2 * rows * keys * D / shards + rows * D / shards + D / shards)
            + f * rows * h / shards
        )

    if plan in ("tp", "dense", "token"):
        agg = xattn(M, m.L, tp)
    else:
        slots = band_slots(m.L, P, g)[0]
        final = xattn(M, P, P)
        if plan == "dchag_l":
            partial = e * (M * slots * D + (M * g * D if g > 1 else 0))
        else:
            partial = xattn(M * g, slots / g, 1) + (xattn(M, g, 1) if g > 1 else 0)
        agg = partial + final
    if checkpointing == "blocks":
        per_block = e * M * D  # the block's input; the rest is recomputed in backward
    elif plan == "token" and P > 1:
        per_block = e * (M * D * (8 + 2 * r) + 2 * m.B * n_loc * P * D) + f * M * h + ln * 4 * M
    else:
        per_block = e * M * D * (4 + 4 / tp + 2 * r / tp) + f * M * h / tp + ln * 4 * M
    head = e * 2 * M * D + ln * 2 * M
    return {"tokenisation": tok, "aggregation": agg, "blocks": m.depth * per_block, "head": head}


def adamw_bytes(elements: float, tensors: int, dtype_bytes: int) -> float:
    """AdamW state of ``tensors`` parameter tensors: exp_avg and exp_avg_sq in the parameter dtype, fp32 step."""
    return 2 * elements * dtype_bytes + 4 * tensors


def plan_memory(
    plan: str,
    m: PlanSize,
    P: int,  # noqa: N803
    g: int = 1,
    checkpointing: str = "none",
) -> dict[tuple[str, str], float]:
    """Rank 0's bytes per (part, kind) for one training step of ``plan``, plus ``("step", "peak")``: the
    modelled peak, and the transient under the part where the peak falls (see ``plan_peak``)."""
    params = plan_parameters(plan, m, P, g)
    acts = plan_activations(plan, m, P, g, checkpointing)
    e = m.dtype_bytes
    out: dict[tuple[str, str], float] = {}
    for part in PLAN_PARTS:
        n, t = params[part]
        out[(part, "parameters")] = n * e
        out[(part, "gradients")] = n * e
        out[(part, "optimizer")] = adamw_bytes(n, t, e)
        out[(part, "activations")] = acts[part]
        out[(part, "transient")] = 0.0
    peak, part, transient = plan_peak(plan, m, P, g, checkpointing, out)
    if part in PLAN_PARTS:
        out[(part, "transient")] = transient
    out[("step", "peak")] = peak
    return out


def plan_peak(
    plan: str,
    m: PlanSize,
    P: int,  # noqa: N803
    g: int,
    checkpointing: str,
    state: dict[tuple[str, str], float],
) -> tuple[float, str, float]:
    """(peak bytes, part where it falls, transient = peak - parameters - optimizer state - saved activations).

    Parameters and optimizer state are always live; ``zero_grad(set_to_none=True)`` means no gradient exists when
    the step starts. Backward runs the parts in reverse (head, blocks, aggregation, tokenisation); during part k's
    backward the activations of parts up to k are still saved, the gradients of the parts after k exist, the batch
    is live, and the gradient flowing through the part is a transient buffer: the logits' and the loss's
    (head), a (B N D) gradient plus one hidden-sized buffer and, checkpointed, one recomputed block (blocks), the
    gradient of the band tokens and of k and v (aggregation), the band tokens' gradient (tokenisation). The
    optimizer step holds every gradient plus AdamW's temporaries (about one parameter-sized buffer of the
    largest part). The peak is the largest of these five moments.
    """
    e = m.dtype_bytes
    n_loc = _ceil(m.N, P) if plan == "token" else m.N
    M = m.B * n_loc
    tp = P if plan in ("tp", "dchag_l", "dchag_c") else 1
    pix = m.B * n_loc * m.patch**2
    order = list(PLAN_PARTS)
    base = sum(state[(p, k)] for p in order for k in ("parameters", "optimizer"))
    acts = {p: state[(p, "activations")] for p in order}
    grads = {p: state[(p, "gradients")] for p in order}
    bands = band_slots(m.L, P, g)[1] if plan.startswith("dchag") else m.L
    keys = band_slots(m.L, P, g)[0] if plan.startswith("dchag") else m.L
    x_in = e * pix * bands  # the input, cloned in the step
    logits = e * pix * m.classes
    flow = {
        "head": x_in + 4 * logits + e * M * m.D,
        "blocks": x_in + logits + e * M * m.D * (2 + m.mlp_ratio / tp),
        "aggregation": x_in + e * (M * keys * m.D + 2 * M * keys * m.D / (1 if plan == "dchag_c" else tp)),
        "tokenisation": x_in + e * M * bands * m.D,
    }
    if checkpointing == "blocks":
        full = plan_activations(plan, m, P, g, "none")["blocks"] / m.depth
        flow["blocks"] += full - e * M * m.D
    moments = []
    for k, part in enumerate(order):
        live = sum(acts[p] for p in order[: k + 1]) + sum(grads[p] for p in order[k + 1 :])
        moments.append((base + live + flow[part], part))
    update = sum(grads.values()) + max(state[(p, "parameters")] for p in order)
    moments.append((base + update, "other"))
    peak, part = max(moments)
    return peak, part, peak - base - sum(acts.values())

"""Per-device training memory of pure TP and D-CHAG+TP, by part (tokenisation, aggregation, blocks) and by kind
(parameters, gradients, optimizer state, activations).

Parameters and saved activations of the tokeniser and aggregators come from :mod:`hsitp.cost.layers`. Block
activations use Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
(arXiv 2205.05198, eq. 2): per layer s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes for 16-bit activations with tensor
parallel degree t and no sequence parallelism (s tokens, b batch, h hidden, a heads), scaled by dtype/2 bytes.
With FSDP (ZeRO-3) over the data-parallel group, parameters, gradients and optimizer state are sharded dp ways and
the largest unit (one block, the tokeniser or the aggregator) is gathered whole while it runs.

Two entry points: :func:`memory_breakdown`, the per-part, per-kind bytes above for the paper's cases (the CCR and
scale tables), and :func:`plan_memory`, rank 0's bytes of one plan at P and g for the model this project trains,
with ``("step", "peak")``, the modelled peak of a training step (the probe's modelled peak, the planner, the budget).
"""

from __future__ import annotations

from dataclasses import dataclass

from hsitp.cost.layers import Terms, build_terms
from hsitp.cost.refined import BLOCK_LAYERS, FRONT_LAYERS
from hsitp.names import DCHAG_PLANS, ONE_RANK, PLAN_NAMES, PLANS, SHARDED_PLANS
from hsitp.shape import LayerShape, slot_product_rows

PARTS = ("tokenisation", "aggregation", "blocks")
KINDS = ("parameters", "gradients", "optimizer", "activations")


def _linear_partial(plan: str) -> bool:
    """D-CHAG with linear partial aggregators (dchag_l): its aggregation's memory is the linear layers', not
    cross-attention's."""
    return PLANS[plan].partial == "linear"


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
        when training in 16 bit with master weights (as in ZeRO's 16-byte-per-parameter accounting). The
        optimizer is one of these four: the config's cost.optimizer is typed to them."""
        state = {"adamw": 8.0, "adam": 8.0, "sgd_momentum": 4.0, "sgd": 0.0}[self.optimizer]
        master = 4.0 if self.master_fp32 and self.dtype_bytes < 4 else 0.0
        return state + master


def block_activation_bytes(shape: LayerShape, P: int) -> float:
    """Korthikanti et al. eq. 2 for one block, scaled from 16-bit to ``dtype_bytes``."""
    s, b, h, a = shape.N, shape.batch, shape.D, shape.heads
    return s * b * h * (10 + 24 / P + 5 * a * s / (h * P)) * shape.dtype_bytes / 2


def _layer_terms(plan: str, shape: LayerShape, P: int, pad: bool = True) -> tuple[Terms, Terms, float]:  # noqa: N803
    """The tokeniser's and the aggregator's terms on one TP rank, and one block's parameters."""
    tok_split, agg = FRONT_LAYERS[plan]
    mesh = (P, 1)
    tok = build_terms("tokenize", tok_split, shape, P, mesh, pad=pad)
    aggr = build_terms(agg, "channel", shape, P, mesh, pad=pad)
    blocks = sum(build_terms(op, sp, shape, P, mesh, pad=pad).params for op, sp in BLOCK_LAYERS["channel"])
    return tok, aggr, blocks


def memory_breakdown(
    plan: str, shape: LayerShape, P: int, dp: int, depth: int, setup: TrainingSetup, *, pad: bool = True
) -> dict[tuple[str, str], float]:
    """Bytes per device for (part, kind) with TP degree P and data-parallel (or FSDP) degree dp."""
    tok, aggr, block_params = _layer_terms(plan, shape, P, pad)
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


def parameter_count(plan: str, shape: LayerShape, P: int, depth: int) -> float:
    """Parameters held by one TP rank (no FSDP) — the model size a P-way TP group holds per rank."""
    tok, aggr, blocks = _layer_terms(plan, shape, P)
    return tok.params + aggr.params + depth * blocks


# --- The probe's model: what this code keeps for one training step, by part and kind ---------------------------
# The per-plan breakdown above prices the paper's setting (Megatron's activation formula, 16-bit with fp32
# master weights). The model below prices what ``hsitp.models`` actually keeps, so it can be checked against the
# memory probe (``hsitp probe``) part by part: every tensor autograd saves in each part, counted from the modules'
# code (``hsitp.parallel.dense`` / ``aggregation``): scaled-dot-product attention keeps q, k, v, its output and
# the log-sum-exp (B, h, N) in fp32, never the N x N scores (CPU and CUDA kernels alike); LayerNorm keeps its
# input and two fp32 statistics per row; a linear layer keeps its input; GELU its input. Parameters, gradients
# and AdamW state (exp_avg, exp_avg_sq in the parameter dtype, one fp32 ``step`` per tensor) are exact.

PLAN_PARTS = ("tokenisation", "aggregation", "blocks", "head")
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
    # where the step is measured: "cpu" (and fake tensors): PyTorch's MemTracker, a dispatch mode, around the step
    # and the for-loop AdamW; "cuda": the caching allocator's counters (no mode) and the foreach AdamW
    device: str = "cpu"
    # mixed precision (``hsitp advise plan``): 16-bit parameters and gradients, AdamW's moments and an fp32 master
    # copy of the weights in fp32 (12 B per parameter). The probe's own runs keep everything in one dtype (False).
    master_fp32: bool = False
    # the single-query cross-attentions' kernel (hsitp.names.ATTENTION_KERNELS): "sdpa" keeps the kv input, k, v,
    # the output and the log-sum-exp; "exact" the tokens, the softmax weights (rows, keys, h) and the per-head
    # weighted mean tokens (rows, h, D), and forms no k, v or their gradients (hsitp.parallel.attention_kernels)
    attention_kernel: str = "sdpa"

    @property
    def optimizer_dtype_bytes(self) -> int:
        """Element size of AdamW's exp_avg and exp_avg_sq (fp32 under mixed precision with master weights)."""
        return 4 if self.master_fp32 else self.dtype_bytes

    @property
    def hidden(self) -> int:
        return self.mlp_ratio * self.D


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def band_slots(L: int, P: int, g: int) -> tuple[int, int]:  # noqa: N803
    """D-CHAG on rank 0: (band slots, real bands): slots padded to a multiple of g (``padding.Split``)."""
    slots = _ceil(_ceil(L, P), g) * g
    return slots, L // P + (L % P > 0)


def _layout(plan: str, m: PlanSize, P: int, g: int) -> tuple[int, int, int]:  # noqa: N803
    """(tp, band slots, real bands) of rank 0: heads sharded P ways under the sharded plans; D-CHAG's bands
    split over the ranks (``band_slots``), every other plan's whole."""
    slots, bands = band_slots(m.L, P, g) if plan in DCHAG_PLANS else (m.L, m.L)
    return (P if plan in SHARDED_PLANS else 1), slots, bands


def _shard_xattn(D: int, tp: int) -> float:  # noqa: N803
    """Head-sharded single-query cross-attention parameters: q, kv column; proj row (bias, query whole)."""
    return 4 * D * D / tp + 3 * D / tp + 2 * D


def _check(plan: str, P: int, checkpointing: str) -> None:  # noqa: N803
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {PLAN_NAMES}, got {plan!r}")
    if PLANS[plan].ranks == ONE_RANK and P != 1:
        raise ValueError(f"plan {plan!r} runs at P = 1")
    if checkpointing not in CHECKPOINTING:
        raise ValueError(f"checkpointing must be one of {CHECKPOINTING}, got {checkpointing!r}")


def plan_parameters(plan: str, m: PlanSize, P: int, g: int = 1) -> dict[str, tuple[float, int]]:  # noqa: N803
    """(elements, tensors) of rank 0's parameters per part."""
    _check(plan, P, "none")
    D, p2 = m.D, m.patch**2
    tp, slots, bands = _layout(plan, m, P, g)
    full_xattn = 4 * D * D + 5 * D  # query, q, kv, proj of a single-query cross-attention
    shard_xattn = _shard_xattn(D, tp)
    if _linear_partial(plan):
        agg = (slots / g + 1 + (g + 1 if g > 1 else 0), 2 + (2 if g > 1 else 0))
        agg = (agg[0] + shard_xattn, agg[1] + 7)
    elif plan == "dchag_c":
        n = 2 if g > 1 else 1
        agg = (n * full_xattn + shard_xattn, 7 * n + 7)
    elif plan in SHARDED_PLANS:
        agg = (shard_xattn, 7)
    else:
        agg = (full_xattn, 7)
    out = m.classes * p2
    return {
        "tokenisation": (bands * D * p2 + 2 * bands * D, 3),
        "aggregation": agg,
        "blocks": (m.N * D + m.depth * _block_elements(m, tp), 1 + 12 * m.depth),
        "head": (2 * D + D * out + out, 4),
    }


def _xattn_bytes(m: PlanSize, rows: float, keys: float, shards: int) -> float:
    """Saved by a single-query cross-attention over ``keys`` tokens per row, heads split ``shards`` ways. sdpa:
    kv input, k and v, the expanded query, the output and the fp32 log-sum-exp; exact: the tokens, the softmax
    weights (rows, keys, h), the weighted mean tokens (rows, h, D), the query, the (D, h) score matrix and the
    output (h = this rank's heads)."""
    e, D = m.dtype_bytes, m.D
    if m.attention_kernel == "exact":
        h = m.heads / shards
        return e * (rows * keys * D + rows * keys * h + rows * h * D + rows * D / shards + D / shards + D * h)
    return (
        e * (rows * keys * D + 2 * rows * keys * D / shards + rows * D / shards + D / shards)
        + STAT_BYTES * rows * m.heads / shards
    )


def plan_activations(
    plan: str, m: PlanSize, P: int, g: int = 1, checkpointing: str = "none"
) -> dict[str, float]:  # noqa: N803
    """Bytes autograd keeps for backward on rank 0, per part (what the probe's saved-tensor hook counts)."""
    _check(plan, P, checkpointing)
    e, f, ln = m.dtype_bytes, STAT_BYTES, m.ln_stat_bytes
    D, h, r = m.D, m.heads, m.mlp_ratio
    n_loc = _ceil(m.N, P) if plan == "token" else m.N
    M = m.B * n_loc  # (B N_local) rows
    tp, slots, bands = _layout(plan, m, P, g)
    tok = e * m.B * bands * m.patch**2 * n_loc  # the conv's input

    if plan not in DCHAG_PLANS:
        agg = _xattn_bytes(m, M, m.L, tp)
    else:
        final = _xattn_bytes(m, M, P, P)
        if _linear_partial(plan):
            partial = e * (M * slots * D + (M * g * D if g > 1 else 0))
        else:
            partial = _xattn_bytes(m, M * g, slots / g, 1) + (_xattn_bytes(m, M, g, 1) if g > 1 else 0)
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
    modelled peak, ``("step", "transient")``: the peak less parameters, optimizer state and saved activations, also
    filed under the part where the peak falls (see ``plan_timeline``)."""
    params = plan_parameters(plan, m, P, g)
    acts = plan_activations(plan, m, P, g, checkpointing)
    e = m.dtype_bytes
    out: dict[tuple[str, str], float] = {}
    for part in PLAN_PARTS:
        n, t = params[part]
        out[(part, "parameters")] = n * e
        out[(part, "gradients")] = n * e
        out[(part, "optimizer")] = adamw_bytes(n, t, m.optimizer_dtype_bytes) + (
            4 * n if m.master_fp32 else 0.0
        )
        out[(part, "activations")] = acts[part]
        out[(part, "transient")] = 0.0
    best = max(plan_timeline(plan, m, P, g, checkpointing, out), key=lambda mo: mo.total)
    steady = sum(out[(p, k)] for p in PLAN_PARTS for k in ("parameters", "optimizer", "activations"))
    transient = best.total - steady
    if best.part in PLAN_PARTS:
        out[(best.part, "transient")] = transient
    out[("step", "peak")] = best.total
    out[("step", "transient")] = transient
    return out


def _block_elements(m: PlanSize, tp: int) -> float:
    """Parameters of one transformer block on a rank (two LayerNorms; qkv, proj, fc1, fc2 sharded ``tp`` ways,
    the row-parallel biases whole)."""
    D, h = m.D, m.hidden
    return 4 * D + (3 * D * D + 3 * D) / tp + D * D / tp + D + (h * D + h) / tp + D * h / tp + D


def _largest_parameter(plan: str, m: PlanSize, P: int, g: int) -> float:  # noqa: N803
    """Elements of rank 0's largest parameter tensor (AdamW's per-tensor temporaries are its size)."""
    tp, _, bands = _layout(plan, m, P, g)
    D = m.D
    sizes = [
        bands * D * m.patch**2,  # the tokenizer's grouped convolution weight
        m.N * D,  # the position embedding
        3 * D * D / tp,  # a block's qkv weight
        m.hidden * D / tp,  # a block's fc1 (and fc2) weight
        2 * D * D / tp,  # the aggregating attention's kv weight (head-sharded under tp and D-CHAG)
        D * m.classes * m.patch**2,  # the head
    ]
    if plan == "dchag_c":
        sizes.append(2 * D * D)  # the rank-local partial cross-attention's kv weight (unsharded)
    return max(sizes)


@dataclass(frozen=True)
class Moment:
    """One moment of the step: the part and phase running, and the bytes live then (every term named)."""

    part: str
    phase: str
    terms: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.terms.values())


@dataclass(frozen=True)
class StepSizes:
    """What one step of ``plan`` on rank 0 is made of, in bytes: the sizes every phase of ``plan_timeline`` sums.

    ``A``: one (B, N_local, D) activation; ``H``: one (B, N_local, hidden / tp); ``Z``: one output-sized tensor
    (logits, the error); ``T``: the tokenizer's output, B N_local tokens per band of this rank; ``T_s``: D-CHAG's
    band slots (padded to a multiple of g) the partial aggregator reads; ``lse``: SDPA's fp32 log-sum-exp of a
    block's attention. ``base``: parameters and AdamW state; ``X``: the batch (the convolution's saved input),
    live the whole step; ``loss``: the model's output and the squared error, referenced by the step to its end.
    """

    plan: str
    m: PlanSize
    P: int
    g: int
    checkpointing: str
    M: float  # rows (B N_local)
    tp: int
    slots: int
    bands: int
    A: float
    H: float
    Z: float
    T: float
    T_s: float
    lse: float
    base: float
    acts: dict[str, float]
    grads: dict[str, float]

    @property
    def dchag(self) -> bool:
        return self.plan in DCHAG_PLANS

    @property
    def token_gather(self) -> bool:
        """The token plan's blocks all-gather k and v (P > 1)."""
        return self.plan == "token" and self.P > 1

    @property
    def X(self) -> float:  # noqa: N802
        return self.acts["tokenisation"]

    @property
    def loss(self) -> float:
        return 2 * self.Z

    def moment(self, part: str, phase: str, **terms: float) -> Moment:
        """A moment of ``part`` in ``phase``: ``terms`` live besides parameters, optimizer state and the batch,
        and after forward (backward, update) the model's output and the squared error (``loss``), which the step
        references to its end; listed after what is ``saved``."""
        if phase != "forward":
            saved = {"saved": terms.pop("saved")} if "saved" in terms else {}
            terms = {**saved, "loss": self.loss, **terms}
        return Moment(part, phase, {"parameters+optimizer": self.base, "batch": self.X, **terms})


def step_sizes(
    plan: str,
    m: PlanSize,
    P: int,  # noqa: N803
    g: int,
    checkpointing: str,
    state: dict[tuple[str, str], float],
) -> StepSizes:
    """The sizes of one step (see ``StepSizes``) from ``plan_memory``'s (part, kind) table ``state``."""
    e = m.dtype_bytes
    n_loc = _ceil(m.N, P) if plan == "token" else m.N
    M = m.B * n_loc
    tp, slots, bands = _layout(plan, m, P, g)
    return StepSizes(
        plan=plan,
        m=m,
        P=P,
        g=g,
        checkpointing=checkpointing,
        M=M,
        tp=tp,
        slots=slots,
        bands=bands,
        A=e * M * m.D,
        H=e * M * m.hidden / tp,
        Z=e * M * m.classes * m.patch**2,
        T=e * M * bands * m.D,
        T_s=e * M * slots * m.D,
        lse=STAT_BYTES * M * m.heads / tp,
        base=sum(state[(p, k)] for p in PLAN_PARTS for k in ("parameters", "optimizer")),
        acts={p: state[(p, "activations")] for p in PLAN_PARTS},
        grads={p: state[(p, "gradients")] for p in PLAN_PARTS},
    )


def _tokenisation_forward(s: StepSizes) -> list[Moment]:
    """The grouped convolution's output (B, bands D, H/p, W/p) and the band-embedded copy of it."""
    return [s.moment("tokenisation", "forward", conv_output=s.T, tokens=s.T)]


def _aggregation_forward(s: StepSizes) -> list[Moment]:
    """The kv projection over every band token (D-CHAG: the partial aggregator's input over the band slots), then
    the end of the part: everything it saves, the tokenizer output still held by its frame, the output
    projection's tensors (D-CHAG: the partial aggregate and the all-gather's buffer)."""
    return _dchag_forward(s) if s.dchag else _single_attention_forward(s)


def _single_attention_forward(s: StepSizes) -> list[Moment]:
    """tp, dense and token: one single-query attention over all L band tokens (see ``_aggregation_forward``)."""
    m, A, T = s.m, s.A, s.T
    mode = m.device != "cuda"  # out-of-place bias add on matmul's path under the tracker's dispatch mode
    view = m.B == 1  # the tokenizer output folds to (B N, bands, D) without a copy
    row_proj = 2 * A  # a row-parallel projection: its partial sum and its + bias, (B N, D) each
    saved = s.acts["aggregation"]
    if m.attention_kernel == "exact":
        proj = row_proj if s.plan == "tp" else A
        return [
            # the scores and their softmax beside the tokens (the exact kernel forms no k or v); at the end the
            # tokens are among the saved tensors (the kernel saves them, no copy)
            s.moment("aggregation", "forward", tokens=T, scores=_exact_scores(m, s.M, m.L, s.tp)),
            s.moment("aggregation", "forward", saved=saved, projection=proj),
        ]
    kv = 2 * T / s.tp  # k and v of every band token, this rank's heads
    proj = row_proj if s.plan == "tp" else A  # dense and token keep the dense aggregator: one addmm
    # the tokenizer writes its output location-major and contiguous (band_patch_embed), so the fold to (B N, L, D)
    # and the kv linear's to (B N L, D) are views: the kv linear saves the tokens themselves, no copy
    return [
        s.moment(
            "aggregation",
            "forward",
            tokens=T,  # the tokenizer output, held by the aggregator's frame (and saved by the kv linear)
            kv=kv,  # the kv projection (addmm, or matmul's mm)
            # matmul's path: bias added out of place (tracker only)
            kv_bias=kv if (view and mode) else 0.0,
        ),
        s.moment("aggregation", "forward", saved=saved, projection=proj),
    ]


def _dchag_forward(s: StepSizes) -> list[Moment]:
    """D-CHAG: the rank-local partial aggregation over the band slots, level 2, then the gather (see
    ``_aggregation_forward``)."""
    m, A, T_s = s.m, s.A, s.T_s
    pad = s.slots > s.bands  # zero band slots appended (torch.cat): the slots tensor replaces the tokens
    tokens = T_s if pad else s.T  # the tokenizer output (or its reshape copy, or the padded concatenation)
    level1 = m.dtype_bytes * s.M * s.g * m.D  # the level-1 output (M, g, D)
    moments = [_dchag_partial_forward(s, tokens, level1)]
    if _linear_partial(s.plan) and s.g > 1:
        # level 2's Linear(g, 1) (slot_mix over the g group tokens) while level 1's tensors are still held by the
        # partial aggregator's frame: the level-1 output (masked by the valid groups when padded: the product
        # replaces it) and level 2's (M, D) output
        moments.append(
            s.moment(
                "aggregation",
                "forward",
                tokens=tokens,
                masked=T_s if pad else 0.0,
                level1_output=level1,
                level2_masked=level1 if pad else 0.0,
                level2_output=A,
            )
        )
    # the tokens are themselves among the saved tensors where the partial level saves its input unpadded (slot_mix,
    # the exact kernel); the sdpa kernel saves a copy of them, a padded rank the masked or concatenated slots
    shared = not pad and (_linear_partial(s.plan) or m.attention_kernel == "exact")
    end = s.moment(
        "aggregation",
        "forward",
        tokens=0.0 if shared else tokens,
        saved=s.acts["aggregation"],
        partial=A,  # the rank-local partial aggregate (B N, D), held while gathered
        # all-gather's (P B N, 1, D) buffer; the gathered (B N, P, D) is a view of it
        gather_buffer=A * s.P if s.P > 1 else 0.0,
        projection=2 * A,  # a row-parallel projection: its partial sum and its + bias, (B N, D) each
    )
    return [*moments, end]


def _dchag_partial_forward(s: StepSizes, tokens: float, level1: float) -> Moment:
    """D-CHAG's level 1 at its largest: ``tokens`` (the band slots it reads) and its working set."""
    T_s, pad = s.T_s, s.slots > s.bands
    if _linear_partial(s.plan):
        # slot_mix reads the slots in place (saved: the tokens, or their masked copy when padded) and writes the
        # (M, g, D) level-1 output
        return s.moment(
            "aggregation",
            "forward",
            tokens=tokens,
            masked=T_s if pad else 0.0,  # padded slots zeroed: tokens * valid
            level1_output=level1,
        )
    if s.m.attention_kernel == "exact":
        # the level-1 cross-attention's scores and softmax over its slots (masked)
        scores = _exact_scores(s.m, s.M * s.g, s.slots / s.g, 1)
        return s.moment("aggregation", "forward", tokens=tokens, scores=scores)
    view = s.m.B == 1  # the tokenizer output folds to (B N, bands, D) without a copy
    return s.moment(
        "aggregation",
        "forward",
        tokens=tokens,
        # the level-1 cross-attention's (M g, s, D) input: a copy when the tokens are the strided view
        kv_input=T_s if (view and not pad) else 0.0,
        kv=2 * T_s,  # its k and v of every band slot (addmm, unsharded: rank-local weights); saved
    )


def _blocks_forward(s: StepSizes) -> list[Moment]:
    """The end of the last block (without checkpointing), the token plan's kv all-gather in it, or (checkpointed)
    the largest temporaries inside the last block."""
    m, A, H, P, tp = s.m, s.A, s.H, s.P, s.tp
    saved = s.acts["aggregation"] + s.acts["blocks"]
    if s.checkpointing == "none":
        # the last block's MLP output before the residual add (row-parallel: its partial sum, then + bias) and the
        # block's output, which the head's LayerNorm saves
        out = [s.moment("blocks", "forward", saved=saved, mlp_output=A, block_output=A)]
        if s.token_gather:
            # the last block's kv all-gather: the local k, v made contiguous, the gather buffer (P ranks) and, for
            # B > 1, its reordered copy (B = 1: a view); the block's later activations are not saved yet
            # saved later in the block: gathered kv, o, lse, x1, ln2 output and statistics, fc1 and GELU outputs
            later = 2 * A * P + A + s.lse + A + A + 2 * m.ln_stat_bytes * s.M + 2 * H
            out.append(
                s.moment(
                    "blocks",
                    "forward",
                    saved=saved - later,
                    kv_local=2 * A,
                    gather_buffer=2 * A * P,
                    gathered=2 * A * P if m.B > 1 else 0.0,
                )
            )
        return out
    # a checkpointed block keeps only its input; inside the last one, whatever its frames hold
    # a row-parallel projection: partial sum, then + bias (two tensors; nn.Linear: one addmm): the attention's
    # proj under every plan but dense, fc2 under the Megatron plans (token keeps the dense MLP)
    rowp_attn = A if s.plan != "dense" else 0.0
    rowp_mlp = A if s.plan == "tp" or s.dchag else 0.0
    kvg = 2 * A * P if s.token_gather else 0.0  # token: the gathered k, v of all N tokens
    # ln1 out, qkv, (gathered kv), o, lse, projection
    attn = A + 3 * A / tp + kvg + A / tp + s.lse + A + rowp_attn
    gelu = A + A + 2 * H  # x1, ln2 out, fc1 and GELU outputs
    fc2 = A + A + H + A + rowp_mlp  # x1, ln2 out, GELU output, fc2 output(s)
    # token: at the all-gather, ln1 out, qkv, contiguous local k v, buffer (and its copy when B > 1)
    gather = A + 3 * A + 2 * A + 2 * A * P + (2 * A * P if m.B > 1 else 0.0) if kvg else 0.0
    return [s.moment("blocks", "forward", saved=saved, block_temporaries=max(attn, gelu, fc2, gather))]


def _head_and_loss_forward(s: StepSizes) -> list[Moment]:
    """The head's logits (un-patchify's copy, the model's output, comes after the head), then the loss and its
    backward before the head's gradient: output, difference, square (token: masked square) and, in pow's
    backward, the error's gradient, d^1, 2 d^1 and grad * 2 d."""
    every = sum(s.acts.values()) - s.X
    return [
        s.moment("head", "forward", saved=every, logits=s.Z),
        s.moment("other", "forward", saved=every, loss_tensors=3 * s.Z, loss_backward=4 * s.Z),
    ]


def _head_backward(s: StepSizes) -> list[Moment]:
    """The logits' gradient (un-patchify's backward copies it), the head input's gradient, the head's grads."""
    every = sum(s.acts.values()) - s.X
    return [
        s.moment(
            "head",
            "backward",
            saved=every,
            grad_logits=s.Z,
            grad_input=s.A,
            grads=s.grads["head"],
        )
    ]


def _blocks_backward(s: StepSizes) -> list[Moment]:
    """Blocks, last to first: the incoming gradient, fc2's gradient of the GELU output, the block's fc2 gradients
    (and, under the token plan, the attention's kv reduce-scatter)."""
    m, A, P, tp, e = s.m, s.A, s.P, s.tp, s.m.dtype_bytes
    D = m.D
    blocks_full = plan_activations(s.plan, m, P, s.g, "none")["blocks"] / m.depth
    per_block = s.acts["blocks"] / m.depth  # what a block keeps through forward (its input when checkpointed)
    block_grads = e * _block_elements(m, tp)
    out = []
    for i in reversed(range(m.depth)):
        # gradients of the parts already back-propagated
        done = s.grads["head"] + (m.depth - 1 - i) * block_grads
        out.append(
            s.moment(
                "blocks",
                "backward",
                # the blocks below, and this block's activations (recomputed when checkpointed)
                saved=s.acts["aggregation"] + i * per_block + blocks_full,
                grads=done + e * (D * m.hidden / tp + D),
                grad_input=A,
                grad_gelu=s.H,
            )
        )
        if s.token_gather:
            # the attention's kv reduce-scatter (all-gather's backward), after the MLP's and SDPA's saved tensors
            # are released: the gradients of x1 and q, the stacked gradient of the gathered k, v, its rank-major
            # contiguous copy, the (B, N_local, 2, h, hd) result, and (gloo, CPU) the per-rank chunks c10d copies
            # it into (reduce_scatter_tensor is emulated on gloo)
            # fc1, fc2, ln2, proj of this block
            mlp_grads = 2 * D * m.hidden + m.hidden + D + 2 * D + D * D + D
            out.append(
                s.moment(
                    "blocks",
                    "backward",
                    # the blocks below, this block's input, ln1 output and statistics (qkv went with SDPA's q view)
                    saved=s.acts["aggregation"] + i * per_block + 2 * A + 2 * m.ln_stat_bytes * s.M,
                    grads=done + e * mlp_grads,
                    grad_x1_q=2 * A,
                    grad_kv=2 * A * P,
                    rank_major=2 * A * P,
                    scattered=2 * A,
                    gloo_chunks=2 * A * P if m.device != "cuda" else 0.0,
                )
            )
    return out


def _aggregation_backward(s: StepSizes) -> list[Moment]:
    """Its largest attention (the only one under tp-like plans; D-CHAG: the final attention, then level 1,
    back-propagated last) holds its saved tensors and the gradients of k and v; the gradients of the aggregation's
    parameters already back-propagated are live (the output projection; D-CHAG: the final attention, level 2,
    level 1's projection)."""
    return _dchag_backward(s) if s.dchag else _single_attention_backward(s)


def _single_attention_backward(s: StepSizes) -> list[Moment]:
    """tp, dense and token: the one attention's backward (see ``_aggregation_backward``)."""
    m, e, M, tp, T = s.m, s.m.dtype_bytes, s.M, s.tp, s.T
    D = m.D
    later = s.grads["head"] + s.grads["blocks"]
    if m.attention_kernel == "exact":
        return [
            s.moment(
                "aggregation",
                "backward",
                # all it saved but the output projection's input (released by the projection's backward)
                saved=s.acts["aggregation"] - e * M * D / tp,
                grads=later + e * (D * D / tp + D),  # and the output projection's
                aggregation=_exact_backward(m, M, m.L, tp, T),
            )
        ]
    kv = 2 * T / tp
    grad_q = 2 * e * M * D / tp  # SDPA's incoming output gradient and the expanded query's gradient
    sdpa = kv + T + kv + grad_q  # saved kv input and kv, the gradients of k and v (and of q, o)
    # saved kv input, the gradient of kv, the gradients of the kv input and of kv's weight and bias
    mm = T + kv + T + e * (2 * D * D + 2 * D) / tp
    return [
        s.moment(
            "aggregation",
            "backward",
            saved=s.acts["aggregation"] - T - kv,  # the attention's query, output and log-sum-exp
            grads=later + e * (D * D / tp + D),  # and the output projection's
            aggregation=max(sdpa, mm),
        )
    ]


def _dchag_backward(s: StepSizes) -> list[Moment]:
    """D-CHAG: the final attention first, then level 2 and level 1 (see ``_aggregation_backward``)."""
    m, e, M, tp = s.m, s.m.dtype_bytes, s.M, s.tp
    D = m.D
    later = s.grads["head"] + s.grads["blocks"]
    # the final head-sharded attention over the P gathered partial aggregates runs first, while every saved
    # tensor of the aggregation is live: SDPA's gradients of k and v (and of q, o), then kv's input gradient
    # (the gathered tokens' gradient) and kv's weight and bias gradients
    gathered = e * M * s.P * D  # the (B N, P, D) gathered partial aggregates
    kv_f = 2 * gathered / tp
    final = s.moment(
        "aggregation",
        "backward",
        saved=s.acts["aggregation"],
        grads=later + e * (D * D / tp + D),  # and the final output projection's
        final=_exact_backward(m, M, s.P, tp, gathered)
        if m.attention_kernel == "exact"
        else max(kv_f + 2 * e * M * D / tp, gathered + e * (2 * D * D + 2 * D) / tp),
    )
    return [final, _dchag_level1_backward(s, later)]


def _dchag_level1_backward(s: StepSizes, later: float) -> Moment:
    """D-CHAG's level 1, back-propagated last: the final attention's and level 2's saved tensors are already
    released; ``later``: the gradients of the head and the blocks."""
    m, e, M, g, T_s = s.m, s.m.dtype_bytes, s.M, s.g, s.T_s
    D = m.D
    shard_xattn = _shard_xattn(D, s.tp)
    if _linear_partial(s.plan):
        level2 = g + 1 if g > 1 else 0.0  # level 2's Linear(g, 1)
        return s.moment(
            "aggregation",
            "backward",
            # final, level 2, level 1's Linear(s, 1)
            grads=later + e * (shard_xattn + level2 + s.slots / g + 1),
            grad_output=e * M * g * D,  # the gradient of level 1's (M, g, D) output
            slots=T_s,  # the saved slots (slot_mix's input)
            grad_slots=T_s,  # their gradient
            weight_products=_slot_products(e, M, g, s.slots / g, D),
        )
    level2 = 4 * D * D + 5 * D if g > 1 else 0.0  # query, q, kv, proj of an unsharded cross-attention
    grads = later + e * (shard_xattn + level2 + D * D + D)  # final, level 2, level 1's proj
    if m.attention_kernel == "exact":
        return s.moment(
            "aggregation",
            "backward",
            grads=grads,
            # what it saved but the projection's input, and its backward's working set
            level1=_xattn_bytes(m, M * g, s.slots / g, 1) - e * M * g * D,
            working=_exact_backward(m, M * g, s.slots / g, 1, T_s),
        )
    return s.moment(
        "aggregation",
        "backward",
        grads=grads,
        level1=_xattn_bytes(m, M * g, s.slots / g, 1),  # its kv input, k, v, query, output, lse
        grad_kv=2 * T_s,  # SDPA's gradients of k and v
        grad_q=2 * e * M * g * D,  # its incoming output gradient and the expanded query's gradient
    )


def _slot_products(e: float, rows: float, groups: int, slots: float, dim: float) -> float:
    """Level 1's weight gradient (``_SlotMix``): a chunk's (r, g, s, D) products, their (r, g, s) sums over D
    and the (g, s) accumulator, r = ``slot_product_rows`` (at most ``rows``)."""
    r = min(rows, slot_product_rows(groups, int(slots), int(dim)))
    return e * (r * groups * slots * dim + r * groups * slots + groups * slots)


def _exact_scores(m: PlanSize, rows: float, keys: float, shards: int) -> float:
    """The exact kernel's forward beyond the tokens, at its softmax: the (rows, h, keys) scores (a key mask is
    added in place) and the softmax weights (h = this rank's heads)."""
    return m.dtype_bytes * rows * keys * (m.heads / shards) * 2


def _exact_backward(m: PlanSize, rows: float, keys: float, shards: int, tokens: float) -> float:
    """The exact kernel's backward beyond its saved tensors, when the tokens' gradient is made: the incoming
    output gradient (rows, D / shards), dy (rows, h, D), ds (rows, keys, h) and the tokens' gradient (``tokens``
    bytes: rows x keys x D); nothing else token-sized (hsitp.parallel.attention_kernels)."""
    e, h = m.dtype_bytes, m.heads / shards
    return e * (rows * m.D / shards + rows * h * m.D + rows * keys * h) + tokens


def _tokenisation_backward(s: StepSizes) -> list[Moment]:
    """The tokens' gradient (D-CHAG: a view of the padded slots' gradient) enters the convolution."""
    return [
        s.moment(
            "tokenisation",
            "backward",
            grads=sum(s.grads.values()),
            grad_tokens=s.T_s if s.dchag else s.T,
        )
    ]


def _update(s: StepSizes) -> list[Moment]:
    """Every gradient, the token plan's flattened all-reduce buffer, AdamW's temporaries (foreach on CUDA: the
    sqrt of every exp_avg_sq; the for-loop on CPU: sqrt and division of the largest tensor)."""
    every_grad = sum(s.grads.values())
    out = []
    if s.token_gather:
        out.append(s.moment("other", "update", grads=every_grad, flat=every_grad))  # one buffer
    big = s.m.dtype_bytes * _largest_parameter(s.plan, s.m, s.P, s.g)
    # AdamW's temporaries are the size of its state (fp32 under mixed precision)
    scale = s.m.optimizer_dtype_bytes / s.m.dtype_bytes
    adamw = (every_grad if s.m.device == "cuda" else 2 * big) * scale
    out.append(s.moment("other", "update", grads=every_grad, adamw=adamw))
    return out


# The phases of one step in order; ``plan_timeline`` is their concatenation.
PHASES = (
    _tokenisation_forward,
    _aggregation_forward,
    _blocks_forward,
    _head_and_loss_forward,
    _head_backward,
    _blocks_backward,
    _aggregation_backward,
    _tokenisation_backward,
    _update,
)


def plan_timeline(
    plan: str,
    m: PlanSize,
    P: int,  # noqa: N803
    g: int,
    checkpointing: str,
    state: dict[tuple[str, str], float],
) -> list[Moment]:
    """The moments of one training step of ``plan`` on rank 0 where the live bytes peak, part by part: one
    function per phase (``PHASES``), each summing the sizes of ``step_sizes``.

    ``state`` is ``plan_memory``'s (part, kind) table (parameters, gradients, optimizer state, saved activations).
    What is live at a moment is what the probe's tracker sees (every tensor an operator returns, until it is freed):

    - always: parameters and AdamW state (``base``); the batch, cloned inside the step, which is also what the
      tokeniser's convolution saves (so it is the tokenisation's activations, live until the step ends);
    - no gradient when the step starts (``zero_grad(set_to_none=True)``); a part's parameter gradients appear in
      its backward and stay until the optimizer step;
    - in forward, the activations saved by the parts already run, plus the running part's live temporaries;
    - in backward (head, blocks, aggregation, tokenisation), the activations of the parts not yet back-propagated,
      the gradient flowing through the part and its temporaries; the model's output and the squared error stay
      referenced by the step until it ends;
    - in the update: every gradient, the token plan's flattened all-reduce buffer, AdamW's temporaries.

    The tokenizer's output (B, N, bands, D) is laid out (B, bands, D, N) in memory (the convolution's layout,
    permuted), so folding it to (B N, bands, D) is a view only when B = 1; then the consuming ``F.linear`` copies
    it (matmul's fold) instead. Linear layers on a non-contiguous input take matmul's path and add their bias out
    of place when a dispatch mode is active (the CPU tracker; ``m.device == "cpu"``), in place on CUDA.
    """
    s = step_sizes(plan, m, P, g, checkpointing, state)
    return [mo for phase in PHASES for mo in phase(s)]

"""What each layer computes, communicates and stores, per rank: the terms the refined model turns into times.

Counts are per rank for one forward pass: multiply-adds (MACs) for GEMM-like terms, FLOPs for elementwise terms,
elements for collectives (the full, unsharded tensor, as the calibration's ring model expects), parameters and
saved activations in elements. Backward and dtype are applied by :mod:`hsitp.cost.refined`.

Layer structures follow the parallel-layer contract (Megatron column/row TP, head-parallel and token-parallel
attention, D-CHAG as in ``../shared/notes/dchag.md``). Three cost-only ops exist besides the contract's names:
``linear_column`` (the paper's §3.2 reference layer: one column-parallel linear C_in = D → D followed by an
all-gather), ``tokenize`` (per-band patch embedding, replicated on every TP rank in the baseline, only the
rank's own bands in D-CHAG) and ``layernorm`` under any split (the blocks' LayerNorm); the contract's
``layernorm_replicated`` and ``layernorm_sharded`` are LayerNorm under its one placement ('replicated',
'channel'). The ``agg_*`` ops are the aggregation alone, from band tokens (B·N, L, D) to (B, N, D); the parallel
layers' aggregators also tokenise, so a measurement of one compares with ``tokenize`` (split 'replicated' for
``agg_tp``, 'dchag' for D-CHAG) plus the ``agg_*`` op, as ``hsitp.bench.predict`` does.

Heads split over ranks are padded up to a multiple of the ranks when ``head_padding`` is on (as the layers do with
``parallel.head_padding: true``); with it off, a head count the ranks do not divide is refused, as by the layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from hsitp.errors import HsitpError
from hsitp.names import AGG_OPS, BY_OP, DCHAG_OPS, OP_NAMES
from hsitp.shape import LayerShape

# Elementwise FLOPs per element (conventions, documented so measured rates are comparable):
LAYERNORM_FLOPS = 7  # mean 1, centre 1, square 1, variance sum 1, normalise 1, scale 1, shift 1
SOFTMAX_FLOPS = 6  # 1/sqrt(d) scale 1, max 1, subtract 1, exp 1, sum 1, divide 1
GELU_FLOPS = 8  # tanh form: x^3, ×0.0447, +x, ×sqrt(2/pi), tanh, +1, ×x, ×0.5
BIAS_FLOPS = 1

OPS = (*OP_NAMES, "linear_column", "layernorm")  # the contract's ops and the cost-only ones
# Splits each op can be costed under; the first is the op's default (what the contract's layer does).
SPLITS: dict[str, tuple[str, ...]] = {
    "linear_column": ("channel",),
    "mlp": ("channel", "token", "2d"),
    "attn_channel": ("channel",),
    "attn_token": ("token",),
    "attn_2d": ("2d",),
    "layernorm": ("channel", "replicated", "token", "2d"),
    "layernorm_replicated": ("replicated",),  # Megatron: full D on every rank, no communication
    "layernorm_sharded": ("channel",),  # D sharded, statistics all-reduced (paper §4.3)
    "agg_tp": ("channel",),
    "agg_dchag_l": ("channel",),
    "agg_dchag_c": ("channel",),
    "tokenize": ("replicated", "dchag"),
}


@dataclass(frozen=True)
class Compute:
    """One forward compute term on one rank. ``paired``: the term the paper's derivation pairs with the communicated tensor (§3.2: the GEMM producing it; §3.3: the score product).
    ``bwd``: backward work as a multiple of this term's forward work: 2 (input and weight gradients) unless the
    input needs no gradient (the raw image cube entering tokenisation: weight gradient only, 1). ``traffic``:
    elements the forward term reads and writes (operands and result), the memory-traffic estimate behind the
    calibrated model's bandwidth term (a GEMM with a short contraction, e.g. patch embedding, is bound by it)."""

    name: str
    amount: float  # MACs for kind 'gemm', FLOPs for kind 'elementwise'
    kind: str  # 'gemm' | 'elementwise'
    paired: bool = False
    bwd: float = 2.0
    traffic: float = 0.0


@dataclass(frozen=True)
class Comm:
    """One collective on one rank. ``group``: 'tp' (all P ranks), or the 2-D mesh axis 'channel' / 'token'.
    ``per_step``: a weight-gradient sync, paid once per optimizer step (amortised over gradient accumulation).
    ``paired_share``: the share of this tensor the paper's derivation pairs with the layer (the layers gather K
    and V as one tensor; §3.3 counts the K half), used only by the ``one_collective`` switch."""

    name: str
    collective: str
    elements: float
    phase: str  # 'fwd' | 'bwd'
    group: str = "tp"
    paired: bool = False
    per_step: bool = False
    paired_share: float = 1.0


@dataclass(frozen=True)
class Terms:
    computes: list[Compute] = field(default_factory=list)
    comms: list[Comm] = field(default_factory=list)
    params: float = 0.0  # parameter elements held by this rank
    activations: float = 0.0  # elements saved for backward on this rank (tokenisation/aggregation ops)


def shard(x: float, parts: int, pad: bool) -> float:
    """Per-rank share of a dimension of size x over ``parts`` ranks: padded up (ceil) unless padding is off."""
    return float(math.ceil(x / parts)) if pad else x / parts


class HeadSplitError(HsitpError, ValueError):
    """Heads that the ranks splitting them do not divide, with head padding off. ``key`` is the config key the
    heads came from (``parallel.heads`` in the bench, ``cost.heads`` in the cost tables): :meth:`keyed` renames it.
    """

    def __init__(self, op: str, heads: int, ranks: int, key: str = "heads") -> None:
        self.op, self.heads, self.ranks, self.key = op, heads, ranks, key
        super().__init__(
            f"{op}: {key} = {heads} is not divisible by the {ranks} ranks that split them: every rank must hold "
            f"whole heads. Set parallel.head_padding: true (pads to {-(-heads // ranks) * ranks} heads, the "
            f"extra ones zero), or choose {key} divisible by {ranks}"
        )

    def keyed(self, key: str) -> HeadSplitError:
        """The same error naming the heads by ``key``."""
        return HeadSplitError(self.op, self.heads, self.ranks, key)


def head_split(op: str, P: int, mesh: tuple[int, int]) -> int:
    """Ranks ``op`` splits its attention heads over (1: it keeps every head on every rank).

    Head-parallel attention and the TP cross-attention of the aggregators (the baseline's, and D-CHAG's final one)
    split heads over all P ranks; 2-D attention over the channel axis P_c of its mesh.
    """
    if op == "attn_channel" or op in AGG_OPS:
        return P
    if op == "attn_2d":
        return mesh[0]
    return 1


def build_terms(
    op: str,
    split: str,
    s: LayerShape,
    P: int,
    mesh: tuple[int, int],
    *,
    pad: bool = True,
    drop_n2: bool = False,
    head_padding: bool = True,
) -> Terms:
    """Terms of ``op`` under ``split`` on P ranks (mesh = (P_c, P_t) for 2-D; (P, 1) otherwise).

    ``pad``: split dimensions that do not divide are padded up (the padded work is computed and sent); off, the
    shares are fractional. ``head_padding``: with ``pad``, heads are padded like any other dimension; off, heads
    the ranks do not divide are an error (:class:`HeadSplitError`), as in the layers.
    """
    if op not in SPLITS:
        raise ValueError(f"unknown op {op!r}; known ops: {', '.join(OPS)}")
    if split not in SPLITS[op]:
        raise ValueError(f"op {op!r} cannot be costed under split {split!r}; allowed: {SPLITS[op]}")
    ranks = head_split(op, P, mesh)
    if pad and not head_padding and s.heads % ranks:
        raise HeadSplitError(op, s.heads, ranks)
    # the aggregation ops, band tokens in and one out; agg_tp's over all L bands (every rank tokenises them all)
    if op == "agg_tp":
        return _tp_cross_attention(s, P, s.L, pad, "")
    if op in DCHAG_OPS:
        return _dchag_aggregation(s, P, pad, str(BY_OP[op].variant))
    return _BUILDERS[op](s, P, mesh, pad, drop_n2, split)


def _linear_column(s: LayerShape, P: int, mesh, pad: bool, drop_n2: bool, split: str) -> Terms:
    M = s.batch * s.N
    d_l = shard(s.D, P, pad)
    return Terms(
        [
            Compute("gemm", M * s.D * d_l, "gemm", paired=True, traffic=M * s.D + s.D * d_l + M * d_l),
            Compute("bias", BIAS_FLOPS * M * d_l, "elementwise", traffic=2 * M * d_l),
        ],
        [
            Comm("gather_out", "all_gather", M * P * d_l, "fwd", paired=True),
            Comm("grad_input", "all_reduce", M * s.D, "bwd"),
        ],
        params=s.D * d_l + d_l,
    )


def _mlp_parts(s: LayerShape, tokens: float, hidden: float) -> list[Compute]:
    M = s.batch * tokens
    return [
        Compute("fc1", M * s.D * hidden, "gemm", traffic=M * s.D + s.D * hidden + M * hidden),
        Compute("fc1_bias", BIAS_FLOPS * M * hidden, "elementwise", traffic=2 * M * hidden),
        Compute("gelu", GELU_FLOPS * M * hidden, "elementwise", traffic=2 * M * hidden),
        Compute("fc2", M * hidden * s.D, "gemm", paired=True, traffic=M * hidden + hidden * s.D + M * s.D),
        Compute("fc2_bias", BIAS_FLOPS * M * s.D, "elementwise", traffic=2 * M * s.D),
    ]


def _axes(split: str, P: int, mesh: tuple[int, int]) -> tuple[int, int, dict[str, str]]:
    """(P_c, P_t, group of each mesh axis) of a channel, token or 2-D split: a 1-D split is the 2-D one with the
    other axis of size one, its collectives over all P ranks ('tp') and none over the axis of one."""
    if split == "channel":
        return P, 1, {"channel": "tp"}
    if split == "token":
        return 1, P, {"token": "tp"}
    return mesh[0], mesh[1], {"channel": "channel", "token": "token"}


def _on_axes(comms: list[Comm], groups: dict[str, str]) -> list[Comm]:
    """``comms`` written for the 2-D mesh, each on its axis' group; those on an axis the split lacks dropped."""
    return [replace(c, group=groups[c.group]) for c in comms if c.group in groups]


def _mlp(s: LayerShape, P: int, mesh, pad: bool, drop_n2: bool, split: str) -> Terms:
    """Hidden units split over the channel axis (Megatron: fc1 column-, fc2 row-parallel, one all-reduce each
    way), tokens over the token axis (no activation traffic, §3.3; the weights' gradients synced)."""
    P_c, P_t, groups = _axes(split, P, mesh)
    h_l = shard(s.mlp_ratio * s.D, P_c, pad)
    n_l = shard(s.N, P_t, pad)
    M = s.batch * n_l
    n_params = 2 * s.D * h_l + h_l + s.D
    comms = [
        Comm("reduce_out", "all_reduce", M * s.D, "fwd", group="channel", paired=True),
        Comm("grad_input", "all_reduce", M * s.D, "bwd", group="channel"),
        Comm("grad_sync", "all_reduce", n_params, "bwd", group="token", per_step=True),
    ]
    return Terms(_mlp_parts(s, n_l, h_l), _on_axes(comms, groups), params=n_params)


def _attention_computes(
    s: LayerShape,
    q_tokens: float,
    kv_tokens: float,
    d_l: float,
    h_l: float,
    *,
    scores_paired: bool,
    drop_n2: bool,
) -> list[Compute]:
    """Self-attention on ``q_tokens`` queries against ``kv_tokens`` keys with ``h_l`` local heads (d_l features)."""
    Mq = s.batch * q_tokens
    out = [
        Compute("qkv", Mq * s.D * 3 * d_l, "gemm", traffic=Mq * s.D + 3 * s.D * d_l + 3 * Mq * d_l),
        Compute("qkv_bias", BIAS_FLOPS * 3 * Mq * d_l, "elementwise", traffic=6 * Mq * d_l),
    ]
    if not drop_n2:
        out += [
            Compute(
                "scores",
                Mq * kv_tokens * d_l,
                "gemm",
                paired=scores_paired,
                traffic=Mq * d_l + s.batch * kv_tokens * d_l + s.batch * h_l * q_tokens * kv_tokens,
            ),
            Compute(
                "softmax",
                SOFTMAX_FLOPS * s.batch * h_l * q_tokens * kv_tokens,
                "elementwise",
                traffic=2 * s.batch * h_l * q_tokens * kv_tokens,
            ),
            Compute(
                "attn_v",
                Mq * kv_tokens * d_l,
                "gemm",
                traffic=s.batch * h_l * q_tokens * kv_tokens + s.batch * kv_tokens * d_l + Mq * d_l,
            ),
        ]
    out += [
        Compute(
            "proj", Mq * d_l * s.D, "gemm", paired=not scores_paired, traffic=Mq * d_l + d_l * s.D + Mq * s.D
        ),
        Compute("proj_bias", BIAS_FLOPS * Mq * s.D, "elementwise", traffic=2 * Mq * s.D),
    ]
    return out


def _attention(s: LayerShape, P: int, mesh, pad: bool, drop_n2: bool, split: str) -> Terms:
    """Heads split over the channel axis (the output all-reduced), tokens over the token axis (K and V
    all-gathered). Under a channel split the derivation pairs the output projection and its all-reduce (§3.2),
    otherwise the score product and the K half of the gather (§3.3, derived from the N² term, which is kept
    whatever ``drop_n2`` says)."""
    P_c, P_t, groups = _axes(split, P, mesh)
    channel = split == "channel"
    h_l = shard(s.heads, P_c, pad)
    d_l = h_l * s.D / s.heads
    n_l = shard(s.N, P_t, pad)
    n_kv = P_t * n_l  # keys after the all-gather (padding tokens masked but computed)
    kv = s.batch * n_kv * 2 * d_l  # this channel rank's K and V, gathered as one (B, N, 2, h, hd) tensor
    n_params = 4 * s.D * d_l + 3 * d_l + s.D
    M = s.batch * n_l
    comms = [
        Comm("gather_kv", "all_gather", kv, "fwd", group="token", paired=True, paired_share=0.5),
        Comm("reduce_out", "all_reduce", M * s.D, "fwd", group="channel", paired=channel),
        Comm("grad_kv", "reduce_scatter", kv, "bwd", group="token"),
        Comm("grad_input", "all_reduce", M * s.D, "bwd", group="channel"),
        Comm("grad_sync", "all_reduce", n_params, "bwd", group="token", per_step=True),
    ]
    computes = _attention_computes(
        s, n_l, n_kv, d_l, h_l, scores_paired=not channel, drop_n2=drop_n2 and channel
    )
    return Terms(computes, _on_axes(comms, groups), params=n_params)


def _layernorm(s: LayerShape, P: int, mesh, pad: bool, drop_n2: bool, split: str) -> Terms:
    # channel: features sharded, all-reduce (sum, sum of squares) per token, and again in backward
    if split == "channel":
        d_l = shard(s.D, P, pad)
        M = s.batch * s.N
        return Terms(
            [Compute("norm", LAYERNORM_FLOPS * M * d_l, "elementwise", paired=True, traffic=2 * M * d_l)],
            [
                Comm("stats", "all_reduce", 2 * M, "fwd", paired=True),
                Comm("grad_stats", "all_reduce", 2 * M, "bwd"),
            ],
            params=2 * d_l,
        )
    # replicated (Megatron: every rank normalises the full activation), token or 2-D: this rank's tokens, the
    # replicated weights' gradients synced over the token ranks
    P_t, groups = (1, {}) if split == "replicated" else _axes(split, P, mesh)[1:]
    n_l = shard(s.N, P_t, pad)
    comms = _on_axes([Comm("grad_sync", "all_reduce", 2 * s.D, "bwd", group="token", per_step=True)], groups)
    return Terms(
        [
            Compute(
                "norm",
                LAYERNORM_FLOPS * s.batch * n_l * s.D,
                "elementwise",
                paired=True,
                traffic=2 * s.batch * n_l * s.D,
            )
        ],
        comms,
        params=2 * s.D,
    )


def _tokenize(s: LayerShape, P: int, mesh, pad: bool, drop_n2: bool, split: str) -> Terms:
    bands = s.L if split == "replicated" else _dchag_bands(s, P, pad)[0]
    M = s.batch * s.N
    p2 = s.patch * s.patch
    return Terms(
        [  # the image needs no gradient: backward is the weight gradients alone (1 x forward)
            Compute(
                "patch_embed",
                M * bands * p2 * s.D,
                "gemm",
                paired=True,
                bwd=1.0,
                traffic=M * bands * p2 + bands * p2 * s.D + M * bands * s.D,
            ),
            Compute(
                "bias_and_band_embed",
                2 * BIAS_FLOPS * M * bands * s.D,
                "elementwise",
                bwd=1.0,
                traffic=2 * M * bands * s.D,
            ),
        ],
        [],
        params=bands * (p2 * s.D + 2 * s.D),  # conv weight + bias + learned per-band embedding (per rank)
        activations=M * bands * (p2 + s.D),  # input patches and the band tokens (kept for the aggregator)
    )


def _tp_cross_attention(s: LayerShape, P: int, channels: float, pad: bool, prefix: str) -> Terms:
    """Single-query cross-attention over ``channels`` tokens per location, Megatron-sharded by heads (the
    baseline aggregator and D-CHAG's final one): fwd all-reduce of the output, bwd all-reduce of the token grad
    and of the replicated learned query's (1, 1, D) gradient (it enters q through Megatron's f)."""
    h_l = shard(s.heads, P, pad)
    d_l = h_l * s.D / s.heads
    M = s.batch * s.N  # spatial locations, folded into the batch
    return Terms(
        [
            *_cross_attention(s, M, prefix, channels, 1, d_l, h_l, paired="proj"),
            Compute(f"{prefix}proj_bias", BIAS_FLOPS * M * s.D, "elementwise", traffic=2 * M * s.D),
        ],
        [
            Comm(f"{prefix}reduce_out", "all_reduce", M * s.D, "fwd", paired=True),
            Comm(f"{prefix}grad_tokens", "all_reduce", M * channels * s.D, "bwd"),
            Comm(f"{prefix}grad_query", "all_reduce", s.D, "bwd"),
        ],
        params=s.D + 4 * s.D * d_l + 3 * d_l + s.D,
        activations=M * channels * 2 * d_l + M * h_l * channels + M * d_l + M * s.D,
    )


def _dchag_bands(s: LayerShape, P: int, pad: bool) -> tuple[float, float]:
    """(bands per rank, bands per group): bands padded to a multiple of P·g, as the parallel layers do."""
    c_g = shard(s.L, P * s.groups, pad)
    return c_g * s.groups, c_g


def _dchag_aggregation(s: LayerShape, P: int, pad: bool, variant: str) -> Terms:
    """D-CHAG on one rank after tokenisation: partial aggregation of its bands (g groups with shared weights, then
    over the g group results), all-gather of one token per rank (backward: local slice, no traffic), final TP
    aggregation over the P gathered tokens."""
    _, c_g = _dchag_bands(s, P, pad)
    M = s.batch * s.N
    partial = _dchag_linear if variant == "L" else _dchag_cross_attention
    computes, params, acts = partial(s, M, c_g)
    final = _tp_cross_attention(s, P, P, pad, "final_")
    # Only the partial aggregation and the all-gather are what §8.2's estimate is about: the final aggregator's
    # terms are not "paired".
    return Terms(
        computes + [replace(c, paired=False) for c in final.computes],
        [
            Comm("gather_tokens", "all_gather", M * P * s.D, "fwd", paired=True),
            *(replace(c, paired=False) for c in final.comms),
        ],
        params=params + final.params,
        activations=acts + M * P * s.D + final.activations,
    )


def _dchag_linear(s: LayerShape, M: int, c_g: float) -> tuple[list[Compute], float, float]:
    """D-CHAG-L's partial aggregation (computes, parameters, activations): a Linear over the channel axis
    (c_g -> 1), then over the g groups (g -> 1)."""
    g, D = s.groups, s.D
    traffic = M * g * c_g * D + c_g + M * g * D
    computes = [Compute("partial_linear", M * D * g * c_g, "gemm", paired=True, traffic=traffic)]
    if g == 1:
        return computes, c_g + 1, M * g * D
    computes.append(Compute("group_linear", M * D * g, "gemm", traffic=M * g * D + g + M * D))
    return computes, c_g + 1 + (g + 1), M * g * D + M * D


def _dchag_cross_attention(s: LayerShape, M: int, c_g: float) -> tuple[list[Compute], float, float]:
    """D-CHAG-C's partial aggregation (computes, parameters, activations): a full (unsharded) single-query
    multi-head cross-attention per group, then one over the g group results."""
    g, D = s.groups, s.D
    computes = _cross_attention(s, M, "partial_", g * c_g, g, D, s.heads, paired="kv")
    params = D + 4 * D * D + 4 * D
    acts = M * g * c_g * 2 * D + M * s.heads * g * c_g + 2 * M * g * D
    if g > 1:
        computes += _cross_attention(s, M, "group_", g, 1, D, s.heads, paired="")
        params += D + 4 * D * D + 4 * D
        acts += M * g * 2 * D + M * s.heads * g + 2 * M * D
    return computes, params, acts


def _cross_attention(
    s: LayerShape, M: int, prefix: str, tokens: float, outputs: float, d_l: float, h_l: float, *, paired: str
) -> list[Compute]:
    """The computes of a single-query cross-attention of ``outputs`` queries over ``tokens`` tokens at each of
    ``M`` locations, with ``h_l`` heads of ``d_l`` features on this rank (all of them when it is unsharded);
    ``paired``: the term (``kv`` or ``proj``) the derivation pairs with the layer's collective, "" for none."""
    D, Mo = s.D, M * outputs
    return [
        Compute(f"{prefix}q_proj", D * d_l, "gemm", traffic=D + D * d_l + d_l),
        Compute(
            f"{prefix}kv",
            M * tokens * D * 2 * d_l,
            "gemm",
            paired=paired == "kv",
            traffic=M * tokens * D + D * 2 * d_l + M * tokens * 2 * d_l,
        ),
        Compute(
            f"{prefix}scores",
            M * tokens * d_l,
            "gemm",
            traffic=Mo * d_l + M * tokens * d_l + M * h_l * tokens,
        ),
        Compute(
            f"{prefix}softmax", SOFTMAX_FLOPS * M * h_l * tokens, "elementwise", traffic=2 * M * h_l * tokens
        ),
        Compute(
            f"{prefix}attn_v",
            M * tokens * d_l,
            "gemm",
            traffic=M * h_l * tokens + M * tokens * d_l + Mo * d_l,
        ),
        Compute(
            f"{prefix}proj",
            Mo * d_l * D,
            "gemm",
            paired=paired == "proj",
            traffic=Mo * d_l + d_l * D + Mo * D,
        ),
    ]


_BUILDERS = {
    "linear_column": _linear_column,
    "mlp": _mlp,
    "attn_channel": _attention,
    "attn_token": _attention,
    "attn_2d": _attention,
    "layernorm": _layernorm,
    "layernorm_replicated": _layernorm,
    "layernorm_sharded": _layernorm,
    "tokenize": _tokenize,
}

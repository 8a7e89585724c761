"""``hsitp advise plan``: which plan (tp, dchag_l / dchag_c with g groups, token), which TP degree P and which
checkpointing policy fit in device memory, and which of those trains fastest on a whole allocation.

Pure arithmetic over two models this package already checks against measurement:

- memory: ``cost.memory.plan_memory``, the per-part model of what ``hsitp.models`` keeps in one step (rank 0's
  peak within 2 % of the CPU probe's), priced in the training dtype with an fp32 master copy and fp32 AdamW state
  when asked, on the CUDA allocator's accounting for GPU presets (foreach AdamW);
- time: ``cost.refined``, per-layer compute and collectives on the hardware preset or a measured calibration.

A candidate is (plan, P, g, checkpointing). The allocation's nodes x devices-per-node devices run
(nodes x devices / P) data-parallel replicas of one P-way group, each holding its own copy of the group's state,
and all-reduce the gradients once a step. Nothing here is measured: every number is labelled modelled.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

from hsitp import __version__
from hsitp.cost.hardware import Hardware
from hsitp.cost.memory import PLAN_PARTS, PlanSize, plan_memory, plan_parameters
from hsitp.cost.refined import BLOCK_LAYERS, OpCost, collective_time, model_cost, op_cost
from hsitp.errors import HsitpError
from hsitp.names import DCHAG_PLANS, PARALLEL_PLANS, SHARDED_PLANS
from hsitp.sections.cost import Headroom, Switches
from hsitp.settings import CostSettings
from hsitp.shape import DTYPE_BYTES, LayerShape

MEMORY_ERROR = 0.02  # the memory model's peak vs the CPU probe's (tests/test_probe.py, PEAK_BOUND)
GB = 1e9  # the presets' unit (datasheet GB)


@dataclass(frozen=True)
class Inputs:
    """What the researcher has: the model, the scene, the allocation."""

    D: int
    depth: int
    heads: int
    mlp_ratio: int
    L: int
    H: int
    W: int
    patch: int
    N: int
    batch: int
    classes: int
    dtype: str
    master_fp32: bool
    nodes: int
    devices_per_node: int
    device_memory_gb: float
    fixed_P: int | None = None
    groups: tuple[int, ...] = (2, 4, 8)
    checkpointing: tuple[str, ...] = ("none", "blocks")

    @property
    def devices(self) -> int:
        return self.nodes * self.devices_per_node


@dataclass
class Row:
    """One candidate, priced (or excluded with ``excluded`` saying why)."""

    plan: str
    P: int
    g: int
    checkpointing: str
    excluded: str = ""
    memory: dict[str, float] = field(default_factory=dict)  # bytes per part (+ "transient", "peak")
    fits: bool = False
    t_compute: float = math.nan
    t_comm_exposed: float = math.nan
    t_dp_allreduce: float = math.nan
    replicas: int = 0
    tokens_per_s: float = math.nan
    rank: int = 0
    tie: bool = False
    borderline: bool = False  # peak within the memory model's 2 % of the usable memory
    why_not: str = ""

    @property
    def label(self) -> str:
        g = f" g={self.g}" if self.plan in DCHAG_PLANS else ""
        return f"{self.plan} P={self.P}{g} ckpt={self.checkpointing}"

    @property
    def t_step(self) -> float:
        return self.t_compute + self.t_comm_exposed + self.t_dp_allreduce

    def as_dict(self) -> RowJSON:
        def fin(x: float) -> float | None:
            return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None

        return {
            "plan": self.plan,
            "P": self.P,
            "g": self.g,
            "checkpointing": self.checkpointing,
            "excluded": self.excluded or None,
            "memory_bytes": {k: fin(v) for k, v in self.memory.items()},
            "fits": self.fits,
            "t_compute_s": fin(self.t_compute),
            "t_comm_exposed_s": fin(self.t_comm_exposed),
            "t_dp_allreduce_s": fin(self.t_dp_allreduce),
            "t_step_s": fin(self.t_step),
            "replicas": self.replicas,
            "tokens_per_s": fin(self.tokens_per_s),
            "rank": self.rank or None,
            "tie_with_best": self.tie,
            "memory_borderline": self.borderline,
            "why_not": self.why_not or None,
        }


class RowJSON(TypedDict):
    """One candidate as ``--json`` writes it (``Row.as_dict``): times in s, memory in bytes, None where not priced."""

    plan: str
    P: int
    g: int
    checkpointing: str
    excluded: str | None
    memory_bytes: dict[str, float | None]
    fits: bool
    t_compute_s: float | None
    t_comm_exposed_s: float | None
    t_dp_allreduce_s: float | None
    t_step_s: float | None
    replicas: int
    tokens_per_s: float | None
    rank: int | None
    tie_with_best: bool
    memory_borderline: bool
    why_not: str | None


class PlanHardware(TypedDict):
    name: str
    measured: bool
    source: str
    assumptions: str
    F_flops: float
    beta_intra_bytes_per_s: float
    beta_inter_bytes_per_s: float
    devices_per_node: int


class PlanHeadroom(TypedDict):
    fraction: float
    fixed_gb: float
    usable_bytes: float


class PlanResult(TypedDict):
    """``hsitp advise plan``'s answer: what ``--json`` writes and :func:`format_text` prints."""

    inputs: Inputs  # --json writes its fields and the device count (:func:`_json_default`)
    hardware: PlanHardware
    headroom: PlanHeadroom
    errors: dict[str, float]  # the models' relative errors: time, memory
    versions: dict[str, str]  # hsitp, python
    rows: list[RowJSON]
    recommendation: RowJSON | None
    ties: list[str]
    what_would_fit: list[str]
    labels: list[str]


def divisors(n: int) -> list[int]:
    """n's divisors in increasing order, found up to sqrt(n) (an allocation of 10^12 devices in a millisecond)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def exclusion(plan: str, P: int, g: int, x: Inputs) -> str:  # noqa: N803
    """Why ``plan`` cannot split this model over P ranks with g groups ("" when it can). Bands and tokens that
    do not divide are padded (and priced), never refused; heads are not: every rank holds whole heads."""
    if plan in SHARDED_PLANS and x.heads % P:
        return f"heads = {x.heads} not divisible by P = {P} (every rank holds whole heads)"
    if plan in DCHAG_PLANS:
        per_rank = -(-x.L // P)
        if g > per_rank:
            return (
                f"g = {g} groups > {per_rank} bands per rank (L = {x.L} over P = {P}): groups of padding only"
            )
    if plan == "token" and P > x.N:
        return f"P = {P} > N = {x.N} tokens: ranks without a token"
    return ""


def _splits(x: Inputs) -> Iterator[tuple[str, int, int]]:
    """Every (plan, P, g) over the divisors of the allocation (or the fixed P)."""
    for P in [x.fixed_P] if x.fixed_P else divisors(x.devices):  # noqa: N806
        for plan in ["dense"] if P == 1 else PARALLEL_PLANS:  # P = 1 is the dense model
            for g in x.groups if plan in DCHAG_PLANS else (1,):
                yield plan, P, g


def candidates(x: Inputs) -> list[Row]:
    """Every (plan, P, g, checkpointing), excluded ones kept with their reason."""
    return [
        Row(plan, P, g, ck, excluded=exclusion(plan, P, g, x))
        for plan, P, g in _splits(x)
        for ck in x.checkpointing
    ]


def size(x: Inputs, device: str, batch: int | None = None) -> PlanSize:
    return PlanSize(
        B=batch or x.batch,
        N=x.N,
        D=x.D,
        L=x.L,
        heads=x.heads,
        depth=x.depth,
        patch=x.patch,
        classes=x.classes,
        mlp_ratio=x.mlp_ratio,
        dtype_bytes=DTYPE_BYTES[x.dtype],
        ln_stat_bytes=4,
        device=device,
        master_fp32=x.master_fp32 and DTYPE_BYTES[x.dtype] < 4,
    )


def memory_by_part(plan: str, m: PlanSize, P: int, g: int, ck: str) -> dict[str, float]:  # noqa: N803
    """Rank 0's modelled bytes per part held the whole step (parameters, optimizer state, saved activations),
    ``transient``: what else is live at the peak (the gradients produced so far and the running op's
    temporaries), ``peak``: their sum; ``gradients``: every gradient (live from its part's backward to the
    update, not additive with the peak)."""
    mem = plan_memory(plan, m, P, g, ck)
    out = {
        part: sum(mem[(part, k)] for k in ("parameters", "optimizer", "activations")) for part in PLAN_PARTS
    }
    out["transient"] = mem[("step", "transient")]
    out["peak"] = mem[("step", "peak")]
    out["gradients"] = sum(mem[(part, "gradients")] for part in PLAN_PARTS)
    return out


def _shape(x: Inputs, g: int, N: int | None = None) -> LayerShape:
    return LayerShape(
        N=N or x.N,
        D=x.D,
        L=x.L,
        batch=x.batch,
        heads=x.heads,
        mlp_ratio=x.mlp_ratio,
        dtype=x.dtype,
        groups=g,
        patch=x.patch,
    )


def _recompute(layers: list[OpCost], overlap: float) -> tuple[float, float]:
    """(compute, exposed communication) of running ``layers`` forward once more (checkpointed blocks)."""
    comp = sum(op.t_comp * op.flops_fwd / (op.flops_fwd + op.flops_bwd) for op in layers if op.flops_fwd)
    comm = sum(c.time_s for op in layers for c in op.collectives if c.phase == "fwd")
    return comp, (1.0 - overlap) * comm


def step_time(
    plan: str, x: Inputs, P: int, g: int, ck: str, hw: Hardware, sw: Switches, overlap: float
) -> tuple[float, float]:  # noqa: N803
    """(compute, exposed communication) of one step of one P-way group, in seconds (refined model)."""
    kw = {"hardware": hw, "switches": sw, "overlap": overlap}
    if plan == "token":
        # tokeniser and aggregator run whole on each rank's ceil(N / P) tokens; blocks split the sequence; the
        # replicated tokeniser and aggregator gradients are all-reduced over the group once a step
        local = _shape(x, 1, -(-x.N // P))
        head = [op_cost("tokenize", local, P=1, split="replicated", **kw)]
        head.append(op_cost("agg_tp", local, P=1, split="channel", **kw))
        blocks = [op_cost(op, _shape(x, 1), P=P, split=sp, **kw) for op, sp in BLOCK_LAYERS["token"]]
        layers = head + blocks * x.depth
        m = size(x, "cpu")
        rep = plan_parameters("token", m, P)
        nbytes = (rep["tokenisation"][0] + rep["aggregation"][0]) * DTYPE_BYTES[x.dtype]
        per_node = min(P, hw.devices_per_node)
        sync = collective_time(
            "all_reduce", nbytes, P, per_node, hw, sw.model_copy(update={"alpha_zero": True})
        )
        comp = sum(op.t_comp for op in layers)
        comm = sum(op.t_comm_exposed for op in layers) + (1.0 - overlap) * sync
    else:
        priced = "tp" if plan == "dense" else plan  # dense: tp's model at P = 1
        sc = model_cost(priced, _shape(x, g), P, hw, x.depth, sw, overlap=overlap)
        layers = list(sc.layers)
        comp, comm = sc.t_comp, sc.t_comm_exposed
        blocks = layers[2 : 2 + len(BLOCK_LAYERS["channel"])]
    if ck == "blocks":
        rc, rm = _recompute(blocks, overlap)
        comp += rc * x.depth
        comm += rm * x.depth
    return comp, comm


def dp_allreduce(plan: str, x: Inputs, P: int, g: int, hw: Hardware, sw: Switches) -> float:  # noqa: N803
    """Seconds to all-reduce one rank's gradients over the (devices / P) replicas, bucketed (no per-layer
    latency); replicas sit one per group, so devices_per_node // P of them share a node."""
    replicas = x.devices // P
    if replicas < 2:
        return 0.0
    elements = sum(n for n, _ in plan_parameters(plan, size(x, "cpu"), P, g).values())
    per_node = max(1, x.devices_per_node // P)
    return collective_time(
        "all_reduce",
        elements * DTYPE_BYTES[x.dtype],
        replicas,
        per_node,
        hw,
        sw.model_copy(update={"alpha_zero": True}),
    )


def price(
    rows: list[Row],
    x: Inputs,
    hw: Hardware,
    sw: Switches,
    *,
    usable: float,
    overlap: float,
    dp_overlap: float,
    device: str,
) -> None:
    """Fill memory, fit, time and tokens/s of every candidate that is not excluded."""
    m = size(x, device)
    for r in rows:
        if r.excluded:
            continue
        r.memory = memory_by_part(r.plan, m, r.P, r.g, r.checkpointing)
        r.fits = r.memory["peak"] <= usable
        # within the memory model's own error of the limit: neither "fits" nor "does not fit" is certain
        r.borderline = abs(r.memory["peak"] - usable) <= MEMORY_ERROR * usable
        r.t_compute, r.t_comm_exposed = step_time(r.plan, x, r.P, r.g, r.checkpointing, hw, sw, overlap)
        r.t_dp_allreduce = (1.0 - dp_overlap) * dp_allreduce(r.plan, x, r.P, r.g, hw, sw)
        r.replicas = x.devices // r.P
        r.tokens_per_s = r.replicas * x.batch * x.N / r.t_step


def _why_not(r: Row, best: Row, usable: float, time_error: float) -> tuple[str, bool]:
    """(reason, tie) for a row ranked below ``best``."""
    if r.excluded:
        return r.excluded, False
    if not r.fits:
        near = " (within the memory model's 2 %: borderline)" if r.borderline else ""
        return f"needs {r.memory['peak'] / GB:.1f} GB per rank > {usable / GB:.1f} GB usable{near}", False
    slower = best.tokens_per_s / r.tokens_per_s - 1.0
    if slower <= time_error:
        return (
            f"tie: {100 * slower:.1f} % slower, within the time model's {100 * time_error:.0f} % error",
            True,
        )
    # per token of the allocation (rows share batch and N: time / replicas): which part costs more than the best's
    parts = {
        "compute": r.t_compute / r.replicas - best.t_compute / best.replicas,
        "exposed TP communication": r.t_comm_exposed / r.replicas - best.t_comm_exposed / best.replicas,
        "gradient all-reduce": r.t_dp_allreduce / r.replicas - best.t_dp_allreduce / best.replicas,
    }
    worst = max(parts, key=parts.get)
    extra = (
        " (recomputed blocks)"
        if worst == "compute" and r.checkpointing == "blocks" and best.checkpointing == "none"
        else ""
    )
    return f"{100 * slower:.0f} % slower: more {worst} per token{extra}", False


def rank_rows(rows: list[Row], usable: float, time_error: float) -> Row | None:
    """Order rows (fitting by tokens/s, then not fitting by peak, then excluded), mark ties and "why not"."""
    fit = sorted((r for r in rows if not r.excluded and r.fits), key=lambda r: -r.tokens_per_s)
    over = sorted((r for r in rows if not r.excluded and not r.fits), key=lambda r: r.memory["peak"])
    rows[:] = fit + over + [r for r in rows if r.excluded]
    best = fit[0] if fit else None
    for i, r in enumerate(rows, 1):
        r.rank = i
        if r is best:
            continue
        if best is not None:
            r.why_not, r.tie = _why_not(r, best, usable, time_error)
        else:
            r.why_not = (
                r.excluded or f"needs {r.memory['peak'] / GB:.1f} GB per rank > {usable / GB:.1f} GB usable"
            )
    return best


def what_would_fit(x: Inputs, hw: Hardware, device: str, usable: float) -> list[str]:
    """When nothing fits: more devices, checkpointing or a smaller batch, with the numbers."""
    out = []
    P = 2 * (x.fixed_P or x.devices)  # noqa: N806
    while 64 * x.devices >= P and not out:  # groups beyond this allocation, doubling
        for plan in PARALLEL_PLANS:
            g = next((g for g in x.groups if not exclusion(plan, P, g, x)), 1) if plan in DCHAG_PLANS else 1
            if exclusion(plan, P, g, x):
                continue
            peak = memory_by_part(plan, size(x, device), P, g, "blocks")["peak"]
            if peak <= usable:
                nodes = -(-P // x.devices_per_node)
                out.append(
                    f"more devices: {plan} at P = {P}{f', g = {g}' if plan in DCHAG_PLANS else ''} "
                    f"with checkpointed blocks needs {peak / GB:.1f} GB per rank "
                    f"({nodes} node{'s' if nodes > 1 else ''} of {x.devices_per_node})"
                )
                break
        P *= 2  # noqa: N806
    B, best = _largest_batch(x, device, usable)  # noqa: N806
    if best:
        out.append(
            f"a smaller batch: --batch {B} fits with {best[1]} at P = {best[2]} and checkpointed blocks "
            f"({best[0] / GB:.1f} GB per rank)"
        )
    if "blocks" not in x.checkpointing:
        out.append("checkpointing: allow --checkpointing blocks (only the blocks' inputs are kept)")
    if not out:
        out.append("nothing within this model's heads and batch 1 fits: a smaller model or larger devices")
    return out


def _smallest_peak(x: Inputs, device: str, batch: int) -> tuple[float, str, int, int] | None:
    """(peak, plan, P, g) of the split with the smallest checkpointed peak per rank at this batch."""
    m = size(x, device, batch=batch)
    return min(
        (
            (memory_by_part(plan, m, P, g, "blocks")["peak"], plan, P, g)
            for plan, P, g in _splits(x)
            if not exclusion(plan, P, g, x)
        ),
        default=None,
    )


def _largest_batch(x: Inputs, device: str, usable: float) -> tuple[int, tuple[float, str, int, int] | None]:
    """The largest batch below ``x.batch`` some split holds in ``usable`` bytes, and that split (0, None: none).
    The peak grows with the batch, so bisect: walking down one batch at a time from --batch 65536 ran for hours."""
    fits, past = 0, x.batch
    while past - fits > 1:
        mid = (fits + past) // 2
        best = _smallest_peak(x, device, mid)
        fits, past = (mid, past) if best and best[0] <= usable else (fits, mid)
    return fits, _smallest_peak(x, device, fits) if fits else None


def plan(
    x: Inputs,
    hw: Hardware,
    *,
    headroom: Headroom,
    time_error: float,
    overlap: float,
    dp_overlap: float,
    sw: Switches | None = None,
) -> PlanResult:
    """The answer as a JSON-ready dict: inputs, rows (ranked, each with its why-not), recommendation, labels."""
    sw = sw or Switches()
    gpu = hw.memory_bytes is not None and not hw.measured
    device = "cuda" if gpu else "cpu"
    hw = hw.with_devices_per_node(x.devices_per_node)
    usable = headroom.usable(x.device_memory_gb)
    if usable <= 0:
        raise HsitpError(
            f"cost.advise.headroom leaves nothing of {x.device_memory_gb} GB: fraction {headroom.fraction}, "
            f"fixed_gb {headroom.fixed_gb}"
        )
    rows = candidates(x)
    if x.fixed_P and all(r.excluded for r in rows):
        reasons = "; ".join(sorted({f"{r.plan}: {r.excluded}" for r in rows}))
        raise HsitpError(
            f"--devices {x.fixed_P}: no plan can split this model over {x.fixed_P} ranks ({reasons})"
        )
    price(rows, x, hw, sw, usable=usable, overlap=overlap, dp_overlap=dp_overlap, device=device)
    best = rank_rows(rows, usable, time_error)
    return {
        "inputs": x,
        "hardware": {
            "name": hw.name,
            "measured": hw.measured,
            "source": hw.source,
            "assumptions": hw.assumptions,
            "F_flops": hw.flops,
            "beta_intra_bytes_per_s": hw.link("all_reduce", "intra")[1],
            "beta_inter_bytes_per_s": hw.link("all_reduce", "inter")[1],
            "devices_per_node": x.devices_per_node,
        },
        "headroom": {"fraction": headroom.fraction, "fixed_gb": headroom.fixed_gb, "usable_bytes": usable},
        "errors": {"time": time_error, "memory": MEMORY_ERROR},
        "versions": {"hsitp": __version__, "python": platform.python_version()},
        "rows": [r.as_dict() for r in rows],
        "recommendation": best.as_dict() if best else None,
        "ties": [r.label for r in rows if r.tie],
        "what_would_fit": [] if best else what_would_fit(x, hw, device, usable),
        "labels": _labels(x, hw, headroom, usable, gpu=gpu),
    }


def _labels(x: Inputs, hw: Hardware, headroom: Headroom, usable: float, *, gpu: bool) -> list[str]:
    """What the plan's numbers are: modelled, on which hardware, against how much usable memory."""
    labels = [
        f"every number is modelled (hsitp.cost: memory.plan_memory, refined time model), not measured; hardware: "
        f"{hw.name} ({'measured calibration' if hw.measured else 'preset'}: {hw.source})",
        f"memory: rank 0's allocated-bytes peak (model within {100 * MEMORY_ERROR:.0f} % of the CPU probe), "
        f"compared with {usable / GB:.1f} GB usable = {x.device_memory_gb:g} GB x (1 - {headroom.fraction}) - "
        f"{headroom.fixed_gb:g} GB (cost.advise.headroom: CUDA context, NCCL buffers, allocator fragmentation)",
    ]
    if gpu:
        labels.append(
            "GPU preset: the CUDA-side peak (caching allocator, foreach AdamW) has not been measured here; the "
            "model is checked against the CPU probe and fake-tensor estimates only"
        )
    return labels


def format_text(a: PlanResult, limit: int = 20) -> str:
    """The plan as a short table (the best ``limit`` rows; every row in --json)."""
    x = a["inputs"]

    def gb(v: float | None) -> str:
        return "-" if v is None else f"{v / GB:.2f}"

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{1e3 * v:.2f}"

    lines = [
        f"model D = {x.D}, depth {x.depth}, {x.heads} heads, mlp x{x.mlp_ratio}; scene "
        f"{x.H}x{x.W}x{x.L}, patch {x.patch} -> N = {x.N}; batch {x.batch}, {x.dtype}"
        f"{' + fp32 master' if x.master_fp32 else ''}",
        f"allocation: {x.nodes} node(s) x {x.devices_per_node} devices of {x.device_memory_gb:g} GB on "
        f"{a['hardware']['name']}; usable per rank {a['headroom']['usable_bytes'] / GB:.1f} GB",
        f"{'#':>3} {'plan':<9}{'P':>3}{'g':>3} {'ckpt':<7}{'tok':>7}{'agg':>7}{'blocks':>8}{'head':>6}"
        f"{'+trans':>7}{'peak GB':>8} {'fit':<4}{'comp ms':>9}{'comm ms':>9}{'AR ms':>8}{'tokens/s':>11}  why not",
    ]
    priced = [r for r in a["rows"] if not r["excluded"]]
    shown_rows = priced[:limit] + [r for r in a["rows"] if r["excluded"]]
    for r in shown_rows:
        mem = r["memory_bytes"]
        g = str(r["g"]) if r["plan"] in DCHAG_PLANS else "-"
        if r["excluded"]:
            lines.append(
                f"{'':>3} {r['plan']:<9}{r['P']:>3}{g:>3} {r['checkpointing']:<7}excluded: {r['excluded']}"
            )
            continue
        tps = "-" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:.3g}"
        lines.append(
            f"{r['rank']:>3} {r['plan']:<9}{r['P']:>3}{g:>3} {r['checkpointing']:<7}"
            f"{gb(mem['tokenisation']):>7}{gb(mem['aggregation']):>7}{gb(mem['blocks']):>8}{gb(mem['head']):>6}"
            f"{gb(mem['transient']):>7}{gb(mem['peak']):>8} {'yes' if r['fits'] else 'NO':<4}"
            f"{ms(r['t_compute_s']):>9}{ms(r['t_comm_exposed_s']):>9}{ms(r['t_dp_allreduce_s']):>8}{tps:>11}"
            f"  {r['why_not'] or 'best'}"
        )
    hidden = len(priced) - limit
    if hidden > 0:
        lines.append(f"    ... {hidden} more rows in --json")
    rec = a["recommendation"]
    if rec:
        g = f", g = {rec['g']}" if rec["plan"] in DCHAG_PLANS else ""
        lines.append(
            f"recommendation: {rec['plan']} at P = {rec['P']}{g}, checkpointing {rec['checkpointing']}: "
            f"{rec['tokens_per_s']:.3g} tokens/s on {x.devices} devices ({rec['replicas']} replicas), "
            f"{rec['memory_bytes']['peak'] / GB:.2f} GB per rank"
            + (f"; ties (within the models' error): {', '.join(a['ties'])}" if a["ties"] else "")
            + (
                "; its peak is within the memory model's 2 % of the usable memory: borderline"
                if rec["memory_borderline"]
                else ""
            )
        )
    else:
        lines.append("recommendation: nothing fits; what would: " + "; ".join(a["what_would_fit"]))
    lines += [f"({lab})" for lab in a["labels"]]
    return "\n".join(lines)


def inputs_from_args(cost: CostSettings, args: Any, hw: Hardware) -> Inputs:
    """Inputs from the command line and the config's cost section, each bad value named in one line (a count
    below 1 or a memory of 0 GB the command line already refuses: ``hsitp.config.check_options``)."""
    from hsitp.shape import n_tokens

    L, H, W, classes = _scene(args)  # noqa: N806
    N = n_tokens(H, W, args.patch, cost.token_grid)  # noqa: N806
    if N < 1:
        raise HsitpError(f"--patch {args.patch} is larger than the {H}x{W} scene; use a patch <= {min(H, W)}")
    G, mem = _allocation(args, hw)  # noqa: N806
    groups = tuple(args.groups or cost.advise.groups)
    return Inputs(
        D=args.embed_dim or int(cost.embed_dim),
        depth=args.depth or int(cost.depth),
        heads=args.heads or int(cost.heads),
        mlp_ratio=args.mlp_ratio or int(cost.mlp_ratio),
        L=L,
        H=H,
        W=W,
        patch=args.patch,
        N=N,
        batch=args.batch or int(cost.batch),
        classes=args.classes or classes,
        dtype=args.dtype or cost.dtype,
        master_fp32=bool(cost.master_fp32 if args.master_fp32 is None else args.master_fp32),
        nodes=args.nodes,
        devices_per_node=G,
        device_memory_gb=float(mem),
        fixed_P=args.devices,
        groups=groups,
        checkpointing=tuple(args.checkpointing),
    )


def _scene(args: Any) -> tuple[int, int, int, int]:
    """(bands, height, width, classes): the registry's scene of --dataset, or --bands/--height/--width."""
    from hsitp.data import registry

    if args.dataset:
        if any(getattr(args, k) is not None for k in ("bands", "height", "width")):
            raise HsitpError(
                "--dataset gives bands and grid: drop --bands/--height/--width, or drop --dataset"
            )
        spec = registry.get(args.dataset)
        return spec.bands, spec.rows, spec.cols, spec.n_classes
    missing = [f"--{k}" for k in ("bands", "height", "width") if getattr(args, k) is None]
    if missing:
        raise HsitpError(f"give --dataset, or all of --bands/--height/--width (missing {', '.join(missing)})")
    return args.bands, args.height, args.width, 16


def _allocation(args: Any, hw: Hardware) -> tuple[int, float]:
    """(devices per node, device memory in GB) of the allocation; --devices must fit it and divide it."""
    G = args.devices_per_node or hw.devices_per_node  # noqa: N806
    mem = args.device_memory_gb if args.device_memory_gb is not None else hw.memory_bytes
    if mem is None:
        raise HsitpError(f"--device-memory-gb is needed: hardware {hw.name} gives no device memory")
    if args.device_memory_gb is None:
        mem = mem / GB
    devices = args.nodes * G
    if args.devices is not None and args.devices > devices:
        raise HsitpError(
            f"--devices {args.devices} is above the allocation's {devices} devices (--nodes {args.nodes} x "
            f"--devices-per-node {G})"
        )
    if args.devices is not None and devices % args.devices:
        raise HsitpError(
            f"--devices {args.devices} does not divide the allocation's {devices} devices into replicas; use one "
            f"of {divisors(devices)}"
        )
    return G, mem


def run_plan(cost: CostSettings, args: Any) -> str:
    """``hsitp advise plan``: the text table, or JSON with ``--json``."""
    import json

    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(args.hardware)
    x = inputs_from_args(cost, args, hw)
    ad = cost.advise
    result = plan(
        x,
        hw,
        headroom=ad.headroom,
        time_error=float(ad.time_error),
        overlap=float(cost.overlap),
        dp_overlap=float(ad.dp_overlap),
        sw=cost.switches,
    )
    return json.dumps(result, indent=2, default=_json_default) if args.json else format_text(result)


def _json_default(value: object) -> dict[str, object]:
    """The plan's inputs as ``--json`` writes them: every field and the allocation's device count."""
    if isinstance(value, Inputs):
        return {**dataclasses.asdict(value), "devices": value.devices}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# --- Validation against D-CHAG's published memory (the numbers live once, in cost.paper) -----------------
DCHAG_GAP = 0.05  # reported gaps below this are within run-to-run and allocator noise: no order is claimed


def dchag_reference_check(checkpointing: str = "blocks") -> list[dict[str, Any]]:
    """For each D-CHAG published row: the planner's predicted rank-0 peak (bf16 + fp32 master + fp32 AdamW, CUDA
    accounting, blocks checkpointed as in their artifact) per plan, the reported ``max_memory_reserved``, their
    ratio, and for each pair of plans whose reported gap exceeds 5 % whether the predicted order agrees. Also
    the one term known to differ in their code: every rank builds all C band embeddings (parameters, gradients
    and optimizer state of the tokeniser's other bands)."""
    from hsitp.cost.paper import DCHAG_REFERENCE
    from hsitp.cost.paper import DCHAG_SETTINGS as S  # noqa: N814

    out = []
    for name, D, L, tp, reported in DCHAG_REFERENCE:  # noqa: N806
        m = PlanSize(
            B=S["batch"],
            N=(S["height"] // S["patch"]) * (S["width"] // S["patch"]),
            D=D,
            L=L,
            heads=S["heads"],
            depth=S["depth"],
            patch=S["patch"],
            classes=S["classes"],
            mlp_ratio=S["mlp_ratio"],
            dtype_bytes=DTYPE_BYTES[S["dtype"]],
            device="cuda",
            master_fp32=True,
        )
        pred = {p: plan_memory(p, m, tp, 1, checkpointing)[("step", "peak")] for p in reported}
        per_param = 2 * m.dtype_bytes + 12  # parameter + gradient (16-bit), fp32 master, exp_avg, exp_avg_sq
        all_bands = (L - L // tp) * (D * S["patch"] ** 2 + 2 * D) * per_param
        pairs = []
        for a, b in itertools.combinations(reported, 2):
            gap = abs(reported[a] - reported[b]) / min(reported[a], reported[b])
            checked = gap > DCHAG_GAP
            agree = (reported[a] > reported[b]) == (pred[a] > pred[b])
            pairs.append({"pair": (a, b), "reported_gap": gap, "checked": checked, "agree": agree})
        out.append(
            {
                "name": name,
                "D": D,
                "L": L,
                "P": tp,
                "reported_gib": dict(reported),
                "predicted_gib": {p: v / 2**30 for p, v in pred.items()},
                "ratio": {p: reported[p] / (pred[p] / 2**30) for p in reported},
                "all_band_embeddings_gib": {p: (all_bands if p != "tp" else 0.0) / 2**30 for p in reported},
                "pairs": pairs,
            }
        )
    return out

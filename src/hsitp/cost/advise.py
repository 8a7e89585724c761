"""``hsitp advise``: which dimension to split for one dataset, patch size, device count and hardware.

It answers with both models for channel, token and 2-D split (CCR, per-layer compute and communication time,
relative throughput) and one recommendation. The rule is the paper's §6.2/§10.1 one, applied to the refined model:
take the split with the lowest CCR if that CCR is below 1, else prefer data parallelism (TP then only to fit
memory). Everything is modelled, not measured, and the output says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np

from hsitp.cost import stated
from hsitp.cost.hardware import get_hardware
from hsitp.cost.refined import StackCost
from hsitp.cost.tables.common import ORIGIN, block_costs
from hsitp.data import registry
from hsitp.errors import HsitpError
from hsitp.settings import CostSettings
from hsitp.shape import LayerShape, n_tokens


def _finite(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


class LayerReport(TypedDict):
    """One layer of a split's block as ``--json`` writes it (times in s, bytes and calls per collective)."""

    op: str
    split: str
    t_comp_s: float
    t_comm_s: float
    ccr: float | None
    ccr_stated: float | None
    bytes_by_collective: dict[str, float]
    count_by_collective: dict[str, int]


class SplitReport(TypedDict):
    """One split's CCRs, throughputs and per-block times (None: not finite, or no layer to time)."""

    ccr_stated: float | None
    ccr_refined: float | None
    ccr_refined_worst_layer: float | None
    relative_throughput_stated: float | None
    relative_throughput_refined: float | None
    t_comp_s: float | None
    t_comm_s: float | None
    mesh: list[int] | None  # the 2-D split's (P_c, P_t)
    note: str
    layers: list[LayerReport]


class AdviceHardware(TypedDict):
    name: str
    description: str
    measured: bool
    F_flops: float
    beta_bytes_per_s: float
    source: str
    assumptions: str


class Advice(TypedDict):
    """``hsitp advise``'s answer: what ``--json`` writes and :func:`format_text` prints."""

    origin: str
    dataset: str
    title: str
    H: int
    W: int
    L: int
    patch: int
    token_grid: str
    N: int
    D: int
    rho: float
    rho_bands: float
    devices: int
    batch: int
    heads: int
    dtype: str
    hardware: AdviceHardware
    threshold: float
    switches_on: list[str]
    splits: dict[str, SplitReport]  # by split (channel, token, 2d); empty at P = 1
    recommendation: str
    reason: str
    warnings: list[str]


def _split_report(b: StackCost) -> SplitReport:
    return {
        "ccr_stated": _finite(b.ccr_stated),
        "ccr_refined": _finite(b.ccr),
        "ccr_refined_worst_layer": _finite(b.ccr_worst_layer),
        "relative_throughput_stated": _finite(b.relative_throughput_stated),
        "relative_throughput_refined": _finite(b.relative_throughput),
        "t_comp_s": _finite(b.t_comp) if b.layers else None,
        "t_comm_s": _finite(b.t_comm) if b.layers else None,
        "mesh": list(b.mesh) if b.layers else None,
        "note": b.note,
        "layers": [
            {
                "op": x.op,
                "split": x.split,
                "t_comp_s": x.t_comp,
                "t_comm_s": x.t_comm,
                "ccr": _finite(x.ccr),
                "ccr_stated": _finite(x.ccr_stated),
                "bytes_by_collective": x.bytes_by_collective(),
                "count_by_collective": x.count_by_collective(),
            }
            for x in b.layers
        ],
    }


def _origin(hw: Any) -> str:
    """What the numbers are: always modelled CCRs; the hardware constants are measured or preset."""
    if hw.measured:
        return (
            "modelled (hsitp.cost) with measured hardware constants (alpha, beta, F from a calibration file)"
        )
    return ORIGIN + " (hardware constants from a preset)"


def _hardware_warnings(hw: Any, devices: int) -> list[str]:
    """Where the hardware description is used outside what it covers."""
    out = []
    if hw.measured:
        fitted = hw.world_sizes
        if devices > 1 and devices not in fitted:
            out.append(
                f"the calibration was fitted at P = {list(fitted)}, not at P = {devices}: its alpha, beta and the "
                "sequence factor are extrapolated (measure this P: add it to bench.world_sizes)"
            )
    elif devices > hw.devices_per_node:
        out.append(
            f"P = {devices} spans nodes of {hw.devices_per_node} devices: the inter-node bandwidth "
            f"{hw.beta_inter:.3g} B/s is used"
        )
    return out


def _recommend(splits: Mapping[str, StackCost], P: int) -> tuple[str, str]:
    """(recommendation, one-line reason) from the refined CCRs, with the stated model's view alongside."""
    if P == 1:
        return (
            "none",
            "no parallelism needed: one device holds the whole layer, nothing is split or communicated",
        )
    refined = {s: b.ccr for s, b in splits.items() if np.isfinite(b.ccr)}
    best = min(refined, key=refined.get)
    others = ", ".join(f"{s} {v:.3g}" for s, v in refined.items() if s != best)
    st = {s: splits[s].ccr_stated for s in ("channel", "token")}
    st_best = min(st, key=st.get)
    stated_view = (
        f"stated model agrees ({st_best} {st[st_best]:.3g})"
        if st_best == best
        else f"stated model prefers {st_best} ({st[st_best]:.3g})"
    )
    if refined[best] >= 1.0:
        tput = splits[best].relative_throughput
        return (
            "data_parallel",
            f"communication-bound: best split {best} has refined CCR {refined[best]:.3g} >= 1 "
            f"(throughput {tput:.3g}x one device on {P}); prefer data parallelism or gradient accumulation, "
            f"TP ({best}) only if the model must be split to fit; {stated_view}",
        )
    return best, f"lowest refined CCR {refined[best]:.3g} (vs {others}); {stated_view}"


def advise(
    cost: CostSettings,
    *,
    dataset: str,
    patch: int,
    devices: int,
    hardware: str,
    embed_dim: int | None = None,
) -> Advice:
    """The advice as a JSON-ready dict (see module docstring).

    A P the model cannot split (more devices than tokens or features) is refused before any arithmetic (a count
    below 1 or beyond any machine the command line already refuses: ``hsitp.config.check_options``). P = 1 is
    answered as "no parallelism needed" without a CCR table. A measured calibration used at a P it was not fitted
    on gives a warning in the result (``warnings``).
    """
    spec = registry.get(dataset)
    hw = get_hardware(hardware)
    shape = _layer_shape(cost, spec, patch=patch, devices=devices, embed_dim=embed_dim)
    N, D = shape.N, shape.D
    splits = block_costs(shape, devices, hw, cost)
    rec, reason = _recommend(splits, devices)
    tables = {s: _split_report(b) for s, b in splits.items()} if devices > 1 else {}
    return {
        "origin": _origin(hw),
        "dataset": spec.name,
        "title": spec.title,
        "H": spec.rows,
        "W": spec.cols,
        "L": spec.bands,
        "patch": patch,
        "token_grid": cost.token_grid,
        "N": N,
        "D": D,
        "rho": D / N,
        "rho_bands": spec.bands / N,
        "devices": devices,
        "batch": shape.batch,
        "heads": shape.heads,
        "dtype": cost.dtype,
        "hardware": {
            "name": hw.name,
            "description": hw.description,
            "measured": hw.measured,
            "F_flops": hw.flops,
            "beta_bytes_per_s": hw.beta_for(devices),
            "source": hw.source,
            "assumptions": hw.assumptions,
        },
        "threshold": float(stated.threshold(devices, hw.flops, hw.beta_for(devices))),
        "switches_on": cost.switches.on(),
        "splits": tables,
        "recommendation": rec,
        "reason": reason,
        "warnings": _hardware_warnings(hw, devices),
    }


def _layer_shape(
    cost: CostSettings, spec: Any, *, patch: int, devices: int, embed_dim: int | None
) -> LayerShape:
    """One layer of ``cost``'s model on the dataset ``spec`` at ``patch``; refused where ``devices`` would leave
    ranks without tokens or features."""
    N = n_tokens(spec.rows, spec.cols, patch, cost.token_grid)
    if N < 1:
        raise HsitpError(
            f"--patch {patch} is larger than {spec.name}'s {spec.rows}x{spec.cols} grid; use a patch <= "
            f"{min(spec.rows, spec.cols)}"
        )
    D = int(cost.embed_dim if embed_dim is None else embed_dim)
    if devices > min(N, D):
        raise HsitpError(
            f"--devices {devices} exceeds what one layer can be split into here (N = {N} tokens, D = {D} "
            f"features): every split would leave devices without work; use --devices <= {min(N, D)}"
        )
    model = {k: int(getattr(cost, k)) for k in ("batch", "heads", "mlp_ratio")}
    return LayerShape(N=N, D=D, L=spec.bands, dtype=cost.dtype, patch=patch, **model)


def format_text(a: Advice) -> str:
    """The advice as a short human-readable table."""

    def f(x: float | None) -> str:
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"

    hw = a["hardware"]
    kind = "measured calibration" if hw["measured"] else "preset"
    lines = [
        f"{a['title']} ({a['dataset']}): {a['H']}x{a['W']}x{a['L']}, patch {a['patch']} -> N = {a['N']} tokens; "
        f"D = {a['D']}, rho = D/N = {f(a['rho'])} (L/N = {f(a['rho_bands'])})",
        f"{a['devices']} device{'s' if a['devices'] > 1 else ''} on {hw['name']} (hardware constants: {kind}): "
        f"F = {f(hw['F_flops'])} FLOP/s, beta = {f(hw['beta_bytes_per_s'])} B/s, P*F/beta = {f(a['threshold'])}",
    ]
    if a["splits"]:
        lines.append(
            f"{'split':<8} {'CCR stated':>11} {'CCR refined':>12} {'worst layer':>12} {'tput stated':>12} "
            f"{'tput refined':>13} {'comp/block s':>13} {'comm/block s':>13}"
        )
    for s, r in a["splits"].items():
        name = s + (f" {r['mesh'][0]}x{r['mesh'][1]}" if s == "2d" and r["mesh"] else "")
        lines.append(
            f"{name:<8} {f(r['ccr_stated']):>11} {f(r['ccr_refined']):>12} {f(r['ccr_refined_worst_layer']):>12} "
            f"{f(r['relative_throughput_stated']):>12} {f(r['relative_throughput_refined']):>13} "
            f"{f(r['t_comp_s']):>13} {f(r['t_comm_s']):>13}" + (f"  ({r['note']})" if r["note"] else "")
        )
    lines.append(f"recommendation: {a['recommendation']} — {a['reason']}")
    lines += [f"warning: {w}" for w in a["warnings"]]
    lines.append(f"(CCR {a['origin']}" + ("; per-layer times in --json)" if a["splits"] else ")"))
    return "\n".join(lines)

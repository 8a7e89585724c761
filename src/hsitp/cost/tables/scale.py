"""``scale.nc``: projection to many devices, TP inside a node × data/FSDP across nodes, with the D-CHAG
paper's reported memory beside this memory model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from hsitp.cost.hardware import Hardware
from hsitp.cost.memory import KINDS, PARTS, TrainingSetup, memory_breakdown, parameter_count
from hsitp.cost.paper import DCHAG_REFERENCE, DCHAG_SETTINGS
from hsitp.cost.refined import collective_time, model_cost
from hsitp.cost.tables.common import (
    COORD_ATTRS,
    common_attrs,
    hardware_list,
    training_setup,
)
from hsitp.io import describe, variable
from hsitp.names import COMPARED_PLANS, COST_MODELS, PLANS
from hsitp.sections.cost import Switches
from hsitp.settings import CostSettings
from hsitp.shape import LayerShape, n_tokens


def scale_table(cost: CostSettings) -> xr.Dataset:
    """Projection to many devices: TP degree inside a node × data/FSDP degree across nodes, per preset and plan
    (pure TP, D-CHAG): CCR, relative throughput and per-device memory by part and kind; infeasible points are NaN
    with a reason."""
    sc = cost.scale
    hws = [hw.with_devices_per_node(sc.devices_per_node) for hw in hardware_list(sc.hardware)]
    tps = list(sc.tp_degrees)
    H, W = sc.image
    shape = LayerShape(
        N=n_tokens(H, W, sc.patch, cost.token_grid),
        D=sc.embed_dim,
        L=sc.bands,
        batch=sc.micro_batch,
        heads=sc.heads,
        mlp_ratio=cost.mlp_ratio,
        dtype=cost.dtype,
        groups=sc.groups,
        patch=sc.patch,
    )
    ds = xr.Dataset(
        {**_scale_vars(_project(cost, shape, hws, tps), tps, sc.devices), **_dchag_reference()},
        coords={
            "hardware": [hw.name for hw in hws],
            "tp": tps,
            "scheme": list(COMPARED_PLANS),  # netCDF dimension name kept (the plans compared)
            "model": list(COST_MODELS),
            "part": list(PARTS),
            "kind": list(KINDS),
        },
        attrs=_scale_attrs(cost, hws, shape),
    )
    return describe(ds, {**COORD_ATTRS, **_ATTRS})


def _project(
    cost: CostSettings, shape: LayerShape, hws: Sequence[Hardware], tps: Sequence[int]
) -> dict[str, np.ndarray]:
    """Every (hardware, TP degree, plan) point of ``cost.scale``'s model (``shape``, its depth, FSDP and
    checkpointing): memory by part and kind, parameters, CCR, throughput, step and DP-sync times, and whether (or
    why not) the layout is possible."""
    nH, nT, nS = len(hws), len(tps), len(COMPARED_PLANS)
    a = {
        "memory": np.full((nT, nS, len(PARTS), len(KINDS)), np.nan),
        "params": np.full((nT, nS), np.nan),
        "ccr": np.full((nH, nT, nS, 2), np.nan),
        **{k: np.full((nH, nT, nS), np.nan) for k in ("tput", "t_step", "t_dp")},
        "feasible": np.zeros((nH, nT, nS), dtype=np.int8),
        "reason": np.full((nH, nT, nS), "", dtype=object),
    }
    sc, setup = cost.scale, training_setup(cost, cost.scale)
    for ti, tp in enumerate(tps):
        dp = sc.devices // tp if sc.devices % tp == 0 else 0
        for si, plan in enumerate(COMPARED_PLANS):
            a["params"][ti, si] = parameter_count(plan, shape, tp, sc.depth)
            if dp:
                m = memory_breakdown(plan, shape, tp, dp, sc.depth, setup)
                a["memory"][ti, si] = [[m[(part, kind)] for kind in KINDS] for part in PARTS]
            for hi, hw in enumerate(hws):
                why = _infeasible(plan, shape, tp, dp, sc.devices, a["memory"][ti, si].sum(), hw)
                a["reason"][hi, ti, si] = why
                if not why:
                    a["feasible"][hi, ti, si] = 1
                    _project_point(cost, shape, plan, tp, dp, hw, a, (hi, ti, si))
    return a


def _project_point(
    cost: CostSettings,
    shape: LayerShape,
    plan: str,
    tp: int,
    dp: int,
    hw: Hardware,
    a: Mapping[str, np.ndarray],
    at: tuple[int, ...],
) -> None:
    """One feasible point into ``a`` at ``at`` (hardware, TP degree, plan): step and DP-sync times (gradient
    accumulation pays the DP sync once per step), both CCRs and the throughput relative to one device running
    pure TP."""
    sc, sw, accum = cost.scale, cost.switches, cost.grad_accumulation
    mc = model_cost(plan, shape, tp, hw, sc.depth, sw, overlap=cost.overlap, grad_accumulation=accum)
    params = a["params"][at[1], at[2]]
    td = _dp_sync_time(params * shape.dtype_bytes, dp, tp, hw, sc.fsdp, sw) / accum
    exposed_dp = (1.0 - sc.dp_overlap) * td
    step = mc.t_comp + mc.t_comm_exposed + exposed_dp
    a["t_dp"][at], a["t_step"][at] = td, step
    a["ccr"][at] = (mc.ccr_stated, (mc.t_comm + td) / mc.t_comp)
    a["tput"][at] = dp * mc.t_single / step


def _scale_vars(a: Mapping[str, np.ndarray], tps: Sequence[int], devices: int) -> dict[str, Any]:
    """The projection's arrays as the table's variables (the dimension ``scheme`` holds the plans)."""
    point = ("hardware", "tp", "scheme")
    memory = "refined per-device training memory"
    return {
        "memory": variable(
            ("tp", "scheme", "part", "kind"), a["memory"], f"{memory} (computed also where infeasible)", "B"
        ),
        "memory_total": variable(
            ("tp", "scheme"), a["memory"].sum(axis=(2, 3)), f"{memory}, all parts and kinds", "B"
        ),
        "parameters_per_tp_rank": variable(("tp", "scheme"), a["params"], "parameters held per TP rank"),
        "dp": variable("tp", [devices // t if devices % t == 0 else 0 for t in tps], "data/FSDP degree"),
        "ccr": variable(
            (*point, "model"),
            a["ccr"],
            "CCR incl. data-parallel gradient sync (refined); NaN where infeasible",
        ),
        "relative_throughput": variable(
            point,
            a["tput"],
            "samples/s vs one device running pure TP (ideal = devices); NaN where infeasible",
        ),
        "scaling_efficiency": variable(point, a["tput"] / devices, "relative throughput / devices (ideal 1)"),
        "t_step": variable(point, a["t_step"], "refined step time", "s"),
        "t_dp_sync": variable(point, a["t_dp"], "DP/FSDP traffic time", "s"),
        "feasible": (
            point,
            a["feasible"],
            {
                "long_name": "the layout is possible (see reason where not)",
                "flag_values": [0, 1],
                "flag_meanings": "infeasible feasible",
            },
        ),
        "reason": (point, a["reason"].astype(str), {"long_name": "why infeasible"}),
    }


def _scale_attrs(cost: CostSettings, hws: Sequence[Hardware], shape: LayerShape) -> dict[str, Any]:
    sc = cost.scale
    model_keys = ("image", "patch", "bands", "embed_dim", "depth", "heads", "micro_batch", "groups")
    return {
        **common_attrs(cost, hws),
        "title": f"projection to {sc.devices} devices ({sc.devices_per_node} per node): TP inside a node x "
        "data/FSDP across nodes",
        "devices": sc.devices,
        "devices_per_node": sc.devices_per_node,
        "N": shape.N,
        "model": json.dumps({k: getattr(sc, k) for k in model_keys}),
        "optimizer": cost.optimizer,
        "master_fp32": int(cost.master_fp32),
        "fsdp": int(sc.fsdp),
        "activation_checkpointing": int(sc.activation_checkpointing),
        "dp_overlap": sc.dp_overlap,
    }


_ATTRS: dict[str, dict[str, Any]] = {
    "tp": {"units": "1", "long_name": "TP degree inside a node"},
    "part": {"long_name": "part of the model"},
    "kind": {"long_name": "kind of memory"},
}


def _infeasible(
    plan: str, shape: LayerShape, tp: int, dp: int, devices: int, mem: float, hw: Hardware
) -> str:
    if not dp:
        return f"TP degree {tp} does not divide {devices} devices"
    if tp > shape.heads:
        return f"TP degree {tp} exceeds {shape.heads} heads (Megatron shards whole heads)"
    if PLANS[plan].groups and tp > shape.L:
        return f"D-CHAG needs at least one band per rank: {shape.L} bands < TP {tp}"
    if hw.memory_bytes is not None and mem > hw.memory_bytes:
        return f"needs {mem / 2**30:.1f} GiB per device > {hw.memory_bytes / 2**30:.1f} GiB on {hw.name}"
    return ""


def _dp_sync_time(grad_bytes: float, dp: int, tp: int, hw: Hardware, fsdp: bool, sw: Switches) -> float:
    """Data-parallel traffic per step for one TP rank's parameters: DDP all-reduces the gradients; FSDP (ZeRO-3)
    all-gathers parameters in forward and backward and reduce-scatters gradients. DP peers sit one per TP group,
    so G // tp of them share a node."""
    per_node = max(1, hw.devices_per_node // tp)
    if fsdp:
        return 2 * collective_time("all_gather", grad_bytes, dp, per_node, hw, sw) + collective_time(
            "reduce_scatter", grad_bytes, dp, per_node, hw, sw
        )
    return collective_time("all_reduce", grad_bytes, dp, per_node, hw, sw)


def _dchag_reference() -> dict[str, Any]:
    """The D-CHAG paper's reported memory beside this memory model at the same settings (no FSDP sharding)."""
    setup = TrainingSetup(
        dtype_bytes=2,
        master_fp32=True,
        optimizer="adamw",
        fsdp=False,
        activation_checkpointing=False,
    )
    reported = np.full((len(DCHAG_REFERENCE), len(COMPARED_PLANS)), np.nan)
    modelled = np.full_like(reported, np.nan)
    S = DCHAG_SETTINGS  # noqa: N806
    for i, (_, D, L, tp, rep) in enumerate(DCHAG_REFERENCE):
        n = n_tokens(S["height"], S["width"], S["patch"])
        shape = LayerShape(
            N=n, D=D, L=L, batch=S["batch"], heads=S["heads"], patch=S["patch"], dtype=S["dtype"], groups=1
        )
        for si, plan in enumerate(COMPARED_PLANS):
            reported[i, si] = rep[plan]
            modelled[i, si] = sum(memory_breakdown(plan, shape, tp, 1, S["depth"], setup).values()) / 2**30
    note = (
        "reported: rank-0 max memory reserved on 64 GiB MI250X GCDs (../shared/notes/dchag.md); modelled: "
        "memory.py with bf16 + fp32 master + AdamW, no FSDP, no checkpointing, D inferred from the parameter count"
    )
    return {
        "reference_memory_reported": (("reference", "scheme"), reported, {"units": "GiB", "long_name": note}),
        "reference_memory_modelled": (("reference", "scheme"), modelled, {"units": "GiB", "long_name": note}),
        "reference": (
            "reference",
            [r[0] for r in DCHAG_REFERENCE],
            {"long_name": "model size reported by the D-CHAG paper"},
        ),
        "reference_embed_dim": (
            "reference",
            [r[1] for r in DCHAG_REFERENCE],
            {"units": "1", "long_name": "inferred D"},
        ),
    }

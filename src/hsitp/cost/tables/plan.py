"""``plan.nc``: what ``hsitp advise plan`` answers, over P, for the report's figure: per-rank peak memory and
tokens/s of one allocation, per hardware preset, dataset, plan and checkpointing policy (modelled)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from hsitp.cost.hardware import Hardware
from hsitp.cost.memory import CHECKPOINTING
from hsitp.cost.planner import GB, Inputs, candidates, divisors, price
from hsitp.cost.tables.common import COORD_ATTRS, common_attrs, hardware_list
from hsitp.data import registry
from hsitp.io import describe, variable
from hsitp.names import PLAN_NAMES
from hsitp.settings import CostSettings
from hsitp.shape import n_tokens


def plan_table(cost: CostSettings) -> xr.Dataset:
    """Every candidate of ``hsitp advise plan`` for one allocation (``cost.plan``: nodes, devices per node,
    presets, datasets, patch, g) with the model of ``cost`` (D, depth, heads, batch, dtype, master weights)."""
    pc, ad = cost.plan, cost.advise
    hws = hardware_list(pc.hardware)
    G, nodes, g = int(pc.devices_per_node), int(pc.nodes), int(pc.groups)  # noqa: N806
    Ps = divisors(nodes * G)  # noqa: N806
    names = list(pc.datasets)
    headroom = ad.headroom
    shape = (len(hws), len(names), len(PLAN_NAMES), len(Ps), len(CHECKPOINTING))
    a = {k: np.full(shape, np.nan) for k in ("peak", "tps", "comp", "comm", "ar")}
    a["excluded"] = np.full(shape, "", dtype=object)
    memory, usable = np.full(len(hws), np.nan), np.full(len(hws), np.nan)
    tokens = [
        n_tokens(registry.get(n).rows, registry.get(n).cols, int(pc.patch), cost.token_grid) for n in names
    ]
    for hi, hw in enumerate(hws):
        if hw.memory_bytes is None:
            raise ValueError(f"cost.plan.hardware: {hw.name} gives no device memory; use a GPU preset")
        memory[hi], usable[hi] = hw.memory_bytes, headroom.usable(hw.memory_bytes / GB)
        for di, name in enumerate(names):
            rows = _priced(cost, registry.get(name), tokens[di], hw, usable[hi])
            for r in rows:
                idx = (hi, di, PLAN_NAMES.index(r.plan), Ps.index(r.P), CHECKPOINTING.index(r.checkpointing))
                a["excluded"][idx] = r.excluded
                if not r.excluded:
                    a["peak"][idx], a["tps"][idx] = r.memory["peak"], r.tokens_per_s
                    a["comp"][idx], a["comm"][idx] = r.t_compute, r.t_comm_exposed
                    a["ar"][idx] = r.t_dp_allreduce
    ds = xr.Dataset(
        {
            **_plan_vars(a),
            "device_memory": variable("hardware", memory, "device memory of the preset", "B"),
            "usable_memory": variable("hardware", usable, "device memory less cost.advise.headroom", "B"),
            "N": variable("dataset", tokens, "tokens per scene at the patch"),
        },
        coords={
            "hardware": [hw.name for hw in hws],
            "dataset": names,
            "plan": list(PLAN_NAMES),
            "P": Ps,
            "checkpointing": list(CHECKPOINTING),
        },
        attrs=_plan_attrs(cost, hws, nodes, G, g),
    )
    return describe(ds, {**COORD_ATTRS, **_COORDS})


_COORDS = {
    "dataset": {"long_name": "registry dataset (its bands, grid and classes)"},
    "plan": {"long_name": "parallel plan (dense at P = 1)"},
    "checkpointing": {"long_name": "activation checkpointing policy"},
    "P": {"units": "1", "long_name": "tensor-parallel degree"},
}


def _priced(cost: CostSettings, spec: Any, N: int, hw: Hardware, usable: float) -> list[Any]:  # noqa: N803
    """Every candidate (plan, P, g, checkpointing) of one scene on one preset, priced (or excluded, with why)."""
    pc, ad = cost.plan, cost.advise
    G = int(pc.devices_per_node)  # noqa: N806
    x = Inputs(
        D=int(cost.embed_dim),
        depth=int(cost.depth),
        heads=int(cost.heads),
        mlp_ratio=int(cost.mlp_ratio),
        L=spec.bands,
        H=spec.rows,
        W=spec.cols,
        patch=int(pc.patch),
        N=N,
        batch=int(cost.batch),
        classes=spec.n_classes,
        dtype=cost.dtype,
        master_fp32=bool(cost.master_fp32),
        nodes=int(pc.nodes),
        devices_per_node=G,
        device_memory_gb=hw.memory_bytes / GB,
        groups=(int(pc.groups),),
    )
    rows = candidates(x)
    price(
        rows,
        x,
        hw.with_devices_per_node(G),
        cost.switches,
        usable=usable,
        overlap=float(cost.overlap),
        dp_overlap=float(ad.dp_overlap),
        device="cuda",
    )
    return rows


# The priced candidates' variables: name, the array it holds, units, long name.
_PRICED = (
    ("peak_memory", "peak", "B", "modelled per-rank peak (rank 0, allocated)"),
    ("tokens_per_s", "tps", "1/s", "modelled tokens/s of the whole allocation (DP replicas)"),
    ("t_compute", "comp", "s", "modelled compute per step"),
    ("t_comm_exposed", "comm", "s", "modelled exposed TP communication"),
    ("t_dp_allreduce", "ar", "s", "modelled gradient all-reduce of replicas"),
)


def _plan_vars(a: Mapping[str, np.ndarray]) -> dict[str, Any]:
    dims = ("hardware", "dataset", "plan", "P", "checkpointing")
    out: dict[str, Any] = {name: variable(dims, a[k], long, u) for name, k, u, long in _PRICED}
    out["excluded"] = (
        dims,
        a["excluded"].astype(str),
        {"long_name": "why the plan cannot split (empty: priced)"},
    )
    return out


def _plan_attrs(cost: CostSettings, hws: Sequence[Hardware], nodes: int, G: int, g: int) -> dict[str, Any]:  # noqa: N803
    pc, ad = cost.plan, cost.advise
    return {
        **common_attrs(cost, hws),
        "title": f"hsitp advise plan over P: {nodes} node(s) x {G} devices, D-CHAG g = {g}",
        "model": json.dumps(
            {k: getattr(cost, k) for k in ("embed_dim", "depth", "heads", "mlp_ratio", "batch")}
        ),
        "master_fp32": int(bool(cost.master_fp32)),
        "groups": g,
        "patch": int(pc.patch),
        "headroom": json.dumps(ad.headroom.model_dump()),
        "cuda_peak": "the CUDA-side peak has not been measured here: the memory model is checked against the "
        "CPU probe and fake-tensor estimates only",
    }

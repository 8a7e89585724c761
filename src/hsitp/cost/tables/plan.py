"""``plan.nc``: what ``hsitp advise plan`` answers, over P, for the report's figure: per-rank peak memory and
tokens/s of one allocation, per hardware preset, dataset, plan and checkpointing policy (modelled)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from hsitp.cost.memory import CHECKPOINTING
from hsitp.cost.planner import GB, Headroom, Inputs, candidates, price
from hsitp.cost.tables.common import COORD_ATTRS, common_attrs, cost_switches, hardware_list, n_tokens
from hsitp.data import registry
from hsitp.io import describe

PLAN_NAMES = ("dense", "tp", "dchag_l", "dchag_c", "token")


def plan_table(cost: Mapping[str, Any]) -> xr.Dataset:
    """Every candidate of ``hsitp advise plan`` for one allocation (``cost.plan``: nodes, devices per node,
    presets, datasets, patch, g) with the model of ``cost`` (D, depth, heads, batch, dtype, master weights)."""
    pc, ad = cost["plan"], cost["advise"]
    hws = hardware_list(pc["hardware"])
    G, nodes, g = int(pc["devices_per_node"]), int(pc["nodes"]), int(pc["groups"])  # noqa: N806
    Ps = [d for d in range(1, nodes * G + 1) if (nodes * G) % d == 0]  # noqa: N806
    names = list(pc["datasets"])
    headroom = Headroom(float(ad["headroom"]["fraction"]), float(ad["headroom"]["fixed_gb"]))
    shape = (len(hws), len(names), len(PLAN_NAMES), len(Ps), len(CHECKPOINTING))
    peak, tps = np.full(shape, np.nan), np.full(shape, np.nan)
    comp, comm, ar = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    excluded = np.full(shape, "", dtype=object)
    memory, usable = np.full(len(hws), np.nan), np.full(len(hws), np.nan)
    tokens = []
    for hi, hw in enumerate(hws):
        if hw.memory_bytes is None:
            raise ValueError(f"cost.plan.hardware: {hw.name} gives no device memory; use a GPU preset")
        memory[hi], usable[hi] = hw.memory_bytes, headroom.usable(hw.memory_bytes / GB)
        for di, name in enumerate(names):
            spec = registry.get(name)
            N = n_tokens(spec.rows, spec.cols, int(pc["patch"]), cost["token_grid"])  # noqa: N806
            if hi == 0:
                tokens.append(N)
            x = Inputs(
                D=int(cost["embed_dim"]),
                depth=int(cost["depth"]),
                heads=int(cost["heads"]),
                mlp_ratio=int(cost["mlp_ratio"]),
                L=spec.bands,
                H=spec.rows,
                W=spec.cols,
                patch=int(pc["patch"]),
                N=N,
                batch=int(cost["batch"]),
                classes=spec.n_classes,
                dtype=cost["dtype"],
                master_fp32=bool(cost["master_fp32"]),
                nodes=nodes,
                devices_per_node=G,
                device_memory_gb=hw.memory_bytes / GB,
                groups=(g,),
            )
            rows = candidates(x)
            price(
                rows,
                x,
                hw.with_devices_per_node(G),
                cost_switches(cost),
                usable=usable[hi],
                overlap=float(cost["overlap"]),
                dp_overlap=float(ad["dp_overlap"]),
                device="cuda",
            )
            for r in rows:
                idx = (hi, di, PLAN_NAMES.index(r.plan), Ps.index(r.P), CHECKPOINTING.index(r.checkpointing))
                excluded[idx] = r.excluded
                if not r.excluded:
                    peak[idx], tps[idx] = r.memory["peak"], r.tokens_per_s
                    comp[idx], comm[idx], ar[idx] = r.t_compute, r.t_comm_exposed, r.t_dp_allreduce
    dims = ("hardware", "dataset", "plan", "P", "checkpointing")
    ds = xr.Dataset(
        {
            "peak_memory": (
                dims,
                peak,
                {"units": "B", "long_name": "modelled per-rank peak (rank 0, allocated)"},
            ),
            "tokens_per_s": (
                dims,
                tps,
                {"units": "1/s", "long_name": "modelled tokens/s of the whole allocation (DP replicas)"},
            ),
            "t_compute": (dims, comp, {"units": "s", "long_name": "modelled compute per step"}),
            "t_comm_exposed": (dims, comm, {"units": "s", "long_name": "modelled exposed TP communication"}),
            "t_dp_allreduce": (
                dims,
                ar,
                {"units": "s", "long_name": "modelled gradient all-reduce of replicas"},
            ),
            "excluded": (
                dims,
                excluded.astype(str),
                {"long_name": "why the plan cannot split (empty: priced)"},
            ),
            "device_memory": ("hardware", memory, {"units": "B", "long_name": "device memory of the preset"}),
            "usable_memory": (
                "hardware",
                usable,
                {"units": "B", "long_name": "device memory less cost.advise.headroom"},
            ),
            "N": ("dataset", tokens, {"units": "1", "long_name": "tokens per scene at the patch"}),
        },
        coords={
            "hardware": [hw.name for hw in hws],
            "dataset": names,
            "plan": list(PLAN_NAMES),
            "P": Ps,
            "checkpointing": list(CHECKPOINTING),
        },
        attrs={
            **common_attrs(cost, hws),
            "title": f"hsitp advise plan over P: {nodes} node(s) x {G} devices, D-CHAG g = {g}",
            "model": json.dumps({k: cost[k] for k in ("embed_dim", "depth", "heads", "mlp_ratio", "batch")}),
            "master_fp32": int(bool(cost["master_fp32"])),
            "groups": g,
            "patch": int(pc["patch"]),
            "headroom": json.dumps(dict(ad["headroom"])),
            "cuda_peak": "the CUDA-side peak has not been measured here: the memory model is checked against the "
            "CPU probe and fake-tensor estimates only",
        },
    )
    return describe(
        ds,
        {
            **COORD_ATTRS,
            "dataset": {"long_name": "registry dataset (its bands, grid and classes)"},
            "plan": {"long_name": "parallel plan (dense at P = 1)"},
            "checkpointing": {"long_name": "activation checkpointing policy"},
            "P": {"units": "1", "long_name": "tensor-parallel degree"},
        },
    )

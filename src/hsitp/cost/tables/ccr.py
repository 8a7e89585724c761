"""``ccr.nc``: CCR and relative throughput, channel vs token vs 2-D, pure TP vs D-CHAG (paper §8.1, §8.2), with
the paper's quoted numbers beside the computed ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from hsitp.cost import paper, stated
from hsitp.cost.memory import memory_breakdown
from hsitp.cost.refined import BLOCK_SPLITS, model_cost
from hsitp.cost.tables.common import (
    COORD_ATTRS,
    block_costs,
    common_attrs,
    hardware_list,
    layer_shape,
    training_setup,
)
from hsitp.data import registry
from hsitp.io import describe, variable
from hsitp.names import COMPARED_PLANS, COST_MODELS, DCHAG_PLANS
from hsitp.settings import CostSettings
from hsitp.shape import n_tokens

LAYER_NAMES = ("ln1", "attn", "ln2", "mlp")
MEMORY_CHECKPOINTING = "none"  # scheme_memory's activation-checkpointing policy (one of memory.CHECKPOINTING)


def _cases(cost: CostSettings) -> list[tuple[str, str, int]]:
    cc = cost.ccr
    out = [(f"paper_N{n}", "paper", int(n)) for n in cc.tokens]
    for name in registry.names():
        spec = registry.get(name)
        out.append((name, "registry", n_tokens(spec.rows, spec.cols, int(cc.patch), cost.token_grid)))
    return out


def ccr_table(cost: CostSettings) -> xr.Dataset:
    """§8.1/§8.2 grid: C = D, N in the paper's cases and each dataset's real N at the ccr patch, P and hardware,
    under both models, with relative throughput, pure TP vs the D-CHAG plans, and the paper's quoted numbers."""
    cc = cost.ccr
    cases = _cases(cost)
    Ps = [int(p) for p in cc.parallel_degrees]
    hws = hardware_list(cc.hardware)
    gs = [int(g) for g in cc.groups]
    plans = _plan_grid(cost, cases, Ps, hws, gs)
    ds = xr.Dataset(
        {
            "N": variable("case", [c[2] for c in cases], "spatial tokens"),
            "case_source": (
                "case",
                [c[1] for c in cases],
                {"long_name": "paper (its N) or registry (real grid)"},
            ),
            **_block_vars(_block_grid(cost, cases, Ps, hws)),
            **_plan_vars(plans),
            **_quotes_for_ccr(cost, cases, Ps, gs, plans["memory"]),
        },
        coords={
            "case": [c[0] for c in cases],
            "P": Ps,
            "hardware": [hw.name for hw in hws],
            "split": list(BLOCK_SPLITS),
            "model": list(COST_MODELS),
            "layer": list(LAYER_NAMES),
            "axis": ["channel", "token"],
            "g": gs,
            "scheme": list(COMPARED_PLANS),  # netCDF dimension name kept (the plans compared)
        },
        attrs={
            **common_attrs(cost, hws),
            "title": "CCR and relative throughput, channel vs token vs 2-D, pure TP vs D-CHAG (paper 8.1, 8.2)",
            "embed_dim": int(cost.embed_dim),
            "bands": int(cost.bands),
            "heads": int(cost.heads),
            "depth": int(cost.depth),
            "batch": int(cost.batch),
            "patch": int(cc.patch),
            "stated_model": "CCR_channel = P F/(beta C), C = embed_dim; CCR_token = P F/(beta N); 2-D = sqrt of "
            "their product; throughput P/(1+CCR); D-CHAG CCR/g",
        },
    )
    return describe(ds, {**COORD_ATTRS, **_ATTRS})


BASE = ("case", "P", "hardware")  # the dims every point of the grid has


def _block_grid(
    cost: CostSettings, cases: Sequence[tuple[str, str, int]], Ps: Sequence[int], hws: Sequence[Any]
) -> dict[str, np.ndarray]:
    """One transformer block per (case, P, hardware, split): both models' CCR and throughput, the worst layer,
    each layer's numbers and the 2-D mesh chosen."""
    nC, nP, nH, nS = len(cases), len(Ps), len(hws), len(BLOCK_SPLITS)
    a = {
        "ccr": np.full((nC, nP, nH, nS, 2), np.nan),
        "tput": np.full((nC, nP, nH, nS, 2), np.nan),
        "worst": np.full((nC, nP, nH, nS), np.nan),
        "mesh": np.full((nC, nP, nH, 2), -1, dtype=int),
        **{
            k: np.full((nC, nP, nH, nS, len(LAYER_NAMES)), np.nan)
            for k in ("layer_ccr", "layer_comp", "layer_comm")
        },
    }
    for i, (_, _, N) in enumerate(cases):
        shape = layer_shape(cost, N=N)
        for q, P in enumerate(Ps):
            for h, hw in enumerate(hws):
                blocks = block_costs(shape, P, hw, cost)
                for s_i, split in enumerate(BLOCK_SPLITS):
                    b = blocks[split]
                    a["ccr"][i, q, h, s_i] = (b.ccr_stated, b.ccr)
                    a["tput"][i, q, h, s_i] = (b.relative_throughput_stated, b.relative_throughput)
                    a["worst"][i, q, h, s_i] = b.ccr_worst_layer
                    for li, layer in enumerate(b.layers):
                        a["layer_ccr"][i, q, h, s_i, li] = layer.ccr
                        a["layer_comp"][i, q, h, s_i, li] = layer.t_comp
                        a["layer_comm"][i, q, h, s_i, li] = layer.t_comm
                    if split == "2d" and b.layers:
                        a["mesh"][i, q, h] = b.mesh
    return a


def _plan_grid(
    cost: CostSettings,
    cases: Sequence[tuple[str, str, int]],
    Ps: Sequence[int],
    hws: Sequence[Any],
    gs: Sequence[int],
) -> dict[str, np.ndarray]:
    """The whole model per compared plan (pure TP, D-CHAG) and g: CCR and throughput per (case, P, hardware) under
    both models, and per-device training memory per (case, P)."""
    nC, nP, nH, nS = len(cases), len(Ps), len(hws), len(COMPARED_PLANS)
    depth = int(cost.depth)
    sw = cost.switches
    kw = {"overlap": float(cost.overlap), "grad_accumulation": int(cost.grad_accumulation)}
    setup = training_setup(cost)  # no scale: activation checkpointing off (see _plan_vars' scheme_memory)
    a = {
        "ccr": np.full((nC, nP, nH, len(gs), nS, 2), np.nan),
        "tput": np.full((nC, nP, nH, len(gs), nS, 2), np.nan),
        "memory": np.full((nC, nP, len(gs), nS), np.nan),
    }
    for i, (_, _, N) in enumerate(cases):
        for q, P in enumerate(Ps):
            for gi, g in enumerate(gs):
                gshape = layer_shape(cost, N=N, groups=g)
                for si, plan in enumerate(COMPARED_PLANS):
                    a["memory"][i, q, gi, si] = sum(
                        memory_breakdown(plan, gshape, P, 1, depth, setup).values()
                    )
                    for h, hw in enumerate(hws):
                        m = model_cost(plan, gshape, P, hw, depth, sw, **kw)
                        a["ccr"][i, q, h, gi, si] = (m.ccr_stated, m.ccr)
                        a["tput"][i, q, h, gi, si] = (m.relative_throughput_stated, m.relative_throughput)
    return a


def _block_vars(a: Mapping[str, np.ndarray]) -> dict[str, Any]:
    return {
        "ccr": variable((*BASE, "split", "model"), a["ccr"], "block CCR (refined: sum T_comm / sum T_comp)"),
        "relative_throughput": variable(
            (*BASE, "split", "model"),
            a["tput"],
            "throughput of P devices relative to one (stated: P/(1+CCR))",
        ),
        "ccr_worst_layer": variable((*BASE, "split"), a["worst"], "refined: CCR of the worst layer"),
        "mesh": variable((*BASE, "axis"), a["mesh"], "2-D split (P_c, P_t) chosen by the refined model"),
        "layer_ccr": variable((*BASE, "split", "layer"), a["layer_ccr"], "refined per-layer CCR"),
        "layer_t_comp": variable((*BASE, "split", "layer"), a["layer_comp"], "refined compute", "s"),
        "layer_t_comm": variable((*BASE, "split", "layer"), a["layer_comm"], "refined comm", "s"),
    }


def _plan_vars(a: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The compared plans' variables (netCDF names kept: scheme_*, along dimension ``scheme``)."""
    return {
        "scheme_ccr": variable(
            (*BASE, "g", "scheme", "model"),
            a["ccr"],
            "whole-model CCR (tokenisation + aggregation + blocks); stated D-CHAG = CCR/g",
        ),
        "scheme_relative_throughput": variable(
            (*BASE, "g", "scheme", "model"), a["tput"], "samples/s relative to one device running pure TP"
        ),
        "scheme_memory": variable(
            ("case", "P", "g", "scheme"),
            a["memory"],
            "refined per-device training memory (no data parallelism)",
            "B",
            # the policy its memory_breakdown priced (training_setup without a scale checkpoints nothing)
            activation_checkpointing=MEMORY_CHECKPOINTING,
        ),
    }


# Units of the counts and ratios, and what each coordinate and quote variable holds. Every quoted number of the
# paper is dimensionless (a CCR, a throughput, a fraction or a token count): see its quote_statement.
_ATTRS: dict[str, dict[str, Any]] = {
    "case": {
        "long_name": "the paper's N values (paper_N...) and each registry scene at the configured patch"
    },
    "layer": {"long_name": "layer of one transformer block"},
    "axis": {"long_name": "axis of the 2-D mesh (P_c channel, P_t token)"},
    "g": {"units": "1", "long_name": "D-CHAG groups"},
    "quote": {"long_name": "numbered statement of the paper checked against the model"},
    "quote_section": {"long_name": "section of the paper"},
    "quote_statement": {"long_name": "the paper's statement"},
    "quoted_low": {"units": "1", "long_name": "lower end of the quoted value (NaN for a rule)"},
    "quoted_high": {"units": "1", "long_name": "upper end of the quoted value (NaN for a rule)"},
    "quoted_text": {"long_name": "the quoted value as text"},
    "computed": {"units": "1", "long_name": "the model's value of the quoted quantity"},
    "computed_text": {"long_name": "the model's value as text"},
    "quote_consistent": {
        "long_name": "does the computed value fall in the quoted range (or the rule hold)?",
        "flag_values": [0, 1],
        "flag_meanings": "inconsistent consistent",
    },
    "quote_how": {"long_name": "how the computed value was obtained"},
}


def _quotes_for_ccr(
    cost: CostSettings,
    cases: list[tuple[str, str, int]],
    Ps: list[int],
    gs: list[int],
    plan_mem: np.ndarray,
) -> dict[str, Any]:
    quotes = list(stated.paper_quotes())
    case_n = {c[0]: c[2] for c in cases}
    for name, paper_n, paper_grid in paper.PAPER_GRIDS:
        if name in case_n:
            spec = registry.get(name)
            quotes.append(
                stated.Quote(
                    f"grid_{name}",
                    "2.1",
                    f"{spec.title}: {paper_grid} at p = 8 gives N ≈ {paper_n}",
                    paper_n * 0.95,
                    paper_n * 1.05,
                    float(case_n[name]),
                    how=f"registry grid {spec.rows}x{spec.cols}: floor(H/p)*floor(W/p) at p = {cost.ccr.patch}",
                )
            )
    n_dc, P_dc, g_dc = paper.PAPER_DCHAG["N"], paper.PAPER_DCHAG["P"], paper.PAPER_DCHAG["g"]
    case = f"paper_N{n_dc}"
    if case in case_n and P_dc in Ps and g_dc in gs:
        i, q, gi = [c[0] for c in cases].index(case), Ps.index(P_dc), gs.index(g_dc)
        tp = plan_mem[i, q, gi, COMPARED_PLANS.index("tp")]
        for plan in DCHAG_PLANS:
            saving = 1.0 - plan_mem[i, q, gi, COMPARED_PLANS.index(plan)] / tp
            quotes.append(
                stated.Quote(
                    f"dchag_memory_saving_{plan}",
                    "8.2",
                    f"D-CHAG lowers per-device memory by about 15-25 % (N = {n_dc}, P = {P_dc}, g = {g_dc}; "
                    f"refined memory model, {plan})",
                    0.15,
                    0.25,
                    float(saving),
                    how="1 - M_dchag / M_tp, refined memory model (memory.py), config embed_dim/bands/depth/batch",
                )
            )
    return {
        "quote_section": ("quote", [x.section for x in quotes]),
        "quote_statement": ("quote", [x.statement for x in quotes]),
        "quoted_low": ("quote", [x.quoted_low for x in quotes]),
        "quoted_high": ("quote", [x.quoted_high for x in quotes]),
        "quoted_text": ("quote", [x.quoted_text for x in quotes]),
        "computed": ("quote", [x.computed for x in quotes]),
        "computed_text": ("quote", [x.computed_text for x in quotes]),
        "quote_consistent": ("quote", [int(x.consistent) for x in quotes]),
        "quote_how": ("quote", [x.how for x in quotes]),
        "quote": ("quote", [x.key for x in quotes]),
    }

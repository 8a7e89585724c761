"""``ccr.nc``: CCR and relative throughput, channel vs token vs 2-D, pure TP vs D-CHAG (paper §8.1, §8.2), with
the paper's quoted numbers beside the computed ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from hsitp.cost import stated
from hsitp.cost.memory import memory_breakdown
from hsitp.cost.refined import BLOCK_SPLITS, SCHEMES, model_cost
from hsitp.cost.tables.common import (
    COORD_ATTRS,
    block_costs,
    common_attrs,
    cost_switches,
    hardware_list,
    layer_shape,
    n_tokens,
    training_setup,
)
from hsitp.data import registry
from hsitp.io import describe
from hsitp.names import COST_MODELS

LAYER_NAMES = ("ln1", "attn", "ln2", "mlp")


def _cases(cost: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    cc = cost["ccr"]
    out = [(f"paper_N{n}", "paper", int(n)) for n in cc["tokens"]]
    for name in registry.names():
        spec = registry.get(name)
        out.append((name, "registry", n_tokens(spec.rows, spec.cols, int(cc["patch"]), cost["token_grid"])))
    return out


def ccr_table(cost: Mapping[str, Any]) -> xr.Dataset:
    """§8.1/§8.2 grid: C = D, N in the paper's cases and each dataset's real N at the ccr patch, P and hardware,
    under both models, with relative throughput, the D-CHAG schemes, and the paper's quoted numbers."""
    cc = cost["ccr"]
    cases = _cases(cost)
    Ps = [int(p) for p in cc["parallel_degrees"]]
    hws = hardware_list(cc["hardware"])
    gs = [int(g) for g in cc["groups"]]
    depth = int(cost["depth"])
    sw = cost_switches(cost)
    kw = {"overlap": float(cost["overlap"]), "grad_accumulation": int(cost["grad_accumulation"])}
    nC, nP, nH = len(cases), len(Ps), len(hws)
    ccr = np.full((nC, nP, nH, len(BLOCK_SPLITS), 2), np.nan)
    tput = np.full_like(ccr, np.nan)
    worst = np.full((nC, nP, nH, len(BLOCK_SPLITS)), np.nan)
    mesh = np.full((nC, nP, nH, 2), -1, dtype=int)
    layer_ccr = np.full((nC, nP, nH, len(BLOCK_SPLITS), len(LAYER_NAMES)), np.nan)
    layer_comp = np.full_like(layer_ccr, np.nan)
    layer_comm = np.full_like(layer_ccr, np.nan)
    sch_ccr = np.full((nC, nP, nH, len(gs), len(SCHEMES), 2), np.nan)
    sch_tput = np.full_like(sch_ccr, np.nan)
    sch_mem = np.full((nC, nP, len(gs), len(SCHEMES)), np.nan)
    setup = training_setup(cost)
    for i, (_, _, N) in enumerate(cases):
        shape = layer_shape(cost, N=N)
        for q, P in enumerate(Ps):
            for h, hw in enumerate(hws):
                blocks = block_costs(shape, P, hw, cost)
                for s_i, split in enumerate(BLOCK_SPLITS):
                    b = blocks[split]
                    ccr[i, q, h, s_i] = (b.ccr_stated, b.ccr)
                    tput[i, q, h, s_i] = (b.relative_throughput_stated, b.relative_throughput)
                    worst[i, q, h, s_i] = b.ccr_worst_layer
                    for li, layer in enumerate(b.layers):
                        layer_ccr[i, q, h, s_i, li] = layer.ccr
                        layer_comp[i, q, h, s_i, li] = layer.t_comp
                        layer_comm[i, q, h, s_i, li] = layer.t_comm
                    if split == "2d" and b.layers:
                        mesh[i, q, h] = b.mesh
                for gi, g in enumerate(gs):
                    gshape = layer_shape(cost, N=N, groups=g)
                    for si, scheme in enumerate(SCHEMES):
                        m = model_cost(scheme, gshape, P, hw, depth, sw, **kw)
                        sch_ccr[i, q, h, gi, si] = (m.ccr_stated, m.ccr)
                        sch_tput[i, q, h, gi, si] = (m.relative_throughput_stated, m.relative_throughput)
            for gi, g in enumerate(gs):
                gshape = layer_shape(cost, N=N, groups=g)
                for si, scheme in enumerate(SCHEMES):
                    sch_mem[i, q, gi, si] = sum(memory_breakdown(scheme, gshape, P, 1, depth, setup).values())
    quotes = _quotes_for_ccr(cost, cases, Ps, gs, sch_mem)
    base = ("case", "P", "hardware")
    ds = xr.Dataset(
        {
            "N": ("case", [c[2] for c in cases], {"long_name": "spatial tokens"}),
            "case_source": (
                "case",
                [c[1] for c in cases],
                {"long_name": "paper (its N) or registry (real grid)"},
            ),
            "ccr": (
                (*base, "split", "model"),
                ccr,
                {"long_name": "block CCR (refined: sum T_comm / sum T_comp)"},
            ),
            "relative_throughput": (
                (*base, "split", "model"),
                tput,
                {"long_name": "throughput of P devices relative to one (stated: P/(1+CCR))"},
            ),
            "ccr_worst_layer": ((*base, "split"), worst, {"long_name": "refined: CCR of the worst layer"}),
            "mesh": (
                (*base, "axis"),
                mesh,
                {"long_name": "2-D split (P_c, P_t) chosen by the refined model"},
            ),
            "layer_ccr": ((*base, "split", "layer"), layer_ccr, {"long_name": "refined per-layer CCR"}),
            "layer_t_comp": (
                (*base, "split", "layer"),
                layer_comp,
                {"units": "s", "long_name": "refined compute"},
            ),
            "layer_t_comm": (
                (*base, "split", "layer"),
                layer_comm,
                {"units": "s", "long_name": "refined comm"},
            ),
            "scheme_ccr": (
                (*base, "g", "scheme", "model"),
                sch_ccr,
                {"long_name": "whole-model CCR (tokenisation + aggregation + blocks); stated D-CHAG = CCR/g"},
            ),
            "scheme_relative_throughput": (
                (*base, "g", "scheme", "model"),
                sch_tput,
                {"long_name": "samples/s relative to one device running pure TP"},
            ),
            "scheme_memory": (
                ("case", "P", "g", "scheme"),
                sch_mem,
                {"units": "B", "long_name": "refined per-device training memory (no data parallelism)"},
            ),
            **quotes,
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
            "scheme": list(SCHEMES),
        },
        attrs={
            **common_attrs(cost, hws),
            "title": "CCR and relative throughput, channel vs token vs 2-D, pure TP vs D-CHAG (paper 8.1, 8.2)",
            "embed_dim": int(cost["embed_dim"]),
            "bands": int(cost["bands"]),
            "heads": int(cost["heads"]),
            "depth": depth,
            "batch": int(cost["batch"]),
            "patch": int(cc["patch"]),
            "stated_model": "CCR_channel = P F/(beta C), C = embed_dim; CCR_token = P F/(beta N); 2-D = sqrt of "
            "their product; throughput P/(1+CCR); D-CHAG CCR/g",
        },
    )
    return describe(ds, {**COORD_ATTRS, **_ATTRS})


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
    "N": {"units": "1"},
    "ccr": {"units": "1"},
    "relative_throughput": {"units": "1"},
    "ccr_worst_layer": {"units": "1"},
    "mesh": {"units": "1"},
    "layer_ccr": {"units": "1"},
    "scheme_ccr": {"units": "1"},
    "scheme_relative_throughput": {"units": "1"},
    "scheme_memory": {"units": "B"},
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
    cost: Mapping[str, Any],
    cases: list[tuple[str, str, int]],
    Ps: list[int],
    gs: list[int],
    sch_mem: np.ndarray,
) -> dict[str, Any]:
    quotes = list(stated.paper_quotes())
    case_n = {c[0]: c[2] for c in cases}
    for name, paper_n, paper_grid in (
        ("indian_pines", 324, "145x145"),
        ("pavia_university", 5776, "610x610"),
    ):
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
                    how=f"registry grid {spec.rows}x{spec.cols}: floor(H/p)*floor(W/p) at p = {cost['ccr']['patch']}",
                )
            )
    n_dc, P_dc, g_dc = stated.PAPER_DCHAG["N"], stated.PAPER_DCHAG["P"], stated.PAPER_DCHAG["g"]
    case = f"paper_N{n_dc}"
    if case in case_n and P_dc in Ps and g_dc in gs:
        i, q, gi = [c[0] for c in cases].index(case), Ps.index(P_dc), gs.index(g_dc)
        tp = sch_mem[i, q, gi, SCHEMES.index("tp")]
        for scheme in ("dchag_l", "dchag_c"):
            saving = 1.0 - sch_mem[i, q, gi, SCHEMES.index(scheme)] / tp
            quotes.append(
                stated.Quote(
                    f"dchag_memory_saving_{scheme}",
                    "8.2",
                    f"D-CHAG lowers per-device memory by about 15-25 % (N = {n_dc}, P = {P_dc}, g = {g_dc}; "
                    f"refined memory model, {scheme})",
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

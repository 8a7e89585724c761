"""``boundary.nc``: the decision boundary over ρ = C/N and P·F/β (paper §6, §10.1), stated and refined, with
the registry datasets and hardware presets as points on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from hsitp.cost import stated
from hsitp.cost.hardware import Hardware, get_hardware
from hsitp.cost.refined import BLOCK_SPLITS
from hsitp.cost.tables.common import (
    COORD_ATTRS,
    block_costs,
    common_attrs,
    hardware_list,
    layer_shape,
)
from hsitp.data import registry
from hsitp.io import describe, variable
from hsitp.settings import CostSettings
from hsitp.shape import n_tokens

REGIONS = ("data_parallel", "channel", "token", "2d")
_FLAGS = {"flag_values": list(range(len(REGIONS))), "flag_meanings": " ".join(REGIONS)}


def _region(values: Mapping[str, float]) -> int:
    """Region code: the lowest-CCR split if its CCR < 1 (TP can be compute-bound, §6.2), else data parallel."""
    finite = {k: v for k, v in values.items() if np.isfinite(v)}
    if not finite or min(finite.values()) >= 1.0:
        return 0
    return REGIONS.index(min(finite, key=finite.get))


def boundary_table(cost: CostSettings) -> xr.Dataset:
    """Decision boundary over (ρ, P·F/β) for each D: stated regions from the formulas, refined regions with P, F,
    α from a preset and β = P·F / threshold; plus the datasets and presets as points to place on it."""
    bc = cost.boundary
    P = int(bc.P)
    hw = get_hardware(bc.hardware)
    rhos = np.logspace(np.log10(bc.rho_range[0]), np.log10(bc.rho_range[1]), int(bc.points))
    thrs = np.logspace(np.log10(bc.threshold_range[0]), np.log10(bc.threshold_range[1]), int(bc.points))
    Ds = [int(d) for d in bc.embed_dims]
    ds = xr.Dataset(
        {**_boundary_grid(cost, P, hw, Ds, rhos, thrs), **_boundary_points(cost, P)},
        coords={"D": Ds, "rho": rhos, "threshold": thrs, "split": list(BLOCK_SPLITS)},
        attrs={
            **common_attrs(cost, [hw]),
            "title": "decision boundary over rho = C/N and P F/beta (paper 6, 10.1)",
            "rule": "region = split with the lowest CCR if that CCR < 1, else data_parallel (paper 6.2, 10.1)",
            "refined_P": P,
            "refined_hardware": hw.name,
            "refined_beta": "beta_intra = beta_inter = P * F / threshold (alpha and F from the preset)",
        },
    )
    return describe(ds, {**COORD_ATTRS, **_ATTRS})


def _boundary_grid(
    cost: CostSettings, P: int, hw: Hardware, Ds: list[int], rhos: np.ndarray, thrs: np.ndarray
) -> dict[str, Any]:
    """Both models' CCRs and regions at every (D, ρ, threshold): N = round(D / ρ), β = P·F / threshold."""
    cs = np.empty((len(Ds), len(rhos), len(thrs)))
    ts = np.empty_like(cs)
    region_s = np.zeros(cs.shape, dtype=np.int8)
    ref = np.full((len(Ds), len(rhos), len(thrs), len(BLOCK_SPLITS)), np.nan)
    region_r = np.zeros(cs.shape, dtype=np.int8)
    Ns = np.zeros((len(Ds), len(rhos)), dtype=int)
    for di, D in enumerate(Ds):
        for ri, r in enumerate(rhos):
            N = max(1, round(D / r))
            Ns[di, ri] = N
            shape = layer_shape(cost, N=N, D=D)
            for ti, thr in enumerate(thrs):
                cs[di, ri, ti] = thr / D
                ts[di, ri, ti] = thr / N
                region_s[di, ri, ti] = _region({"channel": thr / D, "token": thr / N})
                costs = block_costs(shape, P, _with_beta(hw, P * hw.flops / thr), cost)
                vals = {split: costs[split].ccr for split in BLOCK_SPLITS}
                ref[di, ri, ti] = list(vals.values())
                region_r[di, ri, ti] = _region(vals)
    grid = ("D", "rho", "threshold")
    return {
        "N": variable(("D", "rho"), Ns, "tokens at this rho: round(D / rho)"),
        "ccr_channel_stated": variable(grid, cs, "P F/(beta C_in), C_in = D"),
        "ccr_token_stated": variable(grid, ts, "P F/(beta N)"),
        "region_stated": (grid, region_s, {"long_name": "stated decision", **_FLAGS}),
        "ccr_refined": variable((*grid, "split"), ref, "refined block CCR"),
        "region_refined": (grid, region_r, {"long_name": "refined decision", **_FLAGS}),
    }


_ATTRS: dict[str, dict[str, Any]] = {
    "rho": {"units": "1", "long_name": "rho = C / N (C = D)"},
    "threshold": {"units": "1", "long_name": "stated scale threshold P F / beta"},
}


def _with_beta(hw: Hardware, beta: float) -> Hardware:
    """``hw`` with one bandwidth everywhere (effective β), for sweeping the threshold P·F/β."""
    return dataclasses.replace(
        hw,
        beta_intra=beta,
        beta_inter=beta,
        comm_efficiency=1.0,
        collective_beta={c: beta for c in hw.collective_beta} if hw.collective_beta else hw.collective_beta,
    )


def _boundary_points(cost: CostSettings, P: int) -> dict[str, Any]:
    """Registry datasets at the boundary patch (C = each D) × hardware presets at P, as (ρ, P·F/β) points."""
    bc = cost.boundary
    hws = hardware_list(bc.point_hardware)
    labels, rho_v, thr_v, Dv = [], [], [], []
    for D in bc.embed_dims:
        for name in registry.names():
            spec = registry.get(name)
            N = n_tokens(spec.rows, spec.cols, int(bc.patch), cost.token_grid)
            for hw in hws:
                labels.append(f"{name}|{hw.name}|D={D}")
                rho_v.append(D / N)
                thr_v.append(float(stated.threshold(P, hw.flops, hw.beta_for(P))))
                Dv.append(int(D))
    return {
        "point_label": (
            "point",
            labels,
            {"long_name": "dataset|hardware|D of a point placed on the boundary"},
        ),
        "point_rho": variable("point", rho_v, "rho = D / N of the point"),
        "point_threshold": variable("point", thr_v, "P F / beta of the point's hardware"),
        "point_D": variable("point", Dv, "embedding dimension of the point"),
    }

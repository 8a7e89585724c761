"""The cost-model tables: grid sizes from the registry, stated values, quotes, regions, infeasible points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from nc_checks import assert_described

from hsitp.config import load_config
from hsitp.cost import tables
from hsitp.cost.tables.boundary import REGIONS
from hsitp.data import registry
from hsitp.io import provenance, read_netcdf, write_netcdf
from hsitp.settings import CostSettings
from hsitp.shape import n_tokens


@pytest.fixture(scope="module")
def cost() -> CostSettings:
    """Schema defaults (not config/config.yaml), trimmed to keep the suite fast."""
    c = load_config(
        [], {"cost": {"rho": {"hardware": ["paper-intra", "h100-nvlink-ib"]}, "boundary": {"points": 9}}}
    )
    return CostSettings.from_config(c)


@pytest.fixture(scope="module")
def ccr(cost: CostSettings) -> xr.Dataset:
    return tables.ccr_table(cost)


def test_n_tokens_crop_and_pad():
    """Catches the wrong grid rule: Indian Pines 145//8 = 18 → 324 (the paper's number); pad rounds up."""
    assert n_tokens(145, 145, 8) == 324
    assert n_tokens(610, 340, 8) == 76 * 42
    assert n_tokens(145, 145, 8, "pad") == 19 * 19
    with pytest.raises(ValueError, match="crop"):
        n_tokens(145, 145, 8, "tile")


def test_rho_table_uses_registry_grids(cost: CostSettings):
    """Catches grids taken from anywhere but the registry, or ρ not equal to C/N."""
    ds = tables.rho_table(cost)
    assert list(ds["dataset"].values) == registry.names()
    for name in registry.names():
        spec = registry.get(name)
        for p in ds["patch"].values:
            assert int(ds["N"].sel(dataset=name, patch=p)) == (spec.rows // p) * (spec.cols // p)
        assert int(ds["C"].sel(dataset=name, c_def="bands")) == spec.bands
    xr.testing.assert_allclose(ds["rho"], (ds["C"] / ds["N"]).transpose(*ds["rho"].dims))
    assert int(ds["C"].sel(dataset="indian_pines", c_def="embed")) == 256
    # The stated choice is the formula's: channel when C > N (Salinas-A, 10x10 tokens at p = 8).
    st = ds["lower_split"].sel(model="stated", patch=8, hardware="paper-intra", P=4)
    assert st.sel(dataset="salinas_a", c_def="bands") == "channel"
    assert st.sel(dataset="pavia_university", c_def="bands") == "token"
    assert set(np.unique(ds["lower_split"].sel(model="refined").values)) <= {"channel", "token", "2d", "tie"}


def test_ccr_table_stated_values(ccr: xr.Dataset):
    """Catches a stated grid that no longer reproduces the paper's parameters: C = 256, P = 8, intra 31.25 and
    8000/324, inter 375; throughput P/(1+CCR); real grids from the registry (Pavia University N = 3192)."""
    st = ccr["ccr"].sel(model="stated", P=8)
    assert float(st.sel(case="paper_N324", hardware="paper-intra", split="channel")) == pytest.approx(31.25)
    assert float(st.sel(case="paper_N324", hardware="paper-intra", split="token")) == pytest.approx(
        8000 / 324
    )
    assert float(st.sel(case="paper_N5776", hardware="paper-inter", split="channel")) == pytest.approx(375.0)
    tput = ccr["relative_throughput"].sel(model="stated", P=8, case="paper_N324", hardware="paper-intra")
    assert float(tput.sel(split="channel")) == pytest.approx(8 / 32.25)
    assert int(ccr["N"].sel(case="indian_pines")) == 324
    assert int(ccr["N"].sel(case="pavia_university")) == 3192
    dchag = ccr["scheme_ccr"].sel(model="stated", P=8, g=8, case="paper_N5776", hardware="paper-inter")
    assert float(dchag.sel(scheme="dchag_l")) == pytest.approx(375.0 / 8)
    refined = ccr["ccr"].sel(model="refined")
    assert bool(np.all(np.isfinite(refined.sel(split=["channel", "token"]))))


def test_ccr_table_carries_quotes(ccr: xr.Dataset):
    """Catches the paper's quoted numbers going missing from the table the claim audit reads."""
    keys = set(ccr["quote"].values)
    assert {
        "threshold_p8_intra",
        "dchag_ccr_tp_inter",
        "grid_pavia_university",
        "dchag_memory_saving_dchag_l",
    } <= keys
    pavia = ccr.sel(quote="grid_pavia_university")
    assert float(pavia["computed"]) == 3192 and int(pavia["quote_consistent"]) == 0
    assert float(ccr.sel(quote="grid_indian_pines")["computed"]) == 324
    assert 0.0 < float(ccr.sel(quote="dchag_memory_saving_dchag_l")["computed"]) < 1.0


def test_boundary_regions(cost: CostSettings):
    """Catches a boundary that ignores the §6.2 rule: below threshold the lower-CCR split wins; where P·F/β
    exceeds both C and N every split is communication-bound (data parallel, code 0)."""
    ds = tables.boundary_table(cost)
    D = int(ds["D"][0])
    reg = ds["region_stated"].sel(D=D)
    lowest_thr = ds["threshold"].values[0]  # 10: both CCRs below 1 except at extreme rho
    assert lowest_thr < D
    rho_lo, rho_hi = ds["rho"].values[0], ds["rho"].values[-1]  # N = 25600 (token) and N = 3 (channel)
    assert int(reg.sel(rho=rho_lo, threshold=lowest_thr)) == REGIONS.index("token")
    assert int(reg.sel(rho=rho_hi, threshold=lowest_thr)) == REGIONS.index("channel")
    assert int(reg.sel(rho=1.0, threshold=ds["threshold"].values[-1], method="nearest")) == 0
    assert ds.sizes["point"] == len(registry.names()) * len(cost.boundary.point_hardware)


def test_scale_table_infeasible_points(cost: CostSettings):
    """Catches infeasible points reported as numbers: pure TP of the 6.6B-class default on one 80 GB GPU does
    not fit, so its throughput is NaN with a reason; a feasible point has a finite throughput."""
    ds = tables.scale_table(cost)
    pt = ds.sel(hardware="h100-nvlink-ib", tp=1, scheme="tp")
    assert int(pt["feasible"]) == 0 and "GiB" in str(pt["reason"].values)
    assert np.isnan(float(pt["relative_throughput"]))
    ok = ds.sel(hardware="h100-nvlink-ib", tp=8, scheme="dchag_l")
    assert int(ok["feasible"]) == 1 and np.isfinite(float(ok["relative_throughput"]))
    np.testing.assert_allclose(ds["memory"].sum(["part", "kind"]), ds["memory_total"])
    # D-CHAG never needs more tokenisation memory than pure TP.
    tok = ds["memory"].sel(part="tokenisation", kind="activations")
    assert bool(np.all(tok.sel(scheme="dchag_l") <= tok.sel(scheme="tp")))


def test_tables_round_trip_netcdf(ccr: xr.Dataset, tmp_path: Path):
    """Catches a table netCDF cannot store (object strings, bools) — compared by value after reading back."""
    path = write_netcdf(ccr, tmp_path / "ccr.nc", kind="model_ccr", prov=provenance(config={}))
    back = read_netcdf(path, kind="model_ccr")
    xr.testing.assert_allclose(back["ccr"], ccr["ccr"])
    assert list(back["quote"].values) == list(ccr["quote"].values)


@pytest.mark.parametrize("name", sorted(tables.TABLES))
def test_every_table_describes_its_variables(cost: CostSettings, name: str):
    """Catches a cost table whose ratios say nothing (or "s"), a variable or coordinate without units or long
    name, or a table without a descriptive title."""
    assert_described(tables.TABLES[name](cost), f"cost_{name}")


def test_plan_table_is_the_planner_over_p(cost: CostSettings):
    """Catches the report's plan figure drifting from `hsitp advise plan`: plan.nc's peak and tokens/s at the
    recommended row equal the planner's for the same preset and dataset; dense only at P = 1, every other plan
    only above it; the §7.4 model on Indian Pines is N = 324 and fits every GPU preset."""
    import json

    from hsitp.cli import main

    ds = tables.plan_table(cost)
    assert list(ds["P"].values) == [1, 2, 4, 8] and int(ds["N"].sel(dataset="indian_pines")) == 324
    assert np.isfinite(ds["peak_memory"].sel(plan="dense", P=1)).all()
    assert np.isnan(ds["peak_memory"].sel(plan="dense", P=[2, 4, 8])).all()
    assert np.isnan(ds["peak_memory"].sel(plan="tp", P=1)).all()
    assert (ds["peak_memory"] < ds["usable_memory"]).sum() == np.isfinite(ds["peak_memory"]).sum()
    assert "not been measured" in ds.attrs["cuda_peak"]
    import contextlib
    import io

    buf = io.StringIO()
    argv = ["advise", "plan", "--dataset", "indian_pines", "--hardware", "mi250x-frontier", "--groups", "4"]
    with contextlib.redirect_stdout(buf):
        assert main([*argv, "--config-json", "{}", "--json"]) == 0
    rec = json.loads(buf.getvalue())["recommendation"]
    at = {"hardware": "mi250x-frontier", "dataset": "indian_pines", "plan": rec["plan"], "P": rec["P"]}
    cell = ds.sel({**at, "checkpointing": rec["checkpointing"]})
    assert float(cell["peak_memory"]) == pytest.approx(rec["memory_bytes"]["peak"])
    assert float(cell["tokens_per_s"]) == pytest.approx(rec["tokens_per_s"])

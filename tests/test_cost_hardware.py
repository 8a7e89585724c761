"""Hardware presets, the calibration schema and ``measured:PATH``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from nc_checks import described

from hsitp.bench.calibrate import calibration_dataset
from hsitp.config import load_schema
from hsitp.contracts import CALIBRATION, COMPUTE_MODEL_VARS, CalibrationError, validate_calibration
from hsitp.cost.hardware import PRESETS, UnknownHardwareError, get_hardware
from hsitp.cost.refined import op_cost
from hsitp.io import ResultFileError, provenance, write_netcdf
from hsitp.shape import LayerShape

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "calibration_small.nc"


def test_presets_are_sourced_and_sane():
    """Catches a preset without a source or with an impossible number (efficiency > 1, inter faster than intra)."""
    for hw in PRESETS.values():
        assert hw.source and hw.assumptions and hw.description
        assert 0 < hw.compute_efficiency <= 1 and 0 < hw.comm_efficiency <= 1
        assert hw.peak_flops > 0 and hw.beta_inter <= hw.beta_intra
        assert hw.devices_per_node >= 1
    assert PRESETS["paper-intra"].flops == 3e14 and PRESETS["paper-intra"].beta_for(8) == 3e11
    assert PRESETS["paper-inter"].beta_for(2) == 2.5e10
    assert PRESETS["mi250x-frontier"].devices_per_node == 8


def test_unknown_hardware_lists_valid_names():
    """Catches an unhelpful error for a typo: the message lists every preset and the measured:PATH form."""
    with pytest.raises(UnknownHardwareError) as exc:
        get_hardware("h100")
    for name in PRESETS:
        assert name in str(exc.value)
    assert "measured:PATH" in str(exc.value)


def test_schema_pattern_lists_exactly_the_presets():
    """Catches the config schema and hardware.py drifting apart (a new preset the config would reject)."""
    pattern = load_schema()["properties"]["cost"]["properties"]["rho"]["properties"]["hardware"]["items"][
        "pattern"
    ]
    names = re.match(r"\^\((.*)\|measured:\.\+\)\$", pattern).group(1).split("|")
    assert sorted(names) == sorted(PRESETS)


def test_committed_fixture_matches_its_script():
    """Catches a fixture edited by hand or a script changed without regenerating the file (compared by value)."""
    sys.path.insert(0, str(FIXTURE.parent))
    try:
        import make_calibration_small
    finally:
        sys.path.pop(0)
    committed = CALIBRATION.read(FIXTURE)
    built = make_calibration_small.build()
    for var in ("alpha", "beta", "achieved_flops", "n_points", *COMPUTE_MODEL_VARS):
        xr.testing.assert_allclose(committed[var], built[var])
    assert committed.attrs["world_sizes"] == built.attrs["world_sizes"]


def test_measured_hardware_uses_calibration():
    """Catches measured:PATH ignoring the file: per-collective α, β, the sequence factor and per-op compute
    model are used, the median F serves ops the file lacks, and one bandwidth level serves every group size."""
    hw = get_hardware(f"measured:{FIXTURE}")
    assert hw.measured and hw.devices_per_node == 4
    assert hw.flops_for("mlp") == 4e10 and hw.flops_for("layernorm") == 3e10  # median of 4e10, 2e10, 3e10
    assert hw.link("all_reduce", "inter") == (2e-5, 1e9)
    shape = LayerShape(N=64, D=64, batch=1, dtype="float32")
    c = op_cost("mlp", shape, P=2, hardware=hw)
    nbytes = 64 * 64 * 4
    assert c.t_comm == pytest.approx(1.25 * 2 * (2e-5 + 1.0 * nbytes / 1e9))
    assert c.t_comp == pytest.approx(c.flops / 4e10)
    a = op_cost("attn_channel", shape, P=2, hardware=hw)
    assert a.traffic_bytes > 0
    assert a.t_comp == pytest.approx(1e-4 + a.flops / 4e10 + a.traffic_bytes / 1e10)
    assert a.t_comm == pytest.approx(1.5 * 2 * (2e-5 + 1.0 * nbytes / 1e9))  # its own sequence factor
    ln = op_cost("layernorm", shape, P=2, hardware=hw)
    assert ln.t_comp == pytest.approx(ln.flops / 3e10)  # no compute model for it: median achieved F
    assert ln.t_comm == pytest.approx(1.25 * 2 * (2e-5 + 2 * 64 * 4 / 1e9))  # median sequence factor


def test_missing_or_invalid_calibration_is_named(tmp_path: Path):
    """Catches a cryptic failure on a missing or malformed calibration file: the error names the path and field."""
    with pytest.raises(ResultFileError, match="nope.nc: no such result; re-run `hsitp bench calibrate`"):
        get_hardware(f"measured:{tmp_path / 'nope.nc'}")
    good = calibration_dataset(
        alpha={"all_gather": 0.0},
        beta={"all_gather": 1e9},
        achieved_flops={"mlp": 1e9},
        device="test",
        backend="gloo",
        dtype="float32",
        world_sizes=[2],
        fit_points=[],
    )
    bad = good.drop_vars("beta")
    path = write_netcdf(described(bad), tmp_path / "bad.nc", kind="calibration", prov=provenance())
    with pytest.raises(ResultFileError, match=r"bad\.nc.*lacks variable 'beta'"):
        get_hardware(f"measured:{path}")
    neg = good.copy()
    neg["beta"] = -neg["beta"]
    with pytest.raises(CalibrationError, match="beta must be > 0"):
        validate_calibration(neg, "neg.nc")
    half = calibration_dataset(
        alpha={"all_gather": 0.0},
        beta={"all_gather": 1e9},
        achieved_flops={"mlp": 1e9},
        device="test",
        backend="gloo",
        dtype="float32",
        world_sizes=[2],
        fit_points=[],
        compute_model={
            "compute_overhead": {"mlp": 0.0},
            "compute_rate": {"mlp": 1e9},
            "mem_bandwidth": {"mlp": 1e9},
        },
        sequence_factor={"mlp": 1.1},
    ).drop_vars("sequence_factor")
    with pytest.raises(CalibrationError, match="give all or none"):
        validate_calibration(half, "half.nc")
    one = get_hardware(
        f"measured:{write_netcdf(described(good), tmp_path / 'one.nc', kind='calibration', prov={})}"
    )
    assert one.link("all_reduce", "intra") == (0.0, 1e9)  # absent collectives borrow the all_gather fit
    assert np.isclose(one.flops, 1e9)

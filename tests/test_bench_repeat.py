"""The run-to-run report of benchmarks/repeat_bench.sh, on synthetic model_vs_measured files."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from nc_checks import described

from hsitp.bench.repeat import ccr_table, load_runs, main, report, spread
from hsitp.io import write_netcdf

DIMS = ("op", "P", "N", "D", "L", "dtype")


def _run(root, name: str, scale: float, err: float) -> None:
    """A comparison file whose P = 2 CCRs are `scale` times a fixed pattern (P = 1: zero), one point held out."""
    ccr = np.array(
        [[0.1, 0.2, 0.0], [0.4, np.nan, 0.3]]
    )  # (N, D); one point not measured, one not communicating
    values = np.stack([np.zeros_like(ccr), scale * ccr])[None, :, :, :, None, None]  # (op, P, N, D, L, dtype)
    held = np.zeros_like(values, dtype=np.int8)
    held[0, 1, 0, 0, 0, 0] = 1
    ds = xr.Dataset(
        {"ccr_measured": (DIMS, values, {"units": "1"}), "held_out": (DIMS, held)},
        coords={"op": ["mlp"], "P": [1, 2], "N": [16, 32], "D": [8, 16, 24], "L": [4], "dtype": ["float32"]},
    )
    row = {"n_points": 1, **{f"median_abs_rel_err_{m}": err for m in ("stated", "refined", "traced")}}
    ds.attrs = {"device": "CPU: test", "summary": {"held_out": row, "fitted": {**row, "n_points": 2}}}
    write_netcdf(
        described(ds), root / name / "bench" / "model_vs_measured.nc", kind="model_vs_measured", prov={}
    )


def test_spread_and_report(tmp_path, capsys):
    """Catches a spread computed over P = 1, points without communication (CCR 0: 0/0) or unmeasured points, a
    wrong relative range, or a report that drops a run's held-out error."""
    for name, scale, err in (("r1", 0.9, 0.10), ("r2", 1.0, 0.12), ("r3", 1.1, 0.14)):
        _run(tmp_path, name, scale, err)
    dirs = [tmp_path / n for n in ("r1", "r2", "r3")]
    ccr = ccr_table(load_runs(dirs))
    assert ccr.sizes == {"run": 3, "point": 4}  # P = 2, measured and communicating only
    s = spread(ccr)
    assert s["median_range"] == pytest.approx(0.2)  # (1.1 - 0.9) / 1.0 at every point
    assert s["median_deviation"] == pytest.approx(0.1)
    text = report(dirs)
    assert "r2: 1 held out, 2 fitted: stated  12.0 %" in text and "refined  14.0 %" in text
    assert "(max - min) / mean median 20.0 %" in text
    assert [line.split()[3] for line in text.splitlines() if line.startswith("  * ")] == ["N=16"]  # held out
    assert main([str(d) for d in dirs] + ["--no-points"]) == 0 and "per point" not in capsys.readouterr().out
    assert main([str(tmp_path / "r1"), str(tmp_path / "missing")]) == 2
    assert "no such result" in capsys.readouterr().err

"""microbench.nc layout, per-P merge, and calibration.nc per docs/contracts.md, on synthetic timings with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from hsitp.bench.calibrate import calibrate, fit_points, run_calibrate
from hsitp.bench.fit import ring_factor
from hsitp.bench.predict import Point, op_work, predict, work_split
from hsitp.bench.results import MergeError, empty_partial, merge_partials, point_at, write_partial
from hsitp.config import validate_config
from hsitp.contracts import CALIBRATION, CalibrationError
from hsitp.cost.hardware import hardware_from_calibration
from hsitp.io import json_attr, read_netcdf
from hsitp.settings import BenchSettings

ALPHA = {"all_reduce": 4e-5, "all_gather": 3e-5, "reduce_scatter": 2e-5}
BETA = {"all_reduce": 2e9, "all_gather": 3e9, "reduce_scatter": 1e9}
RATE = {"mlp": 4e10, "agg_tp": 1e10}
SEQUENCE = {"mlp": 1.3, "agg_tp": 1.6}  # replayed collectives / their ring-model time
SIZES = [4096, 65536, 1048576, 4194304]
SHAPE = {"batch": 1, "heads": 8, "mlp_ratio": 4, "groups": 1, "patch": 4}


# The tokeniser timed alone, at a rate of its own: an aggregation point's compute time is then its own work at
# its rate plus the tokeniser's work at the tokeniser's.
RATE_TOK = {**RATE, "tokenize": 2.5e9}


def _config(rates=RATE):
    return BenchSettings.from_config(
        validate_config({"bench": {"ops": list(rates), "N": [16, 32, 64], "D": [8], "L": [4, 8]}})
    )


def _partial(p: int, *, seed: int = 0, nbytes=SIZES, layer_shape=SHAPE, rates=RATE):
    """A one-P partial whose times follow the ring model and the cost model's FLOPs / F exactly, times (1 +- 1 %)
    noise. Each layer but the tokeniser issued two all-reduces of 4 KiB x N/16 over its P ranks (a traced record),
    and replaying them took SEQUENCE[op] x their ring-model time."""
    rng = np.random.default_rng(seed + p)
    ds = empty_partial(
        ops=list(rates), world_size=p, N=[16, 32, 64], D=[8], L=[4, 8], dtypes=["float32"], repeats=5,
        collectives=list(ALPHA), sizes_bytes=list(nbytes), coll_repeats=4, layer_shape=layer_shape,
        head_padding=False,
    )  # fmt: skip
    for i, c in enumerate(ALPHA):
        for j, nb in enumerate(nbytes):
            if p > 1:
                t = ALPHA[c] + ring_factor(c, p) * nb / BETA[c]
                ds["coll_time"].values[i, 0, j] = t * (1 + 0.01 * rng.standard_normal(4))
                ds["coll_bytes"].values[i, 0, j] = nb
    ds["group_size"].values[0] = [p, p, 1]
    for i, op in enumerate(rates):
        for k, n in enumerate([16, 32, 64]):
            pt = point_at(ds, op=op, P=p, N=n, D=8, L=4, dtype="float32")
            tok = work_split(pt, head_padding=False)[1][0] if "tokenize" in rates else 0.0
            comp = (op_work(pt, head_padding=False)[0] - tok) / rates[op] + tok / rates.get("tokenize", 1.0)
            calls, total = (2, 2 * 4096 * n / 16) if p > 1 and op != "tokenize" else (0, 0.0)
            ring = calls * ALPHA["all_reduce"] + ring_factor("all_reduce", p) * total / BETA["all_reduce"]
            comm = SEQUENCE.get(op, 1.0) * ring
            ds["trace_count"].values[i, 0, k, 0, 0, 0] = 0
            ds["trace_bytes"].values[i, 0, k, 0, 0, 0] = 0
            ds["trace_count"].values[i, 0, k, 0, 0, 0, 0, 0] = calls  # all_reduce on the tp group
            ds["trace_bytes"].values[i, 0, k, 0, 0, 0, 0, 0] = total
            for m, t in enumerate([comp + comm, comp, comm]):
                ds["time"].values[i, 0, k, 0, 0, 0, m] = t * (1 + 0.01 * rng.standard_normal(5))
    return ds


_ATTRS = {"device": "CPU: test", "backend": "gloo", "threads_per_rank": 1, "cores": 2, "oversubscribed": 0}


def _merged(tmp_path, rates=RATE):
    cfg = _config(rates)
    paths = [
        write_partial(
            _partial(p, rates=rates),
            tmp_path / f"P{p}.nc",
            settings=cfg,
            attrs={**_ATTRS, "oversubscribed": int(p > 2)},
        )
        for p in (4, 1, 2)
    ]
    return merge_partials(paths, tmp_path / "microbench.nc", cfg), cfg


def test_merge_orders_p_keeps_dims_and_flags_oversubscription(tmp_path):
    """Catches a merge that loses a P, scrambles the P order, or drops the per-P oversubscription flag."""
    out, _ = _merged(tmp_path)
    ds = read_netcdf(out, kind="microbench")
    assert ds["time"].dims == ("op", "P", "N", "D", "L", "dtype", "mode", "rep")
    assert ds["P"].values.tolist() == [1, 2, 4]
    assert ds["mode"].values.tolist() == ["full", "compute", "comm"]
    assert json_attr(ds, "world_sizes") == [1, 2, 4]
    assert json_attr(ds, "oversubscribed_P") == [4]
    assert ds["oversubscribed"].values.tolist() == [0, 0, 1]
    assert ds.attrs["device"] == "CPU: test"
    # derived quantities are recomputed from the raw repeats after the merge, from the mean over repeats
    pt = {"op": "mlp", "P": 2, "N": 32, "D": 8, "L": 4, "dtype": "float32"}
    best = ds["time_mean"].sel(pt)
    np.testing.assert_allclose(best, ds["time"].sel(pt).mean("rep"), rtol=1e-12)
    assert float(ds["sanity_ratio"].sel(pt)) == pytest.approx(
        float((best.sel(mode="compute") + best.sel(mode="comm")) / best.sel(mode="full"))
    )
    assert float(ds["ccr_measured"].sel(pt)) == pytest.approx(
        float(best.sel(mode="comm") / best.sel(mode="compute"))
    )
    per_rep = (ds["time"].sel({**pt, "mode": "comm"}) / ds["time"].sel({**pt, "mode": "compute"})).values
    assert float(ds["ccr_measured_iqr"].sel(pt)) == pytest.approx(
        float(np.subtract(*np.percentile(per_rep, [75, 25])))
    )
    assert ds["time"].attrs["units"] == "s" and ds["trace_bytes"].attrs["units"] == "B"  # kept by the merge
    assert float(ds["ccr_measured"].sel(op="mlp", P=1, N=32, D=8, L=4, dtype="float32")) == 0.0
    assert np.isnan(ds["time_median"].sel(op="mlp", L=8)).all()  # never run: NaN, not zero
    assert json_attr(ds, "sanity_ratio_by_P")["2"]["median"] == pytest.approx(
        float(ds["sanity_ratio"].sel(P=2).median())
    )


def test_merge_rejects_duplicate_p_and_different_sweeps(tmp_path):
    """Catches a silent merge of two launches of the same P, or of partials from different configs."""
    cfg = _config()
    a = write_partial(_partial(2), tmp_path / "a.nc", settings=cfg, attrs=_ATTRS)
    b = write_partial(_partial(2, seed=1), tmp_path / "b.nc", settings=cfg, attrs=_ATTRS)
    with pytest.raises(MergeError, match="P=2 launch 0 appears in both"):
        merge_partials([a, b], tmp_path / "m.nc", cfg)
    c = write_partial(_partial(4, nbytes=SIZES[:3] + [8192]), tmp_path / "c.nc", settings=cfg, attrs=_ATTRS)
    with pytest.raises(MergeError, match="nbytes"):
        merge_partials([a, c], tmp_path / "m.nc", cfg)
    d = write_partial(
        _partial(4, layer_shape={**SHAPE, "heads": 4}), tmp_path / "d.nc", settings=cfg, attrs=_ATTRS
    )
    with pytest.raises(MergeError, match="layer_shape"):
        merge_partials([a, d], tmp_path / "m.nc", cfg)


def _launch_partial(p: int, launch: int, scale: float):
    """A partial of launch ``launch`` at P = ``p`` whose comm times are ``scale`` x those of launch 0's."""
    ds = _partial(p)  # the same noise in every launch: only the scale differs
    ds["time"].loc[{"mode": "comm"}] = ds["time"].sel(mode="comm") * scale
    ds.attrs["launch"] = launch
    return ds


def test_merge_pools_launches_and_keeps_each_launchs_ccr(tmp_path):
    """Catches a merge of independent launches (bench.launches) that keeps one launch and drops the others, that
    averages away their run-to-run spread (the audit decides by it), or that mixes the launches of different P."""
    cfg = _config()
    scales = {0: 1.0, 1: 1.5, 2: 0.8}
    paths = [
        write_partial(_launch_partial(p, k, s), tmp_path / f"P{p}_l{k}.nc", settings=cfg, attrs=_ATTRS)
        for p in (2, 1)
        for k, s in scales.items()
    ]
    ds = read_netcdf(merge_partials(paths, tmp_path / "m.nc", cfg), kind="microbench")
    assert ds.attrs["launches"] == 3
    assert ds.sizes["rep"] == 3 * 5  # every launch's repeats, pooled
    pt = {"op": "mlp", "P": 2, "N": 32, "D": 8, "L": 4, "dtype": "float32"}
    by_launch = ds["ccr_measured_launch"].sel(pt)
    assert by_launch["launch"].values.tolist() == [0, 1, 2]
    # each launch's CCR is its own comm mean over its own compute mean: the scales come back exactly
    np.testing.assert_allclose(by_launch.values / by_launch.values[0], [1.0, 1.5, 0.8], rtol=1e-12)
    # the pooled CCR is the ratio of the pooled means, between the launches' extremes
    pooled = float(ds["ccr_measured"].sel(pt))
    assert by_launch.min() < pooled < by_launch.max()
    with pytest.raises(MergeError, match="same launches"):
        merge_partials(paths[:-1], tmp_path / "m2.nc", cfg)  # P = 1 lacks launch 2


def test_microbench_holds_measurements_not_model_outputs(tmp_path):
    """Catches modelled quantities (FLOPs, memory traffic, ring-factor-weighted bytes) stored in the measured
    file: it keeps times, the traced calls and bytes per collective and group, and the settings they were taken
    with, from which the model's numbers are recomputed where used."""
    out, _ = _merged(tmp_path)
    ds = read_netcdf(out, kind="microbench")
    assert not {"flops", "traffic_bytes", "trace_factor_bytes"} & set(ds.variables)
    assert {"time", "bytes_moved", "n_collectives", "trace_count", "trace_bytes", "group_size"} <= set(
        ds.data_vars
    )
    assert json_attr(ds, "layer_shape") == SHAPE and int(ds.attrs["head_padding"]) == 0
    assert ds["group_size"].sel(P=4).values.tolist() == [4, 4, 1]
    assert "modelled" not in ds.attrs["note"].replace("nothing here is modelled", "")
    pt = point_at(ds, op="agg_tp", P=2, N=32, D=8, L=8, dtype="float32")
    assert (pt.op, pt.P, pt.shape.N, pt.shape.L, pt.shape.heads, pt.shape.dtype) == (
        "agg_tp",
        2,
        32,
        8,
        8,
        "float32",
    )


def test_calibration_file_follows_contract_and_recovers_truth(tmp_path):
    """Catches a calibration.nc that breaks docs/contracts.md (names, dims, units, attrs) or fits the wrong quantity."""
    mb, cfg = _merged(tmp_path)
    out = run_calibrate(mb, tmp_path / "calibration.nc", cfg)
    cal = CALIBRATION.read(out)  # its contract, values checked
    hw = hardware_from_calibration(out)  # and its measured:PATH loader
    assert hw.measured and hw.flops_for("mlp") == pytest.approx(float(cal["achieved_flops"].sel(op="mlp")))
    assert cal["collective"].values.tolist() == list(ALPHA)
    assert cal["op"].values.tolist() == list(RATE)
    for var, dim in [("alpha", "collective"), ("beta", "collective"), ("achieved_flops", "op")]:
        assert cal[var].dims == (dim,)
    assert cal["alpha"].attrs["units"] == "s" and cal["beta"].attrs["units"] == "B/s"
    for key in ("device", "backend", "dtype", "world_sizes", "fit_points", "provenance"):
        assert key in cal.attrs
    assert json_attr(cal, "world_sizes") == [2, 4]
    for c in ALPHA:
        assert float(cal["beta"].sel(collective=c)) == pytest.approx(BETA[c], rel=0.1)
        assert float(cal["alpha"].sel(collective=c)) == pytest.approx(ALPHA[c], rel=0.25)
        assert int(cal["n_points"].sel(collective=c)) < 2 * len(SIZES)  # some were held out
    pts = fit_points(cal)
    for op, rate in RATE.items():
        assert float(cal["achieved_flops"].sel(op=op)) == pytest.approx(rate, rel=0.05)
        # times are FLOPs / rate: the compute model (fitted with the model's FLOPs and traffic) reproduces them
        for r in pts["ops"]:
            if r["op"] == op:
                assert r["flops"] > 0 and r["traffic_bytes"] > 0
                assert r["t_compute_predicted"] == pytest.approx(r["t_compute"], rel=0.05)
        # the replayed collectives took SEQUENCE[op] x the ring model of their trace with the fitted alpha, beta
        assert float(cal["sequence_factor"].sel(op=op)) == pytest.approx(SEQUENCE[op], rel=0.1)
    held = [r for r in pts["ops"] if r["held_out"]]
    assert held and len(held) < len(pts["ops"])
    assert all(r["held_out"] in (True, False) and "t_predicted" in r for r in pts["collectives"])


def test_tokenize_timed_alone_is_taken_out_of_the_aggregation_fit(tmp_path):
    """Catches an aggregation's compute model fitted on its time with the tokeniser's inside while the planner
    prices `tokenize` apart (tokenisation counted twice, or at the aggregation's rate: issue 27's tp vs dchag_c
    ranking on CPU), and a prediction of an aggregation point that does not sum the two models. Synthetic truth:
    the tokeniser runs at 2.5 GFLOP/s, the aggregation's own work at 10 GFLOP/s; both must come back (5 %)."""
    mb, cfg = _merged(tmp_path, RATE_TOK)
    out = run_calibrate(mb, tmp_path / "calibration.nc", cfg)
    cal = CALIBRATION.read(out)
    assert cal["op"].values.tolist() == list(RATE_TOK)  # the sweep's order, though tokenize is fitted first
    for op, rate in RATE_TOK.items():
        assert float(cal["achieved_flops"].sel(op=op)) == pytest.approx(rate, rel=0.05), op
    hw = hardware_from_calibration(out)
    for r in fit_points(cal)["ops"]:
        assert r["t_compute_predicted"] == pytest.approx(r["t_compute"], rel=0.05), r
        if r["op"] == "agg_tp":
            assert 0 < r["tokenize_flops"] < r["flops"]
            shape = point_at(read_netcdf(mb), **{k: r[k] for k in ("op", "P", "N", "D", "L", "dtype")}).shape
            pred = predict(Point("agg_tp", r["P"], shape), hw, head_padding=False)
            assert pred.t_comp == pytest.approx(r["t_compute"], rel=0.05)
    # the old fit (no tokenize op) would put agg_tp's rate between the two: its own work at 10 GFLOP/s is slowed
    # by the tokeniser's at 2.5
    total = sum(r["flops"] for r in fit_points(cal)["ops"] if r["op"] == "agg_tp")
    assert (
        total / sum(r["t_compute"] for r in fit_points(cal)["ops"] if r["op"] == "agg_tp")
        < 0.9 * RATE["agg_tp"]
    )


def test_calibrate_without_multi_rank_sweep_says_what_to_do(tmp_path):
    """Catches an opaque numpy error when the sweep has no P >= 2 (nothing to fit alpha and beta on), or an error
    outside the one CalibrationError the CLI reports as a user error."""
    cfg = _config()
    p1 = write_partial(_partial(1), tmp_path / "P1.nc", settings=cfg, attrs=_ATTRS)
    mb = merge_partials([p1], tmp_path / "mb.nc", cfg)
    with pytest.raises(CalibrationError, match="world_sizes with P >= 2"):
        calibrate(read_netcdf(mb), fraction=0.34, seed=0)


def test_wrong_or_missing_input_is_a_user_error(tmp_path):
    """Catches a traceback (instead of a message naming the file and its producer) for a bad bench input."""
    from hsitp.bench.results import BenchInputError

    mb, cfg = _merged(tmp_path)
    cal = run_calibrate(mb, tmp_path / "calibration.nc", cfg)
    with pytest.raises(BenchInputError, match="missing.nc"):
        run_calibrate(tmp_path / "missing.nc", tmp_path / "c.nc", cfg)
    with pytest.raises(BenchInputError, match="expected 'microbench'"):
        merge_partials([cal], tmp_path / "m.nc", cfg)

"""Op-timing plumbing on one process: no-op twins, traces per mesh axis, shard mode and the roofline on CPU.

No timing value is asserted (the machine is shared); only structure, counts and labels.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from nc_checks import assert_described

from hsitp.bench.ops import OpBuild, summarize_trace, trace_point
from hsitp.bench.predict import Point, bench_shape, op_work, predict
from hsitp.bench.roofline import run_roofline
from hsitp.bench.shard import noop_group, run_shard
from hsitp.bench.timing import time_interleaved
from hsitp.config import validate_config
from hsitp.parallel.groups import Mesh2D, TPGroup
from hsitp.settings import BenchSettings
from hsitp.shape import LayerShape

CPU = torch.device("cpu")


def _kw(op: str, P: int, N: int = 16, D: int = 16, L: int = 4) -> OpBuild:
    return OpBuild(LayerShape(N=N, D=D, L=L, groups=2, patch=4, dtype="float32"), device=CPU)


@pytest.mark.parametrize("op", ["mlp", "attn_token", "agg_dchag_c"])
def test_trace_counts_one_step_not_the_shape_probe(op):
    """Catches forward collectives counted twice (make_step's shape probe leaking into the trace)."""
    traced = trace_point(op, TPGroup(None, 2, 0, comm="noop"), _kw(op, 2))
    fwd = [r for _, recs in traced for r in recs if r.phase == "forward"]
    probe = []  # one forward pass alone, traced separately
    module, make_input = _kw(op, 2).build(op, TPGroup(None, 2, 0, comm="noop", trace=probe))
    module(*make_input())
    assert [(r.name, r.shape) for r in fwd] == [(r.name, r.shape) for r in probe]
    assert any(r.phase == "backward" for _, recs in traced for r in recs)


def test_trace_summary_counts_bytes_per_collective_and_group():
    """Catches bytes_moved or per-(collective, group) bytes that disagree with the records they summarise, or
    a 2-D layer's records filed under the wrong mesh axis."""
    traced = trace_point("mlp", TPGroup(None, 4, 0, comm="noop"), _kw("mlp", 4))
    recs = [r for _, rs in traced for r in rs]
    s = summarize_trace(traced, "mlp")
    assert s["n"] == len(recs) > 0
    assert s["bytes"] == sum(r.nbytes for r in recs)
    assert s["count"].sum() == len(recs)
    # all of the MLP pair's collectives are all-reduces over the 4 ranks of the tp group
    assert s["count"][0, 0] == len(recs) and s["trace_bytes"][0, 0] == s["bytes"]
    s2 = summarize_trace(trace_point("attn_2d", noop_group("attn_2d", 4), _kw("attn_2d", 4)), "attn_2d")
    assert s2["count"][:, 0].sum() == 0  # nothing on the tp group
    assert s2["count"][1, 2] > 0 and s2["count"][1, 1] == 0  # K/V gathers along tokens only


def test_mesh_trace_point_keeps_axes_apart():
    """Catches shard mode's 2-D mesh being of the wrong shape, or trace_point filing token records under the
    channel group (the replay would then run them on the wrong group)."""
    mesh = noop_group("attn_2d", 4)
    assert isinstance(mesh, Mesh2D) and (mesh.channel.size, mesh.token.size) == (2, 2)
    (ch_group, ch), (tok_group, tok) = trace_point("attn_2d", mesh, _kw("attn_2d", 4))
    assert ch_group is mesh.channel and tok_group is mesh.token
    assert {r.name for r in tok} >= {"all_gather", "reduce_scatter"}  # keys/values move along tokens
    assert {r.name for r in ch} == {"all_reduce"}  # row-parallel output along channels


def test_time_interleaved_shape_and_per_call_mean():
    """Catches per-repeat times not divided by the k back-to-back calls, or modes returned in the wrong order."""
    calls = {"a": 0, "b": 0}

    def a() -> None:
        calls["a"] += 1

    def b() -> None:
        calls["b"] += 1
        torch.ones(1)

    t = time_interleaved([a, b], device=CPU, warmup=2, repeats=3, min_region_s=1e-3)
    assert t.shape == (2, 3) and np.all(t > 0)
    for name in ("a", "b"):
        k, rest = divmod(calls[name] - 2 - 1, 3)  # warm-ups, one probe call, k calls per repeat
        assert rest == 0 and k >= 1


def test_shard_mode_on_cpu_is_labelled_half_measured():
    """Catches shard output that hides which part is modelled, or gives a P = 1 shard any communication."""
    cfg = BenchSettings.from_config(validate_config(
        {"bench": {"ops": ["mlp", "attn_2d", "agg_dchag_l"], "N": [16], "D": [16], "L": [4, 8], "groups": 1, "repeats": 2,
                   "warmup": 0, "min_region_s": 0.0, "device": "cpu", "shard": {"world_sizes": [1, 2, 4]}}}
    ))  # fmt: skip
    ds = run_shard(cfg, hardware="paper-intra")
    assert ds.attrs["label"] == "half-measured" and "paper-intra" in ds.attrs["modelled"]
    assert_described(ds, "bench_shard")
    assert ds["time"].dims == ("op", "P", "N", "D", "L", "rep")
    comm = ds["t_comm_modelled"].sel(N=16, D=16, L=4)
    assert (comm.sel(P=1) == 0).all() and (comm.sel(P=[2, 4]) > 0).all()
    assert np.isnan(ds["time"].sel(op="mlp", L=8)).all()  # L-independent ops are timed at the first L only
    assert np.isfinite(ds["time"].sel(op="agg_dchag_l", L=8)).all()
    pt = Point("attn_2d", 4, bench_shape(cfg, N=16, D=16, L=4, dtype="float32"))
    assert float(ds["flops"].sel(op="attn_2d", P=4, N=16, D=16, L=4)) == op_work(pt, head_padding=False)[0]
    assert float(ds["t_comm_refined"].sel(op="attn_2d", P=4, N=16, D=16, L=4)) == pytest.approx(
        predict(pt, "paper-intra", head_padding=False).t_comm
    )


def test_roofline_on_cpu_has_both_roofs():
    """Catches a roofline whose compute roof is not the best measured GEMM or whose intensity is miscounted."""
    ds = run_roofline(
        device="cpu", dtype="float32", shapes=[[64, 64, 64], [128, 32, 16]], copy_bytes=1 << 20, warmup=1,
        repeats=2, seed=0,
    )  # fmt: skip
    assert ds.attrs["compute_roof_flops"] == pytest.approx(float(ds["achieved_flops"].max()))
    assert ds.attrs["memory_roof_bytes_per_s"] > 0
    assert_described(ds, "bench_roofline")
    # 2mnk / (4 (mk + kn + mn)) for 128 x 32 x 16
    assert float(ds["intensity"].sel(shape="128x32x16")) == pytest.approx(
        2 * 128 * 32 * 16 / (4 * (2048 + 512 + 4096))
    )


def _shard_config(**parallel) -> BenchSettings:
    return BenchSettings.from_config(validate_config(
        {"parallel": parallel,
         "bench": {"ops": ["layernorm_replicated", "layernorm_sharded", "attn_channel"], "N": [16], "D": [24],
                   "L": [4], "repeats": 2, "warmup": 0, "min_region_s": 0.0, "device": "cpu",
                   "shard": {"world_sizes": [1, 2, 4]}}}
    ))  # fmt: skip


def test_both_layernorm_placements_are_built_and_timed():
    """Catches a LayerNorm placement that is a dead setting rather than a timed op: both placements are built by
    build_op and timed at every P, the replicated one communicates nothing, the sharded one its statistics."""
    ds = run_shard(_shard_config(heads=4), hardware="paper-intra")
    for op in ("layernorm_replicated", "layernorm_sharded"):
        assert np.isfinite(ds["time"].sel(op=op)).all(), op
    moved = ds["bytes_moved"].sel(N=16, D=24, L=4)
    assert (moved.sel(op="layernorm_replicated") == 0).all()
    assert (moved.sel(op="layernorm_sharded", P=1) == 0) and (
        moved.sel(op="layernorm_sharded", P=[2, 4]) > 0
    ).all()
    # and the cost model prices the two as different ops: the replicated one does P times the sharded one's work
    flops = ds["flops"].sel(N=16, D=24, L=4, P=4)
    assert float(flops.sel(op="layernorm_replicated")) == pytest.approx(
        4 * float(flops.sel(op="layernorm_sharded"))
    )


def test_head_padding_off_refuses_before_timing_and_on_pads(monkeypatch):
    """Catches parallel.head_padding ignored by the bench: heads = 6 over P = 4 must stop the run with an error
    naming the key before any point is timed when off, and be timed with padded heads (8) when on."""
    import hsitp.bench.shard as shard_mod

    def no_timing(*args, **kwargs):
        raise AssertionError("timed a point before refusing the sweep")

    monkeypatch.setattr(shard_mod, "time_interleaved", no_timing)
    with pytest.raises(ValueError, match=r"parallel\.head_padding"):
        run_shard(_shard_config(heads=6, head_padding=False), hardware="paper-intra")
    monkeypatch.undo()
    ds = run_shard(_shard_config(heads=6, head_padding=True), hardware="paper-intra")
    assert np.isfinite(ds["time"].sel(op="attn_channel", L=4)).all()
    assert ds.attrs["skipped_points"] == []


def test_bench_run_refuses_indivisible_heads_before_timing(monkeypatch, tmp_path):
    """Catches `hsitp bench run` timing (or skipping point by point) a sweep the layers refuse: with head padding
    off, heads = 6 at P = 4 stops the launch before the collective sweep or any layer is timed, naming the key the
    user writes (parallel.heads), not a bare 'heads'."""
    from types import SimpleNamespace

    import hsitp.bench.runner as runner

    def no_timing(*args, **kwargs):
        raise AssertionError("timing started before the sweep was refused")

    monkeypatch.setattr(runner, "sweep_collectives", no_timing)
    rt = SimpleNamespace(world_size=4, rank=0, device=CPU)
    cfg = _shard_config(heads=6, head_padding=False)
    with pytest.raises(ValueError, match=r"parallel\.heads = 6 is not divisible.*parallel\.head_padding"):
        runner._run(cfg, rt, tmp_path / "P4.nc")

"""Op-timing plumbing on one process: no-op twins, traces per mesh axis, shard mode and the roofline on CPU.

No timing value is asserted (the machine is shared); only structure, counts and labels.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hsitp.bench.model import Point, op_flops, predict
from hsitp.bench.ops import build_kwargs, summarize_trace, trace_point
from hsitp.bench.roofline import run_roofline
from hsitp.bench.shard import noop_group, run_shard
from hsitp.bench.timing import time_interleaved
from hsitp.config import validate_config
from hsitp.parallel.groups import Mesh2D, TPGroup
from hsitp.parallel.ops import build_op

CPU = torch.device("cpu")


def _kw(op: str, P: int, N: int = 16, D: int = 16, L: int = 4) -> dict:
    return build_kwargs(Point(op, P, N, D, L, "float32", groups=2), dtype=torch.float32, device=CPU, seed=0)


@pytest.mark.parametrize("op", ["mlp", "attn_token", "agg_dchag_c"])
def test_trace_counts_one_step_not_the_shape_probe(op):
    """Catches forward collectives counted twice (make_step's shape probe leaking into the trace)."""
    traced = trace_point(op, TPGroup(None, 2, 0, comm="noop"), _kw(op, 2))
    fwd = [r for _, recs in traced for r in recs if r.phase == "forward"]
    probe = []  # one forward pass alone, traced separately
    module, make_input = build_op(op, tp=TPGroup(None, 2, 0, comm="noop", trace=probe), **_kw(op, 2))
    module(*make_input())
    assert [(r.name, r.shape) for r in fwd] == [(r.name, r.shape) for r in probe]
    assert any(r.phase == "backward" for _, recs in traced for r in recs)


def test_trace_summary_counts_bytes_and_ring_factors():
    """Catches bytes_moved or factor-weighted bytes that disagree with the records they summarise."""
    traced = trace_point("mlp", TPGroup(None, 4, 0, comm="noop"), _kw("mlp", 4))
    recs = [r for _, rs in traced for r in rs]
    s = summarize_trace(traced)
    assert s["n"] == len(recs) > 0
    assert s["bytes"] == sum(r.nbytes for r in recs)
    assert s["count"].sum() == len(recs)
    # all of the MLP pair's collectives are all-reduces over 4 ranks: factor 2 (P-1)/P = 1.5
    assert s["count"][0] == len(recs) and s["factor_bytes"][0] == pytest.approx(1.5 * s["bytes"])


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
    cfg = validate_config(
        {"bench": {"ops": ["mlp", "attn_2d", "agg_dchag_l"], "N": [16], "D": [16], "L": [4, 8], "repeats": 2,
                   "warmup": 0, "min_region_s": 0.0, "device": "cpu", "shard": {"world_sizes": [1, 2, 4]}}}
    )  # fmt: skip
    ds = run_shard(cfg, hardware="paper-intra")
    assert ds.attrs["label"] == "half-measured" and "paper-intra" in ds.attrs["modelled"]
    assert ds["time"].dims == ("op", "P", "N", "D", "L", "rep")
    comm = ds["t_comm_modelled"].sel(N=16, D=16, L=4)
    assert (comm.sel(P=1) == 0).all() and (comm.sel(P=[2, 4]) > 0).all()
    assert np.isnan(ds["time"].sel(op="mlp", L=8)).all()  # L-independent ops are timed at the first L only
    assert np.isfinite(ds["time"].sel(op="agg_dchag_l", L=8)).all()
    pt = Point("attn_2d", 4, 16, 16, 4, "float32", groups=2)
    assert float(ds["flops"].sel(op="attn_2d", P=4, N=16, D=16, L=4)) == op_flops(pt)
    assert float(ds["t_comm_refined"].sel(op="attn_2d", P=4, N=16, D=16, L=4)) == pytest.approx(
        predict(pt, "paper-intra").t_comm
    )


def test_roofline_on_cpu_has_both_roofs():
    """Catches a roofline whose compute roof is not the best measured GEMM or whose intensity is miscounted."""
    ds = run_roofline(
        device="cpu", dtype="float32", shapes=[[64, 64, 64], [128, 32, 16]], copy_bytes=1 << 20, warmup=1,
        repeats=2, seed=0,
    )  # fmt: skip
    assert ds.attrs["compute_roof_flops"] == pytest.approx(float(ds["achieved_flops"].max()))
    assert ds.attrs["memory_roof_bytes_per_s"] > 0
    # 2mnk / (4 (mk + kn + mn)) for 128 x 32 x 16
    assert float(ds["intensity"].sel(shape="128x32x16")) == pytest.approx(
        2 * 128 * 32 * 16 / (4 * (2048 + 512 + 4096))
    )

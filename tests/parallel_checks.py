"""Parity checks run inside every rank of a spawned gloo world (see dist_utils.run_world).

Each check builds the dense reference and the sharded layer from the same seed, runs both forward and backward
with the same loss (sum of output times a fixed random tensor), and compares on this rank: the output, the input
gradient and every parameter gradient (mapped to this rank's shard by local_state_from_full). Any mismatch
raises AssertionError naming the check and tensor; the parent test re-raises it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch.testing import assert_close

from hsitp.names import ATTENTION_KERNELS
from hsitp.parallel.aggregation import DCHAGAggregator, HeadParallelCrossAttention, TPAggregator
from hsitp.parallel.collectives import copy_to_tp, gather_from_tp, gather_seq, reduce_from_tp
from hsitp.parallel.dense import (
    DenseAttention,
    DenseDCHAG,
    DenseMLP,
    DenseTPAggregator,
    SingleQueryCrossAttention,
    dense_layernorm,
    seeded,
)
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.linear import ColumnParallelLinear
from hsitp.parallel.padding import local_state_from_full
from hsitp.parallel.runtime import Runtime
from hsitp.parallel.tensor_parallel import (
    HeadParallelAttention,
    ParallelMLP,
    ReplicatedLayerNorm,
    ShardedLayerNorm,
)
from hsitp.parallel.token_parallel import TokenParallelAttention
from hsitp.parallel.two_d import Attention2D

# Tolerances by dtype. Sharded layers compute the same maths with a different summation order (partial sums over
# P ranks, then the all-reduce), so they differ from dense by rounding only:
# - float64: rounding ~1e-16 relative; 1e-10 leaves ample margin yet any logic error (a missing term, a mask
#   leaking 1e-4, a wrong slice) is many orders larger.
# - float32: eps ~1.2e-7; sums of <= 100 terms of O(1) values give ~1e-6, so atol 2e-5 / rtol 1e-4 (10-20x).
TOL = {
    torch.float64: {"rtol": 1e-9, "atol": 1e-10},
    torch.float32: {"rtol": 1e-4, "atol": 2e-5},
}


def _rand(seed: int, *shape: int, dtype: torch.dtype, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale + shift).to(dtype)


def _ident(x: torch.Tensor) -> torch.Tensor:
    return x


def check_parity(
    name: str,
    dense: torch.nn.Module,
    sharded: torch.nn.Module,
    x_full: torch.Tensor,
    dtype: torch.dtype,
    *,
    shard_in: Callable[[torch.Tensor], torch.Tensor] = _ident,
    gather_out: Callable[[torch.Tensor], torch.Tensor] = _ident,
    shard_out: Callable[[torch.Tensor], torch.Tensor] = _ident,
    after_backward: Callable[[], None] | None = None,
    rename: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None,
) -> str:
    tol = TOL[dtype]
    xd = x_full.clone().requires_grad_()
    yd = dense(xd)
    weight = _rand(12345, *yd.shape, dtype=dtype)  # same on every rank
    (yd * weight).sum().backward()

    xs = shard_in(x_full).detach().clone().requires_grad_()
    ys = sharded(xs)
    # Replicated outputs: every rank computes the dense loss. Sharded outputs: each rank its part, summing to it.
    (ys * shard_out(weight)).sum().backward()
    if after_backward is not None:
        after_backward()

    assert_close(gather_out(ys.detach()), yd.detach(), **tol, msg=lambda m: f"{name}: output differs\n{m}")
    assert_close(xs.grad, shard_in(xd.grad), **tol, msg=lambda m: f"{name}: input gradient differs\n{m}")
    full = {n: p.grad for n, p in dense.named_parameters()}
    expected = local_state_from_full(sharded, rename(full) if rename else full)
    n_params = 0
    for pname, p in sharded.named_parameters():
        assert p.grad is not None, f"{name}: parameter {pname} received no gradient"
        assert_close(
            p.grad, expected[pname], **tol, msg=lambda m, k=pname: f"{name}: grad of {k} differs\n{m}"
        )
        n_params += 1
    assert n_params > 0, f"{name}: sharded module has no parameters"
    return name


def _collective_semantics(tp: TPGroup, dtype: torch.dtype) -> list[str]:
    """forward/backward of each autograd collective against its docstring, with rank-specific values."""
    p, r = tp.size, tp.rank
    tol = TOL[dtype]
    xs = [_rand(100 + k, 2, 3, dtype=dtype) for k in range(p)]  # rank k's input
    ws = [
        _rand(200 + k, 2 * p, 3, dtype=dtype) for k in range(p)
    ]  # rank k's loss weights on the gathered tensor
    done = []

    x = xs[r].clone().requires_grad_()
    y = gather_seq(x, tp, 0)  # (2P, 3)
    (y * ws[r]).sum().backward()
    assert_close(y.detach(), torch.cat(xs), **tol, msg="gather_seq forward is not an all-gather")
    want = sum(w[2 * r : 2 * r + 2] for w in ws)  # reduce-scatter of every rank's gradient
    assert_close(x.grad, want, **tol, msg="gather_seq backward is not a reduce-scatter")
    done.append("gather_seq")

    x = xs[r].clone().requires_grad_()
    y = gather_from_tp(x, tp, 0)
    (y * ws[r]).sum().backward()
    assert_close(y.detach(), torch.cat(xs), **tol, msg="gather_from_tp forward is not an all-gather")
    assert_close(
        x.grad, ws[r][2 * r : 2 * r + 2], **tol, msg="gather_from_tp backward is not the local slice"
    )
    done.append("gather_from_tp")

    x = xs[r].clone().requires_grad_()
    y = copy_to_tp(x, tp)
    (y * ws[r][:2]).sum().backward()
    assert_close(y.detach(), xs[r], **tol, msg="copy_to_tp forward is not the identity")
    assert_close(x.grad, sum(w[:2] for w in ws), **tol, msg="copy_to_tp backward is not an all-reduce")
    done.append("copy_to_tp")

    x = xs[r].clone().requires_grad_()
    y = reduce_from_tp(x * 1.0, tp)
    (y * ws[r][:2]).sum().backward()
    assert_close(y.detach(), sum(xs), **tol, msg="reduce_from_tp forward is not an all-reduce")
    assert_close(x.grad, ws[r][:2], **tol, msg="reduce_from_tp backward is not the identity")
    done.append("reduce_from_tp")
    return done


def _trace_counts(tp: TPGroup) -> list[str]:
    """Exactly the Megatron collectives, with the right sizes, and noop mode issues none but keeps shapes."""
    trace: list = []
    traced = dataclasses.replace(tp, trace=trace)
    mlp = ParallelMLP(8, 32, traced, seed=0)
    x = torch.randn(2, 3, 8, requires_grad=True)
    mlp(x).sum().backward()
    got = [(c.name, c.phase, c.shape, c.nbytes) for c in trace]
    assert got == [("all_reduce", "forward", (2, 3, 8), 192), ("all_reduce", "backward", (2, 3, 8), 192)], got

    trace.clear()
    attn = TokenParallelAttention(8, 2, traced, n_tokens=5, seed=0)
    y = attn(torch.randn(1, attn.token_split.local, 8, requires_grad=True))
    y.sum().backward()
    names = [(c.name, c.phase) for c in trace]
    assert names == [("all_gather", "forward"), ("reduce_scatter", "backward")], names

    trace.clear()
    noop = traced.noop()
    assert noop.comm == "noop" and noop.trace is trace
    y_noop = ParallelMLP(8, 32, noop, seed=0)(x)
    assert y_noop.shape == (2, 3, 8) and len(trace) == 1, (y_noop.shape, trace)
    return ["trace_mlp", "trace_token_attn", "noop_mlp"]


def parity_suite(rt: Runtime, dtype_names: tuple[str, ...] = ("float64", "float32")) -> list[str]:
    """Every layer at this world size in each dtype; returns the names of the checks that passed."""
    done: list[str] = []
    for name in dtype_names:
        done += [f"{name}:{check}" for check in _suite(rt, getattr(torch, name))]
    return done


def _suite(rt: Runtime, dtype: torch.dtype) -> list[str]:
    tp, p = rt.world, rt.world_size
    done = _collective_semantics(tp, dtype)
    done += _trace_counts(tp)

    # Megatron MLP pair: hidden 64 divides; hidden 31 does not (padded at P = 2 and 4).
    for hidden in (64, 31):
        dense = DenseMLP(16, hidden, seed=1).to(dtype)
        mod = ParallelMLP(16, hidden, tp, seed=1, dtype=dtype)
        if hidden == 31:
            assert mod.padding_report()[0]["pad_fraction"] > 0
        done.append(check_parity(f"mlp[h={hidden}]", dense, mod, _rand(1, 2, 5, 16, dtype=dtype), dtype))

    # A lone column-parallel linear with gather_output (10 outputs: padded at P = 4).
    with seeded(9):
        dense = torch.nn.Linear(16, 10).to(dtype)
    mod = ColumnParallelLinear(16, 10, tp, gather_output=True, seed=9, dtype=dtype)
    done.append(check_parity("column_gather[out=10]", dense, mod, _rand(9, 2, 3, 16, dtype=dtype), dtype))

    # Head-parallel attention (channel split); 5 heads: an error without padding, zero heads with it.
    for heads, dim, pad in ((4, 16, False), (5, 20, True)):
        dense = DenseAttention(dim, heads, seed=2).to(dtype)
        mod = HeadParallelAttention(dim, heads, tp, head_padding=pad, seed=2, dtype=dtype)
        done.append(
            check_parity(f"attn_channel[h={heads}]", dense, mod, _rand(2, 2, 6, dim, dtype=dtype), dtype)
        )
    try:
        HeadParallelAttention(20, 5, tp, head_padding=False)
    except ShardingError as exc:
        assert "not divisible" in str(exc), exc
        done.append("attn_channel_indivisible_error")
    else:
        raise AssertionError("5 heads over P ranks without head padding did not raise")

    # Token-parallel attention (N split): N = 8 divides by 2 and 4; N = 7 is padded.
    for n in (8, 7):
        dense = DenseAttention(16, 4, seed=3).to(dtype)
        mod = TokenParallelAttention(16, 4, tp, n_tokens=n, seed=3, dtype=dtype)
        done.append(
            check_parity(
                f"attn_token[N={n}]",
                dense,
                mod,
                _rand(3, 2, n, 16, dtype=dtype),
                dtype,
                shard_in=mod.shard_tokens,
                gather_out=mod.gather_tokens,
                shard_out=mod.shard_tokens,
                after_backward=mod.reduce_replicated_grads,
            )
        )

    # 2-D split: P = 4 as 2 x 2; P = 2 as 2 x 1 and 1 x 2 (real sub-groups of size 1 and 2).
    meshes = [(2, 2)] if p == 4 else [(2, 1), (1, 2)] if p == 2 else []
    for pc, pt in meshes:
        mesh = rt.mesh(pc, pt)  # built once, reused by the next dtype
        assert rt.mesh(pc, pt) is mesh
        dense = DenseAttention(16, 4, seed=4).to(dtype)
        mod = Attention2D(16, 4, mesh, n_tokens=7, seed=4, dtype=dtype)
        done.append(
            check_parity(
                f"attn_2d[{pc}x{pt}]",
                dense,
                mod,
                _rand(4, 2, 7, 16, dtype=dtype),
                dtype,
                shard_in=mod.shard_tokens,
                gather_out=mod.gather_tokens,
                shard_out=mod.shard_tokens,
                after_backward=mod.reduce_replicated_grads,
            )
        )

    # LayerNorm: sharded D (16 divides; 9 is padded) and replicated.
    for dim in (16, 9):
        dense = dense_layernorm(dim, seed=5).to(dtype)
        mod = ShardedLayerNorm(dim, tp, seed=5, dtype=dtype)
        x = _rand(5, 2, 4, dim, dtype=dtype, scale=2.0, shift=0.5)
        done.append(
            check_parity(
                f"layernorm_sharded[D={dim}]",
                dense,
                mod,
                x,
                dtype,
                shard_in=mod.shard,
                gather_out=mod.gather,
                shard_out=mod.shard,
            )
        )
    dense = dense_layernorm(16, seed=6).to(dtype)
    done.append(
        check_parity(
            "layernorm_replicated",
            dense,
            ReplicatedLayerNorm.from_dense(dense, tp),
            _rand(6, 2, 4, 16, dtype=dtype),
            dtype,
        )
    )

    # Cross-band aggregation, TP baseline: L = 5 bands, 4 x 6 image, patch 2 -> N = 6; both single-query
    # attention kernels (exact: no k or v formed; sdpa), each against its own dense reference.
    for kernel in ATTENTION_KERNELS:
        dense = DenseTPAggregator(5, 16, 4, 2, seed=7, kernel=kernel).to(dtype)
        mod = TPAggregator(5, 16, 4, 2, tp, seed=7, kernel=kernel, dtype=dtype)
        done.append(check_parity(f"agg_tp[{kernel}]", dense, mod, _rand(7, 2, 5, 4, 6, dtype=dtype), dtype))
    # the head-sharded single-query attention with 5 heads: zero heads pad it at P = 2 and 4 (exact kernel)
    with seeded(10):  # the same master on every rank
        master = SingleQueryCrossAttention(20, 5).to(dtype)
    mod = HeadParallelCrossAttention.from_dense(master, tp, head_padding=True, dtype=dtype)
    done.append(check_parity("xattn_heads_padded", master, mod, _rand(10, 3, 4, 20, dtype=dtype), dtype))

    # D-CHAG vs the single-process emulation of P rank-local aggregators + the final one.
    # L = 8 divides (g = 1 and 2); L = 9, g = 2 pads (at P = 4 one rank has a group made only of padding).
    for variant, bands, groups, kernel in (
        *((v, b, g, "exact") for v in ("L", "C") for b, g in ((8, 1), (8, 2), (9, 2))),
        ("C", 9, 2, "sdpa"),  # the SDPA kernel, padded (the exact one is checked against SDPA's directly)
    ):
        done.append(_dchag_parity(tp, dtype, variant, bands, groups, kernel))
    return done


def lose_rank_mid_collective(rt: Runtime, victim: int, signal_name: str) -> None:
    """All ranks loop all-reduces of a 4 MiB tensor; ``victim`` sends itself ``signal_name`` (SIGKILL: dies;
    SIGSTOP: stays connected but silent) 0.5 s in, i.e. in the middle of the loop. Survivors must raise."""
    import os
    import signal
    import threading
    import time

    from hsitp.parallel.collectives import all_reduce_

    tp = rt.world
    buf = torch.zeros(1 << 20)
    if tp.rank == victim:
        sig = getattr(signal, signal_name)
        threading.Timer(0.5, os.kill, args=(os.getpid(), sig)).start()
    start = time.monotonic()
    deadline = start + 120.0
    while time.monotonic() < deadline:
        try:
            all_reduce_(buf, tp)
        except Exception as exc:  # the point of the test
            elapsed = time.monotonic() - start
            raise RuntimeError(
                f"COLLECTIVE FAILED after {elapsed:.2f}s: {type(exc).__name__}: {exc}"
            ) from exc
    raise AssertionError("all-reduce kept succeeding for 120 s after a rank was lost")


def _dchag_parity(tp: TPGroup, dtype: torch.dtype, variant: str, bands: int, groups: int, kernel: str) -> str:
    """D-CHAG on the ranks vs its single-process emulation (P rank-local partials + the final attention)."""
    p = tp.size
    dense = DenseDCHAG(bands, 16, 4, 2, p, variant=variant, groups=groups, seed=8, kernel=kernel).to(dtype)
    mod = DCHAGAggregator(
        bands, 16, 4, 2, tp, variant=variant, groups=groups, seed=8, kernel=kernel, dtype=dtype
    )
    prefix = f"partials.{tp.rank}."

    def rename(full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {k: v for k, v in full.items() if not k.startswith("partials.")}
        out.update({"partial." + k[len(prefix) :]: v for k, v in full.items() if k.startswith(prefix)})
        return out

    return check_parity(
        f"agg_dchag_{variant.lower()}[L={bands},g={groups},{kernel}]",
        dense,
        mod,
        _rand(8, 2, bands, 4, 6, dtype=dtype),
        dtype,
        shard_in=mod.local_bands,
        rename=rename,
    )

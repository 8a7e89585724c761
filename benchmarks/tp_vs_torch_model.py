"""The ``tp`` plan (hsitp.models.parallelize) vs the same dense model parallelised with PyTorch's own tensor
parallelism (torch.distributed.tensor.parallel), forward + backward, P ranks, same weights.

What is compared (``--scope``):

- ``model`` (default): the whole SpectralSpatialTransformer on a (B, L, H, W) cube: replicated tokenizer,
  aggregator cross-attention, position embedding, ``depth`` pre-norm blocks, norm and head. Both sides split the
  same layers the same way (Megatron): every block's ``attn.qkv`` / ``mlp.fc1`` and the aggregator's ``q`` / ``kv``
  column-wise, ``attn.proj`` / ``mlp.fc2`` / the aggregator's ``proj`` row-wise; tokenizer, LayerNorms, position
  embedding, query and head replicated on both. (Keeping the aggregator replicated on the PyTorch side would make
  it compute all heads of the largest GEMM, kv over B N L tokens, and flatter ours.)
- ``blocks``: only the ``depth`` transformer blocks on a (B, N, D) activation (LayerNorms replicated).

PyTorch side: a copy of the dense model whose attention modules are replaced by local-heads forwards (the heads a
rank holds follow from the local width after ColwiseParallel with ``use_local_output=True``, as torchtitan does),
then ``parallelize_module`` with ColwiseParallel / RowwiseParallel over a 1-D DeviceMesh of the world. The fused
qkv (and kv) rows are laid out (3, heads, head_dim); ColwiseParallel cuts rows contiguously, so they are reordered
to (P, 3, heads/P, head_dim) first: the same weights, and each rank then holds exactly the rows ours holds.

Before timing, the outputs, the input gradient and every parameter gradient (this rank's local shard of it) are
checked equal on every rank; any mismatch exits 1 without timing. One timed sample = ``--steps`` forward +
backward passes, barrier before, max over ranks after; samples alternate ours-torch / torch-ours (interleaved)
and the per-pair ratio ours / torch is reported as min / median / max (goal: median <= 1.0).

Run:  python benchmarks/tp_vs_torch_model.py [--world-size 2] [--tokens 324 1296] [--scope model|blocks]
      [--dim 256] [--depth 12] [--heads 8] [--bands 32] [--repeats 7] [--device auto] [--dtype auto] [--json FILE]
It spawns P local ranks itself (under torchrun it uses the launched world). ``--device auto`` is CUDA + NCCL when
at least P GPUs are visible, else CPU + gloo with ``--threads`` threads per rank; ``--dtype auto`` is bfloat16 on
CUDA and float32 on the CPU. N tokens = an h x w grid of patches (h w = N, h the largest divisor <= sqrt N).
Default sizes are the paper's blocks (D = 256, 8 heads, depth 12) at N = 324 and 1296, with L = 32 bands (Pavia
University's 103 make the aggregator's kv GEMM, over B N L tokens, most of a CPU step). N = 3192 (--tokens 3192)
took about 50 s per fwd+bwd step per side on 2 shared CPU cores, too slow for a default run there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from hsitp.bench.interleave import time_backward  # the one interleaved timer (probe, benchmarks, planner)
from hsitp.io import cpu_model

# How equal ours and PyTorch must be. Both sides run the same per-rank GEMMs on the same weight shards; they
# differ only in how an op is dispatched (F.linear vs DTensor's decomposition, the row-parallel bias added before
# or after the all-reduce), i.e. rounding of differently ordered sums, compounded over the depth of the model.
# float64 / float32: elementwise (torch.testing.assert_close); float32 at D = 256, depth 12 differs by ~1e-6
# relative. 16-bit: a weight gradient sums thousands of rounded terms, so an element near zero can differ by many
# of its own ulps; there the largest difference is measured against the tensor's largest element instead.
ELEMENTWISE: dict[torch.dtype, dict[str, float]] = {
    torch.float64: {"rtol": 1e-9, "atol": 1e-11},
    torch.float32: {"rtol": 2e-3, "atol": 2e-4},
}
SCALED: dict[torch.dtype, float] = {  # max |ours - torch| <= tol * max |torch|
    # 8-bit mantissa (one step 0.4 %): D = 256, depth 12, N = 64 on the CPU differed by up to 3 % (LayerNorm
    # weight gradients, sums that nearly cancel); a real bug (a wrong row layout, a missing all-reduce) is O(1)
    torch.bfloat16: 1e-1,
    torch.float16: 2e-2,  # 3 more mantissa bits than bfloat16
}


def differs(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why ``a`` (ours) and ``b`` (PyTorch's) are not equal within this dtype's tolerance; None when they are."""
    if a.dtype in ELEMENTWISE:
        try:
            torch.testing.assert_close(a, b, **ELEMENTWISE[a.dtype])
        except AssertionError as exc:
            return "; ".join(line.strip() for line in str(exc).splitlines()[1:4])
        return None
    err = float((a.float() - b.float()).abs().max())
    scale = float(b.float().abs().max())
    if not err <= SCALED[a.dtype] * scale:  # also catches NaN
        return f"max |difference| {err:.3g} > {SCALED[a.dtype]} x max |torch| {scale:.3g}"
    return None


def grid_for(n: int) -> tuple[int, int]:
    """(h, w) patches with h w = n, as square as possible (h the largest divisor of n <= sqrt n)."""
    h = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return h, n // h


def _fused_rows_by_rank(t: torch.Tensor, blocks: int, world: int) -> torch.Tensor:
    """Rows laid out (blocks, heads, head_dim) -> (world, blocks, heads/world, head_dim), so that a contiguous
    Shard(0) gives rank r its heads' rows of every block, as hsitp's Partition(blocks=...) does."""
    rest = t.shape[1:]
    per = t.shape[0] // blocks
    return t.reshape(blocks, world, per // world, *rest).transpose(0, 1).reshape(t.shape)


def _fused_linear(dense: nn.Linear, blocks: int, world: int) -> nn.Linear:
    out = nn.Linear(dense.in_features, dense.out_features, bias=dense.bias is not None)
    with torch.no_grad():
        out.weight.copy_(_fused_rows_by_rank(dense.weight, blocks, world))
        if dense.bias is not None:
            out.bias.copy_(_fused_rows_by_rank(dense.bias, blocks, world))
    return out.to(dense.weight.device, dense.weight.dtype)


class LocalHeadsAttention(nn.Module):
    """DenseAttention's maths with qkv ColwiseParallel (local output) and proj RowwiseParallel: the heads of
    this rank are its local width / (3 head_dim)."""

    def __init__(self, dense: nn.Module, world: int) -> None:
        super().__init__()
        self.head_dim = dense.head_dim
        self.qkv = _fused_linear(dense.qkv, 3, world)
        self.proj = dense.proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from hsitp.parallel.attention_kernels import attend

        b, n, _ = x.shape  # (B, N, D), replicated
        qkv = self.qkv(x)  # (B, N, 3 D/P): this rank's heads
        h = qkv.shape[-1] // (3 * self.head_dim)
        q, k, v = qkv.view(b, n, 3, h, self.head_dim).permute(2, 0, 3, 1, 4)  # (B, h_local, N, hd) each
        o = attend(q, k, v, None)  # (B, h_local, N, hd)
        return self.proj(o.transpose(1, 2).reshape(b, n, h * self.head_dim))  # (B, N, D), all-reduced


class LocalHeadsCrossAttention(nn.Module):
    """SingleQueryCrossAttention's maths (one learned query over S tokens) with q / kv ColwiseParallel and proj
    RowwiseParallel; the query parameter stays replicated."""

    def __init__(self, dense: nn.Module, world: int) -> None:
        super().__init__()
        self.head_dim = dense.head_dim
        self.query = dense.query  # (1, 1, D)
        self.q = dense.q
        self.kv = _fused_linear(dense.kv, 2, world)
        self.proj = dense.proj

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        from hsitp.parallel.attention_kernels import attend

        m, s, _ = tokens.shape  # (M, S, D), replicated
        hd = self.head_dim
        q = self.q(self.query)  # (1, 1, D/P)
        h = q.shape[-1] // hd
        q = q.view(1, h, 1, hd).expand(m, -1, -1, -1)  # (M, h_local, 1, hd)
        k, v = self.kv(tokens).view(m, s, 2, h, hd).permute(2, 0, 3, 1, 4)  # (M, h_local, S, hd) each
        o = attend(q, k, v, None)  # (M, h_local, 1, hd)
        return self.proj(o.reshape(m, h * hd))  # (M, D), all-reduced


def torch_tp_model(dense: nn.Module, mesh: Any) -> nn.Module:
    """A copy of the dense SpectralSpatialTransformer, blocks and aggregator attention parallelised by
    torch.distributed.tensor.parallel (parameter names unchanged, so gradients compare by name)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from hsitp.parallel.dense import clone_module

    world = mesh.size()
    model = clone_module(dense)
    model.aggregate.attn = LocalHeadsCrossAttention(model.aggregate.attn, world)
    parallelize_module(
        model.aggregate.attn,
        mesh,
        {"q": ColwiseParallel(), "kv": ColwiseParallel(), "proj": RowwiseParallel()},
    )
    for block in model.blocks:
        block.attn = LocalHeadsAttention(block.attn, world)
        parallelize_module(block.attn, mesh, {"qkv": ColwiseParallel(), "proj": RowwiseParallel()})
        parallelize_module(block.mlp, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    return model


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def check_equal(
    ours: nn.Module,
    theirs: nn.Module,
    x: torch.Tensor,
    gy: torch.Tensor,
    prefix: str,
) -> list[str]:
    """One forward + backward of each side on clones of ``x``; what differs (empty: all equal on this rank)."""
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    ya.backward(gy)
    yb.backward(gy)
    pairs = [("output", ya, yb), ("input gradient", xa.grad, xb.grad)]
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        key = name.removeprefix(prefix)
        q = theirs_params.get(key)
        if q is None:
            return [f"parameter {key} has no counterpart on the PyTorch side"]
        pairs.append((f"grad {key}", p.grad, _local(q.grad) if q.grad is not None else None))
    if len(theirs_params) != sum(1 for _ in ours.parameters()):
        return [f"{len(theirs_params)} PyTorch parameters vs {sum(1 for _ in ours.parameters())} of ours"]
    failures = []
    for what, a, b in pairs:
        if a is None or b is None or a.shape != b.shape:
            failures.append(f"{what}: missing or shapes differ")
            continue
        why = differs(a, b)
        if why is not None:
            failures.append(f"{what}: {why}")
    ours.zero_grad(set_to_none=True)
    theirs.zero_grad(set_to_none=True)
    return failures


def bench_one(rt: Any, mesh: Any, n: int, args: argparse.Namespace, dtype: torch.dtype) -> dict[str, Any]:
    """Build both sides for N tokens, check them equal, then time interleaved samples."""
    from hsitp.models import ModelConfig, SpectralSpatialTransformer, parallelize

    h, w = grid_for(n)
    config = ModelConfig(
        bands=args.bands,
        height=h * args.patch,
        width=w * args.patch,
        classes=args.classes,
        patch=args.patch,
        dim=args.dim,
        heads=args.heads,
        depth=args.depth,
        mlp_ratio=args.mlp_ratio,
    )
    device = rt.device
    dense = SpectralSpatialTransformer(config, seed=args.seed).to(device=device, dtype=dtype)
    ours_model = parallelize(dense, "tp", rt.world, dtype=dtype, device=device)
    theirs_model = torch_tp_model(dense, mesh)
    gen = torch.Generator().manual_seed(args.seed)
    if args.scope == "model":
        ours, theirs, prefix = ours_model, theirs_model, "model."
        x_shape = (args.batch, config.bands, config.height, config.width)  # the cube
        y_shape = (args.batch, config.classes, config.height, config.width)  # logits
    else:
        ours = nn.Sequential(*ours_model.model.blocks)
        theirs = nn.Sequential(*theirs_model.blocks)
        prefix = ""
        x_shape = y_shape = (args.batch, n, config.dim)  # (B, N, D)
    x = torch.randn(x_shape, generator=gen).to(device=device, dtype=dtype)  # same on every rank
    gy = torch.randn(y_shape, generator=gen).to(device=device, dtype=dtype)  # output gradient

    failures = check_equal(ours, theirs, x, gy, prefix)
    bad = torch.tensor([len(failures)], device=device)
    dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    row: dict[str, Any] = {"N": n, "grid": [h, w], "scope": args.scope, "failures": failures}
    if int(bad) > 0:
        return row

    times = time_backward(
        ours, theirs, x, gy, warmup=args.warmup, repeats=args.repeats, steps=args.steps, device=device
    )
    return row | times


def bench_rank(rt: Any, args: argparse.Namespace) -> dict[str, Any] | None:
    from torch.distributed.device_mesh import init_device_mesh

    from hsitp.parallel.runtime import dtype_name, resolve_dtype

    # auto: bfloat16 on CUDA, float32 on the CPU; float64 too (not a bench dtype of hsitp, but the tightest check)
    dtype = torch.float64 if args.dtype == "float64" else resolve_dtype(args.dtype, rt.device)
    mesh = init_device_mesh(rt.device.type, (rt.world_size,))
    rows = []
    for n in args.tokens:
        rows.append(bench_one(rt, mesh, n, args, dtype))
        if rows[-1]["failures"]:
            break  # outputs differ: no timing
    if rt.rank != 0:
        return None
    return {
        "rows": rows,
        "dtype": dtype_name(dtype),
        "backend": rt.backend,
        "world_size": rt.world_size,
        "device": torch.cuda.get_device_name(rt.device) if rt.is_cuda else cpu_model(),
        "oversubscribed": rt.oversubscribed,
    }


def _settings(args: argparse.Namespace) -> Any:
    """Both sides run under the same runtime: backend, timeout, device and threads per rank."""
    from hsitp.parallel.runtime import RuntimeSettings

    return RuntimeSettings(
        backend="auto",
        timeout_s=args.timeout_s,
        device=args.device,
        threads_per_rank=args.threads,
        world_size=args.world_size,
    )


def _worker(rank: int, world: int, port: int, args: argparse.Namespace, q: Any) -> None:
    from hsitp.parallel.runtime import start

    try:
        rt = start(_settings(args), rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
        result = bench_rank(rt, args)
        rt.stop()
    except BaseException as exc:
        q.put({"error": f"rank {rank}: {type(exc).__name__}: {exc}"})
        raise
    if result is not None:
        q.put(result)


def _spawn(args: argparse.Namespace) -> dict[str, Any]:
    """Run P local ranks; rank 0's result, or {"error": ...} when a rank failed."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    world = args.world_size
    procs = [ctx.Process(target=_worker, args=(r, world, port, args, q)) for r in range(world)]
    for p in procs:
        p.start()
    result: dict[str, Any] | None = None
    while result is None:
        try:
            result = q.get(timeout=1.0)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                result = {"error": f"rank process exited with code {dead[0].exitcode}"}
    if "error" in result:
        for p in procs:
            if p.is_alive():
                p.terminate()
    for p in procs:
        p.join()
    return result


def _print(result: dict[str, Any], args: argparse.Namespace) -> int:
    rows = result["rows"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    what = (
        f"whole model (L = {args.bands} bands, patch {args.patch})"
        if args.scope == "model"
        else "the transformer blocks only"
    )
    print(
        f"tp plan vs torch.distributed.tensor.parallel: {what}, D = {args.dim}, {args.heads} heads, depth "
        f"{args.depth}, batch {args.batch}, forward + backward"
    )
    print(
        f"measured on {result['device']}; backend {result['backend']}, P = {result['world_size']}, "
        f"{args.threads} thread(s)/rank{' (oversubscribed)' if result['oversubscribed'] else ''}, "
        f"{result['dtype']}; load average {load:.2f}; {args.repeats} interleaved pairs of {args.steps} step(s)"
    )
    failed = [r for r in rows if r["failures"]]
    for r in failed:
        print(f"N = {r['N']}: ours and PyTorch's TP DIFFER, not timed:", file=sys.stderr)
        for f in r["failures"][:10]:
            print(f"  {f}", file=sys.stderr)
    timed = [r for r in rows if not r["failures"]]
    if timed:
        print("    N   grid     ours[ms]  torch[ms]  ratio ours/torch min / median / max")
        for r in timed:
            grid = f"{r['grid'][0]}x{r['grid'][1]}"
            print(
                f"{r['N']:5d} {grid:>7s} {1e3 * r['ours_median_s']:10.1f} {1e3 * r['torch_median_s']:10.1f}   "
                f"{r['ratio_min']:.3f} / {r['ratio_median']:.3f} / {r['ratio_max']:.3f}"
            )
        medians = ", ".join(f"{r['ratio_median']:.3f} at N = {r['N']}" for r in timed)
        print(f"median ratio ours/torch (P = {result['world_size']}, {args.scope}): {medians} (goal <= 1.0)")
    if args.json:
        info = {k: result[k] for k in ("device", "backend", "world_size", "dtype", "oversubscribed")}
        info |= {"threads_per_rank": args.threads, "torch": torch.__version__, "load_average_1min": load}
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "args": vars(args), "rows": rows}, fh, indent=2)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--world-size", type=int, default=2, help="P ranks (spawned here unless under torchrun)"
    )
    parser.add_argument("--tokens", type=int, nargs="+", default=[324, 1296], help="N, spatial tokens")
    parser.add_argument("--scope", choices=["model", "blocks"], default="model")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--mlp-ratio", type=int, default=4)
    parser.add_argument("--bands", type=int, default=32, help="L (scope model); Pavia University has 103")
    parser.add_argument("--patch", type=int, default=4)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--dtype",
        choices=["auto", "float64", "float32", "bfloat16", "float16"],
        default="auto",
        help="auto: bfloat16 on CUDA, float32 on the CPU",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank (same for both)")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved (ours, PyTorch) sample pairs")
    parser.add_argument("--steps", type=int, default=1, help="forward + backward steps per timed sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows (and machine info) to this JSON file")
    args = parser.parse_args()

    from hsitp.models.config import ModelConfig, check_plan

    if "WORLD_SIZE" in os.environ:  # torchrun decides P
        args.world_size = int(os.environ["WORLD_SIZE"])
    if args.world_size < 2:
        parser.error("--world-size must be at least 2 (at P = 1 there is no tensor parallelism to compare)")
    try:  # heads divisible by P (whole heads per rank), checked before any rank starts
        config = ModelConfig(bands=1, height=4, width=4, classes=1, dim=args.dim, heads=args.heads)
        check_plan(config, "tp", args.world_size)
    except ValueError as exc:
        parser.error(str(exc))
    if (args.mlp_ratio * args.dim) % args.world_size:
        parser.error("--world-size must divide the MLP width mlp_ratio x dim (PyTorch's Shard does not pad)")
    gpus = torch.cuda.device_count()
    if args.device == "auto" and "WORLD_SIZE" not in os.environ:
        args.device = "cuda" if gpus >= args.world_size else "cpu"  # NCCL needs one GPU per rank
    if args.device == "cuda" and "WORLD_SIZE" not in os.environ and gpus < args.world_size:
        parser.error(
            f"--device cuda with --world-size {args.world_size} needs that many GPUs; {gpus} visible"
        )

    if "WORLD_SIZE" in os.environ:  # launched by torchrun
        from hsitp.parallel.runtime import start

        rt = start(_settings(args))
        result = bench_rank(rt, args)
        rt.stop()
        if result is None:
            return 0
    else:
        result = _spawn(args)
    if "error" in result:
        print(f"tp_vs_torch_model: {result['error']}", file=sys.stderr)
        return 1
    return _print(result, args)


if __name__ == "__main__":
    sys.exit(main())

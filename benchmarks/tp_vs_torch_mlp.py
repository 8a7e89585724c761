"""Our Megatron MLP pair (hsitp.parallel.tensor_parallel.ParallelMLP) vs PyTorch's own tensor parallelism
(torch.distributed.tensor.parallel: ColwiseParallel on fc1 + RowwiseParallel on fc2 over a 1-D DeviceMesh).

Same process group backend, same threads per rank, same weights (both built from DenseMLP(seed)), same input;
outputs and gradients are checked equal before timing. One timed sample = ``steps`` forward+backward passes,
barrier before, max over ranks after. Samples alternate A-B / B-A (interleaved), and the ours / PyTorch time
ratio of each pair is reported as min / median / max (goal: median <= 1.0).

Run:  python benchmarks/tp_vs_torch_mlp.py [--N 324 3192] [--D 256] [--P 2] [--threads 1] [--json FILE]
(spawns P local gloo ranks itself; under torchrun it uses the launched world instead). Measured on CPU/gloo
this says nothing about GPU/NCCL.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import torch

from hsitp.bench.interleave import time_backward  # the one interleaved timer (probe, benchmarks, planner)
from hsitp.io import cpu_model


def bench_one(tp: Any, mesh: Any, n: int, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Check parity, then time interleaved samples of ours vs PyTorch's TP for N tokens."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from hsitp.parallel.dense import DenseMLP
    from hsitp.parallel.tensor_parallel import ParallelMLP

    hidden = args.mlp_ratio * args.D
    ours = ParallelMLP(args.D, hidden, tp, seed=args.seed, device=device)
    theirs = parallelize_module(
        DenseMLP(args.D, hidden, seed=args.seed).to(device),
        mesh,
        {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()},
    )
    gen = torch.Generator().manual_seed(args.seed)
    x0 = torch.randn(args.batch, n, args.D, generator=gen).to(device)  # (B, N, D), same on every rank
    gy = torch.randn(args.batch, n, args.D, generator=gen).to(device)  # (B, N, D) output gradient
    # Same maths: outputs and input gradients agree (float32 summation order differs slightly).
    xa, xb = x0.clone().requires_grad_(), x0.clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    torch.testing.assert_close(ya, yb, rtol=1e-4, atol=1e-5)
    ya.backward(gy)
    yb.backward(gy)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-4, atol=1e-5)

    times = time_backward(
        ours, theirs, x0, gy, warmup=args.warmup, repeats=args.repeats, steps=args.steps, device=device
    )
    return {
        "N": n,
        "D": args.D,
        "hidden": hidden,
        "P": tp.size,
        "batch": args.batch,
        **{k: v for k, v in times.items() if k != "ratios"},
        "repeats": args.repeats,
        "steps_per_sample": args.steps,
    }


def bench_rank(rt: Any, args: argparse.Namespace) -> list[dict[str, Any]] | None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(rt.device.type, (rt.world_size,))
    rows = [bench_one(rt.world, mesh, n, args, rt.device) for n in args.N]
    return rows if rt.rank == 0 else None


def _settings(args: argparse.Namespace) -> Any:
    """Both sides run under the same runtime: backend, timeout, device (cuda for nccl) and threads per rank."""
    from hsitp.parallel.runtime import RuntimeSettings

    return RuntimeSettings(
        backend=args.backend,
        timeout_s=args.timeout_s,
        device="cuda" if args.backend == "nccl" else "cpu",
        threads_per_rank=args.threads,
        world_size=args.P,
    )


def _worker(rank: int, world: int, port: int, args: argparse.Namespace, q: Any) -> None:
    from hsitp.parallel.runtime import start

    rt = start(_settings(args), rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    rows = bench_rank(rt, args)
    if rows is not None:
        q.put(rows)
    rt.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--N", type=int, nargs="+", default=[324, 3192])
    parser.add_argument("--D", type=int, default=256)
    parser.add_argument("--P", type=int, default=2)
    parser.add_argument("--mlp-ratio", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank (same for both)")
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    parser.add_argument("--timeout-s", type=float, default=120.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15, help="interleaved (ours, PyTorch) sample pairs")
    parser.add_argument("--steps", type=int, default=5, help="fwd+bwd steps per timed sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows (and machine info) to this JSON file")
    args = parser.parse_args()
    if args.P < 2:
        parser.error("--P must be at least 2 (at P = 1 there is no tensor parallelism to compare)")

    if "WORLD_SIZE" in os.environ:  # launched by torchrun
        from hsitp.parallel.runtime import start

        rt = start(_settings(args))
        rows = bench_rank(rt, args)
        rt.stop()
    else:
        import socket

        import torch.multiprocessing as mp

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(r, args.P, port, args, q)) for r in range(args.P)]
        for p in procs:
            p.start()
        rows = q.get(timeout=3600)
        for p in procs:
            p.join()
    if rows is None:
        return
    device = torch.cuda.get_device_name() if args.backend == "nccl" else cpu_model()
    print(f"measured on {device}; backend {args.backend}, P={args.P}, {args.threads} thread(s)/rank, float32")
    print("   N     D  ours[ms]  torch[ms]  ratio ours/torch min / median / max")
    for r in rows:
        print(
            f"{r['N']:5d} {r['D']:5d} {1e3 * r['ours_median_s']:9.2f} {1e3 * r['torch_median_s']:10.2f}   "
            f"{r['ratio_min']:.3f} / {r['ratio_median']:.3f} / {r['ratio_max']:.3f}"
        )
    if args.json:
        info = {
            "device": device,
            "backend": args.backend,
            "threads_per_rank": args.threads,
            "torch": torch.__version__,
        }
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()

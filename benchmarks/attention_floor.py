"""How close one block's self-attention can come to its FLOP floor at the trained sizes (issue 49).

The step-speed target asks each plan's step to come within 2.5x of its FLOP count at the GEMM rate. This script
measures, in one run and one thread, the part of the step that target cannot reach while the model's heads are
narrow: PyTorch's scaled-dot-product attention (forward + backward) at B, H, N, d against the time its matrix
products' FLOPs take at the rate of a large GEMM, and one ``exp`` over the (B, H, N, N) scores beside it (flash
attention computes the exponentials twice: in the forward and again in the backward). Also the explicit three-step
attention (QK^T, softmax, PV) for comparison. Defaults: config/cpu.yaml's model (dim 64, 8 heads: d = 8), batch 1,
N = 324 (18 x 18 patches of 8 at the 145 x 145 scene's crop).

    python benchmarks/attention_floor.py                 # the trained sizes
    python benchmarks/attention_floor.py --heads 4       # d = 16 at the same dim
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812


def median_s(fn: Callable[[], object], calls: int, rounds: int) -> float:
    """Median over ``rounds`` of the mean time of ``calls`` calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=324, help="N, tokens per sample")
    ap.add_argument("--dim", type=int, default=64, help="model width; head width d = dim / heads")
    ap.add_argument("--gemm", type=int, default=512, help="side of the square GEMM that sets the rate")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    if args.dim % args.heads:
        ap.error(f"--dim {args.dim} is not divisible by --heads {args.heads}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    b, h, n, d = args.batch, args.heads, args.tokens, args.dim // args.heads

    a, c = torch.randn(args.gemm, args.gemm), torch.randn(args.gemm, args.gemm)
    rate = 2 * args.gemm**3 / median_s(lambda: a @ c, args.calls, args.rounds)  # FLOP/s
    q, k, v = (torch.randn(b, h, n, d, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, h, n, d)
    scores = torch.randn(b, h, n, n)

    def flash() -> None:
        F.scaled_dot_product_attention(q, k, v).backward(grad)

    def explicit() -> None:
        p = ((q @ k.transpose(-1, -2)) * d**-0.5).softmax(-1)  # (B, H, N, N)
        (p @ v).backward(grad)

    t_flash = median_s(flash, args.calls, args.rounds)
    t_explicit = median_s(explicit, args.calls, args.rounds)
    t_exp = median_s(lambda: torch.exp(scores), args.calls, args.rounds)
    flops = 3 * 4 * b * h * n * n * d  # QK^T and PV: 4 B H N^2 d forward, the backward twice that
    floor = flops / rate
    print(f"GEMM rate {rate / 1e9:.0f} GFLOP/s ({args.gemm}^3, one thread)")
    print(f"attention B={b} H={h} N={n} d={d}, forward + backward, per block:")
    print(f"  SDPA {t_flash * 1e3:.2f} ms; explicit QK^T-softmax-PV {t_explicit * 1e3:.2f} ms")
    print(f"  matrix products {flops / 1e6:.1f} MFLOP -> {floor * 1e3:.2f} ms at the GEMM rate")
    print(f"  SDPA / FLOP floor {t_flash / floor:.1f}x")
    print(
        f"  one exp over the scores ({b * h * n * n / 1e6:.2f} M elements) {t_exp * 1e3:.2f} ms "
        f"= {t_exp / floor:.2f}x the block's FLOP floor"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

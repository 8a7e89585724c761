"""One forward + backward of every parallel plan of the spectral-spatial transformer at P = 1, under bf16 autocast
(benchmarks/gpu_check.sh runs it on the GPU; ``--device cpu`` runs the same check on a CPU).

Per plan and crop: the plan's architecture (hsitp.models.architecture_for) is built from the same seed, run on a
random cube with a per-pixel cross-entropy loss, and checked: the logits and every gradient are finite, every
parameter gets a gradient, and the plan's logits equal the dense model's (same autocast) within bf16 rounding.
Prints one line per plan (wall time of forward + backward, peak memory on CUDA); exits 1 when a check fails.

Run:  python benchmarks/model_check.py [--device cuda] [--crops 72 304] [--bands 103] [--depth 12] [--json FILE]
Defaults are the paper's model (D = 256, 8 heads, 12 blocks, patch 4: N = 324 and 5776) on Pavia University's
103 bands; D-CHAG plans use --groups (g) groups per rank.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

from hsitp.models import PLANS, ModelConfig, SpectralSpatialTransformer, architecture_for, parallelize
from hsitp.parallel.groups import TPGroup

# bf16 keeps 8 bits of mantissa (relative step 2^-8 = 0.4 %). At P = 1 a plan runs the dense model's operations
# (the token plan convolves a strip of the same patches), so the two differ only by bf16 rounding of differently
# ordered sums: 5e-2 absolute / relative on logits of order 1 is about 10 bf16 steps.
BF16_TOL = {"rtol": 5e-2, "atol": 5e-2}


def check_plan_once(
    plan: str, base: ModelConfig, args: argparse.Namespace, device: torch.device
) -> dict[str, Any]:
    """Forward + backward of one plan at P = 1; returns what was measured and which checks failed."""
    config = architecture_for(base, plan, 1, args.groups if plan.startswith("dchag") else 1)
    dense = SpectralSpatialTransformer(config, seed=args.seed).to(device)
    model = parallelize(dense, plan, TPGroup.single())
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch, config.bands, config.height, config.width, generator=gen).to(device)
    labels = torch.randint(config.classes, (args.batch, config.height, config.width), generator=gen).to(
        device
    )
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    failures: list[str] = []

    with torch.no_grad(), autocast:
        reference = dense(x).float()  # (B, classes, H, W)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    with autocast:
        logits = model(model.shard_input(x))  # (B, classes, H, W) at P = 1
        loss = F.cross_entropy(logits.float(), model.shard_output(labels[:, None])[:, 0])  # (B, H, W) classes
    loss.backward()
    model.reduce_grads()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None

    logits = model.gather_output(logits.detach()).float()
    if not torch.isfinite(logits).all():
        failures.append("non-finite logits")
    if not torch.allclose(logits, reference, **BF16_TOL):
        failures.append(f"logits differ from dense by {float((logits - reference).abs().max()):.3g}")
    for name, p in model.named_parameters():
        if p.grad is None:
            failures.append(f"{name}: no gradient")
        elif not torch.isfinite(p.grad).all():
            failures.append(f"{name}: non-finite gradient")
    return {
        "plan": plan,
        "crop": config.height,
        "n_tokens": config.n_tokens,
        "bands": config.bands,
        "groups": config.groups,
        "seconds": seconds,
        "peak_gib": peak,
        "loss": float(loss.detach()),
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--crops", type=int, nargs="+", default=[72, 304], help="square crop edges in pixels")
    ap.add_argument("--bands", type=int, default=103)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--patch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--groups", type=int, default=4, help="D-CHAG g (groups per rank)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("model_check: --device cuda but CUDA is not available (use --device cpu)", file=sys.stderr)
        return 2
    results = []
    for crop in args.crops:
        base = ModelConfig(
            bands=args.bands,
            height=crop,
            width=crop,
            classes=args.classes,
            patch=args.patch,
            dim=args.dim,
            heads=args.heads,
            depth=args.depth,
        )
        for plan in PLANS:
            r = check_plan_once(plan, base, args, device)
            results.append(r)
            peak = f"{r['peak_gib']:.2f} GiB" if r["peak_gib"] is not None else "-"
            status = "ok" if not r["failures"] else "FAIL: " + "; ".join(r["failures"][:3])
            print(
                f"{plan:8s} N={r['n_tokens']:5d} L={r['bands']} g={r['groups']}: fwd+bwd {r['seconds']:.3f} s, "
                f"peak {peak}, loss {r['loss']:.4f}  {status}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": str(device), "args": vars(args), "results": results}, fh, indent=1)
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

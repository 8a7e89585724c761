"""One training step (forward, backward, optimiser) of each plan's single-process equivalent at the cpu config's
sizes, timed on one thread; with ``--against REV``, REV's code and today's timed in alternation in one process
pair, and their losses compared. Prints ratios measured in this one run (docs/measured-history.md, "Step speed").

    python benchmarks/step_speed.py                      # today's code: ms per step, the FLOP floor, a profile
    python benchmarks/step_speed.py --against 52edbcd    # REV's code vs today's, ABAB... rounds

Sizes (config/cpu.yaml's model): L = 200 bands, a 72 x 72 crop of patch 4 (N = 324), D = 64, 8 heads, depth 4,
MLP ratio 2, 16 classes, batch 1; D-CHAG at P = 2, g = 2 (the cpu config's cell). The step is the training
stage's: ``zero_grad(set_to_none=True)``, forward, cross-entropy with label smoothing 0.1 over the crop's pixels,
backward, AdamW (lr 3e-3, weight decay 0.3), one LR-schedule step.

With ``--against REV``: REV is checked out into a temporary git worktree; two worker processes start, one
importing REV's ``src/``, one today's. Each round times ``--steps`` steps of every plan in each worker, the order of
the two workers alternating from round to round (ABAB..., then BABA...), so a slow drift of a shared machine's
load hits both alike. Per plan it prints ``PLAN: old/new RATIO [min, max], max rel diff X``: the median of the
per-round ratios of REV's time to today's with their range, and the largest relative difference of the first
``--loss-steps`` losses, both workers starting from the same seed and batch.

Then the evaluation's share: one whole-scene prediction (the training stage's tiled inference over Indian Pines'
145 x 145 pixels) timed in each worker, and its share of a cpu-accuracy run (2000 steps) and a cpu run at
today's step time. Then a torch.profiler table of today's code (top operators by self CPU time, and the share of aten::copy_,
aten::cat and aten::fill_), and each plan's step against its FLOP count at the GEMM rate measured in the same run
(a 1024^3 float32 matmul on one thread).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANS = ("tp", "dchag_l", "dchag_c")
SIZES = {
    "bands": 200,
    "height": 72,
    "width": 72,
    "classes": 16,
    "patch": 4,
    "dim": 64,
    "heads": 8,
    "depth": 4,
    "mlp_ratio": 2,
}
# The runs whose evaluation share is reported: evaluated epochs (train.eval_every, the last summary_epochs) vs steps.
EVAL_RUNS = {"cpu-accuracy": ["cpu.yaml", "cpu-accuracy.yaml"], "cpu": ["cpu.yaml"]}
TINY = SIZES | {
    "bands": 16,
    "height": 16,
    "width": 16,
    "dim": 32,
    "heads": 4,
    "depth": 1,
}  # tests: the harness only
P, G = 2, 2  # the D-CHAG cell the single-process equivalents are built for
LR, WEIGHT_DECAY, SMOOTHING, WARMUP, TOTAL = 3e-3, 0.3, 0.1, 30, 2000


# --- worker: runs inside a process whose sys.path starts with one revision's src/ ---------------------------------
class Stepper:
    """One plan's model, optimiser, schedule and a fixed batch; ``step()`` is one training step."""

    def __init__(self, plan: str, sizes: dict[str, int], seed: int = 0) -> None:
        import torch

        from hsitp.models.config import ModelConfig, architecture_for
        from hsitp.models.model import SpectralSpatialTransformer
        from hsitp.train.loop import lr_lambda  # the training stage's schedule: linear warm-up, cosine

        torch.manual_seed(seed)
        base = ModelConfig(**sizes)
        arch = architecture_for(base, plan, P, G if plan.startswith("dchag") else 1)
        self.model = SpectralSpatialTransformer(arch, seed=seed)
        self.opt = _optimizer(self.model)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda(WARMUP, TOTAL))
        gen = torch.Generator().manual_seed(seed + 1)
        c = sizes
        self.x = torch.rand(1, c["bands"], c["height"], c["width"], generator=gen)  # (B, L, H, W)
        self.target = torch.randint(0, c["classes"], (1, c["height"], c["width"]), generator=gen)  # (B, H, W)
        self.mask = (torch.rand(1, c["height"], c["width"], generator=gen) < 0.05).float()  # labelled pixels
        self.n_train = max(1.0, float(self.mask.sum()))
        self.flops = _step_flops(arch)

    def step(self) -> float:
        import torch.nn.functional as F  # noqa: N812

        self.opt.zero_grad(set_to_none=True)
        logits = self.model(self.x)  # (B, K, H, W)
        ce = F.cross_entropy(logits.float(), self.target, reduction="none", label_smoothing=SMOOTHING)
        loss = (ce * self.mask).sum() / self.n_train
        value = float(loss.detach())
        loss.backward()
        self.opt.step()
        self.sched.step()
        return value


def _optimizer(model: object) -> object:
    """The training stage's optimiser where the revision has a factory for it, else the AdamW it built inline."""
    import torch

    try:
        from hsitp.train.optim import make_optimizer
    except ImportError:
        return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    return make_optimizer(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)


def _step_flops(arch: object) -> float:
    """FLOPs of the step's matrix products: forward 2 x MACs, backward twice that (the tokeniser's input needs no
    gradient: 2x instead of 3x there). Elementwise work (softmax, norms, GELU, AdamW) is left out: this is the
    floor the GEMM rate allows, not a model of the step."""
    c = arch
    n, L, d, p, b = c.n_tokens, c.bands, c.dim, c.patch, 1  # noqa: N806
    tok = b * n * L * d * p * p  # per-band patch embedding

    exact = getattr(c, "attention_kernel", "sdpa") == "exact"  # revisions before the exact kernel: sdpa
    heads = c.heads

    def cross_attention(keys: int, rows: int) -> int:  # one learned query over `keys` tokens, `rows` times
        if exact:  # scores (tokens x u) and the weighted mean per head, then W_v and proj on (h, D) per row
            return rows * (2 * keys * d * heads + d * d + d * d)
        return rows * (keys * 2 * d * d + 2 * keys * d + d * d)  # kv, scores + mix, proj

    rows = b * n
    if c.aggregation == "attention":
        agg = cross_attention(L, rows)
    else:
        slots = L // c.parts  # bands per chunk (no padding at the benchmark's sizes)
        if c.partial == "linear":
            agg = rows * L * d + rows * c.parts * c.groups * d  # Linear(s -> 1) per group, Linear(g -> 1)
        else:
            agg = c.parts * c.groups * cross_attention(slots // c.groups, rows)
            agg += c.parts * cross_attention(c.groups, rows) if c.groups > 1 else 0
        agg += cross_attention(c.parts, rows)  # the final cross-attention over the chunks' tokens
    hidden = c.mlp_ratio * d
    blocks = c.depth * rows * (4 * d * d + 2 * n * d + 2 * d * hidden)
    head = rows * d * c.classes * p * p
    return 2 * (2 * tok + 3 * (agg + blocks + head))


def eval_time(plan: str, sizes: dict[str, int], scene_hw: list[int], repeats: int) -> float:
    """Seconds of one whole-scene prediction (the training stage's tiled inference, ``predict_scene``) of the
    plan's single-process equivalent over a synthetic scene of ``scene_hw`` pixels (median of ``repeats``; the
    values do not change the time)."""
    import numpy as np
    import torch

    from hsitp.models.plans import parallelize
    from hsitp.parallel.groups import TPGroup
    from hsitp.train.data import Scene

    try:
        from hsitp.train.inference import predict_scene
    except ModuleNotFoundError:  # a revision from before issue 52 named the module train/evaluate.py
        from hsitp.train.evaluate import predict_scene

    st = Stepper(plan, sizes)
    model = parallelize(st.model, "dense", TPGroup.single())
    h, w = scene_hw
    k = sizes["classes"]
    labels = np.ones((h, w), dtype=np.int16)
    fields = {f.name for f in dataclasses.fields(Scene)}
    # the revision's name of the partition map: partition since issue 38, split before it (52edbcd)
    part = "partition" if "partition" in fields else "split"
    scene = Scene(
        name="synthetic",
        cube=torch.rand(sizes["bands"], h, w),
        target=torch.full((h, w), -1, dtype=torch.int64),
        train_mask=torch.zeros(h, w, dtype=torch.bool),
        classes=k,
        counts={},
        labels=labels,
        validation=np.zeros((h, w), dtype=bool),
        protocol="random",
        **{part: np.zeros((h, w), dtype=np.int8)},
    )
    times = []
    for _ in range(repeats + 1):  # the first one warms up
        t0 = time.perf_counter()
        predict_scene(model, scene, sizes["height"], batch=1, device=torch.device("cpu"), autocast=_Null())
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _evaluations(config_files: list[Path]) -> tuple[int, int]:
    """(evaluated epochs, steps) of a run of ``config_files`` (the training stage's own rule)."""
    from hsitp.config import load_config
    from hsitp.train.loop import evaluated_epochs
    from hsitp.train.settings import TrainSettings

    settings = TrainSettings.from_config(load_config(config_files))
    return len(evaluated_epochs(settings)), settings.epochs * settings.steps_per_epoch


def gemm_rate() -> float:
    """FLOP/s of a 1024^3 float32 matmul on this thread (best of 5)."""
    import torch

    a, b = torch.rand(1024, 1024), torch.rand(1024, 1024)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * 1024**3 / best


def worker(src: str) -> None:
    """Serve commands on stdin, one JSON line each, answering one JSON line on stdout."""
    sys.path.insert(0, src)
    import torch

    torch.set_num_threads(1)
    try:  # what a rank does at start (hsitp.parallel.runtime.start), where the revision has it
        from hsitp.parallel.runtime import keep_freed_memory
    except ImportError:
        pass
    else:
        keep_freed_memory()
    steppers: dict[str, Stepper] = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "time":
            st = steppers.get(cmd["plan"]) or steppers.setdefault(
                cmd["plan"], Stepper(cmd["plan"], cmd["sizes"])
            )
            st.step()  # warm (first-call allocations, lazy inits)
            t0 = time.perf_counter()
            for _ in range(cmd["steps"]):
                st.step()
            out = {"s": (time.perf_counter() - t0) / cmd["steps"], "flops": st.flops}
        elif cmd["op"] == "losses":
            st = Stepper(cmd["plan"], cmd["sizes"])
            out = {"losses": [st.step() for _ in range(cmd["steps"])]}
        elif cmd["op"] == "eval":
            out = {"s": eval_time(cmd["plan"], cmd["sizes"], cmd["scene"], cmd["repeats"])}
        elif cmd["op"] == "gemm":
            out = {"flops_per_s": gemm_rate()}
        elif cmd["op"] == "profile":
            out = {"table": profile(cmd["plan"], cmd["sizes"], cmd["steps"])}
        else:
            out = {"error": f"unknown op {cmd['op']!r}"}
        print(json.dumps(out), flush=True)


def profile(plan: str, sizes: dict[str, int], steps: int) -> dict[str, object]:
    """Top operators by self CPU time over ``steps`` steps, and the layout operators' share."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    st = Stepper(plan, sizes)
    st.step()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            st.step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    rows = sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]
    layout = sum(
        e.self_cpu_time_total for e in events if e.key in ("aten::copy_", "aten::cat", "aten::fill_")
    )
    return {
        "ms_per_step": total / 1e3 / steps,
        "layout_share": layout / total,
        "top": [(e.key, e.self_cpu_time_total / total, e.count // steps) for e in rows],
    }


# --- coordinator ----------------------------------------------------------------------------------------------------
class Worker:
    def __init__(self, src: Path, label: str) -> None:
        self.label = label
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(src)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),  # never import the checkout's hsitp by accident
        )

    def ask(self, **cmd: object) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"step_speed: the {self.label} worker died (see its stderr above)")
        out = json.loads(line)
        if "error" in out:
            raise SystemExit(f"step_speed: {self.label}: {out['error']}")
        return out

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _worktree(rev: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix="step_speed_")) / "rev"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev],
        check=True,
        capture_output=True,
    )
    return where


def _print_profile(who: str, plan: str, prof: dict) -> None:
    print(
        f"\nprofile of {who} {plan} step ({prof['ms_per_step']:.1f} ms of self CPU time per step under the "
        f"profiler; aten::copy_ + aten::cat + aten::fill_ = {100 * prof['layout_share']:.1f} %):"
    )
    print("  | operator | self CPU % | calls/step |")
    print("  |---|---|---|")
    for key, share, calls in prof["top"]:
        print(f"  | {key} | {100 * share:.1f} | {calls} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="REV", help="time REV's code against today's in alternation")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds (>= 7 for the issue's ratio)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per plan per round")
    ap.add_argument("--loss-steps", type=int, default=5, help="steps whose losses are compared")
    ap.add_argument("--plans", nargs="+", default=list(PLANS), choices=PLANS)
    ap.add_argument("--profile-steps", type=int, default=3, help="steps under the profiler (0: no profile)")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes: checks the harness, measures nothing")
    ap.add_argument(
        "--eval-repeats",
        type=int,
        default=3,
        help="whole-scene predictions timed per plan and worker (0: none)",
    )
    ap.add_argument("--worker", metavar="SRC", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0

    print(
        f"step_speed: one thread, load average {os.getloadavg()[0]:.2f} / {os.getloadavg()[1]:.2f} (1 / 5 min), "
        f"{os.cpu_count()} cores"
    )
    sizes = TINY if args.tiny else SIZES
    new = Worker(ROOT / "src", "today's")
    workers = [new]
    tree = None
    loss_diff: dict[str, float] = {}
    try:
        if args.against:
            tree = _worktree(args.against)
            old = Worker(tree / "src", args.against)
            workers = [old, new]
            for plan in args.plans:
                a = old.ask(op="losses", plan=plan, sizes=sizes, steps=args.loss_steps)["losses"]
                b = new.ask(op="losses", plan=plan, sizes=sizes, steps=args.loss_steps)["losses"]
                rel = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b, strict=True))
                print(f"  {plan}: losses of the first {args.loss_steps} steps, max rel diff {rel:.2e}")
                loss_diff[plan] = rel
        times: dict[tuple[str, str], list[float]] = {}
        flops: dict[str, float] = {}
        for r in range(args.rounds):
            order = workers if r % 2 == 0 else workers[::-1]
            for plan in args.plans:
                for w in order:
                    out = w.ask(op="time", plan=plan, sizes=sizes, steps=args.steps)
                    times.setdefault((w.label, plan), []).append(out["s"])
                    flops[plan] = out["flops"]
            print(f"  round {r + 1}/{args.rounds} done", flush=True)
        rate = new.ask(op="gemm")["flops_per_s"]
        print(f"\nGEMM rate (1024^3 float32, one thread, this run): {rate / 1e9:.1f} GFLOP/s")
        for plan in args.plans:
            t_new = statistics.median(times[("today's", plan)])
            floor = flops[plan] / rate
            line = f"{plan}: today {1e3 * t_new:.1f} ms/step"
            if args.against:
                per_round = [
                    o / n for o, n in zip(times[(args.against, plan)], times[("today's", plan)], strict=True)
                ]
                t_old = statistics.median(times[(args.against, plan)])
                line = (
                    f"{plan}: old/new {statistics.median(per_round):.2f} [{min(per_round):.2f}, "
                    f"{max(per_round):.2f}], max rel diff {loss_diff[plan]:.1e}; old {1e3 * t_old:.1f}, "
                    f"new {1e3 * t_new:.1f} ms/step"
                )
            print(
                f"{line}; FLOP floor {1e3 * floor:.1f} ms ({flops[plan] / 1e9:.2f} GFLOP), step = "
                f"{t_new / floor:.1f}x the floor"
            )
        if args.eval_repeats:
            scene = [145, 145] if not args.tiny else [40, 40]  # Indian Pines' 145 x 145 pixels
            runs = {
                name: _evaluations([ROOT / "config" / "config.yaml", *(ROOT / "config" / f for f in files)])
                for name, files in EVAL_RUNS.items()
            }
            print(f"\nevaluation (whole-scene tiled inference, {scene[0]} x {scene[1]} pixels, one thread):")
            for plan in args.plans:
                t_step = statistics.median(times[("today's", plan)])
                for w in workers:
                    t_eval = w.ask(op="eval", plan=plan, sizes=sizes, scene=scene, repeats=args.eval_repeats)[
                        "s"
                    ]
                    shares = ", ".join(
                        f"{name} ({n} evaluations, {steps} steps): {100 * n * t_eval / (n * t_eval + steps * t_step):.1f} %"
                        for name, (n, steps) in runs.items()
                    )
                    print(
                        f"  {plan} ({w.label}): {t_eval:.2f} s per prediction; share of a run at today's step time: "
                        f"{shares}"
                    )
        if args.profile_steps:
            for plan in args.plans:
                prof = new.ask(op="profile", plan=plan, sizes=sizes, steps=args.profile_steps)["table"]
                _print_profile("today's", plan, prof)
            if args.against:
                old = workers[0]
                for plan in args.plans:
                    prof = old.ask(op="profile", plan=plan, sizes=sizes, steps=args.profile_steps)["table"]
                    _print_profile(f"{args.against}'s", plan, prof)
    finally:
        for w in workers:
            w.close()
        if tree is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``hsitp bench ...``: the microbenchmark stage's subcommands (one per Snakemake rule).

``run`` is launched by torchrun, ``bench.launches`` independent launches per P (``torchrun --standalone
--nproc_per_node P -m hsitp bench run --world-size P --launch K --out FILE``; P = 1 may run without torchrun).
``merge`` joins the per-P, per-launch files into microbench.nc, ``calibrate`` fits calibration.nc, ``compare`` writes model_vs_measured.nc; ``shard`` and
``roofline`` are the single-GPU checks of benchmarks/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from hsitp.config import add_step, config_from_args
from hsitp.settings import BenchSettings


def _settings(args: argparse.Namespace) -> BenchSettings:
    return BenchSettings.from_config(config_from_args(args))


def _run(args: argparse.Namespace) -> NoReturn:
    from hsitp.signals import Interrupted, exit_rank, stop_on_signals

    # SIGINT / SIGTERM are recorded from here to the process's exit, not only during the sweep: a signal during
    # start-up, the sweep, the write or the teardown ends the job the same way (one line, 128 + signal, no file).
    with stop_on_signals(f"bench run at P={args.world_size}") as stop:
        code, written = 0, None
        try:
            from hsitp.bench.runner import run_partial

            written = run_partial(
                _settings(args),
                world_size=args.world_size,
                out=args.out,
                stop=stop,
                launch=args.launch,
            )
            stop.check()  # a signal while the file was written or the group torn down: stopped all the same
        except Interrupted as exc:
            # every rank stopped at the same point (or, after the teardown, this rank alone); one line, from rank 0.
            # A file this rank wrote after all is removed: a stopped job leaves no output for Snakemake to trust.
            if written is not None:
                Path(written).unlink(missing_ok=True)
            if os.environ.get("RANK", "0") == "0":
                print(f"hsitp: {exc}; nothing written", file=sys.stderr)
            code = exc.exit_code
        # the group is torn down (run_partial's finally); leave from inside the signal block (hsitp.signals.exit_rank),
        # at P = 1 too: returning would restore the default handlers before the interpreter exits
        exit_rank(code)


def _merge(args: argparse.Namespace) -> None:
    from hsitp.bench.results import merge_partials

    merge_partials(args.partials, args.out, _settings(args))


def _calibrate(args: argparse.Namespace) -> None:
    from hsitp.bench.calibrate import run_calibrate

    run_calibrate(args.microbench, args.out, _settings(args))


def _compare(args: argparse.Namespace) -> None:
    from hsitp.bench.compare import run_compare

    run_compare(args.microbench, args.calibration, args.out, _settings(args))


def _shard(args: argparse.Namespace) -> None:
    from hsitp.bench.shard import write_shard

    write_shard(args.out, _settings(args), hardware=args.hardware)


def _roofline(args: argparse.Namespace) -> None:
    from hsitp.bench.roofline import write_roofline

    write_roofline(args.out, _settings(args))


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench", help="microbenchmarks: measured CCR per layer, calibration, model vs measured"
    )
    bsub = bench.add_subparsers(dest="bench_command", required=True, metavar="STEP")

    p = add_step(bsub, "run", "time every configured point at one P (launch under torchrun for P > 1)", _run)
    p.add_argument("--world-size", type=int, required=True, help="P; must equal torchrun's --nproc_per_node")
    p.add_argument("--out", required=True, help="partial netCDF for this P (written by rank 0)")
    p.add_argument(
        "--launch",
        type=int,
        default=0,
        help="index of this independent launch at P (0 .. bench.launches - 1), recorded in the file for merge",
    )

    p = add_step(bsub, "merge", "merge per-P partial files into microbench.nc", _merge)
    p.add_argument("partials", nargs="+", help="partial files from `bench run`, one per P")
    p.add_argument("--out", required=True)

    p = add_step(
        bsub, "calibrate", "fit alpha, beta per collective and F per op -> calibration.nc", _calibrate
    )
    p.add_argument("--microbench", required=True, help="microbench.nc from `bench merge`")
    p.add_argument("--out", required=True)

    p = add_step(bsub, "compare", "measured CCR vs the stated and the calibrated refined model", _compare)
    p.add_argument("--microbench", required=True, help="microbench.nc from `bench merge`")
    p.add_argument("--calibration", required=True, help="calibration.nc from `bench calibrate`")
    p.add_argument("--out", required=True)

    p = add_step(
        bsub, "shard", "one device: time rank 0's shard for each P, model its comm (half-measured)", _shard
    )
    p.add_argument("--out", required=True)
    p.add_argument("--hardware", help="preset costing the traced collectives (default: bench.shard.hardware)")

    p = add_step(
        bsub, "roofline", "GEMM roofline check on one device (measured compute and memory roofs)", _roofline
    )
    p.add_argument("--out", required=True)

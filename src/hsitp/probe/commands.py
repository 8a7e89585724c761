"""``hsitp probe ...``: the memory probe's subcommands (one per Snakemake rule).

``run`` is launched by torchrun, one launch per P (``torchrun --standalone --nproc_per_node P -m hsitp probe run
--world-size P --out FILE``; P = 1 may run without torchrun); ``merge`` joins the per-P files into memory.nc and
throughput.nc (with the memory model beside the measurement); ``estimate`` runs the probe step with fake tensors
for paper-scale configs (one process).
"""

from __future__ import annotations

import argparse

from hsitp.config import add_step, config_from_args
from hsitp.settings import ProbeSettings


def _settings(args: argparse.Namespace) -> ProbeSettings:
    return ProbeSettings.from_config(config_from_args(args))


def _run(args: argparse.Namespace) -> None:
    from hsitp.probe.runner import run_partial

    run_partial(_settings(args), world_size=args.world_size, out=args.out)
    if args.world_size > 1:  # the group is torn down (run_partial's finally): the gloo teardown abort
        from hsitp.signals import exit_rank

        exit_rank(0)


def _merge(args: argparse.Namespace) -> None:
    from hsitp.probe.results import merge

    merge(
        args.partials,
        memory_out=args.memory_out,
        throughput_out=args.throughput_out,
        settings=_settings(args),
    )


def _estimate(args: argparse.Namespace) -> None:
    from hsitp.probe.estimate import run_estimate

    run_estimate(_settings(args), args.out)


def register(sub: argparse._SubParsersAction) -> None:
    probe = sub.add_parser(
        "probe", help="per-rank memory and throughput of every plan, measured and estimated"
    )
    psub = probe.add_subparsers(dest="probe_command", required=True, metavar="STEP")

    p = add_step(psub, "run", "probe every configured point at one P (launch under torchrun for P > 1)", _run)
    p.add_argument("--world-size", type=int, required=True, help="P; must equal torchrun's --nproc_per_node")
    p.add_argument("--out", required=True, help="partial netCDF for this P (written by rank 0)")

    p = add_step(
        psub, "merge", "merge per-P files into memory.nc and throughput.nc (+ the memory model)", _merge
    )
    p.add_argument("partials", nargs="+")
    p.add_argument("--memory-out", required=True)
    p.add_argument("--throughput-out", required=True)

    p = add_step(
        psub, "estimate", "paper-scale per-rank memory estimated with fake tensors (one process)", _estimate
    )
    p.add_argument("--out", required=True)

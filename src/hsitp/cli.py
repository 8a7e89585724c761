"""``hsitp``: one subcommand per DAG stage; each Snakemake rule calls exactly one of them.

Stage modules register their own parsers (``register(subparsers)``) and import heavy dependencies (torch)
only when their command runs, so ``hsitp data list`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from hsitp import __version__
from hsitp.errors import HsitpError
from hsitp.signals import Interrupted


def build_parser() -> argparse.ArgumentParser:
    from hsitp import launch
    from hsitp.audit import commands as audit_commands
    from hsitp.bench import commands as bench_commands
    from hsitp.cost import commands as cost_commands
    from hsitp.data import commands as data_commands
    from hsitp.evaluate import commands as evaluate_commands
    from hsitp.probe import commands as probe_commands
    from hsitp.report import commands as report_commands
    from hsitp.train import commands as train_commands

    parser = argparse.ArgumentParser(prog="hsitp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"hsitp {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data_commands.register(sub)
    bench_commands.register(sub)
    cost_commands.register(sub)
    report_commands.register(sub)
    audit_commands.register(sub)
    evaluate_commands.register(sub)
    train_commands.register(sub)
    probe_commands.register(sub)
    launch.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except HsitpError as exc:
        print(f"hsitp: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:  # a stage that stops at safe points (hsitp.signals)
        print(f"hsitp: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hsitp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `hsitp data list | head`: the reader left; silence Python's flush of the dead pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())

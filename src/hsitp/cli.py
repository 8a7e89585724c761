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
from typing import NoReturn

from hsitp import __version__
from hsitp.config import check_options, check_outputs
from hsitp.errors import HsitpError, one_line
from hsitp.signals import Interrupted


class Parser(argparse.ArgumentParser):
    """argparse's parser with its usage errors on one line and exit status 2, like every other refusal
    (``hsitp advise plan: error: argument --depth: ...``); ``-h`` still prints the usage. Subcommands' parsers are
    made of the same class (argparse's ``add_subparsers`` takes the parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (usage: {self.prog} -h)\n")


def build_parser() -> argparse.ArgumentParser:
    from hsitp import launch, schema
    from hsitp.audit import commands as audit_commands
    from hsitp.baseline import commands as baseline_commands
    from hsitp.bench import commands as bench_commands
    from hsitp.cost import commands as cost_commands
    from hsitp.data import commands as data_commands
    from hsitp.probe import commands as probe_commands
    from hsitp.publish import commands as publish_commands
    from hsitp.report import commands as report_commands
    from hsitp.train import commands as train_commands
    from hsitp.tune import commands as tune_commands

    parser = Parser(prog="hsitp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"hsitp {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    data_commands.register(sub)
    bench_commands.register(sub)
    cost_commands.register(sub)
    publish_commands.register(report_commands.register(sub))
    audit_commands.register(sub)
    baseline_commands.register(sub)
    train_commands.register(sub)
    tune_commands.register(sub)
    probe_commands.register(sub)
    launch.register(sub)
    schema.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except (
        SystemExit
    ) as exc:  # a usage error (its one line printed by Parser.error): a refusal like any other
        if exc.code == 0:  # -h, --version
            raise
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        check_options(args)  # a NaN, or a size or seed past its bound (hsitp.config.OPTION_BOUNDS)
        check_outputs(args)  # two outputs on one path, or an output on an input
        return int(args.func(args) or 0)
    except HsitpError as exc:
        print(f"hsitp: error: {one_line(str(exc))}", file=sys.stderr)
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
    except OSError as exc:
        # A file a stage reads or writes that the system refuses (a folder where a file was expected, no
        # permission, disk full, an image PIL cannot identify) and that no reader translated: one line naming the
        # file, the traceback under -v. Programming errors (TypeError, KeyError, ...) are not caught.
        logging.getLogger("hsitp").debug("traceback", exc_info=True)
        print(f"hsitp: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        # A binary file where a stage expected text (a notebook, a CSV table) and its reader did not say which.
        logging.getLogger("hsitp").debug("traceback", exc_info=True)
        print(
            f"hsitp: error: an input file is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}): check the paths given to `hsitp {args.command}` (-v shows where it was read)",
            file=sys.stderr,
        )
        return 2


def os_error_line(exc: OSError) -> str:
    """``PATH: what the system said`` for an OSError (Python's text quotes the path after the reason)."""
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    reason = exc.strerror or str(exc) or type(exc).__name__
    if not paths:
        return " ".join(str(reason).split())
    return f"{' -> '.join(paths)}: {' '.join(str(reason).split())}"


if __name__ == "__main__":
    sys.exit(main())

"""``python -m hsitp.torchrun [torchrun options] -m hsitp ...``: torchrun, stopping quietly on SIGINT and SIGTERM.

torchrun forwards a SIGINT or SIGTERM to its workers (which stop at their next safe point, see
:mod:`hsitp.signals`, and print one line) and then raises in its own main thread, printing a 25-line traceback of
its agent and exiting with status 1. This wrapper runs torchrun's own ``main`` unchanged and only turns that
ending into the exit status a shell expects of a signalled job (128 + signal number: 130, 143) without the
traceback, and drops the agent's two shutdown notices. A worker that fails (its own error already printed, e.g.
``hsitp: error: ...``) ends the launch with one line and that worker's exit status instead of torchrun's
traceback and error box. It also sets ``OMP_NUM_THREADS=1`` when unset, which torchrun would do itself (P > 1)
with a four-line banner; every rank sets its own threads in :func:`hsitp.parallel.runtime.start`. Arguments are
torchrun's.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

# torchrun's agent logs these when it forwards a signal; the workers say the same in one line.
_SHUTDOWN_NOTICES = ("death signal, shutting down workers", "closing signal")
_AGENT_LOGGERS = (
    "torch.distributed.elastic.agent.server.api",
    "torch.distributed.elastic.multiprocessing.api",
)


class _DropShutdownNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not any(n in record.getMessage() for n in _SHUTDOWN_NOTICES)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for name in _AGENT_LOGGERS:
        logging.getLogger(name).addFilter(_DropShutdownNotices())
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    try:
        torchrun_main(list(sys.argv[1:] if argv is None else argv))
    except SignalException as exc:
        return 128 + int(exc.sigval)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        code = int(failure.exitcode)
        # a negative exit code is the signal that ended the worker
        code = 128 - code if code < 0 else code or 1
        others = sorted(r for r in exc.failures if r != rank)
        more = f" (and ranks {', '.join(map(str, others))})" if others else ""
        print(f"hsitp.torchrun: rank {rank} failed with exit status {code}{more}", file=sys.stderr)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())

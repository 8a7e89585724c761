"""Stopping a (parallel) job cleanly on SIGINT or SIGTERM: a flag set by the signal, checked at safe points.

Python's default SIGINT raises KeyboardInterrupt wherever the main thread happens to be: inside a collective on
one rank and between two on another, so every rank prints a long traceback, the others wait in their collective
until the process-group timeout, and torchrun (which forwards the signal to its workers) kills them with SIGKILL
after its own shutdown timeout. Instead, :func:`stop_on_signals` only records the signal; the job calls
:meth:`StopRequest.check` where stopping is safe (between two measured points, between two training steps). With a
process group, ``check`` is a collective: the ranks agree whether any of them was signalled, so all of them raise
:class:`Interrupted` at the same point, can tear the group down together and exit with 128 + the signal number
(130 for SIGINT, 143 for SIGTERM), before anything is written.

Every rank must call ``check`` at the same points (like any collective). Further signals while a stop is pending
are ignored (torchrun forwards the terminal's SIGINT to ranks that already got it); a job that never reaches a safe
point is killed by its launcher as before.

    with stop_on_signals() as stop:
        for step in steps:
            work(step)
            stop.check(group, device)      # raises Interrupted on every rank once any rank was signalled

A rank of a torchrun launch (``hsitp bench run``, ``probe run``, ``train``) leaves through :func:`exit_rank`.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = ["Interrupted", "StopRequest", "exit_rank", "stop_on_signals"]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """A stop asked for by a signal, raised at a safe point; the process should exit with :attr:`exit_code`."""

    def __init__(self, signum: int, what: str = "") -> None:
        self.signum = int(signum)
        self.what = what
        super().__init__(f"{what or 'stopped'}: interrupted by {signal_name(self.signum)}")

    @property
    def exit_code(self) -> int:
        """128 + signal number, as a shell reports a process a signal ended (130 SIGINT, 143 SIGTERM)."""
        return 128 + self.signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopRequest:
    """The signal recorded since :func:`stop_on_signals` began (0: none) and the safe-point check."""

    def __init__(self, what: str = "") -> None:
        self.what = what
        self.signum = 0

    @property
    def requested(self) -> bool:
        """True once this process was signalled (other ranks may not know yet: use :meth:`check`)."""
        return self.signum != 0

    def _handle(self, signum: int, frame: Any) -> None:
        if not self.signum:  # the first signal wins; repeats (torchrun's forwarded copy) change nothing
            self.signum = signum

    def check(self, group: Any = None, device: Any = None) -> None:
        """Safe point: raise :class:`Interrupted` if this process or, with ``group``, any of its ranks was signalled.

        With a group of more than one rank this is a collective (one small all-reduce, on ``device`` for NCCL), so
        every rank of ``group`` must call it at the same point.
        """
        signum = self.signum
        if group is not None:
            import torch
            import torch.distributed as dist

            if dist.get_world_size(group) > 1:
                flag = torch.tensor([signum], dtype=torch.int64, device=device)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
                signum = int(flag.item())
        if signum:
            self.signum = self.signum or signum
            raise Interrupted(signum, self.what)


@contextmanager
def stop_on_signals(what: str = "") -> Iterator[StopRequest]:
    """Record SIGINT and SIGTERM (instead of raising or dying) while the block runs; restore the old handlers after.

    ``what`` names the job in the :class:`Interrupted` message (e.g. ``"bench run at P=2"``). Outside the main
    thread signal handlers cannot be installed: the block then runs with the old ones and ``check`` only answers
    for the other ranks.
    """
    stop = StopRequest(what)
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, stop._handle)
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def exit_rank(code: int) -> NoReturn:
    """End this rank's process with ``code`` now: flush the logs and the standard streams, then ``os._exit``.

    Call it once the process group is torn down (``Runtime.stop``: every rank waits for the others, then
    ``destroy_process_group``), or after a failure, when the peers may be stuck in a collective and waiting for
    them would hang. torch 2.13 + gloo: after ``destroy_process_group``, interpreter finalisation intermittently
    aborts ("terminate called without an active exception", SIGABRT; 3-6 runs in 10 with set_num_threads(1), cf.
    pytorch/pytorch#179291), which would fail the Snakemake job; the job's file is written (or, stopped, nothing
    is), so the process leaves without running C++ static destructors. Called inside :func:`stop_on_signals`, a
    signal after the last safe point finds the job done and its result stands.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

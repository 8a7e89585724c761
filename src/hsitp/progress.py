"""Progress of a long step: a tqdm bar on a terminal, log lines with an ETA otherwise.

Under Snakemake a job's stderr is its log file, where a bar would be thousands of carriage returns; there the
same progress is a log line every ``interval_s`` seconds (and at the end) saying how far the step is, how long it
has run and how long it should still take. Only one process of a parallel job should report (pass
``enabled=False`` on the others).
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType
from typing import IO, Any

__all__ = ["Progress", "format_duration"]


def format_duration(seconds: float) -> str:
    """``h:mm:ss`` (or ``m:ss`` under an hour); ``?`` for an unknown duration."""
    if not seconds >= 0 or seconds == float("inf"):
        return "?"
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Count ``total`` steps of a long task and report them (a context manager; :meth:`update` after each step).

    ``stream``: where a terminal bar goes (default stderr); a bar is drawn only when it is a TTY. ``logger`` gets
    the log lines otherwise (default: this module's). The ETA assumes the remaining steps take as long on average
    as the finished ones.
    """

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        logger: logging.Logger | None = None,
        enabled: bool = True,
        interval_s: float = 20.0,
        stream: IO[str] | None = None,
        unit: str = "step",
    ) -> None:
        self.total = max(int(total), 0)
        self.desc = desc
        self.done = 0
        self.enabled = enabled
        self.interval_s = interval_s
        self.log = logger or logging.getLogger(__name__)
        self._start = time.monotonic()
        self._last_log = self._start
        self._bar: Any = None
        stream = stream if stream is not None else sys.stderr
        if enabled and _isatty(stream):
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, file=stream, dynamic_ncols=True)
        elif enabled:
            self.log.info("%s: %d %ss to do", desc, self.total, unit)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def eta(self) -> float:
        """Seconds still to go, from the mean time of the finished steps (inf before the first)."""
        if self.done <= 0:
            return float("inf")
        return self.elapsed / self.done * max(self.total - self.done, 0)

    def update(self, n: int = 1, note: str = "") -> None:
        """``n`` more steps are done; ``note`` says what is being worked on (shown beside the count)."""
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last_log >= self.interval_s or self.done >= self.total:
            self._last_log = now
            self.log.info("%s", self.line(note))

    def line(self, note: str = "") -> str:
        """The log line: ``desc: done/total (pct %), elapsed m:ss, ETA m:ss[; note]``."""
        pct = 100.0 * self.done / self.total if self.total else 100.0
        text = (
            f"{self.desc}: {self.done}/{self.total} ({pct:.0f} %), elapsed {format_duration(self.elapsed)}, "
            f"ETA {format_duration(self.eta())}"
        )
        return f"{text}; {note}" if note else text

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False

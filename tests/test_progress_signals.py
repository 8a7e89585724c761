"""Progress reporting (log lines with an ETA off a terminal) and the signal-to-safe-point stop, in one process."""

from __future__ import annotations

import io
import logging
import os
import signal

import pytest

from hsitp.progress import Progress, format_duration
from hsitp.signals import Interrupted, stop_on_signals


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_logs_count_and_eta_when_not_a_terminal(caplog):
    """Catches progress that stays silent under Snakemake (stderr is a file), or a bar's carriage returns there."""
    stream = io.StringIO()  # not a TTY, like a Snakemake log file
    with (
        caplog.at_level(logging.INFO, logger="hsitp.progress"),
        Progress(4, "bench P=2", interval_s=0.0, stream=stream) as bar,
    ):
        for i in range(4):
            bar.update(1, note=f"point {i}")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "bench P=2: 4 steps to do"
    assert lines[-1].startswith("bench P=2: 4/4 (100 %), elapsed 0:00, ETA 0:00; point 3"), lines
    assert len(lines) == 5 and stream.getvalue() == ""


def test_progress_draws_a_bar_on_a_terminal_and_nothing_when_disabled(caplog):
    """Catches a bar that is not drawn on a terminal, or ranks other than 0 reporting too."""
    tty = _Tty()
    with caplog.at_level(logging.INFO, logger="hsitp.progress"):
        with Progress(3, "run", stream=tty) as bar:
            bar.update(3)
        with Progress(3, "quiet", enabled=False, stream=_Tty()) as other:
            other.update(3)
    assert "3/3" in tty.getvalue() and caplog.records == []
    assert other.done == 3


def test_format_duration():
    assert (format_duration(0), format_duration(75), format_duration(3725)) == ("0:00", "1:15", "1:02:05")
    assert format_duration(float("inf")) == "?"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_is_recorded_and_raised_at_the_safe_point(signum, code):
    """Catches a signal that interrupts the work where it happens to be (KeyboardInterrupt, or death by SIGTERM)
    instead of at the next safe point, a wrong exit status, or handlers left installed after the block."""
    before = signal.getsignal(signum)
    reached_safe_point = False
    with pytest.raises(Interrupted) as info, stop_on_signals("unit test") as stop:
        stop.check()  # nothing yet: no-op
        os.kill(os.getpid(), signum)
        os.kill(os.getpid(), signum)  # a repeat (torchrun's forwarded copy) changes nothing
        assert stop.requested
        reached_safe_point = True
        stop.check()
    assert reached_safe_point
    assert info.value.exit_code == code and info.value.signum == signum
    assert str(info.value) == f"unit test: interrupted by {signal.Signals(signum).name}"
    assert signal.getsignal(signum) is before

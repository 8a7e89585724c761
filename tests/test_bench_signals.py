"""SIGINT and SIGTERM stop a running `bench run` quickly and quietly, and leave no file behind.

SIGINT: the job is launched as the Snakemake rule launches it (``python -m hsitp.torchrun``, torchrun with 2 gloo
ranks) and the signal goes to the whole process group, as a terminal's Ctrl-C does (torchrun and both ranks get
it, and torchrun forwards another copy to the ranks). SIGTERM: a single rank without torchrun (P = 1), as a
scheduler's cancel reaches it; the CLI's own path to exit status 143. A sweep of many short points keeps either
job timing long after the signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

# Many short points (each a safe point to stop at), so the sweep takes far longer than the test waits.
SWEEP = {
    "bench": {
        "ops": ["mlp"],
        "N": list(range(16, 416, 8)),
        "D": [16],
        "L": [4],
        "warmup": 1,
        "repeats": 20,
        "passes": 1,
        "min_region_s": 0.0,
        "collectives": {"sizes_bytes": [4096, 16384, 65536], "warmup": 1, "repeats": 20, "min_region_s": 0.0},
    },
    "parallel": {"timeout_s": 60},
}


# Where a signal is sent: on the first output line holding the marker (rank 0's log), so the test waits on a state
# of the job and never on a duration (a fast machine may finish the sweep within any fixed wait).
MOMENTS = {
    "start-up": "oversubscribed=",  # the sweep's header, logged before the first point is timed
    "sweep": "to do",  # rank 0's first progress line: timing has begun
}


def _drain(stream, lines: list[str], marker: str, reached: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        if marker in line:
            reached.set()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "world_size", "moment"),
    [(signal.SIGINT, 2, "sweep"), (signal.SIGTERM, 1, "sweep"), (signal.SIGTERM, 1, "start-up")],
    ids=["SIGINT-torchrun-P2", "SIGTERM-P1", "SIGTERM-P1-start-up"],
)
def test_bench_run_stops_quietly_on_signal(tmp_path, signum, world_size, moment):
    """Catches: ranks that die with KeyboardInterrupt tracebacks, ranks that stop at different points and hang in
    a collective until the process-group timeout (or torchrun's SIGKILL), a launcher that prints its own traceback
    or exits 1, a partial or temporary file left where Snakemake expects a complete one, and a job whose quiet stop
    covers the sweep only (a SIGTERM during start-up, the write or the teardown killed it with -15)."""
    out = tmp_path / f"P{world_size}.nc"
    cmd = [sys.executable, "-m", "hsitp"]
    if world_size > 1:
        cmd = [
            sys.executable,
            "-m",
            "hsitp.torchrun",
            "--standalone",
            "--nnodes",
            "1",
            "--nproc_per_node",
            "2",
        ]
        cmd += ["-m", "hsitp"]
    cmd += [
        "bench",
        "run",
        "--world-size",
        str(world_size),
        "--out",
        str(out),
        "--config-json",
        json.dumps(SWEEP),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: list[str] = []
    reached = threading.Event()
    marker = MOMENTS[moment]
    reader = threading.Thread(target=_drain, args=(proc.stdout, lines, marker, reached), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not reached.wait(timeout=0.05):
            assert proc.poll() is None and time.monotonic() < deadline, (
                f"never reached {moment}:\n" + "".join(lines)
            )
        sent = time.monotonic()
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        rc = proc.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=5)
    text = "".join(lines)
    after = text.split(marker, 1)[1].splitlines()[1:]  # what the stop printed
    assert rc == 128 + signum, text
    assert took < 10, f"took {took:.1f} s to stop:\n{text}"
    assert "Traceback" not in text, text
    assert len(after) <= 3, text
    assert f"interrupted by {signal.Signals(signum).name}" in text, text
    assert list(tmp_path.iterdir()) == [], "left behind: " + str(list(tmp_path.iterdir()))

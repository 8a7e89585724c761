"""Spawn a small gloo world from pytest and collect each rank's result (or traceback) without ever hanging.

Ranks are started through a forkserver that imported torch and hsitp once per pytest process (``PRELOAD``): a
spawned rank paid ~2 s of CPU importing them, ~30 ranks a suite run on 2 cores. Each rank still is a fresh
process forked from a server that ran no tensor op, and takes the parent's current environment and working
directory (as a spawned one does), not the server's. Each rank starts the runtime (``hsitp.parallel.runtime.start``, gloo on CPU, one thread) with an explicit rank on a
free localhost port (port 0 bound, then released), runs ``fn(rt, *args)`` and puts ``(rank, "ok", result)`` or ``(rank, "error", traceback)`` on a queue. The parent waits up to
``deadline_s`` for every rank; ranks still alive then are killed and reported missing. Worker functions must live
in an importable module (tests/ is on sys.path under pytest).
"""

from __future__ import annotations

import os
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.multiprocessing as mp

# imported once by the forkserver (a missing one is skipped there and imported by the rank itself)
PRELOAD = [
    "torch",
    "hsitp.parallel.runtime",
    "hsitp.models",
    "hsitp.probe.runner",
    "torch.distributed._tools.mem_tracker",  # ~1.5 s more (dynamo, sympy) at a rank's first tracked step
    "hsitp.train.loop",
    "dist_utils",
    "parallel_checks",
    "model_checks",
    "probe_workers",
    "train_utils",
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(
    rank: int,
    world: int,
    port: int,
    fn: Callable[..., Any],
    args: tuple,
    q: Any,
    timeout_s: float,
    env: dict[str, str],
    cwd: str,
) -> None:
    from hsitp.parallel.runtime import RuntimeSettings, start

    os.environ.clear()  # the parent's environment and folder now, not the forkserver's from its start
    os.environ.update(env)
    os.chdir(cwd)

    # one thread per rank: 2 shared cores, no oversubscription
    settings = RuntimeSettings(backend="gloo", timeout_s=timeout_s, device="cpu", threads_per_rank=1)
    try:
        rt = start(settings, rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
        result = fn(rt, *args)
        q.put((rank, "ok", result))
        rt.stop()
    except BaseException:  # report everything to the parent
        q.put((rank, "error", traceback.format_exc()))
        q.close()
        q.join_thread()  # flush the report before the hard exit
        os._exit(1)  # do not wait on peers that may be stuck in a collective


@dataclass
class WorldOutcome:
    reports: dict[int, tuple[str, Any]] = field(default_factory=dict)  # rank -> ("ok" | "error", payload)
    exitcodes: list[int | None] = field(
        default_factory=list
    )  # None: still alive at the deadline (then killed)
    wall_s: float = 0.0


def spawn_world(
    fn: Callable[..., Any],
    world: int,
    *args: Any,
    timeout_s: float = 30.0,
    deadline_s: float = 240.0,
    expect_reports: int | None = None,
) -> WorldOutcome:
    """Run ``fn(rt, *args)`` on ``world`` gloo ranks and return what happened, without judging it."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # read when the server starts: the first world of this process
    q = ctx.Queue()
    port = free_port()
    here = (dict(os.environ), os.getcwd())
    procs = [
        ctx.Process(target=_entry, args=(r, world, port, fn, args, q, timeout_s, *here), daemon=True)
        for r in range(world)
    ]
    start = time.monotonic()
    for p in procs:
        p.start()
    out = WorldOutcome()
    want = world if expect_reports is None else expect_reports
    end = start + deadline_s
    while len(out.reports) < want and time.monotonic() < end:
        try:
            rank, status, payload = q.get(timeout=0.2)
            out.reports[rank] = (status, payload)
        except queue.Empty:
            if all(not p.is_alive() for p in procs) and q.empty():
                break
    for (
        p
    ) in procs:  # reporters exit at once; a rank that is stuck (e.g. SIGSTOP'ed) gets a short grace period
        p.join(timeout=max(0.0, min(3.0, end - time.monotonic())))
    out.exitcodes = [p.exitcode for p in procs]
    out.wall_s = time.monotonic() - start
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return out


def run_world(fn: Callable[..., Any], world: int, *args: Any, **kwargs: Any) -> list[Any]:
    """Like spawn_world, but every rank must succeed; returns the per-rank results in rank order."""
    out = spawn_world(fn, world, *args, **kwargs)
    errors = [
        f"--- rank {r} ---\n{payload}"
        for r, (status, payload) in sorted(out.reports.items())
        if status != "ok"
    ]
    missing = [r for r in range(world) if r not in out.reports]
    if errors or missing:
        detail = "\n".join(errors)
        if missing:
            detail += f"\nranks {missing} reported nothing (hung or died); exit codes {out.exitcodes}"
        raise AssertionError(f"distributed run of {fn.__name__} failed:\n{detail}")
    return [out.reports[r][1] for r in range(world)]

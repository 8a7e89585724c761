"""One torchrun launch of ``hsitp bench run``: every rank times the same points, rank 0 writes the partial file.

The process-group backend and timeout, the attention heads and head padding are the ``parallel`` section's (the
layers' own settings); everything else is ``bench``'s. A sweep the layers would refuse (heads the ranks do not
divide, with ``parallel.head_padding: false``) is refused before anything is timed.

Rank 0 reports progress (a bar on a terminal, a log line with an ETA every few seconds under Snakemake). SIGINT and
SIGTERM stop every rank after the point being timed (:mod:`hsitp.signals`): the ranks agree to stop, tear the
process group down and raise :class:`~hsitp.signals.Interrupted`; nothing is written.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hsitp.bench.collective_sweep import sweep_collectives
from hsitp.bench.predict import check_points
from hsitp.bench.results import SWEPT, empty_partial, write_partial
from hsitp.config import ConfigError
from hsitp.cost.budget import ANY_MACHINE_BYTES, check_bench_sizes, host_bytes
from hsitp.progress import Progress
from hsitp.signals import StopRequest

if TYPE_CHECKING:
    from hsitp.parallel.runtime import Runtime
    from hsitp.settings import BenchSettings

log = logging.getLogger(__name__)


def check_passes(s: BenchSettings) -> None:
    """Every round-robin pass needs at least one repeat of the layers and of the collectives."""
    passes, reps, creps = s.passes, s.repeats, s.collectives.repeats
    if passes > min(reps, creps):
        raise ConfigError(
            f"bench.passes = {passes} exceeds bench.repeats ({reps}) or bench.collectives.repeats ({creps}); "
            "lower bench.passes or raise the repeats"
        )


def run_partial(
    settings: BenchSettings, *, world_size: int, out: str | Path, stop: StopRequest, launch: int = 0
) -> Path | None:
    """Run the configured sweep at P = ``world_size``; returns the file written (rank 0) or None (other ranks).

    ``launch``: which of the ``bench.launches`` independent launches at this P this process is (recorded in the
    file; merge pools the launches and keeps each one's CCR, whose spread the audit decides by).

    ``stop``: the caller's signal recorder (``hsitp bench run`` installs it from the command's start to its exit,
    so a signal at any moment, not only during the sweep, stops the job the same way).
    """
    from hsitp.parallel.runtime import RuntimeSettings, start

    check_passes(settings)
    rt = start(RuntimeSettings.from_config(settings.config, section="bench", world_size=world_size))
    try:
        return _run(settings, rt, Path(out), stop, launch=launch)
    finally:
        rt.stop()


def _resolved_dtypes(s: BenchSettings, rt: Runtime) -> dict[str, Any]:
    """bench.dtypes by resolved name ("auto" may resolve to a dtype also listed by name: time it once)."""
    from hsitp.parallel.runtime import dtype_name, resolve_dtype

    resolved: dict[str, Any] = {}
    for name in s.dtypes:
        dt = resolve_dtype(name, rt.device, key="bench.dtypes")
        resolved.setdefault(dtype_name(dt), dt)
    return resolved


def _run(
    s: BenchSettings, rt: Runtime, out: Path, stop: StopRequest | None = None, *, launch: int = 0
) -> Path | None:
    stop = stop or StopRequest()  # no signal handlers: only the other ranks can stop this one
    from hsitp.bench.ops import bench_kernel, sweep_points

    resolved = _resolved_dtypes(s, rt)
    names = list(resolved)
    points = [pt for _, pt in sweep_points(s, rt.world_size, names)]
    memory = ANY_MACHINE_BYTES if rt.device.type == "cuda" else host_bytes() / rt.world_size
    check_points(points, head_padding=s.head_padding, memory=memory)
    check_bench_sizes([], 0, s.collectives.sizes_bytes, memory)
    fixed = {k: v for k, v in dataclasses.asdict(points[0].shape).items() if k not in SWEPT}
    cc = s.collectives
    ds = empty_partial(ops=s.ops, world_size=rt.world_size, N=s.N, D=s.D, L=s.L, dtypes=names, repeats=s.repeats,
                       collectives=cc.names, sizes_bytes=cc.sizes_bytes, coll_repeats=cc.repeats, layer_shape=fixed,
                       head_padding=s.head_padding)  # fmt: skip
    if rt.rank == 0:
        log.info(
            "bench P=%d on %s (oversubscribed=%s): %d layer points x %d repeats, %d collectives x %d sizes x %d "
            "repeats, %d passes", rt.world_size, rt.device_label, rt.oversubscribed, len(points), s.repeats,
            len(cc.names), len(cc.sizes_bytes), cc.repeats, s.passes,
        )  # fmt: skip
    _passes(s, rt, ds, resolved, len(points), stop)
    ds.attrs.update(collective_dtype=names[0], passes=s.passes, launch=int(launch))
    ds.attrs["attention_kernel"] = bench_kernel(s, rt.device.type)  # the aggregation ops' kernel
    stop.check(rt.group, rt.device)  # the last safe point before the file: all ranks agree to write it or not
    if rt.rank != 0:
        return None
    return write_partial(ds, out, settings=s, attrs=rt.attrs())


def _passes(
    s: BenchSettings, rt: Runtime, ds: Any, resolved: dict[str, Any], n_points: int, stop: StopRequest
) -> None:
    """Round-robin passes: each pass times the collective sweep and then every layer point with its share of the
    repeats, so slow drifts of a shared machine's load hit the calibration and every point alike."""
    from hsitp.bench.ops import time_ops

    cc, names = s.collectives, list(resolved)
    sweep = {"names": cc.names, "sizes_bytes": cc.sizes_bytes, "dtype": resolved[names[0]], "warmup": cc.warmup,
             "min_region_s": cc.min_region_s}  # fmt: skip
    coll_reps = np.array_split(np.arange(cc.repeats), s.passes)
    op_reps = np.array_split(np.arange(s.repeats), s.passes)
    sweep_steps = len(cc.names) * len(cc.sizes_bytes) if rt.world_size > 1 else 0
    total = s.passes * (sweep_steps + n_points)
    with Progress(total, f"bench P={rt.world_size}", logger=log, enabled=rt.rank == 0, unit="point") as bar:

        def done(note: str) -> None:
            """One point or collective size timed: report it, then stop here if any rank was signalled."""
            bar.update(1, note)
            stop.check(rt.group, rt.device)

        stop.check(rt.group, rt.device)  # a signal during start-up
        for k, (creps, oreps) in enumerate(zip(coll_reps, op_reps, strict=True)):
            tag = f"pass {k + 1}/{s.passes}"
            times, full_bytes = sweep_collectives(
                rt, repeats=len(creps), on_step=lambda what, tag=tag: done(f"{tag} {what}"), **sweep
            )
            ds["coll_time"].values[:, 0][..., creps] = times
            ds["coll_bytes"].values[:, 0] = full_bytes
            time_ops(ds, rt, s, dtypes=names, reps=oreps, on_step=lambda what, tag=tag: done(f"{tag} {what}"))

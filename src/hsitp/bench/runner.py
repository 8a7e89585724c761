"""One torchrun launch of ``hsitp bench run``: every rank times the same points, rank 0 writes the partial file."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hsitp.bench.collective_sweep import sweep_collectives
from hsitp.bench.results import empty_partial, write_partial
from hsitp.bench.runtime import BenchRuntime, dtype_name, resolve_dtype, start_runtime, stop_runtime

log = logging.getLogger(__name__)


def run_partial(config: Mapping[str, Any], *, world_size: int, out: str | Path) -> Path | None:
    """Run the configured sweep at P = ``world_size``; returns the file written (rank 0) or None (other ranks)."""
    bc = config["bench"]
    rt = start_runtime(
        device=bc["device"],
        backend=bc["backend"],
        threads_per_rank=bc["threads_per_rank"],
        timeout_s=bc["timeout_s"],
        expected_world_size=world_size,
    )
    try:
        return _run(config, rt, Path(out))
    finally:
        stop_runtime(rt)


def _run(config: Mapping[str, Any], rt: BenchRuntime, out: Path) -> Path | None:
    from hsitp.bench.ops import time_ops

    bc = config["bench"]
    resolved: dict[str, Any] = {}  # "auto" may resolve to a dtype also listed by name: time it once
    for name in bc["dtypes"]:
        dt = resolve_dtype(name, rt.device)
        resolved.setdefault(dtype_name(dt), dt)
    names = list(resolved)
    cc = bc["collectives"]
    ds = empty_partial(
        ops=bc["ops"],
        world_size=rt.world_size,
        N=bc["N"],
        D=bc["D"],
        L=bc["L"],
        dtypes=names,
        repeats=bc["repeats"],
        collectives=cc["names"],
        sizes_bytes=cc["sizes_bytes"],
        coll_repeats=cc["repeats"],
    )
    if rt.rank == 0:
        log.info("bench P=%d on %s (oversubscribed=%s)", rt.world_size, rt.device_label, rt.oversubscribed)
    # Half the collective repeats before the layers and half after: on a shared machine the load drifts, and
    # the calibration should see the same conditions as the layer timings it is compared with.
    first = (cc["repeats"] + 1) // 2
    sweep = {
        "names": cc["names"],
        "sizes_bytes": cc["sizes_bytes"],
        "dtype": resolved[names[0]],
        "warmup": cc["warmup"],
        "min_region_s": bc["min_region_s"],
    }
    before, full_bytes = sweep_collectives(rt, repeats=first, **sweep)
    time_ops(ds, rt, bc, dtypes=resolved, seed=int(config["seed"]))
    after, _ = sweep_collectives(rt, repeats=cc["repeats"] - first, **sweep)
    ds["coll_time"].values[:, 0] = np.concatenate([before, after], axis=-1)
    ds["coll_bytes"].values[:, 0] = full_bytes
    ds.attrs["collective_dtype"] = names[0]
    ds.attrs["collective_sweep"] = f"{first} repeats before the layer timings, {cc['repeats'] - first} after"
    if rt.rank != 0:
        return None
    return write_partial(ds, out, config=config, attrs=rt.attrs())

"""Rank functions of tests/test_probe.py (spawned ranks import them from here)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hsitp.config import validate_config
from hsitp.settings import ProbeModel, ProbeSettings

TINY = {
    "seed": 0,
    "probe": {
        "plans": ["tp", "dchag_l"],
        "world_sizes": [2],
        "groups": [2],
        "L": [6],
        "N": [16],
        "patch": 2,
        "dim": 16,
        "depth": 1,
        "heads": 2,
        "classes": 3,
        "batch": 2,
        "steps": 2,
        "throughput": {"repeats": 5, "steps": 1, "warmup": 1},
        "checkpointing": ["none", "blocks"],
        "device": "cpu",
    },
}
PEAK_SECTION = {
    "patch": 2,
    "classes": 3,
    "dim": 32,
    "heads": 4,
    "depth": 2,
    "mlp_ratio": 4,
    "dtype": "float32",
}


def tiny_config() -> dict[str, Any]:
    return validate_config(TINY)


def probe_all(rt: Any, s: ProbeSettings | None = None) -> dict[str, Any]:
    """What ``hsitp probe run`` measures at P = world size (hsitp.probe.runner.run_partial, on the spawned world's
    runtime) with ``s`` (TINY's by default): every point's result with its throughput rounds, the interleaving
    orders, the runtime's attributes."""
    from hsitp.probe.grid import points
    from hsitp.probe.runner import probe_point, throughput_phase

    s = s or ProbeSettings.from_config(tiny_config())
    pts = points(s, rt.world_size)
    results = [probe_point(pt, s, rt) for pt in pts]
    samples, orders = throughput_phase(pts, s, rt)  # as run_partial: every plan interleaved
    results = [dataclasses.replace(res, sample_time=samples[res.point]) for res in results]
    return {"results": results, "orders": orders, "attrs": rt.attrs() if rt.rank == 0 else None}


def peak_points(rt: Any, cases: list[tuple[str, str, int, int, int, int]]) -> list[dict[str, Any]]:
    """Per case (plan, checkpointing, batch, L, N, g) at P = world size: rank 0's measured peak and transient
    (``measure_step`` after one warm-up step, real collectives) beside the memory model's."""
    import torch

    from hsitp.cost.memory import plan_memory
    from hsitp.probe.build import build_point
    from hsitp.probe.grid import Point
    from hsitp.probe.model import size_of
    from hsitp.probe.tracker import measure_step

    out = []
    for plan, ck, batch, L, N, g in cases:  # noqa: N806
        pc = ProbeModel(**PEAK_SECTION, batch=batch)
        b = build_point(
            Point(plan, rt.world_size, g, L, N, ck),
            pc,
            rt.world,
            dtype=torch.float32,
            device=rt.device,
            seed=0,
        )
        b.step()
        mem = measure_step(b.model, b.step, optimizer=b.optimizer, device=rt.device)
        model = plan_memory(plan, size_of(pc, L, N, "float32"), rt.world_size, g, ck)
        out.append(
            {
                "case": (plan, rt.world_size, ck, batch, L, N, g),
                "peak": mem.peak_allocated,
                "peak_model": model[("step", "peak")],
                "transient": mem.transient,
                "transient_model": model[("step", "transient")],
                "at": f"{mem.peak_part}/{mem.peak_phase}",
            }
        )
    return out

"""Rank functions of tests/test_probe.py (spawned ranks import them from here)."""

from __future__ import annotations

from typing import Any

from hsitp.config import validate_config

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
        "checkpointing": ["none", "blocks"],
        "device": "cpu",
    },
}


def tiny_config() -> dict[str, Any]:
    return validate_config(TINY)


def probe_all(rt: Any) -> list[dict[str, Any]]:
    from hsitp.probe.build import points
    from hsitp.probe.runner import probe_point

    cfg = tiny_config()
    return [probe_point(pt, cfg, rt) for pt in points(cfg["probe"], rt.world_size)]

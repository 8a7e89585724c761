"""Shared by the training tests: a tiny synthetic prepared scene and a tiny training config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from nc_checks import described

from hsitp.config import validate_config
from hsitp.io import provenance, write_netcdf
from hsitp.sections import Config
from hsitp.train.settings import TrainSettings


def write_scene(path: Path, *, both_protocols: bool = False, seed: int = 0, bands: int = 12) -> Path:
    """A 16 x 16 scene, 12 bands (103: Pavia University's count), 3 classes in vertical stripes (learnable from
    the spectra), one partition (partition_index 0) of the random protocol (and of the block one with
    ``both_protocols``)."""
    rng = np.random.default_rng(seed)
    h = w = 16
    labels = np.zeros((h, w), dtype=np.int16)
    labels[:, 1:15] = 1 + (np.arange(1, 15) * 3 // 15)[None, :]
    labels[0, :] = 0  # an unlabelled row
    cube = rng.random((h, w, bands), dtype=np.float32) * 0.2
    for c in (1, 2, 3):
        cube[labels == c, c * 3 : c * 3 + 3] += 0.8  # class c lights up its own bands
    part_random = np.where(labels > 0, np.where(rng.random((h, w)) < 0.5, 1, 2), 0).astype(np.int8)
    part_block = np.where(labels > 0, np.where(np.arange(w)[None, :] < 8, 1, 2), 0).astype(np.int8)
    parts = [part_random, part_block] if both_protocols else [part_random]
    part = (("protocol", "partition_index", "y", "x"), np.stack(parts)[:, None])
    coords: dict[str, Any] = {"protocol": ["random", "block"][: len(parts)], "partition_index": [0]}
    ds = xr.Dataset(
        {
            "cube": (("y", "x", "band"), cube, {"units": "1"}),
            "labels": (("y", "x"), labels, {"class_names": {"1": "a", "2": "b", "3": "c"}}),
            "partition": part,
        },
        coords=coords,
    )
    ds.attrs["dataset"] = "synthetic"
    ds.attrs["partition_settings"] = json.dumps(
        {"block": 4}
    )  # the block partition's grid (validation blocks)
    return write_netcdf(described(ds), path, kind="dataset", prov=provenance({}))


TINY_CROP = {"patch": 4, "tokens": 9, "datasets": None}  # S = 4 x 3 = 12


def tiny_config(data: dict[str, Any] | None = None, **train: Any) -> Config:
    """A validated config whose model trains on the synthetic scene in well under a second per step (``data``: its
    data section)."""
    base: dict[str, Any] = {
        "epochs": 3,
        "steps_per_epoch": 2,
        "warmup_steps": 1,
        "eval_every": 2,  # epochs 2 and 3 evaluated, epoch 1 not (NaN in the record)
        "summary_epochs": 2,  # the last 2 epochs (each evaluated) are the record's summary window
        "crops": [TINY_CROP],  # S = 12 on the 16 x 16 scene
        "model": {"dim": 16, "heads": 2, "depth": 1, "mlp_ratio": 2},
        "device": "cpu",
    }
    base.update(train)
    return validate_config({"train": base, "parallel": {"timeout_s": 20}, "data": data or {}})


def train_p1(cfg: Config, job: Any, recipe_plan: str | None = None) -> Path | None:
    """Train one job in this process at P = 1 (a runtime started and stopped around it)."""
    from hsitp.parallel.runtime import RuntimeSettings, start
    from hsitp.train.loop import train_rank

    rt = start(RuntimeSettings.from_config(cfg, section="train", world_size=1))
    try:
        return train_rank(rt, TrainSettings.from_config(cfg, recipe_plan), job)
    finally:
        rt.stop()

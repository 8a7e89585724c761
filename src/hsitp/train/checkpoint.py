"""Atomic per-epoch checkpoints: every rank writes its own state, then rank 0 writes the manifest, last.

Layout: ``<dir>/epoch_0007/rank0.pt ... rank{P-1}.pt`` and ``<dir>/epoch_0007/manifest.json``. A checkpoint is
complete exactly when its manifest exists (the manifest is written after a barrier that follows every rank's
atomic write), so a run killed at any moment leaves either a complete checkpoint or a folder the next run ignores
and removes. ``keep`` complete checkpoints are kept: the newest ones, so the final epoch's is always among them.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from hsitp.errors import HsitpError
from hsitp.io import atomic_write, atomic_write_text

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


class CheckpointError(HsitpError):
    """A checkpoint folder is unreadable or belongs to a different world size."""


def epoch_dir(root: Path, epoch: int) -> Path:
    return root / f"epoch_{epoch:04d}"


def _atomic_torch_save(obj: Any, path: Path) -> None:
    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def complete_epochs(root: Path) -> list[int]:
    """Epochs (1-based: the number of finished epochs) that have a manifest, oldest first."""
    if not root.is_dir():
        return []
    out = []
    for d in root.glob("epoch_*"):
        if (d / MANIFEST).is_file():
            try:
                out.append(int(d.name.removeprefix("epoch_")))
            except ValueError:
                continue
    return sorted(out)


def save_checkpoint(
    root: Path,
    epoch: int,
    rank: int,
    world_size: int,
    state: Mapping[str, Any],
    meta: Mapping[str, Any],
    *,
    keep: int,
    barrier: Callable[[], None],
) -> Path:
    """Every rank calls this after epoch ``epoch`` (number of finished epochs). Returns the checkpoint folder."""
    d = epoch_dir(root, epoch)
    if rank == 0:
        (d / MANIFEST).unlink(missing_ok=True)  # a stale manifest must not vouch for new files
    barrier()
    _atomic_torch_save(dict(state), d / f"rank{rank}.pt")
    barrier()  # every rank's file is in place
    if rank == 0:
        manifest = {
            "epoch": epoch,
            "world_size": world_size,
            "files": [f"rank{r}.pt" for r in range(world_size)],
            "meta": dict(meta),
        }
        atomic_write_text(d / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
        _prune(root, keep)
    barrier()
    return d


def _prune(root: Path, keep: int) -> None:
    """Remove all but the newest ``keep`` complete checkpoints, and every incomplete folder."""
    done = complete_epochs(root)
    keep_set = set(done[-keep:])
    for d in root.glob("epoch_*"):
        try:
            e = int(d.name.removeprefix("epoch_"))
        except ValueError:
            continue
        if e not in keep_set:
            shutil.rmtree(d, ignore_errors=True)


def latest_checkpoint(
    root: Path, rank: int, world_size: int, meta: Mapping[str, Any]
) -> tuple[int, dict] | None:
    """(epoch, this rank's state) of the newest complete checkpoint made with the same ``meta``, or None.

    A checkpoint of another configuration (other ``meta``) is not resumed from: None, and the caller starts over
    (rank 0 removes it). A checkpoint of another world size is an error (the per-rank shards would not fit)."""
    done = complete_epochs(root)
    if not done:
        return None
    d = epoch_dir(root, done[-1])
    try:
        manifest = json.loads((d / MANIFEST).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{d / MANIFEST}: unreadable ({exc}); delete {root} to start afresh") from exc
    stored = dict(manifest.get("meta") or {})
    if stored != dict(json.loads(json.dumps(dict(meta)))):
        log.warning("%s: checkpoints of another configuration; starting afresh", root)
        return None
    if manifest.get("world_size") != world_size:
        raise CheckpointError(
            f"{d}: written by {manifest.get('world_size')} ranks, this run has {world_size}; delete {root}"
        )
    state = torch.load(d / f"rank{rank}.pt", map_location="cpu", weights_only=False)
    return int(manifest["epoch"]), state


def clear(root: Path) -> None:
    """Remove every checkpoint under ``root`` (rank 0, when starting afresh)."""
    if root.is_dir():
        for d in root.glob("epoch_*"):
            shutil.rmtree(d, ignore_errors=True)

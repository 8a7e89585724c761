"""``results/<run>/train/equivalence.nc``: does each single-process equivalent train like its plan over P ranks?

Under ``train.equivalent`` the accuracy runs train ``architecture_for(base, plan, P, g)`` in one process. The parity
tests show one step of it equals the plan over P ranks; this file shows whole training curves agree: for each
(plan, P, g), one real P-rank run (``hsitp train --stop-after E``, same seed, protocol and LR schedule) against the
equivalent's record at the same epoch E. Test OA must agree within ``train.equivalence.tolerance`` (0.0005: equal
to 3 decimals); the mean training loss of each epoch up to E stands beside it (float reassociation across ranks
makes the curves differ in the last bits, not more). tp's equivalent is one model for every P.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr

from hsitp.contracts import TRAIN
from hsitp.errors import HsitpError
from hsitp.io import variable

DEFAULT_TOLERANCE = 5e-4


class EquivalenceError(HsitpError, ValueError):
    """Check runs without their equivalent, or records that are neither (names the file)."""


def _key(ds: xr.Dataset, *, any_p: bool) -> tuple:
    a = ds.attrs
    return (
        str(a["dataset"]),
        str(a["plan"]),
        None if any_p else int(a["P"]),
        int(a["g"]),
        str(a["protocol"]),
        int(a["seed"]),
        int(a["tokens"]),
    )


def compare(records: Sequence[str | Path], tolerance: float = DEFAULT_TOLERANCE) -> xr.Dataset:
    """Pair every check record (stopped after E epochs, P ranks) with its equivalent (1 rank) and compare at E."""
    checks, equivalents = _sort_records(records)
    rows = sorted(
        (_compare_one(path, ds, equivalents) for path, ds in checks),
        key=lambda r: (r.coords["dataset"], r.coords["plan"], r.coords["P"], r.coords["g"]),
    )
    d_oa = np.array([r.oa_check - r.oa_equivalent for r in rows])
    passed = (np.abs(d_oa) <= tolerance) & np.array([r.recipe_match for r in rows])
    ds_out = xr.Dataset(_check_vars(rows, d_oa, passed, tolerance), coords=_check_coords(rows))
    ds_out.attrs.update(
        {
            "title": "hsitp training equivalence: each plan over P ranks vs its single-process equivalent",
            "tolerance": float(tolerance),
            "method": __doc__.split("\n\n")[1].replace("\n", " "),
            "measured": "both runs on this machine's CPU/gloo (or CUDA/NCCL where the record says so)",
        }
    )
    return ds_out


Record = tuple[str | Path, xr.Dataset]  # a record's path and its contents


def _sort_records(records: Sequence[str | Path]) -> tuple[list[Record], dict[tuple, Record]]:
    """The check runs, and the equivalents by cell and seed (tp's also under any P: one model at every P)."""
    checks: list[Record] = []
    equivalents: dict[tuple, Record] = {}
    for path in records:
        ds = TRAIN.read(path)
        ranks, stop = int(ds.attrs.get("ranks", ds.attrs["P"])), int(ds.attrs.get("stopped_after_epochs", 0))
        if stop and ranks == int(ds.attrs["P"]):
            checks.append((path, ds))
        elif ranks == 1 and not stop:
            equivalents[_key(ds, any_p=False)] = (path, ds)
            if str(ds.attrs["plan"]) == "tp":
                equivalents[_key(ds, any_p=True)] = (path, ds)
        else:
            raise EquivalenceError(
                f"{path}: neither a check run (P ranks, stopped_after_epochs > 0) nor a single-process equivalent "
                f"(ranks 1, whole schedule): ranks {ranks}, P {ds.attrs['P']}, stopped after {stop}"
            )
    if not checks:
        raise EquivalenceError("train equivalence: no check run among the records")
    return checks, equivalents


# the file's coordinates of a check: the check record's attribute each is read from, its type, long_name and units
COORDS = {
    "plan": ("plan", object, "parallel plan", None),
    "P": ("P", np.int32, "TP size of the check run (ranks)", "1"),
    "g": ("g", np.int32, "D-CHAG groups", "1"),
    "dataset": ("dataset", object, "dataset", None),
    "protocol": ("protocol", object, "accuracy protocol", None),
    "seed": ("seed", np.int32, "seed", "1"),
    "N": ("tokens", np.int32, "spatial tokens per crop", "1"),
    "epoch": (
        "stopped_after_epochs",
        np.int32,
        "epochs trained by the check run (train.equivalence.epochs)",
        "1",
    ),
}


@dataclass(frozen=True)
class Check:
    """One check run against its equivalent: its coordinates (:data:`COORDS`' names) and what was compared."""

    coords: dict[str, str | int]
    oa_check: float
    oa_equivalent: float
    loss_max_rel_diff: float
    recipe_match: bool


def _compare_one(path: str | Path, ds: xr.Dataset, equivalents: Mapping[tuple, Record]) -> Check:
    """One check run against its equivalent at the check's last epoch: its coordinates (:data:`COORDS`), test OA
    of both, the loss curves' largest relative difference up to there, and whether they share the recipe."""
    found = equivalents.get(_key(ds, any_p=str(ds.attrs["plan"]) == "tp"))
    if found is None:
        raise EquivalenceError(f"{path}: no single-process equivalent record of the same cell and seed given")
    epath, eq = found
    e = int(ds.attrs["stopped_after_epochs"])
    if e not in eq["epoch"].values or not np.isfinite(float(eq["oa"].sel(epoch=e))):
        raise EquivalenceError(f"{epath}: not evaluated at epoch {e}, the check's last (train.equivalence)")
    loss_c = ds["loss"].sel(epoch=slice(1, e)).values
    loss_e = eq["loss"].sel(epoch=slice(1, e)).values
    return Check(
        coords={
            name: (str if dtype is object else int)(ds.attrs[attr])
            for name, (attr, dtype, *_) in COORDS.items()
        },
        oa_check=float(ds["oa"].sel(epoch=e)),
        oa_equivalent=float(eq["oa"].sel(epoch=e)),
        loss_max_rel_diff=float(np.max(np.abs(loss_c - loss_e) / np.maximum(np.abs(loss_e), 1e-12))),
        recipe_match=ds.attrs.get("recipe_hash") == eq.attrs.get("recipe_hash"),
    )


def _check_vars(rows: Sequence[Check], d_oa: np.ndarray, passed: np.ndarray, tolerance: float) -> dict:
    def column(key: str, long: str) -> tuple:
        return variable("check", [getattr(r, key) for r in rows], long)

    loss = "largest relative difference of the epochs' mean training loss up to the check epoch"
    return {
        "oa_check": column("oa_check", "test OA of the P-rank run at the check epoch"),
        "oa_equivalent": column(
            "oa_equivalent", "test OA of the single-process equivalent at the same epoch"
        ),
        "d_oa": variable("check", d_oa, "OA of the P-rank run minus its equivalent's"),
        "loss_max_rel_diff": column("loss_max_rel_diff", loss),
        "passed": variable(
            "check",
            passed.astype(np.int8),
            f"1 where |d_oa| <= {tolerance:g} and both runs share the recipe hash",
            flag_values=np.array([0, 1], dtype=np.int8),
            flag_meanings="failed passed",
        ),
    }


def _check_coords(rows: Sequence[Check]) -> dict[str, tuple]:
    coords = {"check": variable("check", np.arange(len(rows), dtype=np.int32), "check index")}
    for name, (_, dtype, long, units) in COORDS.items():
        attrs = {"long_name": long} | ({"units": units} if units else {})
        coords[name] = ("check", np.array([r.coords[name] for r in rows], dtype=dtype), attrs)
    return coords


def failures(ds: xr.Dataset) -> list[str]:
    """One line per failed check, naming the cell and the OA difference."""
    out = []
    for i in np.flatnonzero(np.asarray(ds["passed"].values) == 0):
        c = ds.isel(check=int(i))
        out.append(
            f"{c['plan'].item()} P={int(c['P'])} g={int(c['g'])} {c['protocol'].item()} seed {int(c['seed'])}: OA "
            f"{float(c['oa_check']):.4f} over P ranks vs {float(c['oa_equivalent']):.4f} in one process after "
            f"epoch {int(c['epoch'])} (tolerance {ds.attrs['tolerance']:g})"
        )
    return out

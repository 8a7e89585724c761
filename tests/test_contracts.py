"""hsitp.contracts: one module says, per file kind, its name, dimensions, required variables and reader."""

from __future__ import annotations

import ast
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
from nc_checks import described

from hsitp import contracts
from hsitp.io import ResultFileError, provenance, write_netcdf

ROOT = Path(__file__).resolve().parents[1]
ALL = {
    c.kind: c
    for c in [*vars(contracts).values(), *contracts.COST.values()]
    if isinstance(c, contracts.Contract)
}
# written by an older hsitp (no means over repeats): the report still draws them, the bench steps refuse them
OLDER = {ROOT / "tests/fixtures/report_bench" / f"microbench{p}.nc" for p in ("", "_P1", "_P2")}
# a prepared scene reduced to its labels, partition and band moments (tests/reference_summary.py): kind dataset,
# no cube, so refused as a scene to train on
REDUCED = ROOT / "results/reference/smoke/data/indian_pines_summary.nc"


def _committed() -> list[Path]:
    return sorted([*ROOT.glob("results/reference/**/*.nc"), *ROOT.glob("tests/fixtures/**/*.nc")])


@pytest.mark.parametrize("path", _committed(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_file_reads_through_its_contract(path: Path) -> None:
    """Catches a contract that lists more than its writer writes (every reader of the kind would refuse the
    committed references), and a committed kind with no contract at all."""
    with netCDF4.Dataset(path) as nc:
        kind = nc.getncattr("kind")
    assert kind in ALL, f"{path}: kind {kind!r} has no contract in hsitp.contracts"
    if path in OLDER:
        with pytest.raises(ResultFileError, match="lacks variable 'time_mean'"):
            ALL[kind].read(path, load=False)
        return
    if path == REDUCED:  # `hsitp baseline --data` of it ended in a KeyError traceback on the absent cube
        with pytest.raises(ResultFileError, match="lacks variable 'cube'"):
            ALL[kind].read(path, load=False)
        return
    ALL[kind].read(path, load=False).close()


def test_no_kind_is_spelled_outside_the_contracts() -> None:
    """Catches a kind typed as a string literal at a reader or writer (`kind="train_summary"`): two spellings of one
    kind drift apart, and a reader then refuses its own stage's files."""
    found = []
    for path in sorted((ROOT / "src" / "hsitp").rglob("*.py")):
        if path.name == "contracts.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "read_netcdf", "write_netcdf", "load",
            ):  # fmt: skip
                for kw in node.keywords:
                    if kw.arg == "kind" and isinstance(kw.value, ast.Constant | ast.JoinedStr):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "kinds spelled outside hsitp.contracts: " + ", ".join(found)


def test_summary_cells_look_up_every_cell_by_its_coordinates() -> None:
    """Catches a cell lookup that pairs one cell's coordinates with another's numbers (the bug the four hand-written
    lookups invited): each cell of the committed summary is found at its own position with its own OA."""
    summary = contracts.TRAIN_SUMMARY.read(ROOT / "results/reference/cpu-fair/train/summary.nc")
    cells = contracts.summary_cells(summary)
    assert cells.index.names == list(contracts.Cell._fields) and cells.index.is_unique
    for i in range(summary.sizes["cell"]):
        key = contracts.Cell(*(summary[k].values[i].item() for k in contracts.Cell._fields))
        assert cells.loc[key, "i"] == i and cells.loc[key, "oa_mean"] == float(summary["oa_mean"].values[i])
    names = contracts.flag_meanings(summary["oa_verdict"])
    assert names.count("reference") == int((summary["plan"] == "tp").sum())


def test_a_file_lacking_a_dimension_is_refused_in_one_line(tmp_path: Path) -> None:
    """Catches a reader that takes a file without its contract's dimension and fails later with a KeyError deep in
    a table: the contract's reader names the file, what it lacks and the stage to re-run."""
    ds = xr.Dataset(
        {"labels": ("pixel", np.zeros(3, np.int16)), "partition": ("pixel", np.zeros(3, np.int8))}
    )
    path = write_netcdf(described(ds), tmp_path / "flat.nc", kind=contracts.DATASET.kind, prov=provenance({}))
    with pytest.raises(ResultFileError) as err:
        contracts.DATASET.read(path)
    line = str(err.value)
    assert "\n" not in line and str(path) in line and "dimension 'y'" in line and "hsitp data prepare" in line

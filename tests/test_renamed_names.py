"""Issue 38, one word per meaning of "split", after issue 52 retired its aliases: a prepared scene an older hsitp
wrote (the train/test partition called `split`) is still read under today's names, through the one map in
hsitp.io, because a committed reference carries one; the old config keys and `--split` are refused, each naming
its new name."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from nc_checks import described
from train_utils import write_scene

from hsitp.io import (
    RENAMED_ATTRIBUTES,
    RENAMED_VARIABLES,
    read_netcdf,
    upgrade_names,
    write_netcdf,
)

ROOT = Path(__file__).resolve().parents[1]
# Every netCDF name issue 38 renamed, as (kind, old name): docs/contracts.md, "Renamed in issue 38"
ISSUE_38 = {
    *(("dataset", n) for n in ("split", "split_mode", "split_protocols", "split_counts", "split_settings",
                               "split_warnings", "split_test_near_train", "split_test_near_train_radius")),
    *(("baseline", n) for n in ("split_seed", "split_counts", "split_warnings")),
    *((k, "split") for k in ("train", "train_summary", "train_equivalence", "reference_runs", "tune_study")),
}  # fmt: skip


def _as_before_issue_38(path: Path, out: Path) -> Path:
    """``path`` rewritten as an hsitp before issue 38 wrote it: every name of hsitp.io's map back to its old one
    (the file's kind, schema version and provenance kept)."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    kind = ds.attrs["kind"]
    back = {new: old for old, new in RENAMED_VARIABLES.get(kind, {}).items() if new in ds.variables}
    old = ds.rename(back) if back else ds
    attrs_back = {new: old for old, new in RENAMED_ATTRIBUTES.get(kind, {}).items()}
    old.attrs = {attrs_back.get(k, k): v for k, v in ds.attrs.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    old.to_netcdf(out)
    return out


def test_upgrade_names_renames_only_what_an_old_file_has() -> None:
    """Catches a renamed name left under its old one, a new file changed by the upgrade, a name overwritten
    where a file holds both, a kind renamed by another kind's map, and a retired name (a summary's `split`) still
    renamed."""
    old = xr.Dataset(
        {"split": (("protocol", "y", "x"), np.zeros((2, 1, 1), np.int8))},
        coords={"protocol": ["random", "block"]},
        attrs={"kind": "dataset", "split_counts": "{}", "seed": 0},
    )
    new = upgrade_names(old)
    assert "split" not in new and "partition" in new
    assert new.attrs == {"kind": "dataset", "partition_counts": "{}", "seed": 0}
    assert upgrade_names(new) is new  # nothing to rename: the same object
    both = old.assign(partition=old["split"] + 1)
    assert int(upgrade_names(both)["partition"].max()) == 1  # never overwritten
    summary = xr.Dataset(coords={"split": ("cell", ["random", "block"])}, attrs={"kind": "train_summary"})
    assert upgrade_names(summary) is summary  # retired in issue 52: no committed reference needs it
    cost = xr.Dataset(coords={"split": ["channel", "token"]}, attrs={"kind": "cost_ccr"})
    assert "split" in upgrade_names(cost)  # the TP split keeps its name
    untyped = xr.Dataset(attrs={"split_counts": "{}"})
    assert upgrade_names(untyped).attrs == {"split_counts": "{}"}  # no kind: nothing known to rename


def test_old_names_map_is_what_the_committed_references_need() -> None:
    """Catches the old-name map of hsitp.io kept past the last committed reference that needs it (an alias that
    outlived its release) or trimmed while one still does (the reference would no longer read): the map holds
    exactly the names of issue 38's rename that a file of that kind under results/reference/ carries."""
    used: set[tuple[str, str]] = set()
    for path in sorted(glob.glob(str(ROOT / "results" / "reference" / "**" / "*.nc"), recursive=True)):
        with xr.open_dataset(path) as ds:
            kind = ds.attrs.get("kind")
            used |= {(k, n) for k, n in ISSUE_38 if k == kind and (n in ds.variables or n in ds.attrs)}
    mapped = {
        (k, n)
        for table in (RENAMED_VARIABLES, RENAMED_ATTRIBUTES)
        for k, names in table.items()
        for n in names
    }
    assert used and mapped == used


def test_old_prepared_file_reads_as_partition(tmp_path: Path) -> None:
    """Catches a prepared file of an older hsitp (variable `split`, attributes `split_*`) refused or read without
    its partition, and a lazily opened old file left open after close()."""
    from hsitp.data.partition import read_partition

    new = read_netcdf(write_scene(tmp_path / "new.nc", both_protocols=True), kind="dataset")
    old_path = _as_before_issue_38(tmp_path / "new.nc", tmp_path / "old.nc")
    with xr.open_dataset(old_path) as raw:
        assert "split" in raw and "partition" not in raw and "split_settings" in raw.attrs
    old = read_netcdf(old_path, kind="dataset", load=False)
    assert "partition" in old and "split" not in old and "partition_settings" in old.attrs
    for protocol in ("random", "block"):
        np.testing.assert_array_equal(read_partition(old, protocol), read_partition(new, protocol))
    old.close()
    shutil.move(old_path, tmp_path / "moved.nc")  # the file is closed: it can be replaced
    write_netcdf(described(xr.Dataset(attrs={"title": "x"})), old_path, kind="dataset", prov={})


def test_scene_hash_is_the_same_for_an_old_prepared_file(tmp_path: Path) -> None:
    """Catches `hsitp audit reproduce` refusing a prepared scene of an older hsitp (its partition named `split`):
    both files read as `partition` and hash alike."""
    from hsitp.publish.reference import scene_content_sha256

    new = write_scene(tmp_path / "new.nc", both_protocols=True)
    old = _as_before_issue_38(new, tmp_path / "old.nc")
    assert scene_content_sha256(new) == scene_content_sha256(old)


@pytest.mark.parametrize("command", ["train", "tune"])
def test_split_option_is_refused(command: str, capsys) -> None:
    """Catches `--split` (the option's name before issue 38, retired in issue 52) still accepted as --protocol:
    an old command line must stop with argparse's one line, exit 2, not run some other protocol."""
    from hsitp.cli import build_parser

    parser = build_parser()
    tail = ["--out", "x.nc"] + (["--plan", "tp", "--tokens", "9"] if command == "tune" else [])
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([command, "scene.nc", "--split", "block", *tail])
    assert exc.value.code == 2 and "--split" in capsys.readouterr().err
    assert parser.parse_args([command, "scene.nc", "--protocol", "random", *tail]).protocol == "random"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("train.splits", "train.protocols"),
        ("tune.splits", "tune.protocols"),
        ("data.split", "data.partition"),
    ],
)
def test_old_config_key_is_refused_naming_the_new_one(old: str, new: str) -> None:
    """Catches an issue-38 config key (retired in issue 52) silently accepted, or refused without naming the key
    that replaced it."""
    from hsitp.config import ConfigError, validate_config

    section, leaf = old.split(".")
    value = {"block": 8} if section == "data" else ["block"]
    with pytest.raises(ConfigError, match=rf"{old} was replaced by {new}"):
        validate_config({section: {leaf: value}})


def test_tune_without_protocol_names_the_option(tmp_path: Path, capsys) -> None:
    from hsitp.cli import main

    code = main(["tune", str(tmp_path / "scene.nc"), "--plan", "tp", "--tokens", "9", "--out", "x.nc"])
    assert code == 2 and "--protocol required" in capsys.readouterr().err

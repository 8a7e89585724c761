"""Issue 38, one word per meaning of "split": files an older hsitp wrote (the accuracy protocol called `split`, the
train/test partition called `split`) are read under today's names, through the one map in hsitp.io; and the old
command-line option and module names still work for one release."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from nc_checks import described
from report_synthetic import baseline_file, study_files, train_record, train_summary
from train_utils import write_scene

from hsitp.io import (
    RENAMED_ATTRIBUTES,
    RENAMED_VARIABLES,
    provenance,
    read_netcdf,
    upgrade_names,
    write_netcdf,
)


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
    where a file holds both, and a kind renamed by another kind's map."""
    old = xr.Dataset(
        {"oa_mean": ("cell", [0.5, 0.6])},
        coords={"split": ("cell", ["random", "block"])},
        attrs={"kind": "train_summary"},
    )
    new = upgrade_names(old)
    assert "split" not in new and list(new["protocol"].values) == ["random", "block"]
    assert upgrade_names(new) is new  # nothing to rename: the same object
    both = old.assign_coords(protocol=("cell", ["a", "b"]))
    assert list(upgrade_names(both)["protocol"].values) == ["a", "b"]  # never overwritten
    record = xr.Dataset(attrs={"kind": "train", "split": "block", "seed": 0})
    assert upgrade_names(record).attrs == {"kind": "train", "protocol": "block", "seed": 0}
    cost = xr.Dataset(coords={"split": ["channel", "token"]}, attrs={"kind": "cost_ccr"})
    assert "split" in upgrade_names(cost)  # the TP split keeps its name
    untyped = xr.Dataset(attrs={"split": "block"})
    assert upgrade_names(untyped).attrs == {"split": "block"}  # no kind: nothing known to rename
    assert upgrade_names(untyped, kind="tune_study").attrs == {"protocol": "block"}


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


def test_old_records_baselines_and_studies_summarise_and_report(tmp_path: Path) -> None:
    """Catches training records, baseline files and tuning studies of an older hsitp (their protocol under
    `split`, the baseline's `split_counts`) that the summary, the train page or the measured tables cannot read:
    everything is summarised as the new files are."""
    from hsitp.report import measured
    from hsitp.report import train as rt
    from hsitp.train.summary import summarize

    new_dir, old_dir = tmp_path / "new", tmp_path / "old"
    records = [
        train_record(new_dir, plan, 2, g, accuracy=True, prediction=False, protocol=p, seed=s)
        for plan, g in (("tp", 1), ("dchag_l", 2))
        for p in ("random", "block")
        for s in (0, 1)
    ]
    baselines = [baseline_file(new_dir, p, s) for p in ("random", "block") for s in (0, 1)]
    old_records = [_as_before_issue_38(r, old_dir / r.relative_to(new_dir)) for r in records]
    with xr.open_dataset(old_records[0]) as raw:
        assert raw.attrs["split"] == "random" and "protocol" not in raw.attrs
    assert rt.run_label(rt.load_records(old_records[:1])[0]).endswith("random s0")
    got, want = summarize(old_records, baselines), summarize(records, baselines)
    assert list(got["protocol"].values) == list(want["protocol"].values)
    xr.testing.assert_identical(got.drop_attrs(), want.drop_attrs())
    studies = [
        _as_before_issue_38(p, old_dir / "ref" / "tune" / "synthetic" / p.name) for p in study_files(new_dir)
    ]
    with xr.open_dataset(studies[0]) as raw:
        assert raw.attrs["split"] == "block"
    assert "| block " in measured.recipes_block(old_dir / "ref") and "protocol" in measured.budget_block(
        old_dir / "ref"
    )


def test_old_summary_reads_in_report_and_audit(tmp_path: Path) -> None:
    """Catches a train_summary (or control_summary) of an older hsitp (coordinate `split`) that the report tables,
    the measured blocks or the audit's comparison cannot read, or that the audit finds different from the same
    summary written today (the cells keyed by protocol on both sides)."""
    from hsitp.audit.audit import Report, check_summary
    from hsitp.report import measured
    from hsitp.report import train as rt

    path, _ = train_summary(tmp_path / "new")
    ref = tmp_path / "ref"
    old = _as_before_issue_38(path, ref / "train" / "summary.nc")
    with xr.open_dataset(old) as raw:
        assert "split" in raw.coords and "protocol" not in raw.coords
    summary = rt.load_summary(old)
    assert set(summary["protocol"].values) == {"random", "block"}
    tab = rt.accuracy_table(summary)
    assert set(tab["protocol"]) == {"random", "block"}
    assert "- block protocol: tp OA" in measured.headline_block(ref)
    assert measured.fair_block(ref).startswith("| protocol")
    rep = Report()
    check_summary(tmp_path / "new", ref, "summary.nc", rep)
    assert rep.drift == [] and rep.checked, rep.drift


def test_old_equivalence_and_reference_runs(tmp_path: Path) -> None:
    """Catches the other files whose protocol was `split` (equivalence checks, the reference's runs.nc) read under
    the old name."""
    for kind, dims in (("train_equivalence", ("check",)), ("reference_runs", ("run",))):
        ds = xr.Dataset(coords={"split": (dims, ["random", "block"])}, attrs={"title": kind})
        path = write_netcdf(described(ds), tmp_path / f"{kind}.nc", kind=kind, prov=provenance({}))
        assert list(read_netcdf(path, kind=kind)["protocol"].values) == ["random", "block"]


def test_reproduce_accepts_a_scene_hash_recorded_before_issue_38(tmp_path: Path) -> None:
    """Catches `hsitp audit reproduce` refusing the very scene a reference collected by an older hsitp hashed
    (its partition named `split` then): the content hash under the old names matches it."""
    from hsitp.report.reference import scene_content_sha256

    new = write_scene(tmp_path / "new.nc", both_protocols=True)
    old = _as_before_issue_38(new, tmp_path / "old.nc")
    assert scene_content_sha256(new) == scene_content_sha256(old)  # both read as `partition`
    assert scene_content_sha256(new, old_names=True) != scene_content_sha256(new)
    assert scene_content_sha256(old, old_names=True) == scene_content_sha256(new, old_names=True)


@pytest.mark.parametrize("command", ["train", "tune"])
def test_split_option_is_a_deprecated_alias_of_protocol(command: str, caplog) -> None:
    """Catches `--split` (the option before issue 38) refused, stored elsewhere than --protocol, or accepted
    without saying what replaced it."""
    from hsitp.cli import build_parser

    parser = build_parser()
    tail = ["--out", "x.nc"] + (["--plan", "tp", "--tokens", "9"] if command == "tune" else [])
    caplog.set_level(logging.WARNING)
    args = parser.parse_args([command, "scene.nc", "--split", "block", *tail])
    assert args.protocol == "block"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"hsitp {command}: --split is deprecated, use --protocol (accepted until the next release)"
    ]
    caplog.clear()
    assert parser.parse_args([command, "scene.nc", "--protocol", "random", *tail]).protocol == "random"
    assert caplog.records == []
    with pytest.raises(SystemExit):
        parser.parse_args([command, "scene.nc", "--split", "spiral", *tail])  # the same choices


def test_tune_without_protocol_names_the_option(tmp_path: Path, capsys) -> None:
    from hsitp.cli import main

    code = main(["tune", str(tmp_path / "scene.nc"), "--plan", "tp", "--tokens", "9", "--out", "x.nc"])
    assert code == 2 and "--protocol required" in capsys.readouterr().err


def test_old_module_names_still_import() -> None:
    """Catches code written against hsitp.data.split (read_split, SplitError, ...) broken by the rename."""
    from hsitp.data import partition, split

    assert split.read_split is partition.read_partition and split.SplitError is partition.PartitionError
    assert split.make_split is partition.make_partition and split.PROTOCOLS == partition.PROTOCOLS


def test_checkpoint_of_an_older_hsitp_is_resumed(tmp_path: Path) -> None:
    """Catches a checkpoint written before issue 38 (its job's protocol under `split` in the manifest) taken for
    another configuration: the run would start afresh instead of resuming."""
    import torch

    from hsitp.train import checkpoint as ckpt

    meta = {"plan": "tp", "protocol": "block", "seed": 0}
    root = tmp_path / "ck"
    old_meta = {"plan": "tp", "split": "block", "seed": 0}
    ckpt.save_checkpoint(root, 1, 0, 1, {"w": torch.zeros(1)}, old_meta, keep=2, barrier=lambda: None)
    found = ckpt.latest_checkpoint(root, 0, 1, meta)
    assert found is not None and found[0] == 1
    assert ckpt.latest_checkpoint(root, 0, 1, {**meta, "protocol": "random"}) is None

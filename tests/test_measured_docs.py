"""The generated blocks of docs/measured.md and README.md (issue 41): written from committed references by
`hsitp report measured`, and a regeneration of the committed documents is a no-op."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hsitp.publish.measured import MeasuredDocError, update

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "measured.md", ROOT / "docs" / "measured-history.md", ROOT / "README.md"]


def _reference(tmp_path: Path) -> Path:
    """A reference folder laid out as `hsitp report reference` writes it, from the synthetic report inputs."""
    from report_synthetic import study_files, train_summary

    ref = tmp_path / "reference" / "tiny"
    (ref / "train").mkdir(parents=True)
    shutil.copy(train_summary(tmp_path)[0], ref / "train" / "summary.nc")
    (ref / "tune" / "synthetic").mkdir(parents=True)
    for study in study_files(tmp_path):
        shutil.copy(study, ref / "tune" / "synthetic" / study.name)
    return ref


def test_blocks_are_written_from_the_reference_and_checked(tmp_path: Path) -> None:
    """Catches a hand-edited number in a generated table going unnoticed (the bug: prose and data drift apart), a
    regeneration that is not idempotent, a block of another run rewritten, a block whose end marker is lost
    swallowing the rest of the document, and prose quoting a marker in backticks taken for a block without its end
    (docs/measured.md's introduction does)."""
    ref = _reference(tmp_path)
    doc = tmp_path / "measured.md"
    other = (
        "<!-- generated: other/fair (hsitp report measured) -->\nkept\n<!-- end generated: other/fair -->\n"
    )
    doc.write_text(
        "# head\nThe tables between `<!-- generated: ... -->` markers are written from the reference.\n"
        "<!-- generated: tiny/fair (hsitp report measured) -->\nstale\n<!-- end generated: tiny/fair -->\n"
        "<!-- generated: tiny/recipes (hsitp report measured) -->\n<!-- end generated: tiny/recipes -->\n"
        "<!-- generated: tiny/headline (hsitp report measured) -->\n<!-- end generated: tiny/headline -->\n"
        + other
    )
    assert update([doc], [ref]) == [doc]
    text = doc.read_text()
    assert "stale" not in text and "| dchag_l |" in text and "reference" in text and other in text
    assert "0.003" in text  # the recipes block: the study's best lr
    assert "- block protocol: tp OA" in text and "the 1 other cells vs tp" in text  # the headline block
    assert update([doc], [ref], check=True) == []  # idempotent
    doc.write_text(text.replace("| dchag_l ", "| dchag_x ", 1))
    assert update([doc], [ref], check=True) == [doc]
    doc.write_text(other)  # the reference named by no block: nothing compared, never a pass
    with pytest.raises(MeasuredDocError, match="names the reference tiny"):
        update([doc], [ref], check=True)
    doc.write_text("<!-- generated: tiny/fair (hsitp report measured) -->\nno end\n")
    with pytest.raises(MeasuredDocError, match="without its end"):
        update([doc], [ref])


def test_committed_docs_match_their_references() -> None:
    """Catches a committed table in docs/measured.md or README.md that its reference no longer gives (the bug:
    a rerun changed the numbers and the prose kept the old ones)."""
    refs = [p for p in (ROOT / "results" / "reference").iterdir() if (p / "train" / "summary.nc").exists()]
    if not any("<!-- generated: " in d.read_text(encoding="utf-8") for d in DOCS) or not refs:
        pytest.skip("no generated block or no headline reference committed yet")
    assert update(DOCS, refs, check=True) == []


def test_kernel_rows_come_from_the_kernel_check(tmp_path: Path) -> None:
    """Catches the two-kernel rows of the one-table answer (issue 49) not read from the kernel check's file: the
    fullest rank's peak, its ratio to sdpa's and the median [min, max] of the per-round tokens/s ratio must be the
    file's; a reference holding only that file is a reference."""
    import numpy as np
    import xarray as xr

    from hsitp.io import provenance, write_netcdf
    from hsitp.publish.measured import Reference, kernels_block

    ref = tmp_path / "kernel-check"
    times = np.array([[2.0, 2.2, 1.8], [1.0, 1.0, 1.2]])  # (kernel, repeat): sdpa, exact
    ds = xr.Dataset(
        {
            "peak_allocated": (("kernel", "rank"), np.array([[50.0, 60.0], [40.0, 45.0]]) * 2**20),
            "sample_time": (("kernel", "repeat"), times),
            "tokens_per_s": (("kernel", "repeat"), 648 / times),
            "ratio_exact_vs_sdpa": (("repeat",), times[0] / times[1]),
        },
        coords={"kernel": ["sdpa", "exact"], "rank": [0, 1], "repeat": [0, 1, 2]},
        attrs={"P": 2, "device": "CPU: test (1 thread/rank, gloo)"},
    )
    for name, v in ds.variables.items():
        v.attrs.update(units="1", long_name=str(name))
    write_netcdf(
        ds,
        ref / "probe" / "kernels.nc",
        kind="kernel_check",
        prov=provenance(config={}),
        title="tp: two kernels",
    )
    table = kernels_block(Reference(ref))
    exact = next(line for line in table.splitlines() if "exact kernel" in line)
    cells = [c.strip() for c in exact.split("|")]
    assert float(cells[3]) == 45.0 and float(cells[4]) == 0.75  # fullest rank 45 MiB, 45 / 60
    assert "2.00 [1.50, 2.20]" in exact  # sdpa / exact time per round: 2.0, 2.2, 1.5
    doc = tmp_path / "doc.md"
    marker = "<!-- generated: kernel-check/kernels (hsitp report measured) -->"
    doc.write_text(f"{marker}\nold\n<!-- end generated: kernel-check/kernels -->\n")
    assert update([doc], [ref]) == [doc] and "exact kernel" in doc.read_text()


def test_a_reference_of_two_scenes_keeps_each_scenes_baselines_and_tp(tmp_path: Path) -> None:
    """Catches the fair table and the README's lines grouping a reference's cells by protocol alone: with two
    scenes (cpu-places' summary beside a copy named salinas whose SVM scores 99 %), the salinas cells were
    listed with no scene, beside indian_pines' SVM only, and counted against indian_pines' tp."""
    import numpy as np
    import xarray as xr

    from hsitp.publish.measured import Reference, fair_block, headline_block

    s = xr.open_dataset(ROOT / "results" / "reference" / "cpu-places" / "train" / "summary.nc").load()
    n = s.sizes["cell"]
    other = s.assign(baseline_oa_mean=s["baseline_oa_mean"] * 0 + 0.99, tp_cell=s["tp_cell"] + n)
    other = other.assign_coords(dataset=("cell", np.array(["salinas"] * n)))
    both = xr.concat([s, other], dim="cell")
    both.attrs = s.attrs
    (tmp_path / "train").mkdir()
    both.to_netcdf(tmp_path / "train" / "summary.nc")
    ref = Reference(tmp_path)
    svm = [line.split("|") for line in fair_block(ref).splitlines() if "| SVM " in line]
    assert sorted((cols[1].strip(), cols[2].strip(), cols[8].strip()[:4]) for cols in svm) == [
        ("indian_pines", "block", "56.7"), ("indian_pines", "random", "79.9"),
        ("salinas", "block", "99.0"), ("salinas", "random", "99.0"),
    ]  # fmt: skip
    lines = headline_block(ref).splitlines()
    assert len(lines) == 4 and all("the 6 other cells vs tp" in line for line in lines)
    assert sum(line.startswith("- salinas, ") and "(SVM 99.0" in line for line in lines) == 2

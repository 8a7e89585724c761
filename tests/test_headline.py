"""``hsitp report headline``: the headline experiment's figures drawn from its committed reference alone
(``results/reference/cpu-places/``): every figure written and readable, the values drawn equal to the files',
and a missing or damaged reference file refused in one line."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy.stats import t as student_t  # noqa: E402

from hsitp.analysis import headline as analysis_headline  # noqa: E402
from hsitp.cli import main  # noqa: E402
from hsitp.report import headline as hl  # noqa: E402
from hsitp.report import style  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference" / "cpu-places"
DOCS = ROOT / "docs" / "figures"
SPOT = {"plan": "dchag_l", "P": 2, "g": 1, "protocol": "block"}  # the cell every spot check reads


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("headline")
    code = main(
        ["report", "headline", "--reference", str(REFERENCE), "--out", str(out), "--docs", str(out / "docs")]
    )
    return code, out


@pytest.fixture(scope="module")
def inputs():
    return analysis_headline.load_reference(REFERENCE)


def _row(table, **at):
    here = table
    for k, v in at.items():
        here = here[here[k] == v]
    assert len(here) == 1, f"{at}: {len(here)} rows"
    return here.iloc[0]


def _gid_line(fig, gid: str):
    """The plotted line whose gid is ``gid`` (the data marker of an errorbar, a curve, a dot)."""
    found = [line for ax in fig.axes for line in ax.get_lines() if line.get_gid() == gid]
    assert len(found) == 1, f"{gid}: {len(found)} lines"
    return found[0]


def test_renders_every_figure_from_the_committed_reference(rendered):
    """Catches a headline page that cannot be drawn from the committed reference (the issue's bug: the train
    page reads per-run records the reference does not hold), a figure missing, unreadable at page width (the
    repo's figure check, recorded as saved) or not embedded in the Markdown page, and docs copies that lost
    the check or are too heavy for the README."""
    code, out = rendered
    assert code == 0
    for name in hl.FIGURES:
        assert (out / f"headline_{name}.png").is_file() and (out / f"headline_{name}.pdf").is_file()
        assert f"](headline_{name}.png)" in (out / "headline.md").read_text()
        assert (out / f"headline_{name}.csv").is_file()
        assert (out / "docs" / f"headline_{name}.png").stat().st_size < 200_000
    assert style.check_figures(out) == {}
    assert main(["report", "check-figures", str(out / "docs")]) == 0
    page = (out / "headline.md").read_text()
    assert "P = 8: the probe ran P = 1, 2, 4 only" in page  # what the reference lacks, said
    assert "measured on CPU" in page and "not a GPU" in page


def test_forest_plot_draws_the_summary_and_the_runs_values(inputs):
    """Catches a forest plot whose cell OA, interval or verdict differ from the files (or one that presents the
    verdicts of a protocol where no model beats the SVM as counted): the mean and the 95 % t
    interval over partitions recomputed here from runs.nc's per-partition OA, the paired ΔOA interval and
    verdict from summary.nc, and the values the figure actually draws read back from its artists."""
    table = analysis_headline.forest_table(inputs.summary)
    row = _row(table, kind="cell", **SPOT)
    runs = inputs.runs
    pick = np.flatnonzero(
        (runs["plan"].values == SPOT["plan"])
        & (runs["P"].values == SPOT["P"])
        & (runs["g"].values == SPOT["g"])
        & (runs["protocol"].values == SPOT["protocol"])
        & (runs["control"].values == 0)
    )
    oa = runs["oa_summary"].values[pick]
    assert len(oa) == 5 and len(set(runs["partition_index"].values[pick])) == 5  # one seed per partition
    half = student_t.ppf(0.975, 4) * oa.std(ddof=1) / math.sqrt(5)
    assert row["oa_mean"] == pytest.approx(oa.mean(), rel=1e-9)
    assert (row["oa_ci_low"], row["oa_ci_high"]) == pytest.approx(
        (oa.mean() - half, oa.mean() + half), rel=1e-9
    )
    assert round(100 * row["oa_mean"], 1) == 53.1 and round(100 * row["oa_ci_low"], 1) == 44.1
    s = inputs.summary.isel(cell=6)
    assert (str(s["plan"].values), int(s["P"]), str(s["protocol"].values)) == ("dchag_l", 2, "block")
    assert row["d_oa_vs_tp_ci_low"] == float(s["d_oa_vs_tp_ci_low"]) and row["verdict"] == "undecided"
    svm = _row(table, kind="baseline", plan="svm", protocol="block")
    assert svm["oa_mean"] == float(inputs.summary["baseline_oa_mean"].sel(classifier="svm").isel(cell=6))
    fig = hl.forest_figure(table, analysis_headline.trained_on(runs))
    assert _gid_line(fig, "block: oa dchag_l P=2 g=1").get_xdata()[0] == pytest.approx(100 * row["oa_mean"])
    assert _gid_line(fig, "block: d_oa dchag_l P=2 g=1").get_xdata()[0] == pytest.approx(
        100 * row["d_oa_vs_tp_mean"]
    )
    title = fig.get_suptitle()
    assert "measured on CPU: AMD EPYC" in title and "not a GPU" in title
    # a protocol where no model beats the SVM says its verdicts are not counted (the block protocol here)
    cells = table[table["kind"] == "cell"]
    assert not cells[cells["protocol"] == "block"]["beats_svm"].any()
    assert cells[cells["protocol"] == "random"]["beats_svm"].any()
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("block protocol") and "not counted" in t for t in titles)
    assert not any(t.startswith("random protocol") and "not counted" in t for t in titles)
    matplotlib.pyplot.close(fig)


def test_pareto_view_reads_each_scene_at_its_own_bands(inputs):
    """Catches a probe of several L (probe.match_train with scenes of different band counts) read at its first
    L: the Indian Pines cells (200 bands) were drawn at the 103-band rows (another scene's model)."""
    import dataclasses

    import xarray as xr

    mem, thr = inputs.memory, inputs.throughput
    other = {"memory": mem.copy(deep=True), "throughput": thr.copy(deep=True)}
    other["memory"]["peak_allocated"] *= 3  # the 103-band rows: three times the memory
    two = {"data_vars": "minimal", "coords": "different", "compat": "equals", "join": "outer"}
    both = {
        k: xr.concat([other[k].assign_coords(L=[103]), ds], dim="L", **two)
        for k, ds in (("memory", mem), ("throughput", thr))
    }
    table = analysis_headline.pareto_table(dataclasses.replace(inputs, **both))
    right = analysis_headline.pareto_table(inputs)
    assert _row(table, **SPOT)["peak_mib"] == pytest.approx(_row(right, **SPOT)["peak_mib"])
    assert _row(table, **SPOT)["tokens_per_s"] == pytest.approx(_row(right, **SPOT)["tokens_per_s"])


def test_pareto_view_names_the_size_the_probe_lacks(inputs):
    """Catches a probe lacking the trained g (probe.groups without it) said to lack the P: 'not probed: the probe
    ran P = 1, 2, 4' of a P it ran; the note names the g."""
    import dataclasses

    other = {
        k: getattr(inputs, k).sel(g=[g for g in inputs.memory["g"].values if g != 1])
        for k in ("memory", "throughput")
    }
    row = _row(analysis_headline.pareto_table(dataclasses.replace(inputs, **other)), **SPOT)
    assert np.isnan(row["peak_mib"]) and row["note"].startswith("not probed: the probe ran g = "), row["note"]


def test_pareto_view_says_a_probe_of_checkpointing_only(inputs):
    """Catches a probe of activation checkpointing only (probe.checkpointing: [blocks]) that made the pareto table
    fail with a KeyError (the view reads the unchecked policy, the trained models'): NaN with the reason."""
    import dataclasses

    blocks = {k: getattr(inputs, k).sel(checkpointing=["blocks"]) for k in ("memory", "throughput")}
    row = _row(analysis_headline.pareto_table(dataclasses.replace(inputs, **blocks)), **SPOT)
    assert np.isnan(row["peak_mib"]) and row["note"].startswith("not probed without activation checkpointing")


def test_pareto_view_pairs_each_crop_with_its_own_tp(inputs):
    """Catches the tp rows of a run of two crops (train.crops) read at the first tp cell's N: the N = 100 D-CHAG
    cells were drawn against tp at N = 324 (``tp.iloc[0]``), not the tp cell their verdict pairs with
    (``tp_cell``: the same N, g = 1), and tp at N = 100 was never drawn."""
    import dataclasses

    import xarray as xr

    s = inputs.summary
    small = s.assign_coords(
        cell=s["cell"].values + s.sizes["cell"], N=("cell", np.full(s.sizes["cell"], 100))
    )
    # each small cell pairs with the small tp cell of its protocol
    small["tp_cell"] = ("cell", s["tp_cell"].values + s.sizes["cell"])
    one = {"data_vars": "minimal", "coords": "minimal", "compat": "override"}
    summary = xr.concat([s, small], dim="cell", **one)
    mem, thr = inputs.memory.copy(deep=True), inputs.throughput.copy(deep=True)
    mem["peak_allocated"] /= 4  # the smaller crop: a quarter of the memory
    two = {"data_vars": "minimal", "coords": "different", "compat": "equals", "join": "outer"}
    probe = {
        k: xr.concat([ds, other.assign_coords(N=[100])], dim="N", **two)
        for k, ds, other in (("memory", inputs.memory, mem), ("throughput", inputs.throughput, thr))
    }
    table = analysis_headline.pareto_table(dataclasses.replace(inputs, summary=summary, **probe))
    for N in (324, 100):  # noqa: N806
        tp = _row(table, plan="tp", P=2, protocol="block", N=N)
        at = {"plan": "tp", "P": 2, "g": 1, "checkpointing": "none", "L": 200, "N": N}
        assert tp["peak_mib"] == pytest.approx(
            float(probe["memory"]["peak_allocated"].sel(**at).max("rank")) / 2**20
        )
    assert (
        _row(table, plan="tp", P=2, protocol="block", N=100)["peak_mib"]
        < _row(table, plan="tp", P=2, protocol="block", N=324)["peak_mib"]
    )


def test_pareto_view_draws_the_probe_values(inputs):
    """Catches a memory-vs-tokens/s point that is not the probe's (fullest rank, no activation checkpointing,
    tokens/s of the interleaved rounds), a verdict marked on the wrong cell, or a P the probe did not measure
    drawn as if it had (P = 8 must be NaN and named)."""
    table = analysis_headline.pareto_table(inputs)
    row = _row(table, **SPOT)
    at = {"plan": "dchag_l", "P": 2, "g": 1, "checkpointing": "none", "L": 200, "N": 324}
    peak = float(inputs.memory["peak_allocated"].sel(**at).max("rank")) / 2**20
    assert row["peak_mib"] == pytest.approx(peak) and round(row["peak_mib"], 1) == 22.6
    assert row["tokens_per_s"] == float(inputs.throughput["tokens_per_s"].sel(**at))
    assert row["verdict"] == "undecided" and row["note"] == ""
    assert _row(table, plan="dchag_l", P=2, g=1, protocol="random")["verdict"] == "better"
    assert "oversubscribed" in _row(table, plan="dchag_l", P=4, g=1, protocol="block")["note"]
    assert np.isnan(_row(table, plan="dchag_l", P=8, g=1, protocol="block")["peak_mib"])
    fig = hl.pareto_figure(table, analysis_headline.probed_on(inputs.memory))
    line = _gid_line(fig, "block: dchag_l P=2 g=1")
    assert (line.get_xdata()[0], line.get_ydata()[0]) == pytest.approx((row["tokens_per_s"], peak))
    assert "no activation checkpointing" in fig.get_suptitle() and "gloo" in fig.get_suptitle()
    matplotlib.pyplot.close(fig)


def test_time_to_accuracy_curves_reach_the_target_where_the_summary_says(inputs):
    """Catches OA curves that are not the ones the summary's steps to tp's OA − δ were read from (each cell's
    drawn curve must first reach the target at its ``steps_to_target``, NaN where never), and a time ratio
    drawn where the probe timed nothing comparable (P = 4 oversubscribed, P = 8 not probed)."""
    curves, times = analysis_headline.curves_table(inputs), analysis_headline.time_table(inputs)
    for t in times.itertuples(index=False):
        c = curves[
            (curves["plan"] == t.plan)
            & (curves["P"] == t.P)
            & (curves["g"] == t.g)
            & (curves["protocol"] == t.protocol)
        ]
        reached = c.loc[c["oa"] >= t.target_oa, "step"]
        first = float(reached.iloc[0]) if not reached.empty else math.nan
        assert first == t.steps or (np.isnan(first) and np.isnan(t.steps)), t.row
    row = _row(times, **SPOT)
    assert row["steps"] == 720 and round(row["time_ratio"], 2) == 0.42
    assert times.loc[times["P"] > 2, "time_ratio"].isna().all()
    fig = hl.time_figure(curves, times, analysis_headline.trained_on(inputs.runs))
    assert _gid_line(fig, "block: steps dchag_l P=2 g=1").get_xdata()[0] == 720
    matplotlib.pyplot.close(fig)


def test_a_reference_of_one_partition_is_said_to_pair_by_seed():
    """Catches the headline of a reference of one partition and three seeds (results/reference/cpu-fair) saying
    its intervals run over partitions and its ΔOA vs tp pairs by partition (the captions, the ΔOA axis, the OA
    curves' axis and the whiskers' key all said partition where the summary pairs and spreads over seeds)."""
    fair = analysis_headline.load_reference(ROOT / "results" / "reference" / "cpu-fair")
    table, times = analysis_headline.forest_table(fair.summary), analysis_headline.time_table(fair)
    caps = hl.captions(fair, times)
    forest = caps["forest"]
    assert "over seeds" in forest and "paired by seed" in forest and "partitions" not in forest
    assert "the same partition (bands)" in forest  # the baselines: fit on its one partition
    assert "slowest seed's own curve" in caps["time"]
    fig = hl.forest_figure(table, analysis_headline.trained_on(fair.runs))
    assert "paired by seed" in fig.axes[1].get_xlabel()
    fig = hl.time_figure(analysis_headline.curves_table(fair), times, analysis_headline.trained_on(fair.runs))
    assert fig.axes[0].get_ylabel() == "test OA [%], mean over seeds"
    places = hl.captions(analysis_headline.load_reference(REFERENCE), times.assign(unit="partition"))
    assert "paired by partition" in places["forest"]  # cpu-places: five partitions
    matplotlib.pyplot.close("all")


def test_an_untested_svm_comparison_is_not_said_to_fail():
    """Catches the forest plot of a summary without a paired ΔOA vs the SVM (cpu-fair's) titling each protocol
    "no model beats the SVM": its random protocol's dchag_l P = 2 (90.2 %) sits 10 pp above the SVM (80.3 %),
    and the comparison was never run; the title now says the summary holds none."""
    fair = analysis_headline.load_reference(ROOT / "results" / "reference" / "cpu-fair")
    table = analysis_headline.forest_table(fair.summary)
    assert table.loc[table["kind"] == "cell", "beats_svm"].isna().all()
    fig = hl.forest_figure(table, analysis_headline.trained_on(fair.runs))
    titles = [ax.get_title() for ax in fig.axes]
    assert not any("no model beats the SVM" in t for t in titles)
    assert sum("no paired ΔOA vs the SVM" in t for t in titles) == 2  # block and random
    matplotlib.pyplot.close(fig)


def test_the_probe_is_said_to_be_at_the_trained_size_only_where_it_is(inputs):
    """Catches the pareto caption asserting "the probe at the trained size" without reading either side: a probe
    of another width (D = 128 beside runs of D = 64) was captioned as the trained model's."""
    import dataclasses
    import json

    assert (
        analysis_headline.probe_size(inputs) == "the probe at the trained size"
    )  # cpu-places: D 64, batch 1
    wider = inputs.memory.copy()
    wider.attrs = {
        **inputs.memory.attrs,
        "probe": json.dumps({**json.loads(inputs.memory.attrs["probe"]), "dim": 128}),
    }
    other = dataclasses.replace(inputs, memory=wider)
    assert "its own size (dim 128" in analysis_headline.probe_size(other)
    times = analysis_headline.time_table(other)
    assert "not the trained model's" in hl.captions(other, times)["pareto"]


def test_gpu_runs_are_not_said_to_be_no_gpu(inputs):
    """Catches the headline's hardware lines hard-coding the CPU: runs whose device lines name a GPU were
    captioned "measured on CPU: <host CPU>, ..., not a GPU", and a GPU probe "<GPU> ..., not a GPU"."""
    gpu = "NVIDIA H200 (nccl)"
    runs = inputs.runs.assign(device=("run", [gpu] * inputs.runs.sizes["run"]))
    line = analysis_headline.trained_on(runs)
    assert line.startswith("measured on GPU: NVIDIA H200") and "not a GPU" not in line
    memory = inputs.memory.assign(device=("P", [gpu] * inputs.memory.sizes["P"]))
    assert "not a GPU" not in analysis_headline.probed_on(memory)
    assert analysis_headline.trained_on(inputs.runs).endswith("not a GPU")  # the committed CPU runs


@pytest.mark.parametrize("damage", ["missing", "corrupt", "no folder"])
def test_a_missing_or_damaged_reference_file_is_one_line_exit_2(tmp_path, capsys, damage):
    """Catches a traceback (or a half-drawn page) instead of one line naming the file when a reference file is
    missing or damaged, or the reference folder does not exist."""
    ref = tmp_path / "ref"
    for rel in analysis_headline.FILES.values():
        (ref / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REFERENCE / rel, ref / rel)
    if damage == "missing":
        (ref / "probe" / "memory.nc").unlink()
    elif damage == "corrupt":
        (ref / "train" / "runs.nc").write_bytes(b"not a netCDF file" * 10)
    else:
        ref = tmp_path / "absent"
    capsys.readouterr()
    assert main(["report", "headline", "--reference", str(ref), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hsitp: error: ")
    named = {"missing": "memory.nc", "corrupt": "runs.nc", "no folder": "absent"}[damage]
    assert named in err[0]
    assert not (tmp_path / "out").exists()  # refused before anything is drawn


def test_the_docs_figures_are_the_checked_headline_figures():
    """Catches a headline figure the README shows (docs/figures/headline_*.png) that is missing, was not saved
    through the checked saver, fails the figure check, or is over 200 KB."""
    for name in hl.FIGURES:
        png = DOCS / f"headline_{name}.png"
        assert png.is_file(), f"{png}: run hsitp report headline ... --docs docs/figures"
        assert style.png_problems(png) == []
        assert png.stat().st_size < 200_000

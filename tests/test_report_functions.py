"""Report functions on committed files: the smoke cost tables (results/reference/smoke/cost) and the tiny bench
sweep (tests/fixtures/report_bench). Tables are checked value by value against the netCDF they read; figures for
their hardware-naming titles and their data; the registry of outputs against the captions and the rules."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
import xarray as xr

matplotlib.use("Agg")

from hsitp.analysis import answer as analysis_answer  # noqa: E402
from hsitp.analysis import cells as analysis_cells  # noqa: E402
from hsitp.analysis.labels import measured_on, stage_hardware  # noqa: E402
from hsitp.analysis.read import ReportError, need  # noqa: E402
from hsitp.io import ResultFileError, json_attr, read_netcdf  # noqa: E402
from hsitp.report import bench as rb  # noqa: E402
from hsitp.report import cost as rc  # noqa: E402
from hsitp.report import data as rd  # noqa: E402
from hsitp.report import probe as rp  # noqa: E402
from hsitp.report import rules  # noqa: E402
from hsitp.report import train as rt  # noqa: E402
from hsitp.report.common import Publisher, fmt_num, load_cost  # noqa: E402
from hsitp.report.outputs import OUTPUTS, STAGES, stage_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COST = ROOT / "results" / "reference" / "smoke" / "cost"
BENCH = ROOT / "tests" / "fixtures" / "report_bench"
CAPTIONS = ROOT / "workflow" / "report" / "captions"


@pytest.fixture(scope="module")
def cost_tables() -> dict[str, xr.Dataset]:
    return {t: load_cost(COST / f"{t}.nc", t) for t in ("rho", "ccr", "boundary", "scale", "plan")}


@pytest.fixture(scope="module")
def mvm() -> xr.Dataset:
    return rb.load_model_vs_measured(BENCH / "model_vs_measured.nc")


@pytest.fixture(scope="module")
def microbench() -> xr.Dataset:
    return rb.load_microbench(BENCH / "microbench.nc")


@pytest.fixture(scope="module")
def summary_files(tmp_path_factory) -> tuple[Path, list[Path]]:
    """report_synthetic.train_summary's summary and records (last OA 0.7), built once: the tests only read them."""
    from report_synthetic import train_summary

    return train_summary(tmp_path_factory.mktemp("train"))


@pytest.fixture
def scene(tmp_path) -> xr.Dataset:
    """A synthetic 20 x 27 scene with 6 bands and 3 classes, written as a `dataset` file (not real data)."""
    from report_synthetic import scene_file

    return rd.load_scene(scene_file(tmp_path))


# --- the registry of outputs ---------------------------------------------------------------------------------------
def test_every_output_has_a_caption_naming_the_hardware():
    """Catches: a figure or table added to outputs.py without a caption (the report would fail to build) or with
    a caption that does not say on which hardware its numbers are."""
    names = [(o.stage, o.name) for o in OUTPUTS]
    assert len(names) == len(set(names))
    for out in OUTPUTS:
        text = (CAPTIONS / out.caption).read_text()
        assert "{{ snakemake.params.hardware }}" in text, out.caption
    assert {o.stage for o in OUTPUTS} == set(STAGES)


def test_rule_files_cover_every_output_and_mark_pngs_and_csvs_for_the_report():
    """Catches: report targets that miss a format, or a report flag on a file Snakemake cannot show."""
    flagged = []

    def flag(path, **kw):
        flagged.append((path, kw["category"], kw["caption"]))
        return path

    files = rules.stage_files("bench", "results/x", ["ip"], flag)
    tables = stage_outputs("bench", "table")
    assert len(files) == 2 * len(stage_outputs("bench", "figure")) + 3 * len(tables)  # PNG+PDF; CSV+MD+TeX
    assert all(p.endswith((".png", ".csv")) and cat == "bench" for p, cat, _ in flagged)
    assert {Path(c).name for _, _, c in flagged} == {o.caption for o in stage_outputs("bench")}
    data = rules.stage_files("data", "results/x", ["a", "b"])
    assert "results/x/figures/data_scene_b.pdf" in data and "results/x/tables/data_classes_a.tex" in data
    all_targets = rules.targets("results/x", ["a"])
    assert "results/x/notebooks/cost.html" in all_targets and len(all_targets) == len(set(all_targets))


def test_stage_inputs_follow_the_upstream_targets():
    """Catches: a page reading a file its rule does not declare (no re-render when that file changes)."""
    data = ["r/data/a.nc"]
    cost = [f"r/cost/{t}.nc" for t in ("rho", "ccr", "boundary", "scale", "plan")]
    bench = [f"r/bench/{b}.nc" for b in ("microbench", "calibration", "model_vs_measured")]
    assert rules.stage_inputs("cost", data, cost, bench)["datasets"] == data
    b = rules.stage_inputs("bench", data, cost, bench)
    assert b["ccr"] == "r/cost/ccr.nc" and b["model_vs_measured"] == "r/bench/model_vs_measured.nc"
    assert json.loads(rules.notebook_params(b, "r"))["out_dir"] == "r"
    probe = [f"r/probe/{p}.nc" for p in ("memory", "throughput", "estimate")]
    assert rules.stage_inputs("probe", data, cost, bench, probe)["estimate"] == "r/probe/estimate.nc"
    train = ["r/train/a/tp_P2.nc", "r/train/summary.nc"]
    assert rules.stage_inputs("train", data, cost, bench, probe, train) == {
        "records": ["r/train/a/tp_P2.nc"],
        "summary": "r/train/summary.nc",
        "equivalence": None,  # no train.equivalent run
        "control": None,  # no untuned control (train.control)
        "datasets": data,
        "probe_memory": "r/probe/memory.nc",
        "probe_throughput": "r/probe/throughput.nc",
        "studies": [],  # no tune stage
    }
    tuned = rules.stage_inputs("train", data, cost, bench, probe, train, tune=["r/tune/a/tp_block.nc"])
    assert tuned["studies"] == ["r/tune/a/tp_block.nc"]  # the budget curves' files, declared as inputs
    with_check = rules.stage_inputs("train", data, cost, bench, probe, [*train, "r/train/equivalence.nc"])
    assert with_check["equivalence"] == "r/train/equivalence.nc"  # never read as a training record
    assert with_check["records"] == ["r/train/a/tp_P2.nc"]
    with_control = rules.stage_inputs(
        "train", data, cost, bench, probe, [*train, "r/train/control_summary.nc"]
    )
    assert with_control["control"] == "r/train/control_summary.nc"  # never read as a training record
    assert with_control["records"] == ["r/train/a/tp_P2.nc"]
    # a run without the probe stage: the train page's answer table says so, and its rule needs no probe file
    no_probe = rules.stage_inputs("train", data, cost, bench, probe, train, stages=["data", "train"])
    assert no_probe["probe_memory"] is None and "probe_memory" not in rules.rule_inputs(no_probe)
    with pytest.raises(ValueError, match="no report page"):
        rules.stage_inputs("audit", data, cost, bench)


def test_notebook_defaults_are_the_smoke_run_and_match_the_rule_parameters():
    """Catches: a notebook whose parameters cell lacks a parameter the rule injects (papermill would run it on its
    default silently), or whose defaults do not point at results/smoke/ (it would not run standalone)."""
    import nbformat

    data = ["results/smoke/data/indian_pines.nc"]
    cost = [f"results/smoke/cost/{t}.nc" for t in ("rho", "ccr", "boundary", "scale", "plan")]
    bench = [f"results/smoke/bench/{b}.nc" for b in ("microbench", "calibration", "model_vs_measured")]
    probe = [f"results/smoke/probe/{p}.nc" for p in ("memory", "throughput", "estimate")]
    from hsitp.config import load_config
    from hsitp.train.plan import jobs, run_name
    from hsitp.train.settings import TrainSettings

    smoke = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "smoke.yaml"])
    train = [f"results/smoke/train/{d}/{run_name(*j)}.nc" for d, *j in jobs(TrainSettings.from_config(smoke))]
    train.append("results/smoke/train/summary.nc")
    for stage in STAGES:
        nb = nbformat.read(ROOT / "notebooks" / f"{stage}.ipynb", as_version=4)
        cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(cells) == 1, stage
        defaults: dict = {}
        exec(cells[0].source, {}, defaults)  # the parameters cell: assignments only
        injected = json.loads(
            rules.notebook_params(rules.stage_inputs(stage, data, cost, bench, probe, train), "results/smoke")
        )
        assert {k: defaults[k] for k in injected} == injected, stage
        assert nb.metadata["kernelspec"]["name"] == "python3"


# --- hardware labels -------------------------------------------------------------------------------------------------
def test_hardware_named_from_the_files(mvm, cost_tables):
    """Catches: captions or titles that lose the device a number was measured on or the presets it was modelled for."""
    device = measured_on(mvm.attrs)
    assert device.startswith("CPU: AMD EPYC") and "gloo" in device
    assert ", none)" not in device  # the P = 1 launch (no process group) is not a second device
    assert stage_hardware("bench", [BENCH / "model_vs_measured.nc"]) == f"measured on {device}"
    cost_line = stage_hardware("cost", [COST / "ccr.nc", COST / "scale.nc"])
    assert "paper-intra" in cost_line and "h200-nvlink-ib" in cost_line and "not measurements" in cost_line
    assert stage_hardware("bench", ["/nonexistent.nc"]) == "named once the stage's files exist"


def test_wrong_or_incomplete_files_are_named(tmp_path, mvm):
    """Catches: a bench file passed where a cost table belongs, or a variable missing deep inside a plot."""
    with pytest.raises(ResultFileError, match="model_vs_measured.nc: holds kind 'model_vs_measured'"):
        load_cost(BENCH / "model_vs_measured.nc", "ccr")
    with pytest.raises(ReportError, match="lacks nothing_here"):
        need(mvm, "ccr_measured", "nothing_here")


def test_fmt_num():
    assert [fmt_num(x) for x in (5776, 0.61728, 1234.5, 3.2e-5, float("nan"), None, "token")] == [
        "5776", "0.617", "1234", "3.20e-05", "—", "—", "token",
    ]  # fmt: skip


# --- tables ----------------------------------------------------------------------------------------------------------
def test_rho_table_is_the_netcdf_at_patch_8_beside_the_prepared_scene(cost_tables, scene):
    """Catches: the section 2.2 table taking another patch or C definition than its header says, or a prepared
    scene's rho computed on the wrong grid."""
    rho = cost_tables["rho"]
    df = rc.rho_table(rho, [scene], patch=8)
    assert list(df["dataset"]) == list(rho["dataset"].values)
    for c_def in rho["c_def"].values:
        np.testing.assert_allclose(df[f"rho ({c_def}) modelled"], rho["rho"].sel(patch=8, c_def=c_def).values)
    ip = df.set_index("dataset").loc["indian_pines"]
    assert ip["N (p=8)"] == 324 and ip["lower split, stated [paper-intra, P=8, C=bands]"] in (
        "token",
        "channel",
    )
    prep = rc.prepared_rho(scene, 8)
    assert prep == {"dataset": "synthetic", "C": 6, "N": (20 // 8) * (27 // 8), "rho": 6 / 6}
    assert df["rho (bands) prepared here"].isna().all()  # the synthetic scene is no registry dataset


def test_ccr_tables_put_measured_layers_beside_the_model(cost_tables, mvm):
    """Catches: the section 8.1/8.2 tables pairing a modelled row with a measured point of another N, D, P or
    split, or inventing a measurement where the bench grid has none."""
    ccr = cost_tables["ccr"]
    df = rc.paper_cases(ccr)
    assert df == ["paper_N324", "paper_N5776"]
    t81 = rb.ccr_8_1_table(ccr, mvm)
    assert len(t81) == ccr.sizes["case"] * ccr.sizes["P"] * ccr.sizes["split"]
    row = t81[(t81["case"] == "paper_N5776") & (t81["P"] == 8) & (t81["split"] == "token")].iloc[0]
    sel = {"case": "paper_N5776", "P": 8, "split": "token"}
    assert row["block CCR stated [paper-inter]"] == float(
        ccr["ccr"].sel(**sel, hardware="paper-inter", model="stated")
    )
    dev_col = next(c for c in t81.columns if c.startswith("attn CCR measured"))
    assert t81[dev_col].isna().all() and row["measured point"].startswith("not measured")

    # The same measured file relabelled onto a §8.1 point: the table must now pick exactly that measurement.
    moved = mvm.assign_coords(N=[324, 5776], D=[256], P=[1, 8])
    t81m = rb.ccr_8_1_table(ccr, moved)
    hit = t81m[(t81m["case"] == "paper_N5776") & (t81m["P"] == 8) & (t81m["split"] == "token")].iloc[0]
    expect = moved["ccr_measured"].sel(op="attn_token", N=5776, D=256, P=8).isel(L=0, dtype=0)
    assert hit[dev_col] == float(expect) and "attn_token" in hit["measured point"]
    assert np.isnan(t81m[(t81m["split"] == "channel")][dev_col]).all()  # no attn_channel in the sweep

    groups = rb.bench_groups(rb.load_microbench(BENCH / "microbench.nc"))
    assert groups == 2
    t82 = rb.dchag_8_2_table(ccr, moved, groups)
    assert set(t82["case"]) == {"paper_N324", "paper_N5776"}
    dchag = t82[t82["scheme"] != "tp"]
    assert dchag["measured point"].str.contains("D-CHAG groups = 2").all()  # g = 4, 8 modelled; bench used 2
    t82g = rb.dchag_8_2_table(ccr, moved, groups=4)  # as if the bench had used g = 4: agg_dchag_l pairs up
    hit = t82g[
        (t82g["case"] == "paper_N5776") & (t82g["P"] == 8) & (t82g["g"] == 4) & (t82g["scheme"] == "dchag_l")
    ]
    expect = moved["ccr_measured"].sel(op="agg_dchag_l", N=5776, D=256, P=8).isel(L=0, dtype=0)
    assert hit.iloc[0][next(c for c in t82g.columns if c.startswith("aggregation CCR measured"))] == float(
        expect
    )


def test_dchag_8_2_memory_states_its_checkpointing_policy(cost_tables, mvm):
    """Catches table 8.2's memory column without the activation-checkpointing policy ccr.nc's memory model used
    (ccr.nc recorded none), and an old ccr.nc without the attribute breaking the page or being given a policy."""
    ccr = cost_tables["ccr"]
    assert ccr["scheme_memory"].attrs["activation_checkpointing"] == "none"
    col = "memory/device [GiB] (activation checkpointing: none)"
    assert col in rb.dchag_8_2_table(ccr, mvm).columns
    assert "activation checkpointing: none" in rb.dchag_8_2_caption(ccr, mvm)
    old = ccr.copy()
    old["scheme_memory"] = old["scheme_memory"].copy()
    old["scheme_memory"].attrs.pop("activation_checkpointing")
    assert "activation checkpointing: not recorded" in rb.dchag_8_2_caption(old, mvm)
    assert rb.dchag_8_2_table(old, mvm)[col.replace("none", "not recorded in this ccr.nc")].notna().all()


def test_scale_and_summary_tables(cost_tables, mvm):
    """Catches section 9.1's table of the wrong size, an infeasible point given numbers, the D-CHAG memory ratio
    not the two columns' and a modelled memory column without its activation-checkpointing policy."""
    scale = cost_tables["scale"]
    t91 = rc.scale_table(scale)
    assert len(t91) == scale.sizes["hardware"] * scale.sizes["tp"] * scale.sizes["scheme"]
    assert (
        "memory/device [GiB] (activation checkpointing: none)" in t91.columns
    )  # the policy beside the memory
    infeasible = t91[t91["feasible"] != "yes"]
    assert infeasible["CCR refined"].isna().all() and infeasible["feasible"].str.contains("GiB").all()
    mem = rc.dchag_memory_table(scale)
    np.testing.assert_allclose(mem["modelled / reported"],
                               mem["modelled [GiB] (this memory model, no activation checkpointing)"] / mem["reported [GiB] (D-CHAG paper, MI250X)"])  # fmt: skip
    summary = rb.summary_table(mvm)
    held = summary[(summary["op"] == "all ops") & (summary["points"] == "held out")].iloc[0]
    ref = json_attr(mvm, "summary")["held_out"]
    assert (
        held["n"] == ref["n_points"] and held["median |rel err| refined"] == ref["median_abs_rel_err_refined"]
    )
    pts = rb.points_table(mvm)
    assert (pts["P"] > 1).all() and set(pts["subset"]) == {"fitted", "held out"}


def test_class_table_counts_the_arrays(scene):
    """Catches a class table that counts one protocol's partition under another's name, or drops a protocol."""
    df = rd.class_table(scene)
    labels = scene["labels"].values
    total = df[df["class"] == "all"].iloc[0]
    assert total["pixels"] == (labels > 0).sum()
    for i, protocol in enumerate(("random", "block")):
        part = scene["partition"].values[i, 0]
        assert total[f"{protocol}_train"] == ((labels > 0) & (part == 1)).sum()
        assert total[f"{protocol}_test"] == ((labels > 0) & (part == 2)).sum()
    assert list(df["name"][:3]) == ["a", "b", "c"]


# --- figures and the publisher ---------------------------------------------------------------------------------------
def test_figures_say_measured_or_modelled_and_on_which_hardware(cost_tables, mvm, microbench, scene):
    """Catches: a figure whose title hides whether it is measured or modelled, or on which device."""
    import matplotlib.pyplot as plt

    modelled = {
        "rho": rc.rho_figure(cost_tables["rho"]),
        "ccr_vs_p": rc.ccr_vs_p_figure(cost_tables["ccr"]),
        "boundary": rc.boundary_figure(cost_tables["boundary"]),
        "scale": rc.scale_figure(cost_tables["scale"]),
        "plan": rc.plan_figure(cost_tables["plan"]),
    }
    for name, fig in modelled.items():
        title = fig._suptitle.get_text()
        assert "modelled, not measured" in title, name
        first = "h100-nvlink-ib" if name == "plan" else "paper-intra"  # plan.nc: GPU presets (device memory)
        assert name == "rho" or f"modelled for {first}" in title.replace("\n", " "), name
    measured = {
        "ccr_vs_p": rb.ccr_vs_p_figure(mvm),
        "predicted_vs_measured": rb.predicted_vs_measured_figure(mvm),
        "compute_vs_comm": rb.compute_vs_comm_figure(microbench),
    }
    for name, fig in measured.items():
        title = fig._suptitle.get_text().replace("\n", " ")
        assert "measured" in title and "CPU: AMD EPYC" in title, name
    # predicted vs measured: one marker per measured point and model, identity line spanning both axes
    ax = measured["predicted_vs_measured"].axes[0]
    xs = np.concatenate([line.get_xdata() for line in ax.lines[1:]])
    assert sorted(xs) == sorted(rb.points(mvm)["ccr_measured"])
    scene_fig = rd.scene_figure(scene)
    assert "no hardware-dependent number" in scene_fig._suptitle.get_text()
    for i in range(2):  # one panel per accuracy protocol, in file order
        shown = np.asarray(scene_fig.axes[2 + i].images[0].get_array()).tolist()
        assert shown == scene["partition"].values[i, 0].tolist()
    plt.close("all")


def test_publisher_writes_every_format(tmp_path, mvm):
    pub = Publisher(tmp_path, "bench")
    saved = pub.figure(rb.predicted_vs_measured_figure(mvm), "predicted_vs_measured")
    assert saved._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "figures" / "bench_predicted_vs_measured.pdf").read_bytes()[:5] == b"%PDF-"
    pub.table(rb.summary_table(mvm), "model_vs_measured", "caption with 50% & ρ")
    tables = tmp_path / "tables"
    csv = (tables / "bench_model_vs_measured.csv").read_text()
    assert csv.splitlines()[0].startswith("op,points,n,")
    assert (tables / "bench_model_vs_measured.md").read_text().startswith("caption with 50% & ρ\n\n| op")
    tex = (tables / "bench_model_vs_measured.tex").read_text()
    assert r"\caption{caption with 50\% \& $\rho$}" in tex and r"\label{tab:bench-model-vs-measured}" in tex
    with pytest.raises(ValueError, match="is a figure"):
        pub.table(rb.summary_table(mvm), "ccr_vs_p", "x")
    assert sorted(p.name for p in pub.written) == sorted(
        f"bench_{n}" for n in ("predicted_vs_measured.png", "predicted_vs_measured.pdf", "model_vs_measured.csv",
                               "model_vs_measured.md", "model_vs_measured.tex")
    )  # fmt: skip


def test_cli_rejects_unknown_stage_and_missing_notebook(tmp_path, capsys):
    from hsitp.cli import main

    assert main(["report", "notebook", "audit", "--notebook", "x.ipynb", "--out", "o", "--html", "h"]) == 2
    assert "unknown stage 'audit'" in capsys.readouterr().err
    out = tmp_path / "o.ipynb"
    assert main(["report", "notebook", "data", "--notebook", str(tmp_path / "nope.ipynb"), "--out", str(out),
                 "--html", str(tmp_path / "o.html")]) == 2  # fmt: skip
    assert "no such notebook" in capsys.readouterr().err


def test_reference_files_are_readable_by_kind():
    """The fixtures themselves: real stage outputs of the kinds the pages expect."""
    assert read_netcdf(BENCH / "microbench.nc", kind="microbench")["P"].values.tolist() == [1, 2]
    assert read_netcdf(BENCH / "calibration.nc", kind="calibration").attrs["backend"] == "gloo"


# --- probe and train pages (synthetic files: tests/report_synthetic.py) -------------------------------------------
@pytest.fixture(scope="module")
def probe_files(tmp_path_factory):
    from report_synthetic import probe_files as make

    f = make(tmp_path_factory.mktemp("probe"))
    return rp.load_memory(f["memory"]), rp.load_throughput(f["throughput"]), rp.load_estimate(f["estimate"])


def test_probe_figures_say_measured_modelled_estimated_and_the_hardware(probe_files):
    """Catches: a probe figure that hides whether a number is measured, modelled or estimated with fake tensors,
    the device it ran on, or the activation-checkpointing policy of a memory number."""
    import matplotlib.pyplot as plt
    from report_synthetic import DEVICE_SHOWN

    mem, thr, est = probe_files
    figs = {
        "memory_parts": rp.memory_parts_figure(mem),
        "memory_vs_p": rp.memory_vs_p_figure(mem),
        "throughput": rp.throughput_figure(thr),
    }
    for name, fig in figs.items():
        title = fig._suptitle.get_text().replace("\n", " ")
        assert "measured" in title and DEVICE_SHOWN in title and "float32" in title, name
        panels = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
        assert panels and all("activation checkpointing: " in t for t in panels), name
    assert "modelled" in figs["memory_vs_p"]._suptitle.get_text()
    # the stacked bars of one panel add up to the fullest rank's steady bytes
    ax = figs["memory_parts"].axes[0]
    assert ax.get_title() == "P = 1, activation checkpointing: none"
    tops = {}  # horizontal stacks: one row per plan, the right end of its last segment
    for patch in ax.patches:
        y = round(patch.get_y(), 3)
        tops[y] = max(tops.get(y, 0.0), patch.get_x() + patch.get_width())
    steady = mem["memory"].sel(P=1, g=2, checkpointing="none", kind=list(rp.STEADY_KINDS), rank=0)
    expect = steady.sum(("part", "kind")).sel(plan=["dense", "tp", "dchag_l"]).values / rp.MIB
    # P = 1: rank 0 is the only rank
    np.testing.assert_allclose(sorted(tops.values()), sorted(expect.ravel()))
    title = rp.estimate_figure(est)._suptitle.get_text().replace("\n", " ")
    assert "estimated with fake tensors on " in title and "modelled" in title
    plt.close("all")


def test_probe_peak_note_reads_where_the_peak_falls_under_both_policies(probe_files):
    """Catches the probe page showing the peak under both checkpointing policies without saying that block
    checkpointing leaves it unchanged (cpu-places: the peak falls in aggregation/backward, after the blocks'
    activations are freed), a note not read from the file's ``peak_part`` and peaks, and an old file without
    ``peak_part`` given a note."""
    mem = probe_files[0].copy(deep=True)
    assert rp.peak_policy_note(mem) == ""  # no peak_part: nothing said
    none = mem["peak_allocated"].sel(checkpointing="none")
    peak = mem["peak_allocated"]
    mem["peak_allocated"] = peak.copy(data=none.broadcast_like(peak).transpose(*peak.dims).values.copy())
    mem["peak_part"] = peak.copy(data=np.full(peak.shape, "aggregation/backward", dtype="<U20"))
    note = rp.peak_policy_note(mem)
    assert note.startswith("Peak in aggregation/backward under both policies") and "does not lower it" in note
    assert note in rp.relative_to_tp_caption(mem)
    mem["peak_allocated"].loc[{"checkpointing": "blocks"}] = 0.7 * none  # checkpointing now lowers it by 30 %
    mem["peak_part"].loc[{"checkpointing": "none"}] = "blocks/forward"
    note = rp.peak_policy_note(mem)
    assert "in blocks/forward without checkpointing, in aggregation/backward with block" in note
    assert "lowers it by up to 30 %" in note


def test_probe_tables_are_the_files_values(probe_files):
    """Catches: a relative-to-tp table comparing against another point, or a model-vs-measured table that
    misses the worst error."""
    mem, _, est = probe_files
    rel = rp.relative_to_tp_table(mem)
    assert (
        set(rel["plan"]) == {"dense", "tp", "dchag_l (g=2)"}
        and (rel[rel["plan"] == "tp"]["total vs tp [%]"] == 0).all()
    )
    row = rel[
        (rel["plan"] == "dchag_l (g=2)") & (rel["P"] == 2) & (rel["activation checkpointing"] == "blocks")
    ].iloc[0]
    at = mem["memory"].sel(P=2, g=2, checkpointing="blocks", L=20, N=16, kind=list(rp.STEADY_KINDS))
    tot = at.sum(("part", "kind")).max("rank")
    np.testing.assert_allclose(row["total [MiB] (measured)"], float(tot.sel(plan="dchag_l")) / rp.MIB)
    np.testing.assert_allclose(
        row["total vs tp [%]"], 100 * (float(tot.sel(plan="dchag_l") / tot.sel(plan="tp")) - 1)
    )
    tokagg = at.sel(part=["tokenisation", "aggregation"]).sum("kind")
    r = int(at.sum(("part", "kind")).sel(plan="dchag_l").argmax("rank"))
    np.testing.assert_allclose(
        row["tokenisation+aggregation [MiB] (measured)"],
        float(tokagg.sel(plan="dchag_l", rank=r).sum()) / rp.MIB,
    )
    mvm = rp.model_vs_measured_table(mem)
    blocks = mvm[(mvm["part"] == "blocks") & (mvm["kind"] == "activations")].iloc[0]
    ran = np.isfinite(mem["memory"].sel(rank=0)).all(("part", "kind"))
    ran = ran & (mem["plan"].astype(str).str.startswith("dchag") | (mem["g"] == 2))
    errs = mem["rel_err"].sel(part="blocks", kind="activations").where(ran)
    assert blocks["largest |rel err|"] == float(np.abs(errs).max()) and blocks["points"] == int(ran.sum())
    assert mvm.iloc[-1]["kind"] == "peak" and mvm.iloc[-1]["largest |rel err|"] == pytest.approx(0.2)
    tab = rp.estimate_frame(est)
    assert (
        list(tab["peak estimated [GiB]"]) == [40.0, 20.0]
        and tab["reported reserved [GiB] (D-CHAG paper, MI250X)"].iloc[1] == 25.0
    )


def test_train_page_with_and_without_accuracy_and_prediction(tmp_path):
    """Catches: a train page that fails on records without overall accuracy or prediction (the record gains
    them later), a title that loses the device, a summary table whose numbers are not the record's, or a predicted
    map without the scene's ground truth beside it and a class colour key (issue 26)."""
    import matplotlib.pyplot as plt
    from report_synthetic import DEVICE_SHOWN, scene_file, train_record

    full = train_record(tmp_path, "tp", 2, 1, accuracy=True, prediction=True)
    bare = train_record(tmp_path, "dchag_l", 1, 2, accuracy=False, prediction=False)
    runs = rt.load_records(sorted((tmp_path / "train").glob("*/*.nc")))
    assert {r.attrs["plan"] for r in runs} == {"tp", "dchag_l"}
    for figs in ([rt.curves_figure(runs), rt.resources_figure(runs), rt.prediction_figure(runs)],
                 [rt.curves_figure(runs[:1]), rt.prediction_figure(rt.load_records([bare]))]):  # fmt: skip
        for fig in figs:
            title = fig._suptitle.get_text().replace("\n", " ")
            assert "measured" in title and DEVICE_SHOWN in title and "activation checkpointing: none" in title
    assert len(rt.curves_figure(rt.load_records([full])).axes) == 2  # loss and OA
    assert (
        "no record holds an overall accuracy"
        in rt.curves_figure(rt.load_records([bare]))._suptitle.get_text()
    )
    shown = rt.prediction_figure(rt.load_records([full, bare])).axes[0].images[0].get_array()
    pred = read_netcdf(full)["prediction"].values
    assert np.allclose(shown, rd.class_image(pred, sorted(np.unique(pred).tolist())))  # its classes' colours
    scene = rd.load_scene(scene_file(tmp_path))
    fig = rt.prediction_figure(rt.load_records([full]), [scene])
    truth = np.asarray(fig.axes[0].images[0].get_array())
    labels = scene["labels"].values
    assert fig.axes[0].get_title().endswith("ground truth") and np.allclose(
        truth, rd.class_image(labels, [1, 2, 3])
    )
    shown = np.asarray(fig.axes[1].images[0].get_array())
    assert np.allclose(
        shown, rd.class_image(np.where(labels > 0, pred, 0), [1, 2, 3])
    )  # labelled pixels only
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["1 a", "2 b", "3 c"]  # the class colour key
    tab = rt.summary_table(rt.load_records([full, bare]))
    ref = read_netcdf(full)
    row = tab.iloc[0]
    assert row["loss"] == float(ref["loss_summary"]) and row["tokens/s"] == float(ref["tokens_per_s_summary"])
    assert row["peak [MiB] (fullest rank)"] == float(ref["peak_allocated_summary"].max()) / analysis_cells.MIB
    assert row["overall accuracy (last evaluated)"] == 0.7 and np.isnan(
        tab.iloc[1]["overall accuracy (last evaluated)"]
    )
    plt.close("all")


def test_accuracy_table_and_figure_from_the_summary(summary_files):
    """Catches: an accuracy table whose mean/std are not the seeds' (or that drops the classical baseline of the
    same protocol, or mixes protocols), a learning-curve figure without the baseline lines, or titles losing the device."""
    import matplotlib.pyplot as plt
    from report_synthetic import DEVICE_SHOWN

    path, records = summary_files
    summary = analysis_cells.load_summary(path)
    runs = rt.load_records(records)
    tab = analysis_cells.accuracy_table(summary)
    assert list(dict.fromkeys(zip(tab["dataset"], tab["protocol"], strict=True))) == [
        ("synthetic", "block"),
        ("synthetic", "random"),
    ]
    tp = tab[(tab["protocol"] == "random") & (tab["model"] == "tp P=2")].iloc[0]
    oas = [float(read_netcdf(r)["oa"].values[-1]) for r in records if "tp_N9_P2_g1_random" in r.name]
    assert tp["seeds"] == 2 and tp["OA mean"] == pytest.approx(np.mean(oas))
    assert tp["OA std"] == pytest.approx(np.std(oas, ddof=1)) and np.isnan(tp["ΔOA vs tp mean"])
    svm = tab[(tab["protocol"] == "block") & (tab["model"] == "SVM (RBF)")].iloc[0]
    assert svm["kind"].startswith("classical baseline") and svm["seeds"] == 2
    assert svm["OA mean"] == pytest.approx(np.mean([0.5, 0.51]))  # block baseline of seeds 0 and 1
    dchag = tab[(tab["protocol"] == "block") & (tab["model"] == "dchag_l P=2 g=2")].iloc[0]
    assert dchag["ΔOA vs tp mean"] == pytest.approx(0.0)  # same synthetic OA per seed
    fig = rt.curves_figure(runs, summary)
    assert len(fig.axes) == 4  # loss and OA for each protocol
    col = [ax.get_title() for ax in fig.axes[:2]].index("synthetic, block protocol")
    assert any(
        abs(line.get_ydata()[0] - 0.505) < 1e-9 for line in fig.axes[2 + col].lines
    )  # block SVM mean OA
    for shown in (fig, rt.accuracy_figure(summary, runs)):
        title = shown._suptitle.get_text().replace("\n", " ")
        assert "measured" in title and DEVICE_SHOWN in title
    plt.close("all")


def test_answer_table_reads_the_probe_and_the_verdict(summary_files, probe_files):
    """Catches: the one-table answer dividing other numbers than the files' (peak of a rank that is not the
    fullest, a ratio to tp at another P or policy), an oversubscribed P whose throughput cell does not say so, a
    row without its machine, or a verdict column that shows a number before the run has a summary (or misreads
    the verdict's flag values)."""
    from report_synthetic import DEVICE_SHOWN

    mem, thr, _ = probe_files
    path, _ = summary_files
    summary = analysis_cells.load_summary(path)
    tab = analysis_answer.answer_table(mem, thr, summary)
    assert {("dense", 1), ("tp", 2), ("dchag_l", 2)} <= set(zip(tab["plan"], tab["P"], strict=True))
    assert len(tab) == len(set(zip(tab["plan"], tab["P"], strict=True))) * 2  # x 2 checkpointing policies
    row = tab[
        (tab["plan"] == "dchag_l") & (tab["P"] == 2) & (tab["activation checkpointing"] == "blocks")
    ].iloc[0]
    peak = mem["peak_allocated"].sel(P=2, g=2, L=20, N=16, checkpointing="blocks").max("rank")
    assert (
        row["peak vs tp (fullest rank, measured on CPU)"]
        == f"{float(peak.sel(plan='dchag_l') / peak.sel(plan='tp')):.2f}"
    )
    r = thr.sel(P=2, g=2, L=20, N=16, checkpointing="blocks", plan="dchag_l")
    med, lo, hi = (float(r[f"ratio_vs_tp_{k}"]) for k in ("median", "min", "max"))
    assert row["tokens/s vs tp, median [min, max] (measured on CPU, interleaved)"] == (
        f"oversubscribed: 2 ranks on 1 core: {med:.2f} [{lo:.2f}, {hi:.2f}], no conclusion"
    )
    assert all(DEVICE_SHOWN in on for on in tab["measured on"])
    no_tp1 = mem.assign(peak_allocated=mem["peak_allocated"].where((mem["plan"] != "tp") | (mem["P"] != 1)))
    dense = (
        analysis_answer.answer_table(no_tp1, thr).query("plan == 'dense'").iloc[0]
    )  # as the probe runs: no tp at P = 1
    assert dense["peak vs tp (fullest rank, measured on CPU)"] == "n/a (no tp at P = 1)"
    before = analysis_answer.answer_table(mem, thr, None)  # no training summary yet
    assert set(before["OA verdict vs tp (measured)"]) == {analysis_answer.NO_VERDICT}
    # the verdict as CF flag values, at the probe's crop
    flags = xr.DataArray(np.ones(summary.sizes["cell"], dtype=np.int8), dims="cell",
                         attrs={"flag_values": np.array([0, 1, 2, 3], dtype=np.int8),
                                "flag_meanings": "equal better worse undecided"})  # fmt: skip
    summary = summary.assign(oa_verdict=flags, N=("cell", np.full(summary.sizes["cell"], 16)))
    tab = analysis_answer.answer_table(mem, thr, summary)
    row = tab[(tab["plan"] == "dchag_l") & (tab["P"] == 2)].iloc[0]
    assert row["OA verdict vs tp, synthetic random protocol (measured)"].startswith("better")
    assert (
        tab.query("plan == 'tp' and P == 2").iloc[0]["OA verdict vs tp, synthetic block protocol (measured)"]
        == "reference"
    )
    assert (
        tab[tab["plan"] == "dense"].iloc[0]["OA verdict vs tp, synthetic block protocol (measured)"]
        == "not trained"
    )
    assert "measured on CPU" in rt.answer_caption(mem, thr) and "oversubscribed" in rt.answer_caption(
        mem, thr
    )
    assert list(analysis_answer.answer_table(None, None, summary)["answer"]) == [analysis_answer.NO_PROBE]


CPU_PLACES = ROOT / "results" / "reference" / "cpu-places"


def test_answer_table_times_only_the_policy_the_runs_trained_with():
    """Catches the one-table answer's time to accuracy on a row probed with activation checkpointing (blocks):
    the steps of runs that checkpoint nothing were multiplied by the checkpointed probe's time per step
    (cpu-places: dchag_l P = 2 read 0.38 on the blocks row beside 0.42 on the unchecked one)."""
    summary = analysis_cells.load_summary(CPU_PLACES / "train" / "summary.nc")
    mem, thr = analysis_answer.load_probe(
        CPU_PLACES / "probe" / "memory.nc", CPU_PLACES / "probe" / "throughput.nc"
    )
    tab = analysis_answer.answer_table(mem, thr, summary)
    col = "time to tp's OA − δ vs tp, indian_pines block protocol (measured; time per step on CPU)"
    at = (tab["plan"] == "dchag_l") & (tab["P"] == 2) & (tab["g"] == 1)
    none, blocks = (tab[at & (tab["activation checkpointing"] == ck)].iloc[0] for ck in ("none", "blocks"))
    c = next(
        c
        for c in analysis_cells.cell_rows(summary)
        if (c.plan, c.P, c.g, c.protocol) == ("dchag_l", 2, 1, "block")
    )
    med = float(thr["ratio_vs_tp_median"].sel(plan="dchag_l", P=2, g=1, checkpointing="none").squeeze())
    assert none[col] == analysis_answer.time_to_accuracy_ratio(summary, c, 1.0 / med)[1]
    assert blocks[col].startswith("n/a") and "without activation checkpointing" in blocks[col]
    assert (
        blocks["OA verdict vs tp, indian_pines block protocol (measured)"]
        == none["OA verdict vs tp, indian_pines block protocol (measured)"]
    )  # the accuracy itself does not depend on the policy


def test_answer_table_pairs_each_scene_with_its_own_bands(summary_files, probe_files):
    """Catches the one-table answer of a probe of several L (probe.match_train, scenes of 103 and 200 bands)
    giving every row an indian_pines cell's verdict and time, the 103-band rows (Pavia University's) too: a
    cell answers only the row at its scene's bands."""
    mem, thr, _ = probe_files
    summary = analysis_cells.load_summary(summary_files[0])
    n = summary.sizes["cell"]
    summary = summary.assign(dataset=("cell", ["indian_pines"] * n), N=("cell", np.full(n, 16)))
    two = {"data_vars": "all", "coords": "different", "compat": "equals", "join": "outer"}
    mem2, thr2 = (
        xr.concat([ds.assign_coords(L=[103]), ds.assign_coords(L=[200])], dim="L", **two) for ds in (mem, thr)
    )
    tab = analysis_answer.answer_table(mem2, thr2, summary)
    col = "OA verdict vs tp, indian_pines block protocol (measured)"
    tp = tab[(tab["plan"] == "tp") & (tab["P"] == 2) & (tab["activation checkpointing"] == "none")]
    assert dict(zip(tp["L"], tp[col], strict=True)) == {103: "not trained", 200: "reference"}
    dchag = tab[(tab["plan"] == "dchag_l") & (tab["P"] == 2) & (tab["activation checkpointing"] == "none")]
    assert (dchag.loc[dchag["L"] == 103, col] == "not trained").all()
    assert (dchag.loc[dchag["L"] == 200, col] != "not trained").all()


def test_a_gpu_probe_is_labelled_gpu(tmp_path):
    """Catches a GPU's numbers labelled CPU: the one-table answer's columns said "measured on CPU" and the
    headline's probe line "..., not a GPU" for the H200 probe of results/reference/h200-check (merged here),
    and the answer's caption "MemTracker on CPU ... not on a GPU"."""
    from hsitp.analysis import headline as analysis_headline
    from hsitp.cli import main

    mem_out, thr_out = tmp_path / "memory.nc", tmp_path / "throughput.nc"
    part = ROOT / "results" / "reference" / "h200-check" / "probe_P1.nc"
    assert (
        main(["probe", "merge", str(part), "--memory-out", str(mem_out), "--throughput-out", str(thr_out)])
        == 0
    )
    mem, thr = analysis_answer.load_probe(mem_out, thr_out)
    columns = " ".join(analysis_answer.answer_table(mem, thr, None).columns)
    assert "measured on GPU" in columns and "CPU" not in columns
    line = analysis_headline.probed_on(mem)
    assert "H200" in line and "not a GPU" not in line
    caption = rt.answer_caption(mem, thr)
    assert "measured on GPU" in caption and "CPU" not in caption and "not on a GPU" not in caption


def test_train_page_names_the_replicates_and_backend_it_pairs_over():
    """Catches the train page's accuracy caption saying "over seeds", "paired by seed" and "the seeds that would
    decide it" for cpu-places, whose 5 partitions x 1 seed pair and decide by partition, and the memory-vs-time
    figure naming the P = 1 launch's backend ("1 thread/rank, none)") for ratios all timed at P >= 2 over gloo."""
    places = analysis_cells.load_summary(CPU_PLACES / "train" / "summary.nc")
    caption = rt.accuracy_caption(places, [])
    assert "paired by partition" in caption and "partitions that would decide" in caption
    assert "paired by seed" not in caption and "same partitions" in caption
    fair = analysis_cells.load_summary(ROOT / "results" / "reference" / "cpu-fair" / "train" / "summary.nc")
    assert "paired by seed" in rt.accuracy_caption(fair, []) and "over seeds" in rt.per_class_caption(
        fair, []
    )
    mem, thr = analysis_answer.load_probe(
        CPU_PLACES / "probe" / "memory.nc", CPU_PLACES / "probe" / "throughput.nc"
    )
    fig = rt.pareto_figure(mem, thr, places)
    title = fig._suptitle.get_text()
    assert "gloo" in title and "none)" not in title
    matplotlib.pyplot.close(fig)


def test_probe_throughput_marks_an_oversubscribed_p():
    """Catches the probe page's tokens/s-vs-P figure drawing cpu-places' P = 4 (4 ranks on 2 cores) as an
    ordinary point beside P = 2, inviting the scaling reading the answer table refuses ("no conclusion")."""
    thr = rp.load_throughput(CPU_PLACES / "probe" / "throughput.nc")
    fig = rp.throughput_figure(thr)
    for ax in fig.axes:
        ticks = {t.get_text().split("\n")[0]: t.get_text() for t in ax.get_xticklabels()}
        assert ticks["4"].endswith("oversubscribed") and ticks["2"] == "2"
    matplotlib.pyplot.close(fig)


def test_probe_and_train_hardware_lines(tmp_path):
    from report_synthetic import DEVICE_SHOWN, probe_files, train_record

    f = probe_files(tmp_path)
    assert stage_hardware("probe", [f["memory"]]) == f"measured on {DEVICE_SHOWN}, float32"
    assert stage_hardware("probe", [f["estimate"]]).endswith(
        "estimates with fake tensors (no device memory used)"
    )
    assert stage_hardware(
        "train", [train_record(tmp_path, "tp", 2, 1, accuracy=False, prediction=False)]
    ) == (f"measured on {DEVICE_SHOWN}, float32")


def test_answer_says_whether_the_probe_measured_the_trained_model():
    """Catches a caption claiming "the trained model's size" for a probe of another model (the smoke probe is
    smaller than the smoke training), or denying it when the sizes agree (config/cpu.yaml)."""
    pc = {"dim": 64, "depth": 4, "mlp_ratio": 2, "patch": 4, "heads": 4}
    mem = xr.Dataset(coords={"L": [200], "N": [324]}, attrs={"probe": json.dumps(pc)})
    model = {**pc, "bands": 200, "heads": 4}
    rec = xr.Dataset(attrs={"model": json.dumps(model), "tokens": 324})
    assert rt.probe_sizes(mem, [rec]).startswith("the trained model's size (D = 64, depth 4, patch 4")
    other = xr.Dataset(attrs={"model": json.dumps({**model, "depth": 2}), "tokens": 324})
    assert "not the trained model's" in rt.probe_sizes(mem, [rec, other])
    assert "not the trained model's" in rt.probe_sizes(mem, [])  # nothing to compare with: no claim


# --- figures a reader does not stumble on (issue 40) ---------------------------------------------------------------
def test_bench_ccr_vs_p_plots_ccr_against_p(mvm):
    """Catches bench_ccr_vs_p drawing CCR against N (its name says P): every point sits at a P of the file (the
    shapes side by side within a factor 2**0.3), the x axis is P, and a bench with a single P > 1 says so."""
    import matplotlib.pyplot as plt

    fig = rb.ccr_vs_p_figure(mvm)
    comm = sorted(int(p) for p in rb.points(mvm)["P"].unique())
    for ax in (a for a in fig.axes if a.get_visible()):
        assert ax.get_xlabel() == "P (ranks)" and [float(t) for t in ax.get_xticks()] == comm
        for line in ax.lines:
            xs, ys = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            if xs.size == 0 or np.allclose(ys, 1.0):
                continue  # empty subset, or the CCR = 1 line
            off = np.abs(np.log2(xs[:, None] / np.asarray(comm, float)[None, :])).min(axis=1)
            assert (off <= 0.3).all(), (ax.get_title(), xs)
    title = fig._suptitle.get_text().replace("\n", " ")
    assert title.startswith("CCR vs P per layer") and (len(comm) > 1 or f"P = {comm[0]} only" in title)
    plt.close("all")


def test_boundary_names_sit_next_to_their_points(cost_tables):
    """Catches cost_boundary's dataset names placed far from their points (adjustText pushed them away): each name
    is an annotation of one of its dataset's points, a few points right or left of it and at most a few lines
    above or below, and no two names overlap."""
    import matplotlib.pyplot as plt

    from hsitp.report import style

    b = cost_tables["boundary"]
    fig = rc.boundary_figure(b)
    names = [str(s).split("|")[0] for s in b["point_label"].values]
    points = {(n, float(x), float(y)) for n, x, y in zip(names, b["point_rho"].values, b["point_threshold"].values,
                                                         strict=True)}  # fmt: skip
    for ax in fig.axes:
        notes = [t for t in ax.texts if t.get_text()]
        assert sorted(t.get_text() for t in notes) == sorted(set(names))
        for t in notes:
            assert (t.get_text(), float(t.xy[0]), float(t.xy[1])) in points
            dx, dy = t.xyann
            assert abs(dx) <= 3 and abs(dy) <= 3 + 11 * (7.5 + 3.5), (t.get_text(), t.xyann)
    assert not [p for p in style.figure_problems(fig) if "annotations" in p]
    plt.close("all")


def test_plan_names_the_device_lines_without_labels_on_them(cost_tables):
    """Catches cost_plan's "device 80 GB" and "usable 70.5 GB" labels written on two lines 10 % apart (they overlap
    each other and the lines): the values are in the panel titles, the line styles in the legend."""
    import matplotlib.pyplot as plt

    fig = rc.plan_figure(cost_tables["plan"])
    top = [
        ax for ax in fig.axes if ax.get_ylabel() == "per-rank peak memory [GB]" or "usable" in ax.get_title()
    ]
    assert top and all(not ax.texts for ax in fig.axes)
    assert all("device " in ax.get_title() and " GB, usable " in ax.get_title() for ax in top)
    entries = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "device memory" in entries and "usable (device less headroom)" in entries
    plt.close("all")


def test_accuracy_figures_of_an_untrained_run_say_so(tmp_path, summary_files):
    """Catches the smoke run's training figures (OA ~0.1 beside the SVM's 0.8, noise-like class maps) shown with
    no word that the run tests the machinery, not accuracy; and the note on a run that did learn."""
    import matplotlib.pyplot as plt
    from report_synthetic import scene_file, train_summary

    scene = rd.load_scene(scene_file(tmp_path))
    for oa, noted, (path, records) in (
        (0.1, True, train_summary(tmp_path, oa=0.1)),
        (0.7, False, summary_files),
    ):
        summary, runs = analysis_cells.load_summary(path), rt.load_records(records)
        note = rt.accuracy_note(summary, runs)
        assert (note is not None) == noted, oa
        if noted:
            assert "not trained yet" in note and "4 epochs of 3 steps" in note and "not accuracy" in note
        figs = (rt.curves_figure(runs, summary), rt.accuracy_figure(summary, runs),
                rt.prediction_figure(runs, [scene], summary))  # fmt: skip
        for fig in figs:
            shown = " ".join(t.get_text().replace("\n", " ") for ax in fig.axes for t in ax.texts)
            assert ("A smoke run tests the machinery, not accuracy" in shown) == noted, (oa, fig)
        plt.close("all")
    assert rt.accuracy_note(None, []) is None


def test_pareto_points_pair_memory_with_time_to_accuracy(tmp_path, summary_files):
    """Catches a memory-vs-time-to-accuracy point built from the wrong numbers (the bugs: the memory ratio of another
    P or g, the interleaved tokens/s ratio used as a time ratio instead of its inverse, a cell that never reached
    the target plotted at some value, an oversubscribed P timed): each D-CHAG cell's point is its probed peak over
    tp's at the same P and g (no checkpointing) and its steps over tp's times tp's tokens/s over its own."""
    from report_synthetic import probe_files

    probe = probe_files(tmp_path)
    summary = analysis_cells.load_summary(summary_files[0])
    mem, thr = analysis_answer.load_probe(probe["memory"], probe["throughput"])
    mem, thr = (ds.assign_coords(N=[9]) for ds in (mem, thr))  # the synthetic probe at the records' crop
    busy = thr["oversubscribed_note"].copy()
    thr = thr.assign(oversubscribed_note=xr.full_like(busy, ""))  # as if P = 2 had its two cores
    pts = analysis_answer.pareto_points(mem, thr, summary).set_index("protocol")
    peak = mem["peak_allocated"].max("rank").sel(P=2, g=2, checkpointing="none").isel(L=0, N=0)
    med = float(thr["ratio_vs_tp_median"].sel(plan="dchag_l", P=2, g=2, checkpointing="none").isel(L=0, N=0))
    assert pts.loc["block", "memory_ratio"] == pytest.approx(
        float(peak.sel(plan="dchag_l") / peak.sel(plan="tp"))
    )
    steps = (
        summary["steps_to_target"].sel(target="tp_minus_delta").values
    )  # dchag_l block, random; tp block, random
    assert pts.loc["block", "time_ratio"] == pytest.approx(steps[0] / steps[2] / med)
    never = summary.copy(deep=True)
    never["steps_to_target"].loc[{"target": "tp_minus_delta"}] = [np.nan, 12.0, 12.0, 12.0]
    pts = analysis_answer.pareto_points(mem, thr, never).set_index("protocol")
    assert np.isnan(pts.loc["block", "time_ratio"]) and np.isfinite(pts.loc["random", "time_ratio"])
    assert (
        analysis_answer.pareto_points(mem, thr.assign(oversubscribed_note=busy), summary)["time_ratio"]
        .isna()
        .all()
    )


def test_pareto_points_pair_each_scene_with_its_own_bands(tmp_path, summary_files):
    """Catches a probe of several L (probe.match_train with scenes of different band counts: [103, 200]) paired by
    its first L: an indian_pines cell (200 bands) got the memory ratio of the 103-band rows (Pavia University's),
    twice the right one here."""
    from report_synthetic import probe_files

    probe = probe_files(tmp_path)
    summary = analysis_cells.load_summary(summary_files[0])
    summary = summary.assign(dataset=("cell", ["indian_pines"] * summary.sizes["cell"]))
    mem, thr = analysis_answer.load_probe(probe["memory"], probe["throughput"])
    mem, thr = (ds.assign_coords(N=[9]) for ds in (mem, thr))
    thr = thr.assign(oversubscribed_note=xr.full_like(thr["oversubscribed_note"], ""))
    right = analysis_answer.pareto_points(mem, thr, summary)["memory_ratio"]
    other = mem.copy(deep=True)  # the 103-band rows: dchag_l twice as large
    other["peak_allocated"].loc[{"plan": "dchag_l"}] = other["peak_allocated"].sel(plan="dchag_l") * 2
    two = {"data_vars": "all", "coords": "different", "compat": "equals", "join": "outer"}
    mem2 = xr.concat([other.assign_coords(L=[103]), mem.assign_coords(L=[200])], dim="L", **two)
    thr2 = xr.concat([thr.assign_coords(L=[103]), thr.assign_coords(L=[200])], dim="L", **two)
    pts = analysis_answer.pareto_points(mem2, thr2, summary)["memory_ratio"]
    assert len(pts) == len(right) > 0 and pts.to_numpy() == pytest.approx(right.to_numpy())
    ksc = summary.assign(dataset=("cell", ["ksc"] * summary.sizes["cell"]))  # 176 bands: not probed
    assert analysis_answer.pareto_points(mem2, thr2, ksc).empty


def test_pareto_points_leave_out_a_probe_that_checkpoints(tmp_path, summary_files):
    """Catches a probe of activation checkpointing only (probe.checkpointing: [blocks]) drawn as the trained cells'
    memory (training checkpoints nothing) under the axis 'no checkpointing': no point is paired."""
    from report_synthetic import probe_files

    probe = probe_files(tmp_path)
    summary = analysis_cells.load_summary(summary_files[0])
    mem, thr = analysis_answer.load_probe(probe["memory"], probe["throughput"])
    mem, thr = (ds.assign_coords(N=[9]) for ds in (mem, thr))
    assert not analysis_answer.pareto_points(mem, thr, summary).empty
    blocks = [ds.sel(checkpointing=["blocks"]) for ds in (mem, thr)]
    assert analysis_answer.pareto_points(*blocks, summary).empty


def test_budget_figure_draws_each_study(tmp_path):
    """Catches budget curves drawn from the wrong variable or dropped (the bug: a study whose best-so-far or
    expected-best curve is missing, the plan's colour or the protocol's panel mixed up), and a page that fails when
    the run has no tune stage."""
    from report_synthetic import study_files

    studies = rt.load_studies(study_files(tmp_path))
    fig = rt.budget_figure(studies)
    ax = fig.axes[0]
    assert ax.get_title() == "block protocol (5 trials of 80 steps)"
    best = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    np.testing.assert_allclose(best["dchag_l: best so far"], [0.45, 0.50, 0.61, 0.61, 0.62])
    np.testing.assert_allclose(best["tp: expected best"], studies[0]["expected_best"].values)
    empty = rt.budget_figure([])
    assert empty.axes[0].get_title() == "no tuning study in this run"


def test_tuning_effect_pairs_each_control_cell_with_its_tuned_cell(summary_files):
    """Catches the untuned-control table pairing a control cell with the wrong tuned cell (another protocol or P), the
    sign of what tuning gained flipped, or tp listed as if compared with itself; and a page failing without a
    control."""
    summary = analysis_cells.load_summary(summary_files[0])
    control = summary.copy(deep=True)
    dchag = np.flatnonzero(summary["plan"].values == "dchag_l")
    control["d_oa_vs_tp_mean"].values[dchag] = [-0.10, -0.02]  # block, random on tp's recipe
    table = analysis_answer.tuning_effect_table(summary, control).set_index("protocol")
    assert list(table["plan"]) == ["dchag_l", "dchag_l"]
    for i, protocol in zip(dchag, summary["protocol"].values[dchag], strict=True):
        own = 100 * float(summary["d_oa_vs_tp_mean"].values[i])
        assert table.loc[protocol, "ΔOA vs tp on its own recipe (pp)"] == pytest.approx(own)
        untuned = 100 * float(control["d_oa_vs_tp_mean"].values[i])
        assert table.loc[protocol, "tuning gained (pp)"] == pytest.approx(own - untuned)
    assert analysis_answer.tuning_effect_table(summary, None)["plan"].tolist() == ["none"]


def test_every_analysis_module_is_a_rendering_input() -> None:
    """Bug: a module added to the analysis floor is left out of the rendering rules' inputs, so an edit to the
    tables it computes leaves every rendered page stale."""
    from pathlib import Path

    from hsitp import analysis

    on_disk = {p.stem for p in Path(analysis.__file__).parent.glob("*.py")}
    assert on_disk == set(rules.ANALYSIS_MODULES)
    assert all(Path(p).exists() for p in rules.code_inputs("train"))


def test_the_one_markdown_writer_keeps_text_as_text() -> None:
    """Bug: a cell holding '|' splits its row in two, a seed '01' or a version '2.10' is re-read as a number and
    printed as 1 or 2.1 (the claims table and the jobs' times print text, the pages' tables numbers)."""
    from hsitp.markdown import markdown_table

    text = markdown_table([["01", "a|b", "2.10"]], ["seed", "note", "version"]).splitlines()
    assert [c.strip() for c in text[2].strip("|").split(" | ")] == ["01", "a\\|b", "2.10"]
    assert (
        markdown_table(pd.DataFrame({"x": [0.123456]}), floatfmt=".3g").splitlines()[2].strip("| ") == "0.123"
    )

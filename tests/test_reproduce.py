"""Issue 41: a run's reference (``hsitp report reference``) and the auditor's spot check (``hsitp audit reproduce``) on
a tiny run: 4 training records (tp and dchag_l at P = 2 as single-process equivalents, seeds 0 and 1) on the
synthetic scene, their summary, and a probe at P = 2 (tp and dchag_l at g = 2), all built once for the module.

No timing is asserted: the spot checks here run with ``--no-timing`` or pick cells without a probe row."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from dist_utils import run_world
from probe_workers import probe_all
from train_utils import TINY_CROP, tiny_config, train_p1, write_scene

from hsitp.audit import rebuild
from hsitp.audit import reproduce as rp
from hsitp.cli import main
from hsitp.publish.reference import MANIFEST, collect

PROBE = {
    "plans": ["tp", "dchag_l"],
    "world_sizes": [2],
    "groups": [2],
    "L": [12],
    "N": [9],
    "patch": 4,
    "dim": 16,
    "depth": 1,
    "heads": 2,
    "mlp_ratio": 2,
    "classes": 3,
    "batch": 1,
    "steps": 1,
    "warmup": 1,
    "throughput": {"repeats": 5, "steps": 1, "warmup": 1},
    "checkpointing": ["none"],
    "device": "cpu",
}
CELLS = [("tp", 1), ("dchag_l", 2)]  # (plan, g), each at P = 2 on one process, seeds 0 and 1


PROBE_CFG = {"seed": 0, "probe": PROBE, "parallel": {"timeout_s": 60}}


def _probe(run: Path) -> None:
    """probe/memory.nc and probe/throughput.nc of the tiny run at P = 2, as the probe_run and probe_merge rules
    write them: ``hsitp probe run``'s measurement on a gloo world of 2 forked ranks (the command itself, under
    torchrun, is what the spot check below re-runs through Snakemake), its partial file, the merge."""
    from hsitp.config import validate_config
    from hsitp.models.config import config_attention_kernel
    from hsitp.probe.results import merge, write_partial
    from hsitp.settings import ProbeSettings

    s = ProbeSettings.from_config(validate_config(PROBE_CFG))
    s = s.model_copy(update={"attention_kernel": config_attention_kernel(s.config, "cpu")})  # as run_partial
    out = run_world(probe_all, 2, s)[0]
    attrs = {**out["attrs"], "interleave_orders": out["orders"]}
    partial = write_partial(
        out["results"], settings=s, attrs=attrs, out=run / "probe" / "partial" / "probe_P2.nc", world_size=2
    )
    merge(
        [partial],
        memory_out=run / "probe" / "memory.nc",
        throughput_out=run / "probe" / "throughput.nc",
        settings=s,
    )


def _study(path: Path, plan: str, **best: float) -> Path:
    """A tuning study as training reads it (its attributes: plan, protocol, best trial's parameters)."""
    from hsitp.io import provenance, write_netcdf

    params = {
        "lr": 0.003,
        "weight_decay": 0.1,
        "label_smoothing": 0.05,
        "warmup_steps": 1,
        "per_class": 8,
        **best,
    }
    ds = xr.Dataset(
        {"score": ("trial", [0.5], {"units": "1", "long_name": "validation OA of the trial"})},
        coords={"trial": ("trial", [1], {"units": "1", "long_name": "trial"})},
        attrs={
            "title": f"tiny study of {plan}",
            "plan": plan,
            "protocol": "random",
            "best_params": json.dumps(params),
        },
    )
    return write_netcdf(ds, path, kind="tune_study", prov=provenance({}))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """results/tiny as the cpu-fair run lays it out: each plan on its own tuned recipe (train.recipe tuned), the
    untuned control (dchag_l on tp's recipe, train/synthetic/control/), their summaries and the probe."""
    from hsitp.train.loop import TrainJob
    from hsitp.train.recipe import apply_recipe

    root = tmp_path_factory.mktemp("reproduce")
    run = root / "results" / "tiny"
    scene = write_scene(run / "data" / "synthetic.nc")
    studies = {
        "tp": _study(run / "tune" / "synthetic" / "tp_random.nc", "tp"),
        "dchag_l": _study(run / "tune" / "synthetic" / "dchag_l_random.nc", "dchag_l", lr=0.004, groups=2),
    }
    base = tiny_config(equivalent=True, recipe="tuned")
    jobs = [(plan, g, seed, None) for plan, g in CELLS for seed in (0, 1)] + [("dchag_l", 2, 0, "tp")]
    records: dict[str, list[Path]] = {"own": [], "control": []}
    for plan, g, seed, recipe_plan in jobs:
        cfg, whose = apply_recipe(
            base,
            studies[recipe_plan or plan],
            plan=plan,
            protocol="random",
            groups=g,
            recipe_plan=recipe_plan,
        )
        folder = run / "train" / "synthetic" / ("control" if recipe_plan else "")
        job = TrainJob(
            data=scene, out=folder / f"{plan}_N9_P2_g{g}_random_s{seed}.nc", plan=plan, world_size=2, groups=g,
            protocol="random", seed=seed, tokens=TINY_CROP["tokens"], patch=TINY_CROP["patch"], ranks=1,
        )  # fmt: skip
        records["control" if recipe_plan else "own"].append(train_p1(cfg, job, recipe_plan=whose))
    own = [str(p) for p in records["own"]]
    tp = [p for p in own if "/tp_" in p]
    assert main(["train", "summary", *own, "--out", str(run / "train" / "summary.nc")]) == 0
    control = [*map(str, records["control"]), *tp]
    assert main(["train", "summary", *control, "--out", str(run / "train" / "control_summary.nc")]) == 0
    _probe(run)
    ref = root / "reference" / "tiny"
    collect(run, ref)
    return {"root": root, "run": run, "scene": scene, "ref": ref}


def _seed_picking(ref: rp.Reference, budget_min: float, want) -> int:  # noqa: ANN001
    """The first auditor seed whose picks satisfy ``want`` (the test needs a given kind of cell)."""
    for seed in range(200):
        picks = rp.pick_cells(ref, seed, budget_min * 60)
        if want(picks):
            return seed
    raise AssertionError("no seed below 200 picks such cells")


def _spot_check(ref: Path, seed: int, budget: float, scene: Path, work: Path, *extra: str) -> int:
    argv = ["audit", "reproduce", "--reference", str(ref), "--seed", str(seed), "--budget-min", str(budget)]
    return main([*argv, "--data", str(scene), "--work", str(work), *extra])


def test_reference_holds_the_reported_numbers_and_stays_small(tiny: dict[str, Path]) -> None:
    """Catches a reference that drops a record, a summary, the probe files or the provenance an identical rerun
    needs, or that carries a checkpoint, a cube or a prediction map."""
    ref = tiny["ref"]
    manifest = json.loads((ref / MANIFEST).read_text())
    files = set(manifest["files"])
    assert files == {
        "train/runs.nc", "train/summary.nc", "train/control_summary.nc", "probe/memory.nc", "probe/throughput.nc",
        "tune/synthetic/tp_random.nc", "tune/synthetic/dchag_l_random.nc",
    }  # fmt: skip
    on_disk = {p.relative_to(ref).as_posix() for p in ref.rglob("*") if p.is_file()}
    assert on_disk == files | {MANIFEST}  # no checkpoint, no scene, nothing else
    assert manifest["total_bytes"] < 1_000_000
    assert all(manifest["files"][f]["bytes"] == (ref / f).stat().st_size for f in files)
    runs = xr.load_dataset(ref / "train" / "runs.nc")
    assert runs.attrs["kind"] == "reference_runs" and runs.sizes["run"] == 5
    assert "prediction" not in runs and "cube" not in runs
    names = [f"{p}_N9_P2_g{g}_random_s{s}" for p, g in CELLS for s in (0, 1)]
    assert sorted(runs["name"].values.tolist()) == sorted([*names, "dchag_l_N9_P2_g2_random_s0"])
    assert (runs["steps"] == 6).all() and (runs["ranks"] == 1).all() and int(runs["control"].sum()) == 1
    for path in sorted((tiny["run"] / "train" / "synthetic").rglob("*.nc")):
        control = path.parent.name == "control"
        row = int(np.flatnonzero((runs["name"].values == path.stem) & (runs["control"].values == control))[0])
        with xr.open_dataset(path) as rec:
            assert float(runs["oa_summary"][row]) == float(rec["oa_summary"])
            assert float(runs["oa_final"][row]) == float(rec["oa"][-1])
            assert str(runs["recipe_hash"].values[row]) == rec.attrs["recipe_hash"]
            assert json.loads(str(runs["recipe"].values[row])) == json.loads(rec.attrs["recipe"])
    assert np.isnan(runs["wall_s"]).all()  # no Snakemake benchmark files in this run
    scene = manifest["scenes"]["synthetic"]
    assert len(scene["content_sha256"]) == 64
    plat = manifest["platform"]
    assert plat["torch"] and plat["simd_flags"] is not None  # collected on the training machine
    assert manifest["collected_by"]["load_average_1_5_15_min"]


@pytest.mark.slow
def test_spot_check_reproduces_a_run_and_its_memory_ratio(
    tiny: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """Catches a retraining that is not the recorded run (another recipe, seed, crop, steps or window: the OA is
    compared to 1e-9 on the same platform), a probe re-measurement at other sizes, and a summary line that is not
    last."""
    ref = rp.load_reference(tiny["ref"])
    seed = _seed_picking(
        ref,
        0.7,
        lambda ps: (
            len(ps) == 1 and ps[0].cell.plan == "dchag_l" and not ps[0].cell.control and ps[0].probe_s > 0
        ),
    )
    out = tmp_path / "report.json"
    code = _spot_check(
        tiny["ref"], seed, 0.7, tiny["scene"], tmp_path / "work", "--no-timing", "--out", str(out)
    )
    text = capsys.readouterr().out
    print(text)
    lines = text.strip().splitlines()
    assert code == 0, text
    assert lines[-1] == "1 of 1 cells reproduced"
    assert "identical (|Δ| ≤ 1e-09)" in text
    report = json.loads(out.read_text())
    (only,) = report["cells"]
    assert only["verdict"] == "reproduced" and only["plan"] == "dchag_l" and not only["control"], only
    kinds = {c["what"]: c for c in only["checks"]}
    assert kinds["memory vs tp (probe)"]["ok"] is True
    assert kinds["throughput vs tp"]["ok"] is None  # --no-timing: shown, not judged
    assert abs(kinds["OA last 2"]["reproduced"] - kinds["OA last 2"]["reference"]) <= 1e-9
    assert any(line.startswith(f"[1/1] {only['cell']}: reproduced in ") for line in lines), text


@pytest.mark.slow
def test_planted_difference_is_caught_and_names_the_cell(
    tiny: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """Catches a spot check that passes whatever the reference says: one reference number changed by 0.01 (a
    point of OA) makes the picked cell `differs`, named with the size of the difference, and the exit status 1.
    The cell is the untuned control's (retrained on tp's study through --recipe-plan): its other numbers and its
    recipe must still be the recorded ones, and its probe, over the budget, is said not re-measured."""
    planted = tmp_path / "ref"
    shutil.copytree(tiny["ref"], planted)
    ref = rp.load_reference(planted)
    seed = _seed_picking(ref, 0.2, lambda ps: len(ps) == 1 and ps[0].cell.control)
    (pick,) = rp.pick_cells(ref, seed, 0.2 * 60)
    runs = xr.load_dataset(planted / "train" / "runs.nc")
    runs["oa_summary"].values[pick.cell.row] += 0.01
    runs.to_netcdf(planted / "train" / "runs.nc")
    out = tmp_path / "report.json"
    code = _spot_check(planted, seed, 0.2, tiny["scene"], tmp_path / "work", "--out", str(out))
    text = capsys.readouterr().out
    print(text)
    assert code == 1, text
    assert "not as collected (sha256 differs from manifest.json): train/runs.nc" in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("[1/1] ") and ": differs in " in ln]
    assert "control/dchag_l_N9_P2_g2_random_s0" in line and "OA last 2" in line and "Δ -0.01" in line, line
    assert text.strip().splitlines()[-1] == "0 of 1 cells reproduced"
    (cell,) = json.loads(out.read_text())["cells"]
    assert cell["verdict"] == "differs" and cell["control"] is True
    assert [c["what"] for c in cell["checks"] if c["ok"] is False] == ["OA last 2"]  # only the planted number
    assert "the recorded one" in next(c["text"] for c in cell["checks"] if c["kind"] == "recipe")
    assert "did not fit the budget" in text


def test_picked_cells_depend_only_on_the_seed(tiny: dict[str, Path], tmp_path: Path, capsys) -> None:
    """Catches picks that depend on the order of the rows, the work folder, the time or anything but the auditor's
    seed (and the reference), and a seed that does not change them."""
    ref = rp.load_reference(tiny["ref"])
    budget = 0.4 * 60
    labels = {s: [p.cell.label for p in rp.pick_cells(ref, s, budget)] for s in range(20)}
    assert all(labels[s] for s in labels)
    assert len({tuple(v) for v in labels.values()}) > 1  # the seed changes them
    # the same seed, rows shuffled: the same cells
    shuffled = tmp_path / "ref"
    shutil.copytree(tiny["ref"], shuffled)
    runs = xr.load_dataset(shuffled / "train" / "runs.nc")
    order = np.random.default_rng(123).permutation(runs.sizes["run"])
    runs.isel(run=order).assign_coords(run=np.arange(runs.sizes["run"], dtype=np.int32)).to_netcdf(
        shuffled / "train" / "runs.nc"
    )
    again = rp.load_reference(shuffled)
    assert {s: [p.cell.label for p in rp.pick_cells(again, s, budget)] for s in range(20)} == labels
    # the command prints them before anything runs, the same from two work folders
    outs = []
    for work in ("a", "b"):
        assert _spot_check(tiny["ref"], 7, 0.4, tiny["scene"], tmp_path / work, "--dry-run") == 0
        outs.append(
            [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("picked", "estimate"))]
        )
    assert outs[0] == outs[1] and len(outs[0]) == 2
    assert ", ".join(labels[7]) in outs[0][0]


def test_another_platform_compares_within_the_seeds_spread(tiny: dict[str, Path]) -> None:
    """Catches a spot check that demands bit-identical accuracy on another platform (torch version, CPU flags), or
    that then accepts any difference: the tolerance is 3 sigma of the cell's own seeds (train/summary.nc)."""
    ref = rp.load_reference(tiny["ref"])
    other = {**ref.manifest, "platform": {**ref.manifest["platform"], "torch": "0.0.0"}}
    same, line = rp.platform_comparison(other)
    assert not same and "torch 0.0.0 there" in line
    assert rp.platform_comparison(ref.manifest)[0]
    cell = next(c for c in ref.cells if c.plan == "dchag_l" and not c.control)
    record = tiny["run"] / "train" / "synthetic" / f"{cell.name}.nc"
    sd, source = rp.seed_spread(ref, cell, "oa")
    assert source == "oa_std of train/summary.nc" and np.isfinite(sd) and sd > 0
    checks = {c.what: c for c in rp.accuracy_checks(ref, cell, record, identical=False)}
    assert checks["OA last 2"].ok and "3 sigma of the seeds" in checks["OA last 2"].text
    # the reference moved by 4 sigma (at least a point of OA): outside
    ref.runs["oa_summary"].values[cell.row] += max(4 * sd, 0.01)
    checks = {c.what: c for c in rp.accuracy_checks(ref, cell, record, identical=False)}
    assert checks["OA last 2"].ok is False


def test_memory_ratio_planted_in_the_probe_differs(tiny: dict[str, Path]) -> None:
    """Catches a memory comparison that does not read the (plan, P, g) row against tp: the reference's own probe
    files as the re-measurement agree; its dchag_l peak raised 5 % makes the ratio differ by 5 % (> 2 %)."""
    ref = rp.load_reference(tiny["ref"])
    cell = next(c for c in ref.cells if c.plan == "dchag_l")
    measured = (ref.memory.copy(deep=True), ref.throughput.copy(deep=True))
    checks = rp.probe_checks(ref, cell, measured, timing=False, cores=2)
    assert checks[0].what == "memory vs tp (probe)" and checks[0].ok is True
    measured[0]["peak_allocated"].loc[{"plan": "dchag_l"}] *= 1.05
    checks = rp.probe_checks(ref, cell, measured, timing=False, cores=2)
    assert checks[0].ok is False and "+5.00 %" in checks[0].text


def test_budget_that_fits_no_cell_says_what_it_needs(tiny: dict[str, Path], tmp_path: Path, capsys) -> None:
    """Catches a spot check that starts with nothing to do, or fails without saying which budget would do, and
    one that tries to prepare a scene the registry does not know instead of asking for it."""
    assert _spot_check(tiny["ref"], 1, 0.01, tiny["scene"], tmp_path / "work") == 2
    assert "fits no cell: the cheapest needs" in capsys.readouterr().err
    code = main(["audit", "reproduce", "--reference", str(tiny["ref"]), "--seed", "1", "--budget-min", "5"])
    assert code == 2
    assert "no way to prepare 'synthetic' (not a registry scene): give --data PATH" in capsys.readouterr().err


def test_cli_registers_both_commands(capsys) -> None:
    """Catches a command that is not wired into ``hsitp`` (its parser, in process: ``python -m hsitp`` itself is
    run by tests/test_refused.py)."""
    for argv in (["report", "reference", "--help"], ["audit", "reproduce", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
        assert f"usage: hsitp {' '.join(argv[:2])}" in capsys.readouterr().out


def test_recipe_check_reads_nested_sections_key_by_key():
    """Catches a recipe check that compares nested sections whole: a record from before issue 50 holds
    validation {"fraction": 0.0}, today's code writes {"fraction": 0.0, "folds": 1, "fold": 0} (the defaults of the
    keys added since), and the spot check called that "not trained on the recorded recipe"; a changed nested value
    must still fail, naming its dotted key."""
    want = {"seed": 0, "train": {"lr": 1e-3, "validation": {"fraction": 0.0}}}
    added = {"seed": 0, "train": {"lr": 1e-3, "validation": {"fraction": 0.0, "folds": 1, "fold": 0}}}
    ok = rp.recipe_check("a", want, "b", added)
    assert ok.ok and "validation.folds = 1" in ok.text and "validation.fold = 0" in ok.text
    changed = {"seed": 0, "train": {"lr": 1e-3, "validation": {"fraction": 0.2, "folds": 1}}}
    bad = rp.recipe_check("a", want, "c", changed)
    assert not bad.ok and "validation.fraction: 0.0 recorded, 0.2 here" in bad.text


def _cpu_places_cell(control: bool) -> tuple[rp.Reference, rp.Cell]:
    ref = rp.load_reference(Path(__file__).parents[1] / "results" / "reference" / "cpu-places")
    cell = next(c for c in ref.cells if c.control == control and c.plan == "dchag_l" and c.partition == 2)
    return ref, cell


def test_cell_overlay_holds_the_recorded_run_and_only_its_cell() -> None:
    """Catches an overlay that lets Snakemake build more than the picked cell (another seed, P, plan, protocol or
    crop) or trains another recipe than the recorded one (a recorded train key changed)."""
    ref, cell = _cpu_places_cell(control=False)
    cfg = rebuild.cell_overlay(ref.config, ref.run, cell)
    train = cfg["train"]
    assert (train["plans"], train["world_sizes"], train["groups"]) == (
        ["dchag_l"],
        [cell.P],
        {"dchag_l": [cell.g]},
    )
    assert (train["protocols"], train["seeds"], train["datasets"]) == (
        [cell.protocol],
        [cell.seed],
        [cell.dataset],
    )
    assert [c["tokens"] for c in train["crops"]] == [cell.N] and train["control"] == {"world_sizes": []}
    recipe = json.loads(cell.recipe)["train"]
    assert all(train[k] == v for k, v in recipe.items() if k != "recipe_plan"), "not the recorded recipe"
    assert cfg["data"]["partition"]["draws"] > cell.partition


@pytest.mark.parametrize("control", [False, True])
def test_snakemake_plans_exactly_the_picked_cell(tmp_path: Path, control: bool) -> None:
    """Catches a spot check whose overlay and target make Snakemake plan other jobs than the one cell's training
    (a tuning study rerun, other seeds, the summary) or no job at all: the rule's command line is the one run."""
    ref, cell = _cpu_places_cell(control)
    work = tmp_path / "work"
    data = work / "results" / ref.run / "data" / f"{cell.dataset}.nc"
    data.parent.mkdir(parents=True)
    data.write_bytes(b"")  # present: the dry run plans no data job
    for study in (ref.path / "tune" / cell.dataset).glob("*.nc"):  # the recipe is tuned: the rules read them
        rebuild.place(study, work / "results" / ref.run / "tune" / cell.dataset / study.name)
    overlay = rebuild.cell_overlay(ref.config, ref.run, cell)
    path = work / "overlay.json"
    path.write_text(json.dumps(overlay))
    sub = "control/" if control else ""
    target = f"results/{ref.run}/train/{cell.dataset}/{sub}{cell.name}.nc"
    argv = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(rebuild.snakefile()),
        "--configfile",
        str(path),
    ]
    argv += ["--directory", str(work), "-n", "--cores", "1", "--nolock", target]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rule = "train_control" if control else "train"
    rows = [ln.split() for ln in done.stdout.splitlines()]
    stats = {tuple(r) for r in rows if len(r) == 2 and r[1].isdigit()}  # Snakemake's tables of jobs per rule
    assert stats == {(rule, "1"), ("total", "1")}, done.stdout[-3000:]


def test_no_snakefile_says_a_checkout_is_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Catches a pip-installed package (no Snakefile beside it) failing with a traceback instead of one line that
    says the spot check needs a checkout."""
    monkeypatch.setattr(rebuild, "SNAKEFILE", tmp_path / "Snakefile")
    with pytest.raises(rp.ReproduceError, match="checkout of hsitp"):
        rebuild.snakefile()

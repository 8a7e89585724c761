"""The training rule through Snakemake and torchrun: one job at P = 2 on a tiny synthetic scene, then nothing to
re-run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from train_utils import write_scene

from hsitp.io import read_netcdf

TARGET = "results/smoke/train/synthetic/token_N9_P2_g1_random_s0.nc"
TINY = {
    "train": {
        "datasets": ["synthetic"],
        "plans": ["token"],
        "world_sizes": [2],
        "epochs": 1,
        "steps_per_epoch": 2,
        "warmup_steps": 1,
        "crops": [{"patch": 4, "tokens": 9, "datasets": None}],
        "model": {"dim": 16, "heads": 2, "depth": 1, "mlp_ratio": 2},
        "device": "cpu",
    }
}


@pytest.mark.slow
def test_train_dag_one_job_then_nothing_to_do(workflow_copy):
    """Catches a broken torchrun launch line or CLI wiring, a record missing its per-rank numbers, rule params
    that change between runs (re-running forever), and a FutureWarning in the P = 2 log."""
    root = workflow_copy.root
    write_scene(root / "results" / "smoke" / "data" / "synthetic.nc")
    (root / "config" / "tiny_train.yaml").write_text(yaml.safe_dump(TINY))
    args = [TARGET, "--cores", "2", "--configfile", "config/smoke.yaml", "config/tiny_train.yaml"]
    run = workflow_copy.snakemake(*args, timeout=240)
    logs = "".join(p.read_text() for p in sorted((root / "logs" / "smoke" / "train").rglob("*.log")))
    assert run.returncode == 0, run.stderr[-3000:] + logs[-3000:]
    assert "FutureWarning" not in logs, logs[-3000:]  # issue 26: deprecated all_gather_into_tensor at P >= 2

    ds = read_netcdf(root / TARGET, kind="train")
    assert ds.attrs["plan"] == "token" and int(ds.attrs["P"]) == 2 and ds.attrs["backend"] == "gloo"
    assert ds.sizes["epoch"] == 1 and ds.sizes["rank"] == 2
    assert np.isfinite(ds["loss"]).all() and (ds["tokens_per_s"] > 0).all()
    assert ds["tokens_per_s"].attrs["comparable"] == "within this record only"  # never divided by another's
    assert (ds["comm_time"] > 0).all()  # token plan: K/V gathers and the gradient all-reduce were timed
    assert (ds["peak_allocated"] > 0).all()
    assert (
        root / "results/smoke/train/synthetic/checkpoints/token_N9_P2_g1_random_s0/epoch_0001/manifest.json"
    ).exists()

    assert workflow_copy.planned(*args) == {}


EQUIVALENT = {
    "train": {
        **TINY["train"],
        "plans": ["dchag_l"],
        "groups": {"dchag_l": [2]},
        "epochs": 2,
        "summary_epochs": 1,
        "equivalent": True,
        "equivalence": {"epochs": 1, "seed": 0},
    }
}


@pytest.mark.slow
def test_equivalent_run_launches_one_rank_and_checks_against_p_ranks(workflow_copy):
    """Catches the accuracy runs of train.equivalent still launching P ranks, a check run that is not launched over
    P ranks or not stopped after train.equivalence.epochs, the equivalence rule not wired to both records, and a
    single-process equivalent that is not the model the plan splits (another architecture, other initial weights,
    another sampler stream): its loss and test OA after the check's epoch must match the real P = 2 run. Tolerance:
    OA within 0.0005 (3 decimals), mean loss of the epoch within 1e-4 relative (float32 reassociation across
    ranks moves the last bits only)."""
    root = workflow_copy.root
    write_scene(root / "results" / "smoke" / "data" / "synthetic.nc")
    (root / "config" / "tiny_eq.yaml").write_text(yaml.safe_dump(EQUIVALENT))
    target = "results/smoke/train/equivalence.nc"
    args = [target, "--cores", "2", "--configfile", "config/smoke.yaml", "config/tiny_eq.yaml"]
    run = workflow_copy.snakemake(*args, timeout=240)
    logs = "".join(p.read_text() for p in sorted((root / "logs" / "smoke" / "train").rglob("*.log")))
    assert run.returncode == 0, run.stderr[-3000:] + logs[-3000:]
    eq = read_netcdf(root / "results/smoke/train/synthetic/dchag_l_N9_P2_g2_random_s0.nc", kind="train")
    check = read_netcdf(
        root / "results/smoke/train/synthetic/check/dchag_l_N9_P2_g2_random_s0.nc", kind="train"
    )
    assert (int(eq.attrs["ranks"]), eq.sizes["rank"], eq.sizes["epoch"]) == (1, 1, 2)
    assert (int(check.attrs["ranks"]), check.sizes["rank"], check.sizes["epoch"]) == (2, 2, 1)
    ds = read_netcdf(root / target, kind="train_equivalence")
    assert list(ds["plan"].values) == ["dchag_l"] and int(ds["passed"][0]) == 1
    assert float(ds["loss_max_rel_diff"][0]) < 1e-4
    from hsitp.report.train import NO_CHECK, equivalence_table

    tab = equivalence_table(root / target)
    assert list(tab["within tolerance"]) == ["yes"] and list(tab["epochs"]) == [1]
    assert float(tab["OA over P ranks (measured)"][0]) == pytest.approx(float(ds["oa_check"][0]))
    assert list(equivalence_table(None)["equivalence"]) == [NO_CHECK]


TUNED = {
    "train": {
        **TINY["train"],
        "recipe": "tuned",
        "plans": ["tp", "dchag_l"],
        "epochs": 2,
        "summary_epochs": 1,
        "seeds": [0],
        "equivalent": True,
        "equivalence": {"epochs": 0},
        "control": {"world_sizes": [2]},  # dchag_l also on tp's recipe at train.groups' g = 2
    },
    "tune": {
        "plans": ["tp", "dchag_l"],
        "protocols": ["random"],
        "trials": 1,  # the machinery, not the search: one trial a study
        "startup_trials": 1,
        "epochs": 1,
        "steps_per_epoch": 2,
        "space": {"groups": [1, 2]},
    },
}


@pytest.mark.slow
def test_tuned_recipes_train_each_plan_on_its_own_study(workflow_copy):
    """Catches the fair matrix not training on the tuned recipes (the bugs: every plan on the config's recipe, a
    D-CHAG job at train.groups' g instead of its study's, the summary refusing per-plan recipes or mixing them
    silently, the training jobs planned before the studies exist, tp's job held back until every study has run):
    tune tp and dchag_l, then train each on its
    study's best trial through the checkpoint, and summarise. The untuned control (train.control) catches a control
    run trained on its own recipe or at the study's g, or summarised with the tuned cells."""
    from hsitp.train.recipe import read_best

    root = workflow_copy.root
    write_scene(root / "results" / "smoke" / "data" / "synthetic.nc")
    (root / "config" / "tiny_tuned.yaml").write_text(yaml.safe_dump(TUNED))
    target = "results/smoke/train/summary.nc"
    control_target = "results/smoke/train/control_summary.nc"
    args = [
        target,
        control_target,
        "--cores",
        "2",
        "--configfile",
        "config/smoke.yaml",
        "config/tiny_tuned.yaml",
    ]
    # Before any study has run, tp's job (no g to choose) is already planned, dchag_l's waits for its own study:
    # the studies and tp's training share the cores instead of training waiting for the last study.
    planned = " ".join(workflow_copy.planned(*args))
    assert "train/synthetic/tp_N9_P2_g1_random_s0" in planned, planned
    assert "train/synthetic/dchag_l_N9_P2_g" not in planned, planned
    run = workflow_copy.snakemake(*args, timeout=400)
    logs = "".join(p.read_text() for p in sorted((root / "logs" / "smoke").rglob("*.log")))
    assert run.returncode == 0, run.stderr[-3000:] + logs[-3000:]
    tune_dir = root / "results/smoke/tune/synthetic"
    best = {plan: read_best(tune_dir / f"{plan}_random.nc")["best"] for plan in ("tp", "dchag_l")}
    g = int(best["dchag_l"]["groups"])
    for plan, name in (("tp", "tp_N9_P2_g1_random_s0"), ("dchag_l", f"dchag_l_N9_P2_g{g}_random_s0")):
        ds = read_netcdf(root / f"results/smoke/train/synthetic/{name}.nc", kind="train")
        recipe = json.loads(ds.attrs["recipe"])["train"]
        assert recipe["lr"] == pytest.approx(best[plan]["lr"]) and recipe["recipe"] == "tuned"
        assert recipe["sampling"]["per_class"] == best[plan]["per_class"]
    summary = read_netcdf(root / target, kind="train_summary")
    assert summary.attrs["recipe_hash"].startswith("per plan and protocol")
    control = read_netcdf(
        root / "results/smoke/train/synthetic/control/dchag_l_N9_P2_g2_random_s0.nc", kind="train"
    )
    recipe = json.loads(control.attrs["recipe"])["train"]
    assert recipe["lr"] == pytest.approx(best["tp"]["lr"]) and recipe["recipe_plan"] == "tp"
    assert int(control.attrs["g"]) == 2
    control_summary = read_netcdf(root / control_target, kind="train_summary")
    assert set(control_summary["plan"].values) == {"tp", "dchag_l"}
    assert "oa_verdict" in control_summary
    # the control's records are not in the tuned summary: one tp cell and dchag_l at its study's g only
    assert sorted(zip(summary["plan"].values, summary["g"].values.tolist(), strict=True)) == [
        ("dchag_l", g),
        ("tp", 1),
    ]
    assert workflow_copy.planned(*args) == {}

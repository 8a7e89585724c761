"""Crop sizes of the training matrix (`train.crops`): which scene trains at which N, refusal of a crop larger than
the scene, and two crops of one scene kept apart in the record names and the summary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from train_utils import tiny_config, write_scene

from hsitp.config import ConfigError, load_config, validate_config
from hsitp.train.plan import TrainConfigError, check_jobs, crop_patch, jobs, plan_groups, run_name
from hsitp.train.settings import TrainSettings

ROOT = Path(__file__).resolve().parents[1]


def test_paper_config_trains_5776_only_on_pavia_university() -> None:
    """Catches a crop applied to every scene (N = 5776 on Indian Pines, S = 304 > 145, or no 5776 on Pavia at
    all), a crop whose patch is lost (5776 with patch 8 would be S = 608), or a matrix that silently drops a
    crop: N = 324 (patch 8) on both scenes, N = 5776 (patch 4) on Pavia University only, 90 jobs per crop and
    scene."""
    cfg = TrainSettings.from_config(load_config([ROOT / "config" / "config.yaml"]))
    check_jobs(cfg)  # every crop fits its scene (registry sizes) and every P fits the model
    by_scene: dict[str, set[int]] = {}
    for dataset, _, N, *_ in jobs(cfg):  # noqa: N806
        by_scene.setdefault(dataset, set()).add(N)
    assert by_scene == {"indian_pines": {324}, "pavia_university": {324, 5776}}
    assert crop_patch(cfg, "pavia_university", 5776) == 4
    assert crop_patch(cfg, "pavia_university", 324) == 8
    assert crop_patch(cfg, "indian_pines", 324) == 8
    with pytest.raises(TrainConfigError, match=r"train\.crops: indian_pines has no crop with tokens = 5776"):
        crop_patch(cfg, "indian_pines", 5776)
    counts = {
        (d, N): 0 for d, N in [("indian_pines", 324), ("pavia_university", 324), ("pavia_university", 5776)]
    }
    for dataset, _, N, *_ in jobs(cfg):  # noqa: N806
        counts[(dataset, N)] += 1
    assert set(counts.values()) == {90} and len(jobs(cfg)) == 270


def test_crop_larger_than_the_scene_is_refused_naming_train_crops(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Catches a DAG that schedules a crop the scene cannot hold (N = 5776 at patch 4 is S = 304: it fits Pavia
    University's 610 x 340, not Indian Pines' 145 x 145) and would only fail after the launch, a CLI that starts
    the runtime before checking the crop, a CLI that ignores the crop's patch in train.crops when --patch is not
    given, and a config still using the removed train.patch / train.tokens without being told of train.crops."""
    from hsitp.cli import main

    cfg = load_config([ROOT / "config" / "config.yaml"]).as_json()

    def check(**train: object) -> None:
        cfg["train"].update(train)
        check_jobs(TrainSettings.from_config(validate_config(cfg)))

    with pytest.raises(TrainConfigError, match=r"train\.crops.*indian_pines scene \(145 x 145\)"):
        check(crops=[{"patch": 4, "tokens": 5776, "datasets": None}])
    check(datasets=["pavia_university"])  # the same crop fits Pavia University
    with pytest.raises(TrainConfigError, match=r"train\.crops\[0\]\.datasets names \['pavia_universty'\]"):
        check(
            crops=[{"patch": 8, "tokens": 324, "datasets": ["pavia_universty"]}]
        )  # a typo would train no crop

    with pytest.raises(
        ConfigError, match=r"train: .*'patch', 'tokens' were unexpected\); allowed keys: .*crops"
    ):
        validate_config({"train": {"patch": 8, "tokens": 324}})

    # the CLI on a synthetic 16 x 16 scene of 103 bands: N = 25 at the config's patch 4 is S = 20 > 16
    data = write_scene(tmp_path / "scene.nc", bands=103)
    for k, v in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MASTER_PORT", "9")  # nobody serves it: reaching init_process_group would hang
    crops = [{"patch": 4, "tokens": 25, "datasets": None}, {"patch": 2, "tokens": 36, "datasets": None}]
    conf = json.dumps(
        {"train": {"crops": crops, "model": {"dim": 16, "heads": 2, "depth": 1, "mlp_ratio": 1}}}
    )
    args = ["train", str(data), "--plan", "tp", "--world-size", "2", "--protocol", "random", "--seed", "0"]
    args += ["--out", str(tmp_path / "x.nc"), "--config-json", conf]
    assert main([*args, "--tokens", "25"]) == 2
    err = capsys.readouterr().err
    assert "train.crops: the crop patch 4, tokens 25 (S = 20" in err and "(16 x 16)" in err
    assert main([*args, "--tokens", "49"]) == 2
    assert "train.crops: synthetic has no crop with tokens = 49" in capsys.readouterr().err


def test_two_crops_of_one_scene_give_distinct_records_and_cells(tmp_path: Path) -> None:
    """Catches run names without N (the second crop's record would overwrite the first's, and Snakemake would
    see one output for two jobs), a loop that trains every job at one crop, and a summary that merges the two
    crops into one cell or pairs plan-minus-tp across crops, or an accuracy table that shows both crops under one
    model name: dense and tp at P = 1, each at N = 9 (patch 4,
    S = 12) and N = 16 (patch 2, S = 8), on a synthetic 103-band scene, one epoch of one step each."""
    from hsitp.io import read_netcdf
    from hsitp.parallel.runtime import RuntimeSettings, start
    from hsitp.train.loop import TrainJob, train_rank
    from hsitp.train.summary import summarize

    data = write_scene(tmp_path / "synthetic.nc", bands=103)
    crops = [
        {"patch": 4, "tokens": 9, "datasets": None},
        {"patch": 2, "tokens": 16, "datasets": ["synthetic"]},
    ]
    cfg = tiny_config(
        datasets=["synthetic"],
        crops=crops,
        plans=["dense", "tp"],
        world_sizes=[1],
        epochs=1,
        steps_per_epoch=1,
    )
    planned = jobs(TrainSettings.from_config(cfg))
    assert [(N, plan) for _, plan, N, *_ in planned] == [(9, "dense"), (9, "tp"), (16, "dense"), (16, "tp")]
    names = [run_name(*j[1:]) for j in planned]
    assert len(set(names)) == 4 and "tp_N9_P1_g1_random_s0" in names and "tp_N16_P1_g1_random_s0" in names

    records = []
    for (dataset, plan, N, P, g, protocol, seed, _), name in zip(planned, names, strict=True):  # noqa: N806
        job = TrainJob(
            data=data,
            out=tmp_path / "train" / dataset / f"{name}.nc",
            plan=plan,
            world_size=P,
            groups=g,
            protocol=protocol,
            seed=seed,
            tokens=N,
            patch=crop_patch(TrainSettings.from_config(cfg), dataset, N),
        )
        rt = start(RuntimeSettings.from_config(cfg, section="train", world_size=1))
        try:
            out = train_rank(rt, TrainSettings.from_config(cfg), job)
        finally:
            rt.stop()
        assert out == job.out and job.checkpoint_dir.name == name
        records.append(out)
    attrs = [read_netcdf(r, kind="train").attrs for r in records]
    assert [(int(a["tokens"]), int(a["crop_size"])) for a in attrs] == [(9, 12), (9, 12), (16, 8), (16, 8)]

    ds = summarize(records)
    assert ds.sizes["cell"] == 4
    assert sorted(zip(ds["plan"].values, ds["N"].values.tolist(), strict=True)) == [
        ("dense", 9),
        ("dense", 16),
        ("tp", 9),
        ("tp", 16),
    ]
    cells = zip(ds["plan"].values, ds["N"].values, ds["oa_mean"].values, strict=True)
    oa = {(str(p), int(n)): float(v) for p, n, v in cells}
    for n in (9, 16):
        cell = ds.isel(cell=int(np.flatnonzero((ds["plan"].values == "dense") & (ds["N"].values == n))[0]))
        assert float(cell["d_oa_vs_tp_mean"]) == pytest.approx(oa[("dense", n)] - oa[("tp", n)])
    from hsitp.analysis.cells import accuracy_table

    models = accuracy_table(ds)["model"].tolist()
    assert sorted(models) == ["dense P=1 N=16", "dense P=1 N=9", "tp P=1 N=16", "tp P=1 N=9"]


def test_settings_are_the_section_model_read_by_config_path() -> None:
    """Catches TrainSettings losing a key of the section (a nested key read at its default, not the config's), a
    null train.datasets not falling back to the top-level list, a D-CHAG plan the config gives no g for trained at
    another g than 1, the ``recipe_plan`` of a tuned recipe lost, or the hashed config copied (provenance must hash
    the validated config itself)."""
    cfg = validate_config(
        {
            "datasets": ["indian_pines"],
            "train": {
                "groups": {"dchag_l": [2]},
                "validation": {"folds": 3, "fold": 2},
                "ema": {"decay": 0.5},
            },
        }
    )
    s = TrainSettings.from_config(cfg, recipe_plan="tp")
    assert s.datasets == ("indian_pines",) and s.recipe_plan == "tp" and s.config is cfg
    assert (s.validation.folds, s.validation.fold, s.ema.decay) == (3, 2, 0.5)
    assert plan_groups(s, "dchag_l") == [2] and plan_groups(s, "dchag_c") == [1]
    with pytest.raises(ValueError, match="frozen"):
        s.validation.fraction = 0.5  # type: ignore[misc]

"""The ingredients ablation's runner (issue 50): the spec, the configs of its rows, and the table of paired ΔOA."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from train_utils import TINY_CROP, train_p1, write_scene

from hsitp.evaluate.verdict import t_quantile
from hsitp.io import read_netcdf
from hsitp.train.ingredients import (
    IngredientsError,
    main,
    markdown,
    partition_path,
    read_spec,
    row_config,
    row_jobs,
    table,
)
from hsitp.train.loop import TrainJob

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "epochs": 2, "steps_per_epoch": 2, "warmup_steps": 1, "eval_every": 1, "summary_epochs": 1,
    "crops": [TINY_CROP], "model": {"dim": 16, "heads": 2, "depth": 1, "mlp_ratio": 2}, "device": "cpu",
    "validation": {"fraction": 0.0},
}  # fmt: skip


def _spec(tmp: Path) -> Path:
    spec = {
        "base": [str(ROOT / "config" / "config.yaml")],
        "run": "ing",
        "dataset": "synthetic",
        "plan": "dense",
        "world_size": 1,
        "protocol": "random",
        "partitions": [0, 1],
        "seeds": [0, 1],
        "train": TINY,
        "rows": [
            {"name": "baseline"},
            {"name": "ema", "what": "EMA", "train": {"ema": {"decay": 0.5}}},
            {"name": "pretrain", "what": "pretraining", "train": {"pretrain": {"steps": 2}}},
        ],
    }
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_table_pairs_each_row_with_the_baseline_by_replicate(tmp_path: Path, monkeypatch) -> None:
    """Catches a ΔOA that pairs a row's run with another partition's or seed's baseline run (or not at all), a
    wrong interval (not the t interval over replicates), a row trained on other keys than the baseline plus its
    ingredient (the study's recipe or the shared keys lost), a pretraining row not marked transductive, and
    records of a changed spec read as if they were its own: two partitions x two seeds, trained in this process
    where the runner's jobs would write them, and the table recomputed by hand."""
    monkeypatch.chdir(tmp_path)
    spec = read_spec(_spec(tmp_path))
    _scene_with_draws(partition_path(spec), spec.partitions, tmp_path)  # two different draws of the scene
    oa: dict[str, dict[tuple[int, int], float]] = {}
    for row in spec.rows:
        cfg = row_config(spec, row)
        assert cfg.train.epochs == 2 and cfg.train.validation.fraction == 0.0
        oa[row.name] = {}
        for job in row_jobs(spec, row):
            k, seed = job.replicate
            assert job.cmd[job.cmd.index("--seed") + 1] == str(seed)
            assert job.cmd[4] == str(partition_path(spec))
            assert job.cmd[job.cmd.index("--partition") + 1] == str(k)
            assert pickle.loads(pickle.dumps(job)) == job  # a process pool can take it
            out = train_p1(cfg, TrainJob(
                data=partition_path(spec), out=job.record, plan="dense", world_size=1, groups=1,
                protocol="random", seed=seed, tokens=9, patch=4, partition=k,
            ))  # fmt: skip
            job.record.with_suffix(".wall.json").write_text(json.dumps({"wall_s": 10.0 + k + seed}))
            oa[row.name][(k, seed)] = float(read_netcdf(out, kind="train")["oa_summary"])
    ds = table(spec)
    reps = sorted(oa["baseline"])
    for i, name in enumerate(["baseline", "ema", "pretrain"]):
        d = np.array([oa[name][r] - oa["baseline"][r] for r in reps])
        assert int(ds["replicates"].values[i]) == 4
        assert float(ds["d_oa_mean"].values[i]) == pytest.approx(d.mean())
        half = t_quantile(4) * d.std(ddof=1) / 2
        if d.std() > 0:
            assert float(ds["d_oa_ci_high"].values[i]) == pytest.approx(d.mean() + half)
        assert float(ds["oa_mean"].values[i]) == pytest.approx(np.mean(list(oa[name].values())))
    assert list(ds["transductive"].values) == [0, 0, 1]
    assert list(ds["steps"].values) == [4, 4, 6]  # 2 x 2 fine-tuning steps (+ 2 pretraining)
    assert float(ds["wall_vs_baseline"].values[1]) == pytest.approx(1.0)
    text = markdown(ds)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    by_name = {r[0]: r for r in rows}
    assert rows[0][0] == "baseline" and by_name["pretrain"][1:3] == ["pretraining", "4"]
    assert rows[-1][-1] == "yes"

    changed = read_spec(_spec(tmp_path)).model_copy(update={"train": {**TINY, "epochs": 3}})
    with pytest.raises(IngredientsError, match="trained under recipe .* the spec or its overlays changed"):
        table(changed)


def _bad(raw: dict) -> None:
    raw["rows"][0]["train"] = {"augment": False}


MALFORMED = [  # (what is wrong, the change, the line's key and words)
    ("baseline adds keys", _bad, r"rows: the first row \(baseline\) is the baseline: it adds no `train` keys"),
    ("a row twice", lambda r: r["rows"].append({"name": "ema"}), r"rows: row names repeat: \['ema'\]"),
    ("no partitions", lambda r: r.update(partitions=[]), "partitions: Tuple should have at least 1 item"),
    ("a seed twice", lambda r: r.update(seeds=[0, 0]), r"seeds: \[0, 0\] repeats an item"),
    ("a partition twice", lambda r: r.update(partitions=[1, 1]), r"partitions: \[1, 1\] repeats an item"),
    ("a negative partition", lambda r: r.update(partitions=[-1]), "partitions.0: Input should be greater"),
    ("a key missing", lambda r: r.pop("plan"), "plan: Field required"),
    ("a key misspelt", lambda r: r.update(seed=3), r"seed: unknown key \(allowed: base, run, .*seeds"),
    ("a row's key misspelt", lambda r: r["rows"][1].update(trian={}), r"rows.1.trian: unknown key \(allowed: name"),
    ("an unknown plan", lambda r: r.update(plan="tpp"), "plan: 'tpp' is not a plan"),
    ("a row name as a path", lambda r: r["rows"][1].update(name="../x"), "rows.1.name: String should match"),
    ("no world size", lambda r: r.update(world_size=0), "world_size: Input should be greater than or equal to 1"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "change", "words"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_spec_is_refused_in_one_line_naming_the_file_and_key(
    tmp_path: Path, what: str, change, words: str
) -> None:
    """Catches a malformed spec that trains anyway or fails later with a traceback: a baseline row adding keys
    (ΔOA not against the baseline recipe), two rows of one name (one folder for two rows' records), a seed or
    partition given twice (one replicate counted twice in the paired interval), no partitions, a misspelt key
    silently ignored (``seed:`` for ``seeds:``, a row's ``trian:``: the row would train the baseline), an unknown
    plan, a row name that leaves results/RUN/, a world size of 0; and a message without the file or the key."""
    raw = yaml.safe_load(_spec(tmp_path).read_text())
    change(raw)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(IngredientsError, match=f"^{re.escape(str(bad))}: {words}") as exc:
        read_spec(bad)
    assert "\n" not in str(exc.value)


def test_the_runner_exits_2_with_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    """Catches the runner printing a traceback (or exiting 1) for a spec it refuses, a row whose ingredient the
    pipeline's schema refuses reported without the row's name or only after other rows trained, and an empty
    overlay read as no overlay."""
    monkeypatch.chdir(tmp_path)
    path = _spec(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["rows"][2]["train"] = {"pretrain": {"stepz": 2}}
    path.write_text(yaml.safe_dump(raw))
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hsitp: error: rows: pretrain: invalid config: train.pretrain") and "\n" not in err
    assert not (tmp_path / "results").exists()  # refused before the scene was prepared or a row trained
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    assert main([str(path), "--overlay", str(empty), "--table"]) == 2
    assert f"{empty} holds no settings" in capsys.readouterr().err


def test_spec_is_overlaid(tmp_path: Path) -> None:
    """Catches an overlay (the pilot's) that does not replace the run name, seeds and shared keys; and the
    committed spec and pilot resolving to other than tp's tuned block recipe on the block protocol at N = 324."""
    spec = read_spec(ROOT / "config/cpu-places-ablation.yaml", [ROOT / "config/cpu-places-pilot.yaml"])
    assert spec.run == "cpu-places-pilot" and spec.seeds == (0, 1) and spec.partitions == (0,)
    full = read_spec(ROOT / "config/cpu-places-ablation.yaml")
    assert [r.name for r in spec.rows] == [r.name for r in full.rows]
    base = row_config(full, full.rows[0]).train
    assert base.lr == pytest.approx(0.00855, rel=1e-3)
    assert (base.sampling.mode, base.sampling.per_class) == ("stratified", 19)
    assert base.epochs * base.steps_per_epoch == 2000 and base.crops[0].tokens == 324
    assert row_config(spec, spec.rows[0]).train.epochs * 30 == 300
    for row in full.rows[1:]:
        train = row_config(full, row).train
        assert train.crops[0].tokens == 324 and train.lr == base.lr, row.name


def _scene_with_draws(path: Path, draws: list[int], tmp: Path) -> None:
    """One prepared scene holding a random-protocol partition per draw (the k-th from write_scene's seed k), laid
    out (protocol, partition_index, y, x) as ``hsitp data prepare`` writes K draws."""
    import xarray as xr

    write_scene(path, seed=0)
    parts = [
        xr.load_dataset(write_scene(tmp / f"draw{k}.nc", seed=k))["partition"].values[0, 0] for k in draws
    ]
    ds = xr.load_dataset(path)
    attrs = dict(ds["partition"].attrs)
    ds = ds.drop_vars(["partition", "partition_index"]).assign_coords(partition_index=list(draws))
    ds["partition"] = (("protocol", "partition_index", "y", "x"), np.stack(parts)[None], attrs)
    ds.to_netcdf(path)

"""The training recipe (issue 23): validation pixels, stratified sampling, label smoothing, the recipe hash and the
summary's recipe checks, on the tiny synthetic scene."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr
from nc_checks import described
from train_utils import TINY_CROP, tiny_config, train_p1, write_scene

from hsitp.config import ConfigError, validate_config
from hsitp.evaluate.metrics import score_map
from hsitp.io import provenance, read_netcdf, write_netcdf
from hsitp.sections import Config
from hsitp.train import checkpoint as ckpt
from hsitp.train.data import TEST, CropSampler, TrainDataError, load_scene, validation_mask
from hsitp.train.loop import InjectedFailure, TrainJob
from hsitp.train.settings import TrainSettings
from hsitp.train.summary import SummaryError, summarize


def recipe_hash(cfg: Config) -> str:
    return TrainSettings.from_config(cfg).recipe_hash()


def _grid_labels(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A 32 x 32 scene with 4 classes (class 4 has a single train pixel) and a random train mask."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(1, 4, size=(32, 32))
    labels[0, 0] = 4
    train = rng.random((32, 32)) < 0.5
    train[0, 0] = True
    labels[(labels == 4) & ~train] = 1
    return labels, train


def test_validation_random_per_class_seeded_and_disjoint() -> None:
    """Catches validation pixels drawn over the whole scene instead of per class (a class's share drifting), drawn
    outside the train pixels, a class left with no train pixel, and a draw that ignores the master seed."""
    labels, train = _grid_labels()
    val = validation_mask(labels, train, "random", 0.25, seed=3)
    assert not (val & ~train).any()
    for c in (1, 2, 3):
        n = int((train & (labels == c)).sum())
        assert int((val & (labels == c)).sum()) == round(0.25 * n)
    assert not val[0, 0]  # class 4's only train pixel stays in training
    np.testing.assert_array_equal(val, validation_mask(labels, train, "random", 0.25, seed=3))
    assert not np.array_equal(val, validation_mask(labels, train, "random", 0.25, seed=4))
    assert not validation_mask(labels, train, "random", 0.0, seed=3).any()


def test_validation_block_takes_whole_blocks() -> None:
    """Catches a block-protocol validation made of scattered pixels (spatially mixed with the loss pixels, so it would
    flatter the recipe as the random protocol does), one below the fraction, or one that empties the training set."""
    labels, train = _grid_labels()
    val = validation_mask(labels, train, "block", 0.3, seed=0, block=8)
    assert not (val & ~train).any()
    assert val.sum() >= 0.3 * train.sum()
    for by in range(4):
        for bx in range(4):
            blk = (slice(by * 8, by * 8 + 8), slice(bx * 8, bx * 8 + 8))
            held = val[blk][train[blk]]
            assert held.all() or not held.any(), (by, bx)  # all of a block's train pixels, or none
    assert (train & ~val).any()
    with pytest.raises(TrainDataError, match="train.validation.fraction"):
        validation_mask(labels, train, "block", 0.3, seed=0, block=None)


def test_inner_folds_validate_every_train_pixel_once_in_whole_blocks() -> None:
    """Catches inner folds (issue 50: the block protocol's tuning validation) that overlap, miss train pixels (the
    pooled validation would not be every train pixel), leak outside the train pixels, split a block between folds
    under the block protocol (validation beside its own block's loss pixels), ignore the master seed, or accept a
    fold index beyond the folds."""
    labels, train = _grid_labels()
    for protocol in ("block", "random"):
        masks = [
            validation_mask(labels, train, protocol, 0.0, seed=0, block=8, folds=3, fold=f) for f in range(3)
        ]
        assert np.array_equal(sum(m.astype(int) for m in masks), train.astype(int))  # each train pixel once
        assert all(m.any() for m in masks)
        again = validation_mask(labels, train, protocol, 0.0, seed=0, block=8, folds=3, fold=1)
        assert np.array_equal(masks[1], again)
        other = [
            validation_mask(labels, train, protocol, 0.0, seed=9, block=8, folds=3, fold=f) for f in range(3)
        ]
        # random: the seed draws the folds; block: StratifiedGroupKFold orders the blocks by their class mix and
        # the seed only breaks ties, so the same blocks may well fall the same way
        assert protocol == "block" or any(not np.array_equal(a, b) for a, b in zip(masks, other, strict=True))
    for f in range(2):
        val = validation_mask(labels, train, "block", 0.5, seed=0, block=8, folds=2, fold=f)
        for by in range(4):
            for bx in range(4):
                held = val[by * 8 : by * 8 + 8, bx * 8 : bx * 8 + 8][
                    train[by * 8 : by * 8 + 8, bx * 8 : bx * 8 + 8]
                ]
                assert held.all() or not held.any(), (f, by, bx)
    with pytest.raises(TrainDataError, match="train.validation.fold = 2"):
        validation_mask(labels, train, "block", 0.0, seed=0, block=8, folds=2, fold=2)
    with pytest.raises(TrainDataError, match="train.validation.folds = 40"):
        validation_mask(labels, train, "block", 0.0, seed=0, block=8, folds=40, fold=0)


def test_scene_holds_validation_pixels_out_of_the_loss(tmp_path: Path) -> None:
    """Catches validation pixels that keep their training target (the loss would see the pixels every decision is
    taken on) and counts that do not add up."""
    data = write_scene(tmp_path / "scene.nc", both_protocols=True)
    for protocol in ("random", "block"):
        full = load_scene(data, protocol)
        held = load_scene(data, protocol, validation=0.3, validation_seed=1)
        assert held.validation.any()
        assert (held.target.numpy()[held.validation] == -1).all()
        assert (full.target.numpy()[held.validation] >= 0).all()
        assert held.counts["train_pixels"] + held.counts["validation_pixels"] == full.counts["train_pixels"]
        # class coverage: what a reader needs to judge a validation set (a few whole blocks hold few classes)
        labels = held.labels
        assert held.counts["validation_classes"] == len(set(labels[held.validation].tolist()) - {0})
        assert held.counts["train_classes"] == len(set(labels[held.train_mask.numpy()].tolist()) - {0})
        assert (
            0 < held.counts["validation_classes"] <= held.classes
            and 0 < held.counts["test_classes"] <= held.classes
        )


def test_stratified_sampler_caps_each_class_and_resumes_exactly(tmp_path: Path) -> None:
    """Catches a stratified mask that keeps more than k pixels of a class, invents labels (a pixel that was not a
    train pixel of that class in the crop), draws from an RNG a checkpoint does not restore, or moves the crops."""
    scene = load_scene(write_scene(tmp_path / "scene.nc"), "random")
    plain = CropSampler(scene, 12, 2, seed=5)
    strat = CropSampler(scene, 12, 2, seed=5, per_class=3)
    x0, y0 = plain.next()
    x1, y1 = strat.next()
    torch.testing.assert_close(x0, x1)  # the same crops: only the mask differs
    kept = y1 >= 0
    assert (y1[kept] == y0[kept]).all() and kept.sum() < (y0 >= 0).sum()
    counts = torch.bincount(y1[kept], minlength=scene.classes)
    assert counts.max() <= 3
    for c in range(scene.classes):
        assert counts[c] == min(3, int((y0 == c).sum()))
    state = strat.state_dict()
    a = [strat.next()[1] for _ in range(3)]
    strat.load_state_dict(state)
    b = [strat.next()[1] for _ in range(3)]
    for u, v in zip(a, b, strict=True):
        assert torch.equal(u, v)


def _job(tmp: Path, data: Path, tag: str) -> TrainJob:
    return TrainJob(
        data=data,
        out=tmp / tag / "dense_N9_P1_g1_random_s0.nc",
        plan="dense",
        world_size=1,
        groups=1,
        protocol="random",
        seed=0,
        tokens=TINY_CROP["tokens"],
        patch=TINY_CROP["patch"],
    )


def test_recipe_run_resumes_bitwise_and_records_validation(tmp_path: Path) -> None:
    """Catches a stratified draw or smoothed loss that breaks exact resume, validation scores that are not those of
    the recorded map on the held-out pixels, and a record without its recipe hash."""
    data = write_scene(tmp_path / "scene.nc")
    recipe = {"sampling": {"mode": "stratified", "per_class": 4}, "label_smoothing": 0.1}
    cfg = tiny_config(**recipe, validation={"fraction": 0.3})
    ref = read_netcdf(train_p1(cfg, _job(tmp_path, data, "straight")), kind="train")
    crashed = _job(tmp_path, data, "crashed")
    with pytest.raises(InjectedFailure):
        train_p1(tiny_config(**recipe, validation={"fraction": 0.3}, debug={"fail_at_step": 3}), crashed)
    assert ckpt.complete_epochs(crashed.checkpoint_dir) == [1]
    got = read_netcdf(train_p1(cfg, crashed), kind="train")
    for name in ("loss", "oa", "val_oa", "val_per_class_accuracy", "prediction"):
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)

    scene = load_scene(data, "random", validation=0.3, validation_seed=cfg.seed)
    flags = np.where(scene.validation, TEST, 0)
    val = score_map(ref["prediction"].values, scene.labels, flags, scene.classes)
    assert float(ref["val_oa"].values[-1]) == pytest.approx(val.oa)
    assert np.isnan(ref["val_oa"].values[0]) and np.isfinite(ref["val_oa"].values[1:]).all()  # eval_every = 2
    assert json.loads(ref.attrs["counts"])["validation_pixels"] == int(scene.validation.sum())
    assert ref.attrs["recipe_hash"] == recipe_hash(cfg)
    assert json.loads(ref.attrs["recipe"]) == TrainSettings.from_config(cfg).recipe_record()


def test_recipe_hash_follows_the_recipe_not_the_job_matrix() -> None:
    """Catches a hash blind to a recipe key (two recipes would share a summary) or one that changes with keys
    that do not shape the weights (seeds, plans, evaluation cadence), which would split one recipe's runs."""
    base = recipe_hash(tiny_config())
    for change in (
        {"label_smoothing": 0.1},
        {"sampling": {"mode": "stratified"}},
        {"validation": {"fraction": 0.1}},
        {"augment": False},
        {"epochs": 4},
        {"model": {"dim": 32, "heads": 2, "depth": 1, "mlp_ratio": 2}},
    ):
        assert recipe_hash(tiny_config(**change)) != base, change
    for same in ({"seeds": [0, 1, 2]}, {"plans": ["tp"]}, {"eval_every": 1}, {"summary_epochs": 2}):
        assert recipe_hash(tiny_config(**same)) == base, same
    assert (
        recipe_hash(tiny_config().model_copy(update={"seed": 7})) != base
    )  # the seed draws the validation pixels
    with pytest.raises(ConfigError, match="label_smoothing"):
        tiny_config(label_smoothing=1.5)


def _record(tmp: Path, seed: int, rh: str, oa: float) -> Path:
    ds = xr.Dataset(
        {
            "oa": ("epoch", [np.nan, oa], {"units": "1", "long_name": "oa"}),
            "aa": ("epoch", [np.nan, oa], {"units": "1", "long_name": "aa"}),
            "kappa": ("epoch", [np.nan, oa], {"units": "1", "long_name": "kappa"}),
            **{f"{m}_summary": ((), oa, {"units": "1", "long_name": m}) for m in ("oa", "aa", "kappa")},
            "val_oa": ("epoch", [np.nan, oa + 0.1], {"units": "1", "long_name": "val oa"}),
            "per_class_accuracy": (
                ("epoch", "label"),
                [[np.nan] * 2, [oa, np.nan]],
                {"units": "1", "long_name": "r"},
            ),
            "tokens_per_s_summary": ((), 1.0, {"units": "1/s", "long_name": "t"}),
            "peak_allocated_summary": (("rank",), [1.0], {"units": "bytes", "long_name": "m"}),
            "ccr_inline_summary": (("rank",), [0.0], {"units": "1", "long_name": "c"}),
        }
    )
    ds.attrs.update(
        {"title": "record", "dataset": "s", "plan": "tp", "P": 2, "g": 1, "protocol": "random", "seed": seed}
    )
    ds.attrs.update({"tokens": 9, "recipe_hash": rh, "recipe": json.dumps({"h": rh})})
    ds.attrs.update({"partition_index": 0, "steps_per_epoch": 1, "attention_kernel": "exact"})
    return write_netcdf(described(ds), tmp / f"{rh}_s{seed}.nc", kind="train", prov=provenance({}))


def _baseline(tmp: Path, seed: int, per_class: list[float]) -> Path:
    one = {"units": "1", "long_name": "x"}
    ds = xr.Dataset(
        {
            "overall_accuracy": ("classifier", [0.5], one),
            "average_accuracy": ("classifier", [0.5], one),
            "kappa": ("classifier", [0.5], one),
            "class_accuracy": (("classifier", "label"), [per_class], one),
        },
        coords={"classifier": ["svm"]},
        attrs={"title": "baseline", "dataset": "s", "protocol": "random", "seed": seed, "partition_index": 0},
    )
    return write_netcdf(described(ds), tmp / f"s_random_s{seed}.nc", kind="baseline", prov=provenance({}))


def test_summary_refuses_mixed_recipes_and_reduces_validation(tmp_path: Path) -> None:
    """Catches a summary that silently averages runs of two recipes, loses the recipe hash, or drops the
    validation and per-class numbers (the model's and the baseline's) that the train page's per-class table shows."""
    from hsitp.analysis.cells import per_class_table

    a0, a1 = _record(tmp_path, 0, "aaaa", 0.6), _record(tmp_path, 1, "aaaa", 0.8)
    bases = [_baseline(tmp_path, seed, [0.5 + 0.2 * seed, np.nan]) for seed in (0, 1)]
    ds = summarize([a0, a1], bases)
    assert ds.attrs["recipe_hash"] == "aaaa"
    assert float(ds["val_oa_mean"][0]) == pytest.approx(0.8)
    np.testing.assert_allclose(ds["per_class_accuracy_mean"].values[0], [0.7, np.nan])
    np.testing.assert_allclose(ds["baseline_per_class_accuracy_mean"].values[0, 0], [0.6, np.nan])
    tab = per_class_table(ds)
    assert list(tab["class"]) == [1, 2]
    assert tab["s random: tp P=2"].tolist()[0] == pytest.approx(0.7)
    assert tab["s random: SVM (RBF)"].tolist()[0] == pytest.approx(0.6)
    with pytest.raises(SummaryError, match="recipe bbbb.*recipe aaaa|recipe aaaa.*recipe bbbb"):
        summarize([a0, a1, _record(tmp_path, 2, "bbbb", 0.7)])


def test_control_jobs_train_dchag_on_tp_recipe_only_under_tuned(tmp_path: Path) -> None:
    """Catches the untuned control (issue 36) being planned when the recipe is not tuned, at a P the tuned matrix
    lacks (nothing to compare it with), for tp itself, or at the study's g instead of train.groups."""
    from hsitp.train.plan import TrainConfigError, control_jobs

    train = {
        "datasets": ["ksc"], "crops": [{"patch": 1, "tokens": 9, "datasets": None}], "plans": ["tp", "dchag_l"],
        "world_sizes": [2, 4], "groups": {"dchag_l": [2]}, "protocols": ["block"], "seeds": [0, 1],
        "recipe": "tuned", "control": {"world_sizes": [2]}, "equivalent": True,
    }  # fmt: skip

    # the DAG's functions read the typed train settings
    def control(**keys: object) -> list:
        return control_jobs(
            TrainSettings.from_config(validate_config({"datasets": ["ksc"], "train": train | keys}))
        )

    assert control() == [
        ("ksc", "dchag_l", 9, 2, 2, "block", 0, 0),
        ("ksc", "dchag_l", 9, 2, 2, "block", 1, 0),
    ]
    assert control(recipe="config") == []
    assert control(control={"world_sizes": []}) == []
    with pytest.raises(TrainConfigError, match="not in train.world_sizes"):
        control(control={"world_sizes": [8]})


def test_apply_recipe_control_takes_tp_study_and_keeps_job_g(tmp_path: Path) -> None:
    """Catches a control job silently trained on its own study (or a D-CHAG job on another plan's study without
    saying so): the study's plan must be --recipe-plan, the job keeps its g, and the recipe records recipe_plan."""
    from hsitp.contracts import TUNE_STUDY
    from hsitp.train.recipe import RecipeError, apply_recipe

    best = {"lr": 0.002, "weight_decay": 0.1, "label_smoothing": 0.05, "warmup_steps": 10, "per_class": 8}
    study = tmp_path / "tp_block.nc"
    attrs = {"plan": "tp", "protocol": "block", "best_params": json.dumps(best)}
    study_ds = xr.Dataset({"score": ("trial", [0.5])}, coords={"trial": [1]}, attrs=attrs)
    write_netcdf(described(study_ds), study, kind=TUNE_STUDY.kind, prov=provenance({}))
    cfg = validate_config({"train": {"lr": 0.001, "sampling": {"mode": "all", "per_class": 16}}})
    out, whose = apply_recipe(cfg, study, plan="dchag_l", protocol="block", groups=4, recipe_plan="tp")
    assert out.train.lr == 0.002 and whose == "tp"
    assert out.as_json()["train"]["sampling"] == {"mode": "stratified", "per_class": 8}
    assert (
        TrainSettings.from_config(out, whose).recipe_record()["train"]["recipe_plan"] == "tp"
    )  # in the hash
    assert apply_recipe(cfg, study, plan="tp", protocol="block", groups=1)[1] is None
    with pytest.raises(RecipeError, match="own study"):
        apply_recipe(cfg, study, plan="dchag_l", protocol="block", groups=4)
    with pytest.raises(RecipeError, match="random protocol"):
        apply_recipe(cfg, study, plan="dchag_l", protocol="random", groups=4, recipe_plan="tp")

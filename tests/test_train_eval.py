"""Evaluation inside training: tiled whole-scene prediction scored on the test pixels, identical under every plan."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
import torch
from dist_utils import run_world
from nc_checks import described
from train_utils import TINY_CROP, tiny_config, write_scene

from hsitp.evaluate.metrics import scores
from hsitp.parallel.groups import TPGroup
from hsitp.train.data import TEST, load_scene
from hsitp.train.inference import Evaluation, predict_scene, tile_origins
from hsitp.train.plan import check_job
from hsitp.train.settings import TrainSettings


def _model(scene, plan: str, tp):  # noqa: ANN001, ANN202
    from hsitp.models.model import SpectralSpatialTransformer
    from hsitp.models.plans import parallelize

    arch = check_job(
        TrainSettings.from_config(tiny_config()), plan, tp.size, 1, scene.bands, scene.classes,
        patch=TINY_CROP["patch"], tokens=TINY_CROP["tokens"],
    )  # fmt: skip
    return parallelize(SpectralSpatialTransformer(arch, seed=0), plan, tp, device="cpu"), arch


def test_tile_origins_cover_the_scene_flush_with_the_edges() -> None:
    """Catches tiles that leave the far rows/columns unpredicted (S not dividing the scene) or run past it."""
    assert tile_origins(16, 12) == [0, 4]
    assert tile_origins(24, 12) == [0, 12]
    assert tile_origins(12, 12) == [0]
    for extent, size in ((145, 144), (610, 144), (340, 304)):
        starts = tile_origins(extent, size)
        covered = np.zeros(extent, bool)
        for s in starts:
            covered[s : s + size] = True
        assert covered.all() and starts[-1] + size == extent


def test_scene_bands_standardised_on_train_pixels_only(tmp_path: Path) -> None:
    """Catches standardisation statistics taken over test pixels (test information leaking into the input) or
    over the wrong axis: every band has mean 0 and std 1 over the train pixels, not over the test pixels, and a
    constant band does not become NaN."""
    from hsitp.train.data import TRAIN, standardise

    scene = load_scene(write_scene(tmp_path / "scene.nc"), "random")
    cube = scene.cube.numpy()  # (L, H, W)
    train = (scene.partition == TRAIN) & (scene.labels > 0)
    np.testing.assert_allclose(cube[:, train].mean(axis=1), 0.0, atol=1e-5)  # float32 sums of ~100 pixels
    np.testing.assert_allclose(cube[:, train].std(axis=1), 1.0, rtol=1e-4)
    test = (scene.partition == TEST) & (scene.labels > 0)
    assert np.abs(cube[:, test].mean(axis=1)).max() > 1e-3  # the test pixels were not used
    flat = standardise(np.ones((2, 2, 3), dtype=np.float32), np.ones((2, 2), dtype=bool))
    assert np.array_equal(flat, np.zeros((2, 2, 3), dtype=np.float32))


def test_evaluation_equals_metrics_on_the_same_prediction(tmp_path: Path) -> None:
    """Catches an evaluation that scores the wrong pixels (train or unlabelled ones, a 0-based label map), loses
    the far-edge tiles, or stitches tiles at the wrong place: its scores must be metrics.scores of its own map on
    the test pixels, and the map must equal the model applied tile by tile by hand (logits summed on overlaps)."""
    scene = load_scene(write_scene(tmp_path / "scene.nc"), "random")
    model, arch = _model(scene, "dense", TPGroup.single())
    model.train()
    s = arch.height  # 12 on the 16 x 16 scene: tiles at 0 and 4 (overlapping)
    pred = predict_scene(model, scene, s, batch=3, device=torch.device("cpu"), autocast=nullcontext())
    ev = Evaluation.of(scene, pred)
    assert model.training  # restored
    assert ev.prediction.dtype == np.int16 and ev.prediction.shape == (16, 16)
    assert ev.prediction.min() >= 1 and ev.prediction.max() <= scene.classes
    test = (scene.partition == TEST) & (scene.labels > 0)
    ref = scores(scene.labels[test], ev.prediction[test], scene.classes)
    assert ev.scores.oa == ref.oa and ev.scores.aa == ref.aa and ev.scores.kappa == ref.kappa
    np.testing.assert_array_equal(ev.scores.per_class, ref.per_class)
    assert ev.scores.n == int(test.sum())
    # by hand: the four tiles, logits summed where they overlap
    model.eval()
    total = torch.zeros(scene.classes, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        for t in (0, 4):
            for left in (0, 4):
                total[:, t : t + s, left : left + s] += model(
                    scene.cube[None, :, t : t + s, left : left + s]
                )[0]
    np.testing.assert_array_equal(ev.prediction, (total.argmax(0) + 1).numpy())


def _predict_on_rank(rt, data: str) -> dict[str, np.ndarray]:  # noqa: ANN001
    scene = load_scene(data, "random")
    out = {}
    for plan in ("tp", "token"):  # one world for both plans (spawning is the slow part)
        model, arch = _model(scene, plan, rt.world)
        out[plan] = predict_scene(
            model, scene, arch.height, batch=2, device=rt.device, autocast=nullcontext()
        )
    return out


@pytest.mark.slow
def test_every_rank_predicts_the_dense_map(tmp_path: Path) -> None:
    """Catches an evaluation that skips the plan's shard_input/gather_output (token ranks would score only their
    strip, or hang in a gather another rank never enters) or lets TP ranks disagree: at P = 2 every rank's map
    equals the dense model's. Random init of a tiny fp32 model: logits differ from dense by reduction order only
    (~1e-6), far below the gap between classes, so the argmax maps must be equal."""
    data = write_scene(tmp_path / "scene.nc")
    scene = load_scene(data, "random")
    dense, arch = _model(scene, "dense", TPGroup.single())
    ref = predict_scene(
        dense, scene, arch.height, batch=2, device=torch.device("cpu"), autocast=nullcontext()
    )
    maps = run_world(_predict_on_rank, 2, str(data))
    for r, by_plan in enumerate(maps):
        for plan, m in by_plan.items():
            np.testing.assert_array_equal(m, ref, err_msg=f"{plan} rank {r}")


def _fake_record(tmp: Path, plan: str, seed: int, oa: float, tok: float, peak: tuple[float, float]) -> Path:
    """A record holding only what the summary reads (3 epochs, last one evaluated, 2 ranks)."""
    import xarray as xr

    from hsitp.io import provenance, write_netcdf

    ds = xr.Dataset(
        {
            "oa": ("epoch", [np.nan, 0.1, oa]),
            "aa": ("epoch", [np.nan, 0.1, oa - 0.1]),
            "kappa": ("epoch", [np.nan, 0.1, oa - 0.2]),
            "oa_summary": ((), oa),  # one evaluation in the summary window: the last epoch's
            "aa_summary": ((), oa - 0.1),
            "kappa_summary": ((), oa - 0.2),
            "tokens_per_s_summary": ((), tok),
            "peak_allocated_summary": ("rank", list(peak)),
            "ccr_inline_summary": ("rank", [0.5, 0.7]),
        }
    )
    attrs = {
        "dataset": "synthetic",
        "plan": plan,
        "P": 2,
        "g": 1,
        "protocol": "random",
        "seed": seed,
        "tokens": 9,
        "partition_index": 0,
        "steps_per_epoch": 1,
        "attention_kernel": "exact",
    }
    ds.attrs.update(attrs)
    return write_netcdf(
        described(ds), tmp / f"{plan}_N9_P2_g1_random_s{seed}.nc", kind="train", prov=provenance({})
    )


def _fake_baseline(tmp: Path, seed: int, oa: tuple[float, float]) -> Path:
    import xarray as xr

    from hsitp.io import provenance, write_netcdf

    ds = xr.Dataset(
        {
            "overall_accuracy": ("classifier", list(oa)),
            "average_accuracy": ("classifier", list(oa)),
            "kappa": ("classifier", list(oa)),
        },
        coords={"classifier": ["svm", "rf"]},
    )
    ds.attrs.update({"dataset": "synthetic", "protocol": "random", "seed": seed, "partition_index": 0})
    return write_netcdf(
        described(ds), tmp / f"synthetic_random_s{seed}.nc", kind="baseline", prov=provenance({})
    )


def test_summary_over_two_seeds_by_hand(tmp_path: Path) -> None:
    """Catches a summary that averages the wrong epoch (an unevaluated NaN one, or the mean of the history),
    uses a population std, pairs plan-minus-tp differences across seeds or cells, takes the peak memory of the
    wrong rank, or puts another protocol's baseline beside a cell: every number is recomputed by hand here."""
    from hsitp.cli import main
    from hsitp.io import read_netcdf

    records = [
        _fake_record(tmp_path, "tp", 0, 0.80, 100.0, (10.0, 12.0)),
        _fake_record(tmp_path, "tp", 1, 0.90, 300.0, (10.0, 14.0)),
        _fake_record(tmp_path, "token", 0, 0.70, 200.0, (8.0, 6.0)),
        _fake_record(tmp_path, "token", 1, 0.75, 400.0, (9.0, 6.0)),
    ]
    bases = [_fake_baseline(tmp_path, 0, (0.6, 0.5)), _fake_baseline(tmp_path, 1, (0.7, 0.4))]
    out = tmp_path / "summary.nc"
    args = ["train", "summary", *map(str, records), "--baseline", *map(str, bases), "--out", str(out)]
    assert main(args) == 0
    ds = read_netcdf(out, kind="train_summary")
    assert list(ds["plan"].values) == ["token", "tp"]
    tok, tp = ds.isel(cell=0), ds.isel(cell=1)
    sd = np.sqrt(((0.80 - 0.85) ** 2 + (0.90 - 0.85) ** 2) / 1)  # ddof 1 over two seeds
    assert float(tp["oa_mean"]) == pytest.approx(0.85) and float(tp["oa_std"]) == pytest.approx(sd)
    assert float(tok["aa_mean"]) == pytest.approx(0.625)
    assert float(tp["tokens_per_s_mean"]) == pytest.approx(200.0)
    assert float(tp["tokens_per_s_std"]) == pytest.approx(np.sqrt(2 * 100.0**2))
    # each record timed at its own moment: the summary says its tokens/s are no ratio material (issue 25)
    assert ds["tokens_per_s_mean"].attrs["comparable"].startswith("within one record only")
    assert float(tok["peak_memory_mean"]) == pytest.approx(8.5)  # largest rank: 8 and 9
    assert float(tp["ccr_inline_mean"]) == pytest.approx(0.6)
    d = np.array([0.70 - 0.80, 0.75 - 0.90])  # paired by seed
    assert float(tok["d_oa_vs_tp_mean"]) == pytest.approx(d.mean())
    assert float(tok["d_oa_vs_tp_std"]) == pytest.approx(d.std(ddof=1))
    assert float(tp["d_kappa_vs_tp_mean"]) == 0.0
    np.testing.assert_allclose(tok["baseline_oa_mean"].values, [0.65, 0.45])
    np.testing.assert_allclose(tok["baseline_oa_std"].values, [np.std([0.6, 0.7], ddof=1)] * 2)
    assert int(tp["seeds"]) == 2
    for name, var in ds.data_vars.items():
        assert "units" in var.attrs and "long_name" in var.attrs, name

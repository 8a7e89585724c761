"""Issue 50's recipe ingredients for new places (the block protocol): crop augmentation, test-time flips, an EMA of
the weights, N = 324 at 36 / 2 and 18 / 1, masked-band pretraining. Each is off by default and must leave a run
without it unchanged; each, when on, must do what its key says and survive a resume."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from train_utils import TINY_CROP, tiny_config, train_p1, write_scene

from hsitp.io import read_netcdf
from hsitp.parallel.groups import TPGroup
from hsitp.train import checkpoint as ckpt
from hsitp.train.data import CropSampler, Photometric, load_scene
from hsitp.train.ema import WeightEMA
from hsitp.train.inference import TTA, predict_scene, transform, untransform
from hsitp.train.loop import InjectedFailure, TrainJob
from hsitp.train.settings import TrainSettings


def _job(
    tmp: Path, data: Path, tag: str, *, plan: str = "dense", tokens: int = 9, patch: int = 4
) -> TrainJob:
    return TrainJob(
        data=data,
        out=tmp / tag / f"{plan}_N{tokens}_P1_g1_random_s0.nc",
        plan=plan,
        world_size=1,
        groups=1,
        protocol="random",
        seed=0,
        tokens=tokens,
        patch=patch,
    )


def _last_state(job: TrainJob) -> dict:
    epoch = ckpt.complete_epochs(job.checkpoint_dir)[-1]
    return torch.load(ckpt.epoch_dir(job.checkpoint_dir, epoch) / "rank0.pt", weights_only=False)


# --- a. augmentation -----------------------------------------------------------------------------------------


def test_flips_and_rotations_move_the_crop_and_its_targets_together(tmp_path: Path) -> None:
    """Catches a flip or rot90 of the crop but not of its labels (or of the labels the other way round), and an
    augmentation that never draws some orientation: band 0 carries each pixel's target, bands 1 and 2 its row and
    column, so every sampled crop must still hold its own target in band 0 and the 8 orientations must all occur."""
    scene = load_scene(write_scene(tmp_path / "scene.nc"), "random")
    rows, cols = np.indices((scene.height, scene.width))
    scene.cube[0] = scene.target.float()
    scene.cube[1] = torch.from_numpy(rows.astype(np.float32))
    scene.cube[2] = torch.from_numpy(cols.astype(np.float32))
    sampler = CropSampler(scene, 12, 4, seed=3, augment=True)
    seen = set()
    for _ in range(15):
        x, y = sampler.next()
        np.testing.assert_array_equal(x[:, 0].long().numpy(), y.numpy())
        for crop in x:
            # the orientation: which way the row and column ramps run along the crop's two axes
            dr = (float(crop[1, 1, 0] - crop[1, 0, 0]), float(crop[1, 0, 1] - crop[1, 0, 0]))
            dc = (float(crop[2, 1, 0] - crop[2, 0, 0]), float(crop[2, 0, 1] - crop[2, 0, 0]))
            seen.add((dr, dc))
    assert len(seen) == 8, seen


def test_photometric_augmentation_changes_the_input_only(tmp_path: Path) -> None:
    """Catches brightness that scales the standardised values (not the pixel's spectrum: the band offsets
    forgotten) or one factor per crop instead of per pixel, noise of the wrong strength, a band mask that masks
    the wrong number of bands or only some pixels, an augmentation that touches the labels or writes into the
    scene's cube (a view of it is the crop when flips are off), and strengths of 0 that still draw random numbers
    (every existing run's crop stream would change)."""
    scene = load_scene(write_scene(tmp_path / "scene.nc"), "random")
    cube = scene.cube.clone()
    offset = scene.offset.view(-1, 1, 1)

    def first(photometric: Photometric | None) -> tuple[torch.Tensor, torch.Tensor]:
        return CropSampler(scene, 12, 1, seed=5, augment=False, photometric=photometric).next()

    x0, y0 = first(None)
    # off: the same stream as before the key existed, crop after crop
    a, b = CropSampler(scene, 12, 2, 7), CropSampler(scene, 12, 2, 7, photometric=Photometric())
    for _ in range(3):
        (xa, ya), (xb, yb) = a.next(), b.next()
        assert torch.equal(xa, xb) and torch.equal(ya, yb)

    xb, yb = first(Photometric(brightness=0.2))
    ratio = (xb[0] + offset) / (x0[0] + offset)  # the spectrum in the prepared cube's units, up to 1/std
    factor = ratio.median(dim=0).values  # (S, S): one factor per pixel
    np.testing.assert_allclose((xb[0] + offset).numpy(), (factor * (x0[0] + offset)).numpy(), atol=1e-4)
    assert float(factor.min()) >= 0.8 - 1e-6 and float(factor.max()) <= 1.2 + 1e-6
    assert float(factor.std()) > 0.05  # per pixel, not one factor per crop
    assert torch.equal(yb, y0)

    xn, yn = first(Photometric(noise=0.1))
    assert float((xn - x0).std()) == pytest.approx(0.1, rel=0.1) and torch.equal(yn, y0)

    xm, ym = first(Photometric(band_mask=0.25))  # round(0.25 x 12) = 3 bands
    zero = (xm[0] == 0).all(dim=(1, 2))
    assert int(zero.sum()) == 3 and torch.equal(ym, y0)
    assert torch.equal(xm[0][~zero], x0[0][~zero])
    assert torch.equal(scene.cube, cube)  # nothing written into the scene


# --- b. test-time flips --------------------------------------------------------------------------------------


class _Pointwise(nn.Module):
    """A per-pixel linear classifier with the parallel model's interface: equivariant to every flip."""

    def __init__(self, bands: int, classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(bands, classes, 1)
        with torch.no_grad():
            self.conv.weight.copy_(
                torch.randn(classes, bands, 1, 1, generator=torch.Generator().manual_seed(0))
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)

    def shard_input(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def gather_output(self, y: torch.Tensor) -> torch.Tensor:
        return y


def test_tta_maps_every_output_back_before_averaging(tmp_path: Path) -> None:
    """Catches test-time augmentation that does not un-flip (or un-transpose) an output before averaging, maps it
    back by the wrong inverse (a transposed flip is not its own inverse), or repeats a transform: a per-pixel
    model is equivariant to all of them, so its map must be the same with and without TTA; every transform is
    undone by its inverse, and the 8 are distinct."""
    scene = load_scene(write_scene(tmp_path / "scene.nc"), "random")
    model = _Pointwise(scene.bands, scene.classes)
    # a scene whose classes sit in vertical stripes: mirrored outputs would move them
    kw = {"batch": 2, "device": torch.device("cpu"), "autocast": nullcontext()}
    plain = predict_scene(model, scene, 12, **kw)
    assert len(np.unique(plain)) > 1
    for tta in ("flips", "dihedral"):
        np.testing.assert_array_equal(predict_scene(model, scene, 12, tta=tta, **kw), plain, err_msg=tta)
    x = torch.arange(2 * 3 * 4 * 4, dtype=torch.float32).view(2, 3, 4, 4)
    images = set()
    for t in TTA["dihedral"]:
        assert torch.equal(untransform(transform(x, t), t), x), t
        images.add(tuple(transform(x, t).flatten().tolist()))
    assert len(TTA["dihedral"]) == 8 and len(images) == 8 and TTA["flips"] == TTA["dihedral"][:4]


# --- c. EMA of the weights -----------------------------------------------------------------------------------


def test_ema_average_and_swap_by_hand() -> None:
    """Catches an EMA with the decay the wrong way round (the shadow following the weights at 1 - d), without its
    warm-up, or a swap that leaves the average in the model after the evaluation (training would go on from the
    averaged weights)."""
    model = nn.Linear(3, 2)
    ema = WeightEMA(model, 0.9)
    w0 = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    ema.update(model)  # decay min(0.9, 1/10) = 0.1
    torch.testing.assert_close(ema.shadow["weight"], 0.1 * w0 + 0.9 * (w0 + 1.0))
    for _ in range(200):
        ema.update(model)
    assert ema.current_decay() == 0.9
    raw = model.weight.detach().clone()
    with ema.swapped(model):
        assert torch.equal(model.weight, ema.shadow["weight"])
    assert torch.equal(model.weight, raw)


def test_ema_evaluates_the_average_trains_the_raw_weights_and_resumes(tmp_path: Path) -> None:
    """Catches an EMA that is not restored on resume (it would restart from the resumed weights), one that moves
    the training trajectory (the swap not undone), evaluation on the raw weights instead of the average, and
    photometric augmentation or TTA that breaks the exact resume: a run crashed mid-epoch 2 and resumed ends with
    the straight run's losses, maps and EMA bit for bit, the losses are those of the run without the EMA, and the
    record's final map is the one the EMA weights predict."""
    data = write_scene(tmp_path / "scene.nc")
    keys = {"ema": {"decay": 0.5}, "tta": "flips", "augmentation": {"brightness": 0.1, "noise": 0.05}}
    straight = _job(tmp_path, data, "straight")
    ref = read_netcdf(train_p1(tiny_config(**keys), straight), kind="train")
    crashed = _job(tmp_path, data, "crashed")
    with pytest.raises(InjectedFailure):
        train_p1(tiny_config(**keys, debug={"fail_at_step": 3}), crashed)
    got = read_netcdf(train_p1(tiny_config(**keys), crashed), kind="train")
    for name in ("loss", "oa", "per_class_accuracy", "prediction"):
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)
    a, b = _last_state(straight)["ema"], _last_state(crashed)["ema"]
    assert a["updates"] == b["updates"] == 6
    for k in a["shadow"]:
        assert torch.equal(a["shadow"][k], b["shadow"][k]), k

    no_ema = keys | {"ema": {"decay": 0.0}}
    plain = read_netcdf(train_p1(tiny_config(**no_ema), _job(tmp_path, data, "plain")), kind="train")
    np.testing.assert_array_equal(plain["loss"].values, ref["loss"].values)

    from hsitp.models.model import SpectralSpatialTransformer
    from hsitp.models.plans import parallelize
    from hsitp.train.plan import check_job

    settings = TrainSettings.from_config(tiny_config(**keys))
    # the run's scene: standardised on its train pixels less the validation ones
    scene = load_scene(data, "random", validation=settings.validation.fraction, validation_seed=settings.seed)
    arch = check_job(settings, "dense", 1, 1, scene.bands, scene.classes, patch=4, tokens=9)
    model = parallelize(SpectralSpatialTransformer(arch, seed=0), "dense", TPGroup.single(), device="cpu")
    model.load_state_dict(a["shadow"])
    kw = {"batch": settings.batch, "device": torch.device("cpu"), "autocast": nullcontext(), "tta": "flips"}
    np.testing.assert_array_equal(predict_scene(model, scene, 12, **kw), ref["prediction"].values)
    ingredients = json.loads(ref.attrs["ingredients"])
    assert ingredients["ema_decay"] == 0.5 and ingredients["tta"] == "flips"
    assert ingredients["augmentation"]["brightness"] == 0.1 and ref.attrs["transductive"].startswith("no")


# --- d. input geometry at N = 324 ----------------------------------------------------------------------------


def _big_scene(path: Path, size: int = 40, bands: int = 8) -> Path:
    """write_scene's stripes on a size x size scene (crops of 36 pixels need more than 16)."""
    import xarray as xr
    from nc_checks import described

    from hsitp.io import provenance, write_netcdf

    rng = np.random.default_rng(0)
    labels = (1 + (np.arange(size) * 3 // size))[None, :].repeat(size, 0).astype(np.int16)
    cube = rng.random((size, size, bands), dtype=np.float32) * 0.2
    for c in (1, 2, 3):
        cube[labels == c, c * 2 : c * 2 + 2] += 0.8
    part = np.where(rng.random((size, size)) < 0.5, 1, 2).astype(np.int8)
    ds = xr.Dataset(
        {
            "cube": (("y", "x", "band"), cube, {"units": "1"}),
            "labels": (("y", "x"), labels, {"class_names": {"1": "a", "2": "b", "3": "c"}}),
            "partition": (("protocol", "partition_index", "y", "x"), part[None, None]),
        },
        coords={"protocol": ["random"], "partition_index": [0]},
    )
    ds.attrs["dataset"] = "synthetic"
    return write_netcdf(described(ds), path, kind="dataset", prov=provenance({}))


@pytest.mark.parametrize(("patch", "size"), [(2, 36), (1, 18)])
def test_n324_at_36_and_18_pixel_crops_trains_end_to_end(tmp_path: Path, patch: int, size: int) -> None:
    """Catches a crop of N = 324 tokens at patch 2 (S = 36) or patch 1 (S = 18) that train.crops cannot select,
    that the DAG refuses on Indian Pines, or that fails in the tokeniser, the sampler, the tiled evaluation or the
    record: the cpu config with that crop plans its jobs at N = 324, and a tiny model trains on it, with TTA and
    pretraining (whose reconstruction head un-patchifies at that patch), to a record of that crop."""
    from hsitp.config import load_config
    from hsitp.train.plan import check_jobs, crop_patch, jobs

    crop = {"patch": patch, "tokens": 324, "datasets": None}
    cfg = TrainSettings.from_config(
        load_config(["config/config.yaml", "config/cpu.yaml"], {"train": {"crops": [crop]}})
    )
    check_jobs(cfg)  # Indian Pines' 145 x 145 holds S = 36 and 18
    assert {n for _, _, n, *_ in jobs(cfg)} == {324}
    assert crop_patch(cfg, "indian_pines", 324) == patch

    data = _big_scene(tmp_path / "scene.nc")
    tiny = tiny_config(crops=[crop], epochs=1, steps_per_epoch=2, tta="flips", pretrain={"steps": 2})
    out = train_p1(tiny, _job(tmp_path, data, "geom", plan="tp", tokens=324, patch=patch))
    rec = read_netcdf(out, kind="train")
    assert int(rec.attrs["tokens"]) == 324 and int(rec.attrs["crop_size"]) == size
    assert json.loads(rec.attrs["model"])["patch"] == patch
    assert rec["prediction"].shape == (40, 40) and np.isfinite(rec["oa"].values[-1])


# --- e. masked-band pretraining ------------------------------------------------------------------------------


def test_encode_is_the_models_forward_without_its_head(tmp_path: Path) -> None:
    """Catches pretraining features that drift from the model's own forward (a changed SpectralSpatialTransformer
    whose encoder pretrain.encode no longer mirrors): the classification head on encode's tokens, un-patchified,
    must give the model's logits."""
    from hsitp.models.model import SpectralSpatialTransformer, unpatchify
    from hsitp.models.plans import parallelize
    from hsitp.train.plan import check_job
    from hsitp.train.pretrain import encode

    settings = TrainSettings.from_config(tiny_config())
    arch = check_job(settings, "tp", 1, 1, 12, 3, patch=4, tokens=9)
    model = parallelize(SpectralSpatialTransformer(arch, seed=1), "tp", TPGroup.single(), device="cpu")
    x = torch.randn(2, 12, 12, 12, generator=torch.Generator().manual_seed(0))
    logits = unpatchify(model.model.head(encode(model, x)), (3, 3), 4, 3)
    torch.testing.assert_close(logits, model(x))


def _pretrained(data: Path, tmp: Path, tag: str, steps: int) -> tuple[dict[str, torch.Tensor], dict]:
    """The model's weights after ``steps`` pretraining steps, and what the pretraining reported."""
    from hsitp.parallel.runtime import RuntimeSettings, start
    from hsitp.train.loop import _build
    from hsitp.train.pretrain import pretrain

    cfg = tiny_config(
        pretrain={"steps": steps, "lr": 0.01}, validation={"fraction": 0.0}
    )  # no label-drawn pixels
    settings = TrainSettings.from_config(cfg)
    rt = start(RuntimeSettings.from_config(cfg, section="train", world_size=1))
    try:
        setup = _build(settings, _job(tmp, data, tag), rt.world, rt.device)
        result = pretrain(setup, settings, seed=0)
        return {k: v.clone() for k, v in setup.model.state_dict().items()}, result.attrs()
    finally:
        rt.stop()


def test_pretraining_reads_no_label_and_learns_to_reconstruct(tmp_path: Path) -> None:
    """Catches pretraining that reads the labels (a scene with the same spectra and train pixels but its classes
    renamed must pretrain to the same weights, bit for bit) and one that does not learn (its reconstruction loss
    must fall)."""
    from hsitp.io import provenance, write_netcdf

    data = write_scene(tmp_path / "scene.nc")
    ds = read_netcdf(data, kind="dataset")
    swapped = ds["labels"].values.copy()
    swapped[ds["labels"].values == 1], swapped[ds["labels"].values == 2] = 2, 1
    other = ds.assign(labels=(("y", "x"), swapped, dict(ds["labels"].attrs)))
    other_path = write_netcdf(other, tmp_path / "renamed.nc", kind="dataset", prov=provenance({}))
    a, info = _pretrained(data, tmp_path, "a", 30)
    b, _ = _pretrained(other_path, tmp_path, "b", 30)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert info["last_loss_mean_of_10"] < 0.8 * info["first_loss"], info


def test_pretrained_run_resumes_and_says_it_is_transductive(tmp_path: Path) -> None:
    """Catches pretraining that runs again on resume (the resumed run would differ from the straight one), a
    record that does not say the run saw the test pixels' spectra, or loses what the pretraining did after a
    resume, a summary that hides it, and pretraining that draws from the fine-tuning sampler's stream: a run
    crashed in epoch 2 resumes to the straight run's losses and map bit for bit, both records (and the summary of
    one) say transductive and carry the pretraining, and the fine-tuning sampler ends where a run without
    pretraining ends."""
    data = write_scene(tmp_path / "scene.nc")
    pre = {"pretrain": {"steps": 4}}
    straight = _job(tmp_path, data, "straight")
    ref = read_netcdf(train_p1(tiny_config(**pre), straight), kind="train")
    crashed = _job(tmp_path, data, "crashed")
    with pytest.raises(InjectedFailure):
        train_p1(tiny_config(**pre, debug={"fail_at_step": 3}), crashed)
    got = read_netcdf(train_p1(tiny_config(**pre), crashed), kind="train")
    for name in ("loss", "oa", "prediction"):
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)
    for rec in (ref, got):
        assert rec.attrs["transductive"].startswith("yes: masked-band reconstruction pretraining")
        assert json.loads(rec.attrs["pretrain"])["steps"] == 4
        assert json.loads(rec.attrs["ingredients"])["pretrain"]["steps"] == 4
    plain = _job(tmp_path, data, "plain")
    train_p1(tiny_config(), plain)
    from hsitp.train.summary import summarize

    assert summarize([straight.out]).attrs["transductive"].startswith("yes: 1 of 1 records pretrained")
    assert summarize([plain.out]).attrs["transductive"].startswith("no record")
    assert torch.equal(_last_state(plain)["sampler"]["gen"], _last_state(straight)["sampler"]["gen"])
    assert not np.array_equal(ref["loss"].values, read_netcdf(plain.out, kind="train")["loss"].values)


def _pretrain_on_rank(rt, data: str, tmp: str, plan: str) -> tuple[float, ...]:  # noqa: ANN001
    from hsitp.train.loop import _build
    from hsitp.train.pretrain import pretrain

    settings = TrainSettings.from_config(tiny_config(pretrain={"steps": 6, "lr": 0.01}))
    job = TrainJob(
        data=Path(data), out=Path(tmp) / "x.nc", plan=plan, world_size=rt.world_size, groups=1,
        protocol="random", seed=0, tokens=TINY_CROP["tokens"], patch=TINY_CROP["patch"],
    )  # fmt: skip
    setup = _build(settings, job, rt.world, rt.device)
    return pretrain(setup, settings, seed=0).losses


@pytest.mark.slow
def test_token_plan_pretrains_as_the_dense_model(tmp_path: Path) -> None:
    """Catches pretraining that normalises each token rank's loss by its own pixels, or leaves the temporary
    head's gradients unsummed across the token ranks (each rank's head would see only its locations, and the
    model would train on two different heads): at P = 2 every rank's loss of every step equals the dense
    model's (fp32 reduction order only). Losses, not weights: AdamW turns the exact-zero gradient of the key
    bias into reduction-order noise of the size of a step."""
    from dist_utils import run_world

    data = write_scene(tmp_path / "scene.nc")
    dense = _pretrain_on_rank(_OneRank(), str(data), str(tmp_path), "dense")
    ranks = run_world(_pretrain_on_rank, 2, str(data), str(tmp_path), "token")
    for r, losses in enumerate(ranks):
        np.testing.assert_allclose(losses, dense, rtol=1e-5, err_msg=f"rank {r}")


class _OneRank:
    """The runtime's fields that _build reads, for one process without a process group."""

    world_size = 1
    world = TPGroup.single()
    device = torch.device("cpu")

"""The training stage on a tiny synthetic scene: the partition read, exact resume, NaN stop, refusal before launch,
a dead rank."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr
from dist_utils import spawn_world
from train_utils import TINY_CROP, tiny_config, train_p1, write_scene

from hsitp.data.partition import PartitionError, read_partition
from hsitp.io import read_netcdf
from hsitp.train import checkpoint as ckpt
from hsitp.train.loop import InjectedFailure, TrainError, TrainJob, train_rank
from hsitp.train.settings import TrainSettings


def _job(tmp: Path, data: Path, plan: str = "dense", P: int = 1, tag: str = "a") -> TrainJob:  # noqa: N803
    return TrainJob(
        data=data,
        out=tmp / tag / "train" / "synthetic" / f"{plan}_N9_P{P}_g1_random_s0.nc",
        plan=plan,
        world_size=P,
        groups=1,
        protocol="random",
        seed=0,
        tokens=TINY_CROP["tokens"],
        patch=TINY_CROP["patch"],
    )


def _final_weights(job: TrainJob, rank: int = 0) -> dict[str, torch.Tensor]:
    epoch = ckpt.complete_epochs(job.checkpoint_dir)[-1]
    state = torch.load(ckpt.epoch_dir(job.checkpoint_dir, epoch) / f"rank{rank}.pt", weights_only=False)
    return state["model"]


def test_read_partition_picks_protocol_and_draw(tmp_path: Path) -> None:
    """Catches a reader that picks the wrong protocol or draw, or silently trains on a protocol or a draw the file
    does not hold."""
    one = read_netcdf(write_scene(tmp_path / "one.nc"), kind="dataset")
    new = read_netcdf(write_scene(tmp_path / "new.nc", both_protocols=True), kind="dataset")
    np.testing.assert_array_equal(read_partition(one, "random"), one["partition"].values[0, 0])
    for i, protocol in enumerate(("random", "block")):
        np.testing.assert_array_equal(read_partition(new, protocol), new["partition"].values[i, 0])
    assert not np.array_equal(read_partition(new, "random"), read_partition(new, "block"))
    with pytest.raises(
        PartitionError, match=r"^x.nc: .*'block' is not in the prepared file, which holds \['random'\]"
    ):
        read_partition(one, "block", path="x.nc")
    with pytest.raises(PartitionError, match="'spiral' is not in the prepared file"):
        read_partition(new, "spiral")
    with pytest.raises(PartitionError, match="partition index 1 is not in the prepared file"):
        read_partition(new, "random", 1)
    assert isinstance(new, xr.Dataset)


def test_resume_mid_epoch_is_bitwise(tmp_path: Path) -> None:
    """Catches any state a checkpoint forgets (optimizer moments, LR schedule position, sampler or global RNG,
    the loss history) and a resume that restarts from the wrong epoch: a run crashed mid-epoch 2 and resumed
    must end with the same weights and per-epoch losses, bit for bit (CPU fp32, deterministic algorithms)."""
    data = write_scene(tmp_path / "scene.nc")
    straight = _job(tmp_path, data, tag="straight")
    out = train_p1(tiny_config(), straight)
    assert out is not None
    ref = read_netcdf(out, kind="train")

    crashed = _job(tmp_path, data, tag="crashed")
    with pytest.raises(InjectedFailure):
        train_p1(tiny_config(debug={"fail_at_step": 3}), crashed)  # epoch 2, second step
    assert ckpt.complete_epochs(crashed.checkpoint_dir) == [1]
    assert not crashed.out.exists()
    out2 = train_p1(tiny_config(), crashed)
    assert out2 is not None
    got = read_netcdf(out2, kind="train")

    np.testing.assert_array_equal(got["loss"].values, ref["loss"].values)
    np.testing.assert_array_equal(got["lr"].values, ref["lr"].values)
    for name in ("oa", "aa", "kappa", "per_class_accuracy", "prediction"):  # NaN == NaN here
        np.testing.assert_array_equal(got[name].values, ref[name].values, err_msg=name)
    assert np.isnan(ref["oa"].values[0]) and np.isfinite(ref["oa"].values[1:]).all()  # eval_every = 2
    a, b = _final_weights(straight), _final_weights(crashed)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert got.attrs["resumed_at_epochs"] == "[1]" and ref.attrs["resumed_at_epochs"] == "[]"
    # keep = 2: the final epoch and the one before
    assert ckpt.complete_epochs(straight.checkpoint_dir) == [2, 3]
    k = int(ref.attrs["summary_epochs"])  # the window: the last k epochs
    # memory is tracked in the window's epochs only (a tracked step costs several plain ones): NaN before it
    assert (ref["loss"] > 0).all() and np.isfinite(ref["peak_allocated"][-k:]).all()
    assert np.isnan(ref["peak_allocated"][:-k]).all() and np.isnan(ref["memory"][:-k]).all()
    assert (ref["memory"][-k:].sel(kind="parameters").sum("part") > 0).all()
    assert ref["peak_allocated_summary"].item() == pytest.approx(float(ref["peak_allocated"][-k:].mean()))
    assert ref["loss_summary"].item() == pytest.approx(float(ref["loss"][-k:].mean()))


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path: Path) -> None:
    """Catches a run that trains on after a NaN loss (poisoning the weights and the checkpoints), a message that
    does not name the step, and a stop that deletes or overwrites the last good checkpoint."""
    data = write_scene(tmp_path / "scene.nc")
    job = _job(tmp_path, data)
    with pytest.raises(TrainError, match=r"loss is nan at .*step 3 \(epoch 2, step 2 of 2\).*epoch_0001"):
        train_p1(tiny_config(debug={"nan_at_step": 3}), job)
    assert ckpt.complete_epochs(job.checkpoint_dir) == [1]
    state = _final_weights(job)
    assert all(torch.isfinite(v).all() for v in state.values())
    assert not job.out.exists()


def test_plan_that_does_not_fit_is_refused_before_launch(tmp_path: Path, monkeypatch, capsys) -> None:
    """Catches a CLI that starts the runtime (rendezvous: it would wait for ranks that never come) before
    checking that P divides the heads."""
    from hsitp.cli import main

    data = write_scene(tmp_path / "scene.nc")
    # torchrun's variables for rank 0 of 4, on a port nobody serves: reaching init_process_group would hang.
    for k, v in {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MASTER_PORT", "9")
    model = {"dim": 12, "heads": 6, "depth": 1, "mlp_ratio": 1}
    cfg = json.dumps({"train": {"crops": [TINY_CROP], "model": model}})
    t0 = time.monotonic()
    code = main(
        [
            "train",
            str(data),
            "--plan",
            "tp",
            "--tokens",
            "9",
            "--world-size",
            "4",
            "--protocol",
            "random",
            "--seed",
            "0",
        ]
        + ["--out", str(tmp_path / "x.nc"), "--config-json", cfg]
    )
    assert code == 2
    assert "train.model.heads = 6 is not divisible by P = 4" in capsys.readouterr().err
    assert time.monotonic() - t0 < 30
    assert not torch.distributed.is_initialized()


def _kill_rank1(rt, cfg: dict, job: TrainJob) -> str:
    def on_step(step: int) -> None:
        if rt.rank == 1 and step == 1:
            os.kill(os.getpid(), signal.SIGKILL)

    t0 = time.monotonic()
    try:
        train_rank(rt, TrainSettings.from_config(cfg), job, on_step=on_step)
    except Exception as exc:  # the survivor: report how long it took to notice
        raise RuntimeError(f"TRAIN FAILED after {time.monotonic() - t0:.1f}s: {exc}") from exc
    return "finished"


@pytest.mark.slow
def test_dead_rank_makes_the_other_fail_within_timeout(tmp_path: Path) -> None:
    """Catches a training loop that hangs forever when a peer dies mid-step (no process-group timeout reaching
    the collectives of the model, the loss or the checkpoint barrier)."""
    data = write_scene(tmp_path / "scene.nc")
    timeout_s = 5.0
    cfg = tiny_config()
    out = spawn_world(
        _kill_rank1,
        2,
        cfg,
        _job(tmp_path, data, plan="tp", P=2),
        timeout_s=timeout_s,
        deadline_s=120.0,
        expect_reports=1,
    )
    assert 0 in out.reports, f"rank 0 never reported (hung); exit codes {out.exitcodes}"
    status, payload = out.reports[0]
    assert status == "error", payload
    import re

    found = re.search(r"TRAIN FAILED after ([0-9.]+)s", payload)
    assert found, payload
    assert float(found.group(1)) < timeout_s + 30.0, (
        payload
    )  # startup of the loop + the timeout, loaded machine
    assert out.exitcodes[1] == -signal.SIGKILL


def test_dag_refuses_a_plan_that_does_not_fit() -> None:
    """Catches a DAG that schedules jobs whose P does not fit the model (it would only fail after the launch):
    check_jobs, called when train.smk is parsed, names the key as the user writes it (train.model.heads)."""
    from hsitp.config import load_config
    from hsitp.train.plan import PlanError, check_jobs, jobs
    from hsitp.train.settings import TrainSettings

    cfg = TrainSettings.from_config(load_config(["config/config.yaml", "config/smoke.yaml"]))
    check_jobs(cfg)  # the smoke config fits
    assert ("indian_pines", "dense", 324, 1, 1, "random", 0, 0) in jobs(cfg)  # seed 0, partition 0
    assert not any(plan == "dense" and P > 1 for _, plan, _, P, *_ in jobs(cfg))
    with pytest.raises(PlanError, match=r"train\.model\.heads = 4 is not divisible by P = 3"):
        check_jobs(cfg.model_copy(update={"world_sizes": (3,)}))

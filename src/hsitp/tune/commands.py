"""``hsitp tune``: one tuning study (dataset, plan, accuracy protocol) with the run's equal budget::

    hsitp tune results/RUN/data/DATASET.nc --plan dchag_l --protocol block --tokens 324 \\
        --out results/RUN/tune/DATASET/dchag_l_block.nc --config-json CFG

Runs (or resumes) the study in ``results/RUN/tune/DATASET/PLAN_PROTOCOL.journal`` until ``tune.trials`` trials count,
one progress line per trial, then writes every trial and the budget curves to ``--out`` (``hsitp.tune.study``).
Before the first trial it counts what the validation holds (pixels and classes per inner fold, and of them those
whose class the fold's training holds), logs it, records it in the study file, and refuses to start below
``tune.block_validation.min_pixels`` / ``min_classes`` (block protocol).
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hsitp.config import add_config_args, add_protocol_args, config_from_args
from hsitp.errors import HsitpError
from hsitp.names import COMPARED_PLANS
from hsitp.settings import TuneSettings
from hsitp.train.settings import TrainSettings

if TYPE_CHECKING:
    from hsitp.train.recipe import TrialParams
    from hsitp.train.record import EpochRecord
    from hsitp.tune.study import StudySpec, TrialTrainer


def _run(args: argparse.Namespace) -> int:
    from hsitp.contracts import TUNE_STUDY
    from hsitp.io import provenance, write_netcdf
    from hsitp.parallel.runtime import RuntimeSettings, start
    from hsitp.signals import stop_on_signals
    from hsitp.tune.study import run_study, study_dataset

    if args.protocol is None:
        raise HsitpError("hsitp tune: --protocol required (random or block)")
    cfg = config_from_args(args)
    train, tune = TrainSettings.from_config(cfg), TuneSettings.from_config(cfg)  # the run's; a trial its own
    spec, held, dataset = _study_spec(args, train, tune)
    fits = _fits(spec, train, tune, dataset)
    # SIGINT / SIGTERM stop the trial before its next step (hsitp.signals); its checkpoints stay for the resume
    with stop_on_signals(f"tune {spec.plan} under the {spec.protocol} protocol") as stop:
        rt = start(RuntimeSettings.from_config(cfg, section="train", world_size=1))
        try:
            study = run_study(spec, tune, _trainer(spec, train, tune, rt, stop), fits=fits)
        finally:
            rt.stop()
    ds = study_dataset(study, spec, tune, held)
    write_netcdf(
        ds,
        spec.out,
        kind=TUNE_STUDY.kind,
        prov=provenance(cfg.as_json(include={"tune", "train", "seed"}), inputs={"data": spec.data}),
        title=f"Tuning study of {spec.plan} under the {spec.protocol} protocol on {dataset} (validation pixels only)",
    )
    print(f"wrote {spec.out} ({ds.sizes['trial']} trials; best validation OA {float(ds['score'].max()):.3f})")
    return 0


def _study_spec(
    args: argparse.Namespace, train: TrainSettings, tune: TuneSettings
) -> tuple[StudySpec, Any, str]:
    """The study's spec, what its validation holds (refused below tune.block_validation's minimum) and the scene."""
    from hsitp.contracts import dataset_name
    from hsitp.train.data import validation_counts
    from hsitp.train.plan import crop_patch
    from hsitp.tune.study import StudySpec

    data = Path(args.data)
    dataset = dataset_name(data)
    patch = args.patch if args.patch is not None else crop_patch(train, dataset, args.tokens)
    folds = tune.block_validation.folds if args.protocol == "block" else 1
    spec = StudySpec(data=data, out=Path(args.out), plan=args.plan, protocol=args.protocol, tokens=args.tokens,
                     patch=patch, folds=folds, partition=args.partition)  # fmt: skip
    held = validation_counts(data, spec.protocol, partition_index=spec.partition, fraction=tune.validation_fraction,
                             seed=train.seed, folds=folds)  # fmt: skip
    _check_validation(spec, held, tune)
    return spec, held, dataset


def _fits(spec: StudySpec, train: TrainSettings, tune: TuneSettings, dataset: str) -> Callable[[int], bool]:
    """Whether the plan fits at P = tune.world_size and g (check_job); refuses, before any trial, a plan that fits
    at no g of the space, with check_job's message."""
    from hsitp.train.data import scene_header
    from hsitp.train.plan import check_job

    bands, classes, rows, cols = scene_header(spec.data)

    def check(g: int, **named: Any) -> None:
        check_job(train, spec.plan, tune.world_size, g, bands, classes, patch=spec.patch, tokens=spec.tokens,
                  rows=rows, cols=cols, **named)  # fmt: skip

    def fits(g: int) -> bool:
        try:
            check(g)
        except HsitpError:
            return False
        return True

    check(1 if spec.plan == "tp" else next((g for g in tune.space.groups if fits(g)), tune.space.groups[0]),
          dataset=dataset)  # fmt: skip
    return fits


def _trainer(spec: StudySpec, train: TrainSettings, tune: TuneSettings, rt: Any, stop: Any) -> TrialTrainer:
    """``run_study``'s trial: train it (once per inner fold), report every fold's epochs to the pruner (step
    f x epochs + e) and return its validation OA (pooled over the folds by their pixels)."""
    from optuna import TrialPruned

    from hsitp.train.plan import TrainJob
    from hsitp.tune.study import trial_config

    def train_trial(
        params: TrialParams, workdir: Path, on_epoch: Callable[[int, EpochRecord], None]
    ) -> float:
        jobs = [
            TrainJob(data=spec.data, out=(workdir / f"fold{f}" if spec.folds > 1 else workdir) / "trial.nc",
                     plan=spec.plan, world_size=tune.world_size, groups=int(params["groups"]), protocol=spec.protocol,
                     seed=tune.seed, tokens=spec.tokens, patch=spec.patch, ranks=1, partition=spec.partition)
            for f in range(spec.folds)
        ]  # fmt: skip
        correct = pixels = 0.0
        try:
            for f, job in enumerate(jobs):
                cfg_f = trial_config(train.config, tune, params, folds=spec.folds, fold=f)
                report = lambda e, rec, f=f: on_epoch(f * tune.epochs + e, rec)  # noqa: E731
                oa, n = _train_fold(rt, stop, job, TrainSettings.from_config(cfg_f), report)
                correct, pixels = correct + oa * n, pixels + n
        except (TrialPruned, HsitpError):
            _drop_checkpoints(jobs)  # an ended trial resumes nothing
            raise
        # ended: its records keep the result (a killed or interrupted trial never gets here and keeps every fold's
        # checkpoints, so its retry resumes each fold where it stopped)
        _drop_checkpoints(jobs)
        return correct / pixels if pixels else float("nan")

    return train_trial


def _drop_checkpoints(jobs: list[Any]) -> None:
    for job in jobs:
        shutil.rmtree(job.checkpoint_dir, ignore_errors=True)


def _train_fold(
    rt: Any, stop: Any, job: Any, settings: TrainSettings, report: Callable[[int, EpochRecord], None]
) -> tuple[float, int]:
    """One fold of a trial: (its last-epoch validation OA, its validation pixels)."""
    from hsitp.contracts import TRAIN
    from hsitp.io import json_attr
    from hsitp.train.loop import train_rank

    last: dict[str, float] = {}

    def record(epoch: int, rec: EpochRecord) -> None:
        last["val_oa"] = float(rec["val_oa"])
        report(epoch, rec)

    path = train_rank(rt, settings, job, stop=stop, on_epoch=record)
    with TRAIN.read(path) as ds:
        if "val_oa" not in last:  # resumed after its last epoch (killed before the study recorded it)
            last["val_oa"] = float(ds["val_oa"].values[-1])
        n = int((json_attr(ds, "counts") or {}).get("validation_pixels", 0))
    return last["val_oa"], n


def _check_validation(spec: StudySpec, held: Any, tune: TuneSettings) -> None:
    """Log what the validation holds; refuse a block-protocol study whose validation (pooled over its folds) holds
    fewer pixels or classes than tune.block_validation asks: it could not select a recipe."""
    import logging

    from hsitp.tune.study import TuneError

    learn = sum(held.learnable_pixels)
    logging.getLogger(__name__).info(
        "%s protocol, partition %d: validation %d pixels of %d classes over %d fold(s) (per fold %s pixels, %s "
        "classes); %d pixels of %d classes are of a class the fold's training holds; train pixels %d of %d classes",
        spec.protocol, spec.partition, held.total_pixels, held.total_classes, spec.folds, list(held.pixels),
        list(held.classes), learn, held.learnable_classes, held.train_pixels, held.train_classes,
    )  # fmt: skip
    if spec.protocol != "block":
        return
    want = tune.block_validation
    low = []
    if held.total_pixels < want.min_pixels:
        low.append(f"{held.total_pixels} pixels < tune.block_validation.min_pixels = {want.min_pixels}")
    if held.total_classes < want.min_classes:
        low.append(f"{held.total_classes} classes < tune.block_validation.min_classes = {want.min_classes}")
    if low:
        raise TuneError(
            f"tune {spec.out.stem}: the block validation (partition {spec.partition}, {spec.folds} fold(s)) holds "
            + " and ".join(low)
            + "; raise tune.block_validation.folds (or tune.validation_fraction with one fold), or lower the minimum"
        )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="tune one plan's recipe under one accuracy protocol (Optuna TPE, median pruning, equal budget per plan; "
        "resumable study in a journal file beside --out)",
    )
    p.add_argument("data", help="prepared scene, results/RUN/data/DATASET.nc")
    p.add_argument("--plan", required=True, choices=COMPARED_PLANS, help="plan whose recipe is tuned")
    add_protocol_args(
        p, help_text="accuracy protocol (its train pixels, less the validation pixels); required"
    )
    p.add_argument(
        "--tokens", type=int, required=True, help="N, spatial tokens per crop: one crop of train.crops"
    )
    p.add_argument(
        "--patch", type=int, help="patch edge p; default: that of the train.crops entry with N = --tokens"
    )
    p.add_argument(
        "--partition",
        type=int,
        default=0,
        help="which of the protocol's partitions of the prepared file the study tunes on (default 0)",
    )
    p.add_argument(
        "--out", required=True, help="the study's netCDF, results/RUN/tune/DATASET/PLAN_PROTOCOL.nc"
    )
    add_config_args(p)
    p.set_defaults(func=_run)

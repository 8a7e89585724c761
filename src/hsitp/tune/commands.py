"""``hsitp tune``: one tuning study (dataset, plan, accuracy protocol) with the run's equal budget::

    hsitp tune results/RUN/data/DATASET.nc --plan dchag_l --protocol block --tokens 324 \\
        --out results/RUN/tune/DATASET/dchag_l_block.nc --config-json CFG

Runs (or resumes) the study in ``results/RUN/tune/DATASET/PLAN_PROTOCOL.journal`` until ``tune.trials`` trials count,
one progress line per trial, then writes every trial and the budget curves to ``--out`` (``hsitp.tune.study``).
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hsitp.config import add_config_args, add_protocol_args, config_from_args
from hsitp.errors import HsitpError
from hsitp.names import COMPARED_PLANS


def _run(args: argparse.Namespace) -> int:
    from optuna import TrialPruned

    from hsitp.io import provenance, write_netcdf
    from hsitp.signals import stop_on_signals
    from hsitp.train.commands import dataset_name
    from hsitp.train.data import scene_header
    from hsitp.train.plan import TrainJob, check_job, crop_patch
    from hsitp.train.settings import TrainSettings
    from hsitp.tune.study import KIND, StudySpec, run_study, study_dataset

    if args.protocol is None:
        raise HsitpError("hsitp tune: --protocol required (random or block)")
    cfg = config_from_args(args)
    tune = cfg["tune"]
    data = Path(args.data)
    dataset = dataset_name(data)
    settings = TrainSettings.from_config(cfg)  # the run's; each trial trains on its own (trial_config)
    patch = args.patch if args.patch is not None else crop_patch(settings, dataset, args.tokens)
    spec = StudySpec(
        data=data, out=Path(args.out), plan=args.plan, protocol=args.protocol, tokens=args.tokens, patch=patch
    )
    bands, classes, rows, cols = scene_header(data)
    P = int(tune["world_size"])  # noqa: N806

    def check(g: int, **named: Any) -> None:
        """The job's sizes at P = tune.world_size and g: check_job's errors."""
        check_job(settings, spec.plan, P, g, bands, classes, patch=patch, tokens=args.tokens, rows=rows,
                  cols=cols, **named)  # fmt: skip

    def fits(g: int) -> bool:
        try:
            check(g)
        except HsitpError:
            return False
        return True

    # before any trial: a plan that fits at no g of the space is refused with check_job's message
    check(1 if spec.plan == "tp" else _first_fit(tune, fits), dataset=dataset)

    from hsitp.parallel.runtime import RuntimeSettings, start
    from hsitp.train.loop import train_rank

    def train_trial(
        params: Mapping[str, Any],
        trial_cfg: Mapping[str, Any],
        workdir: Path,
        on_epoch: Callable[[int, Mapping[str, Any]], None],
    ) -> float:
        job = TrainJob(
            data=data,
            out=workdir / "trial.nc",
            plan=spec.plan,
            world_size=P,
            groups=int(params["groups"]),
            protocol=spec.protocol,
            seed=int(tune["seed"]),
            tokens=spec.tokens,
            patch=patch,
            ranks=1,
        )
        last: dict[str, float] = {}

        def record(epoch: int, rec: Mapping[str, Any]) -> None:
            last["val_oa"] = float(rec["val_oa"])
            on_epoch(epoch, rec)

        try:
            path = train_rank(rt, TrainSettings.from_config(trial_cfg), job, stop=stop, on_epoch=record)
        except (TrialPruned, HsitpError):
            shutil.rmtree(job.checkpoint_dir, ignore_errors=True)  # an ended trial resumes nothing
            raise
        # ended: its record keeps the result (a killed trial never gets here and keeps its checkpoints)
        shutil.rmtree(job.checkpoint_dir, ignore_errors=True)
        if "val_oa" not in last:  # resumed after its last epoch (killed before the study recorded it)
            from hsitp.io import read_netcdf

            with read_netcdf(path, kind="train") as ds:
                last["val_oa"] = float(ds["val_oa"].values[-1])
        return last["val_oa"]

    # SIGINT / SIGTERM stop the trial before its next step (hsitp.signals); its checkpoints stay for the resume
    with stop_on_signals(f"tune {spec.plan} under the {spec.protocol} protocol") as stop:
        rt = start(RuntimeSettings.from_config(cfg, section="train", world_size=1))
        try:
            study = run_study(spec, cfg, train_trial, fits=fits)
        finally:
            rt.stop()
    ds = study_dataset(study, spec, cfg)
    write_netcdf(
        ds,
        spec.out,
        kind=KIND,
        prov=provenance({"tune": tune, "train": cfg["train"], "seed": cfg["seed"]}, inputs={"data": data}),
        title=f"Tuning study of {spec.plan} under the {spec.protocol} protocol on {dataset} (validation pixels only)",
    )
    print(f"wrote {spec.out} ({ds.sizes['trial']} trials; best validation OA {float(ds['score'].max()):.3f})")
    return 0


def _first_fit(tune: Mapping[str, Any], fits: Callable[[int], bool]) -> int:
    for g in tune["space"]["groups"]:
        if fits(int(g)):
            return int(g)
    return int(tune["space"]["groups"][0])  # check_job then names what does not fit


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
        "--out", required=True, help="the study's netCDF, results/RUN/tune/DATASET/PLAN_PROTOCOL.nc"
    )
    add_config_args(p)
    p.set_defaults(func=_run)

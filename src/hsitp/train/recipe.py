"""A tuned recipe: the best trial of a tuning study (``hsitp tune``'s netCDF, kind ``tune_study``) applied to the
training config of one job (``hsitp train --recipe STUDY``).

The study file is read here by its attributes only (``plan``, ``protocol``, ``best_params``), so training does not
depend on the tuning code (``hsitp.tune`` depends on training, not the other way round).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from hsitp.errors import HsitpError
from hsitp.sections import Config


class RecipeError(HsitpError):
    """A study that cannot give this job its recipe."""


class TrialParams(TypedDict):
    """A tuning trial's recipe: the parameters Optuna suggests (groups: the D-CHAG plans' g, searched or fixed),
    what a study file's ``best_params`` holds for its best trial."""

    lr: float
    weight_decay: float
    label_smoothing: float
    warmup_steps: int
    per_class: int
    groups: int


class StudyBest(TypedDict):
    """What ``--recipe`` reads of a study file: its plan, accuracy protocol and best trial's parameters."""

    plan: str
    protocol: str
    best: TrialParams


def read_best(path: str | Path) -> StudyBest:
    """The study's plan, accuracy protocol and best parameters (RecipeError when the study has no completed
    trial)."""
    from hsitp.contracts import TUNE_STUDY

    ds = TUNE_STUDY.read(path, load=False)
    try:
        attrs = dict(ds.attrs)
    finally:
        ds.close()
    best = json.loads(str(attrs.get("best_params", "{}")))
    if not best:
        raise RecipeError(f"{path}: the study has no completed trial, so no recipe; give it more trials")
    return {"plan": str(attrs["plan"]), "protocol": str(attrs["protocol"]), "best": best}


def best_groups(path: str | Path) -> int:
    """g of the study's best trial (1 for tp)."""
    return int(read_best(path)["best"].get("groups", 1))


def apply_recipe(
    config: Config,
    study: str | Path,
    *,
    plan: str,
    protocol: str,
    groups: int,
    recipe_plan: str | None = None,
) -> tuple[Config, str | None]:
    """``config`` with the train keys of the study's best trial, and whose recipe the job trains on when not its
    own plan's (``TrainSettings.recipe_plan``). The study must be this job's plan and protocol, and its best g the
    job's g. With ``recipe_plan`` (the untuned control: a D-CHAG job on tp's recipe) the study must be that plan's
    under the job's protocol and the job keeps its own g."""
    found = read_best(study)
    owner = recipe_plan or plan
    if found["plan"] != owner or found["protocol"] != protocol:
        whose = "its own study's recipe" if recipe_plan is None else f"{recipe_plan}'s study (--recipe-plan)"
        raise RecipeError(
            f"--recipe {study}: a study of {found['plan']} under the {found['protocol']} protocol, but this job "
            f"trains {plan} under the {protocol} protocol on {whose}"
        )
    best = found["best"]
    if recipe_plan is None and int(best.get("groups", 1)) != int(groups):
        raise RecipeError(
            f"--recipe {study}: its best trial has g = {best.get('groups', 1)}, this job g = {groups}"
        )
    return config.with_train(**recipe_keys(best)), recipe_plan if recipe_plan != plan else None


def recipe_keys(params: TrialParams) -> dict[str, Any]:
    """The train keys a searched recipe sets (lr, weight decay, label smoothing, warm-up, stratified per_class):
    what a tuning trial trains with and what ``--recipe`` applies from its best trial."""
    return {
        "lr": float(params["lr"]),
        "weight_decay": float(params["weight_decay"]),
        "label_smoothing": float(params["label_smoothing"]),
        "warmup_steps": int(params["warmup_steps"]),
        "sampling": {"mode": "stratified", "per_class": int(params["per_class"])},
    }

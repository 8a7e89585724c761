"""The spot check's builds, made by the repository's own Snakefile (the one orchestrator): a config overlay written
from what the reference recorded, restricted to one picked cell, and Snakemake asked for that cell's file in a work
folder (``snakemake --snakefile SNAKEFILE --configfile OVERLAY --directory WORK TARGET``). Each rule's command line
thus exists once, in workflow/rules/; nothing here knows an ``hsitp`` subcommand's flags.

The overlay starts from the reference's ``run_config.json`` (the merged config of the run) and sets the cell's
keys: its scene, plan, P, g, protocol, seed and crop, the partition draws that hold its partition, and the
recorded recipe (the train keys that shaped its weights). Under ``train.recipe: tuned`` the rules read the tuning
studies, which are copied from the reference (newer than the scene there, so Snakemake does not tune again). A
reference without ``run_config.json`` starts from config/config.yaml's defaults.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hsitp.errors import HsitpError

if TYPE_CHECKING:
    import xarray as xr

SNAKEFILE = Path(__file__).resolve().parents[3] / "Snakefile"  # src/hsitp/audit/ -> the checkout's root


class ReproduceError(HsitpError):
    """The spot check cannot start (reference, budget, scene, checkout); the message says what to give."""


def snakefile() -> Path:
    """The checkout's Snakefile; a pip-installed package has none, and the spot check cannot run without it."""
    if not SNAKEFILE.is_file():
        raise ReproduceError(
            f"the spot check builds its cells with the repository's Snakefile ({SNAKEFILE} is missing): "
            "run it from a checkout of hsitp (git clone), not from a pip-installed package"
        )
    return SNAKEFILE


def base_config(reference: Path) -> dict[str, Any]:
    """The run's recorded config (``run_config.json``), or an empty overlay (config/config.yaml's defaults)."""
    path = reference / "run_config.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _set(config: dict[str, Any], dotted: str, value: Any) -> None:
    """``config[a][b] = value`` for ``"a.b"``, creating the sections on the way."""
    *sections, key = dotted.split(".")
    for s in sections:
        config = config.setdefault(s, {})
    config[key] = value


# runs.nc's variable of each Cell field named otherwise
RUNS_VARIABLES = {"partition": "partition_index", "kernel": "attention_kernel"}
CASTS: dict[str, Callable[[Any], Any]] = {
    "int": int,
    "str": str,
    "bool": bool,
}  # a field's type, as annotated


@dataclass(frozen=True)
class Cell:
    """One training run of the reference (a row of train/runs.nc): its cell, its recipe and how it ran."""

    row: int
    name: str
    dataset: str
    plan: str
    P: int  # noqa: N815
    g: int
    protocol: str
    seed: int
    N: int  # noqa: N815
    control: bool
    partition: int  # which of the protocol's partitions
    patch: int
    ranks: int  # processes launched (< P: the single-process equivalent)
    recipe: str  # the record's recipe JSON
    kernel: str  # model.attention_kernel
    device: str  # as recorded (a CPU's name, or a GPU's)
    backend: str  # as recorded
    eval_every: int
    summary_epochs: int
    threads_per_rank: int

    @classmethod
    def from_runs(cls, runs: xr.Dataset, i: int) -> Cell:
        """Row ``i`` of train/runs.nc, each field its variable's value cast to the field's type."""
        return cls(
            row=i,
            **{
                f.name: CASTS[str(f.type)](runs[RUNS_VARIABLES.get(f.name, f.name)].values[i])
                for f in fields(cls)
                if f.name != "row"
            },
        )

    @property
    def label(self) -> str:
        return f"control/{self.name}" if self.control else self.name

    @property
    def key(self) -> tuple[Any, ...]:
        """Canonical order of the cells (the seed permutes this order)."""
        return (
            self.dataset,
            int(self.control),
            self.plan,
            self.P,
            self.g,
            self.protocol,
            self.N,
            self.partition,
            self.seed,
            self.name,
        )

    @property
    def probe_key(self) -> tuple[str, int, int]:
        return (self.plan, self.P, self.g)


def cell_overlay(base: Mapping[str, Any], run: str, cell: Cell) -> dict[str, Any]:
    """The config that makes rule ``train`` (or ``train_control``) build exactly this cell as it was recorded."""
    cfg = copy.deepcopy(dict(base))
    recipe = json.loads(cell.recipe)
    train = {k: v for k, v in recipe.get("train", {}).items() if k != "recipe_plan"}
    cfg["train"] = {**cfg.get("train", {}), **train}
    cfg |= {"run": run, "stages": ["train"]}  # train.datasets only: a scene outside the registry is given
    if recipe.get("seed") is not None:
        cfg["seed"] = recipe["seed"]
    plan, P, g = cell.plan, cell.P, cell.g  # noqa: N806
    for key, value in {
        # the DAG's keys: this cell only
        "train.datasets": [cell.dataset], "train.plans": [plan], "train.world_sizes": [P],
        "train.groups": {} if plan == "tp" else {plan: [g]}, "train.protocols": [cell.protocol],
        "train.seeds": [cell.seed], "train.control": {"world_sizes": []},
        "train.equivalence.seed": cell.seed,  # must be one of train.seeds; not in the recipe
        "train.crops": [{"tokens": cell.N, "patch": cell.patch, "datasets": None}],
        "train.equivalent": cell.ranks < P,
        "train.eval_every": cell.eval_every, "train.summary_epochs": cell.summary_epochs,
        "train.threads_per_rank": cell.threads_per_rank,
        "train.device": "cpu" if cell.device.upper().startswith("CPU") or not cell.device else "auto",
        "model.attention_kernel": cell.kernel,  # the arithmetic the reference trained with
        "parallel.backend": cell.backend if cell.backend in ("gloo", "nccl") else "auto", "parallel.timeout_s": 600,
    }.items():  # fmt: skip
        _set(cfg, key, value)
    if cfg["train"].get("recipe") == "tuned":
        # no P-rank check is built here, and none is allowed on a tuned recipe (hsitp.config.check_run); the
        # check's epoch is evaluated by the equivalent too, so a config recipe keeps the recorded one
        _set(cfg, "train.equivalence.epochs", 0)
    draws = cfg.get("data", {}).get("partition", {}).get("draws", 1)
    _set(cfg, "data.partition.draws", max(int(draws), cell.partition + 1))
    return cfg


def probe_overlay(
    base: Mapping[str, Any], run: str, probe: Mapping[str, Any], seed: int, kernel: str
) -> dict:
    """The config that makes rules ``probe_run`` and ``probe_merge`` re-measure the given probe section."""
    cfg = copy.deepcopy(dict(base))
    cfg |= {"run": run, "seed": seed, "probe": dict(probe), "stages": ["probe"]}
    _set(cfg, "model.attention_kernel", kernel)
    _set(cfg, "parallel.timeout_s", 600)
    return cfg


def place(src: Path, dst: Path) -> Path:
    """A file of the reference (a scene, a study) copied into the work folder, newer than what it was made from
    there (Snakemake's mtime check then takes it as built)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def snakemake(work: Path, name: str, config: Mapping[str, Any], targets: Sequence[str], log: Path) -> int:
    """Snakemake builds ``targets`` (paths under ``work``) with ``config`` as its overlay; its exit status, its
    output in ``log``."""
    targets = [os.path.relpath(t, work) for t in targets]  # Snakemake matches them against its rules' outputs
    overlay = work / "overlays" / f"{name}.json"
    overlay.parent.mkdir(parents=True, exist_ok=True)
    overlay.write_text(json.dumps(config, indent=1, sort_keys=True) + "\n")
    argv = [
        sys.executable, "-m", "snakemake", "--snakefile", str(snakefile()), "--configfile", str(overlay),
        "--directory", str(work), "--cores", str(os.cpu_count() or 1), "--nolock", *targets,
    ]  # fmt: skip
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as fh:
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        return subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode


def tail(log: Path, lines: int = 3) -> str:
    """The last non-empty lines of a log, on one line."""
    try:
        text = [ln for ln in log.read_text().splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(text[-lines:])

"""What workflow/rules/report.smk needs to declare the report rules: inputs, outputs, parameters, targets.

Kept out of the rule file (Snakemake's lint wants no functions beside rules) and light (the DAG imports it). The
upstream paths come in from the stages' own target functions, so the report follows wherever those write.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hsitp.report.outputs import STAGES, stage_outputs

# Code every page runs (module files under src/hsitp/report/, and the analysis floor's every module): rendering-rule
# inputs, so an edit re-runs them.
COMMON_MODULES = ("__init__", "outputs", "style", "common", "commands")
ANALYSIS_MODULES = ("__init__", "labels", "read", "cells", "answer", "headline")


# Other pages' modules a page uses (the train page draws the scenes' ground truth with the data page's code, the
# bench page's section 8.2 table takes the paper's cases as the cost page does).
BORROWED = {"bench": ("cost",), "train": ("data",)}


def code_inputs(stage: str) -> list[str]:
    """The report modules a stage's rendering job runs, as paths relative to the repository root."""
    report = [f"src/hsitp/report/{m}.py" for m in (*COMMON_MODULES, *BORROWED.get(stage, ()), stage)]
    return [*report, *(f"src/hsitp/analysis/{m}.py" for m in ANALYSIS_MODULES)]


def stage_inputs(
    stage: str,
    data: Sequence[str],
    cost: Sequence[str],
    bench: Sequence[str],
    probe: Sequence[str] = (),
    train: Sequence[str] = (),
    stages: Sequence[str] = STAGES,
    tune: Sequence[str] = (),
) -> dict[str, Any]:
    """The netCDF one stage's page reads, keyed like the notebook's parameters (None: a file of a stage this run
    does not build; the page says what is missing).

    ``data``, ``cost``, ``bench``, ``probe`` and ``train`` are the upstream stages' target lists (targets.smk);
    ``stages`` the run's (config ``stages``): the train page reads the probe's files only when the probe runs;
    ``tune`` the tuning studies (tune_targets) it draws the budget curves of."""
    cost_by = {Path(p).stem: p for p in cost}
    bench_by = {Path(p).stem: p for p in bench}
    if stage == "data":
        return {"datasets": list(data)}
    if stage == "cost":
        return {t: cost_by[t] for t in ("rho", "ccr", "boundary", "scale", "plan")} | {"datasets": list(data)}
    if stage == "bench":
        return {
            **{k: bench_by[k] for k in ("microbench", "calibration", "model_vs_measured")},
            "ccr": cost_by["ccr"],
        }
    if stage == "probe":
        probe_by = {Path(p).stem: p for p in probe}
        return {k: probe_by[k] for k in ("memory", "throughput", "estimate")}
    # train: the records, their summary over seeds, the scenes' ground truth, the probe's answer table
    if stage == "train":
        probe_by = {Path(p).stem: p for p in probe} if "probe" in stages else {}
        # files over the records, not records
        reduced = ("summary.nc", "equivalence.nc", "control_summary.nc")
        return {
            "records": [p for p in train if Path(p).name not in reduced],
            "summary": next((p for p in train if Path(p).name == "summary.nc"), None),
            "equivalence": next((p for p in train if Path(p).name == "equivalence.nc"), None),
            "control": next((p for p in train if Path(p).name == "control_summary.nc"), None),
            "datasets": list(data),
            "probe_memory": probe_by.get("memory"),
            "probe_throughput": probe_by.get("throughput"),
            "studies": list(tune),  # the tuning studies (stage tune): the budget curves
        }
    raise ValueError(f"no report page for stage {stage!r}; one of {', '.join(STAGES)}")


def rule_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """A page's inputs as a rule declares them: the files this run builds (None entries left out)."""
    return {k: v for k, v in inputs.items() if v is not None}


def notebook_params(inputs: dict[str, Any], results: str) -> str:
    """The notebook's papermill parameters (JSON): its input paths and the run's results folder."""
    return json.dumps({**inputs, "out_dir": results}, sort_keys=True)


def stage_files(
    stage: str, results: str, datasets: Sequence[str], flag: Callable[..., Any] | None = None
) -> list[Any]:
    """Every figure and table file of a stage's page; with ``flag`` (Snakemake's ``report``), the PNGs and CSVs
    are marked for the Snakemake report with their caption, category (the stage) and labels."""
    files: list[Any] = []
    for out in stage_outputs(stage):
        for dataset in datasets if out.per_dataset else [None]:
            base = out.base(dataset)
            for ext in out.formats:
                path: Any = f"{results}/{out.folder}/{base}.{ext}"
                if flag is not None and ext in ("png", "csv"):
                    path = flag(
                        path,
                        caption=f"../report/captions/{out.caption}",
                        category=stage,
                        subcategory="figures" if out.kind == "figure" else "tables",
                        labels={"name": base, "shows": out.what},
                    )
                files.append(path)
    return files


def notebook_files(stage: str, results: str) -> dict[str, str]:
    """The executed notebook and its HTML."""
    return {"notebook": f"{results}/notebooks/{stage}.ipynb", "html": f"{results}/notebooks/{stage}.html"}


def targets(results: str, datasets: Sequence[str], stages: Sequence[str] = STAGES) -> list[str]:
    """Every file the report stage writes for ``stages`` (default all): figures, tables, notebooks and their HTML."""
    return [
        str(f)
        for stage in stages
        for f in [*stage_files(stage, results, datasets), *notebook_files(stage, results).values()]
    ]

"""Every figure and table the report stage writes, named once (the notebooks, the rules and the tests read this).

Light on purpose: the Snakefile imports it while it builds the DAG, so nothing heavier than the standard library
is imported here. A file's base name is ``{stage}_{name}`` (``{stage}_{name}_{dataset}`` for per-dataset outputs);
figures go to ``<out_dir>/figures/`` as PNG and PDF, tables to ``<out_dir>/tables/`` as CSV, Markdown and LaTeX,
executed notebooks to ``<out_dir>/notebooks/`` as .ipynb and .html. The caption of each output for the
Snakemake report is ``workflow/report/captions/{stage}_{name}.rst``.
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES: tuple[str, ...] = ("data", "cost", "bench", "probe", "train")
FIGURE_FORMATS: tuple[str, ...] = ("png", "pdf")
TABLE_FORMATS: tuple[str, ...] = ("csv", "md", "tex")


@dataclass(frozen=True)
class Output:
    """One figure or table of one stage's notebook."""

    stage: str
    name: str
    kind: str  # "figure" | "table"
    what: str  # one line: what it shows (the notebook's heading; the caption says more)
    per_dataset: bool = False

    def base(self, dataset: str | None = None) -> str:
        """File name without folder and extension."""
        if self.per_dataset:
            if dataset is None:
                raise ValueError(f"{self.stage}_{self.name} is per dataset: give the dataset")
            return f"{self.stage}_{self.name}_{dataset}"
        return f"{self.stage}_{self.name}"

    @property
    def caption(self) -> str:
        return f"{self.stage}_{self.name}.rst"

    @property
    def formats(self) -> tuple[str, ...]:
        return FIGURE_FORMATS if self.kind == "figure" else TABLE_FORMATS

    @property
    def folder(self) -> str:
        return "figures" if self.kind == "figure" else "tables"


OUTPUTS: tuple[Output, ...] = (
    # data: the prepared scenes (no hardware-dependent number)
    Output("data", "scene", "figure", "false-colour composite, ground truth and train/test partition", True),
    Output("data", "classes", "table", "labelled pixels per class and their train/test partition", True),
    # cost: modelled, not measured (hardware presets)
    Output("cost", "rho", "figure", "rho = C/N per dataset and patch size"),
    Output("cost", "ccr_vs_p", "figure", "modelled CCR vs P for the three splits under both models"),
    Output("cost", "boundary", "figure", "decision-boundary map with each dataset placed on it"),
    Output("cost", "scale", "figure", "projection to many devices: throughput and memory per scheme"),
    Output("cost", "plan", "figure", "advise plan: per-rank memory and tokens/s vs P per plan (GPU presets)"),
    Output("cost", "rho_2_2", "table", "paper section 2.2: rho per dataset, registry vs prepared here"),
    Output("cost", "scale_9_1", "table", "paper section 9.1: pure TP vs D-CHAG+TP at scale (modelled)"),
    Output("cost", "dchag_memory", "table", "D-CHAG paper's reported memory vs this memory model"),
    # bench: measured, beside the models
    Output("bench", "ccr_vs_p", "figure", "CCR vs P per op: measured points, stated and calibrated models"),
    Output("bench", "predicted_vs_measured", "figure", "predicted vs measured CCR, held-out points marked"),
    Output("bench", "compute_vs_comm", "figure", "compute vs exposed communication per op"),
    Output("bench", "ccr_8_1", "table", "paper section 8.1: CCR per split, modelled beside measured"),
    Output("bench", "dchag_8_2", "table", "paper section 8.2: D-CHAG vs TP, modelled beside measured"),
    Output("bench", "model_vs_measured", "table", "median |relative error| of both models, per op"),
    Output("bench", "points", "table", "every measured point beside both calibrated models"),
    Output("bench", "calibration", "table", "the fitted alpha, beta per collective and compute model per op"),
    # probe: measured per-rank memory and throughput beside the memory model; fake-tensor estimates
    Output(
        "probe",
        "memory_parts",
        "figure",
        "measured per-rank memory by part per plan, per P and checkpointing",
    ),
    Output(
        "probe", "memory_vs_p", "figure", "per-rank memory vs P per plan: measured beside the memory model"
    ),
    Output("probe", "throughput", "figure", "measured training-step throughput (tokens/s) vs P per plan"),
    Output(
        "probe",
        "estimate",
        "figure",
        "peak memory estimated with fake tensors (rank 0 of P in one process, nothing allocated) beside the memory model",
    ),
    Output(
        "probe", "relative_to_tp", "table", "per-plan measured memory relative to tp (total, tok+agg, peak)"
    ),
    Output(
        "probe", "model_vs_measured", "table", "memory model vs measurement: largest |rel err| per part/kind"
    ),
    Output(
        "probe",
        "estimate_vs_model",
        "table",
        "fake-tensor estimates beside the memory model and D-CHAG's report",
    ),
    # train: measured training runs, opened by the answer to the paper's question (probe + summary)
    Output(
        "train",
        "answer",
        "table",
        "per plan and P: peak memory, interleaved tokens/s and accuracy verdict vs tp",
    ),
    Output(
        "train",
        "pareto",
        "figure",
        "per D-CHAG plan and P: memory per rank vs time to accuracy, each over tp's, marked by accuracy verdict",
    ),
    Output(
        "train",
        "tuning_effect",
        "table",
        "per D-CHAG plan, P and protocol: ΔOA vs tp on tp's recipe (the untuned control) beside its own tuned recipe",
    ),
    Output(
        "train",
        "tune_budget",
        "figure",
        "per plan and protocol: best validation OA against tuning trials, the search as run and Dodge et al.'s expected best",
    ),
    Output(
        "train", "curves", "figure", "training loss (and overall accuracy where evaluated) per epoch per run"
    ),
    Output("train", "resources", "figure", "measured per-rank peak memory and tokens/s per run"),
    Output("train", "prediction", "figure", "predicted class map per run (where the record holds one)"),
    Output("train", "summary", "table", "mean of the last epochs per run (the paper's summary)"),
    Output(
        "train",
        "accuracy",
        "table",
        "OA, AA and κ mean ± std over seeds per model, beside the classical baseline",
    ),
    Output("train", "accuracy_plot", "figure", "OA, AA and κ per model and classical baseline, over seeds"),
    Output(
        "train", "per_class_accuracy", "table", "test recall of each class per model and baseline, over seeds"
    ),
    Output(
        "train",
        "equivalence",
        "table",
        "each plan over P ranks vs its single-process equivalent (OA after the check's epochs)",
    ),
)


def stage_outputs(stage: str, kind: str | None = None) -> list[Output]:
    """The outputs of one stage's notebook (optionally only figures or only tables), in notebook order."""
    if stage not in STAGES:
        raise ValueError(f"unknown report stage {stage!r}; one of {', '.join(STAGES)}")
    return [o for o in OUTPUTS if o.stage == stage and (kind is None or o.kind == kind)]


def output(stage: str, name: str) -> Output:
    for o in OUTPUTS:
        if o.stage == stage and o.name == name:
            return o
    raise KeyError(f"no report output {stage}_{name}")

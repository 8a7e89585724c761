# What each stage builds (its final files: `rule all` asks for those of the stages in config `stages`) and the input
# functions of the rules that read another stage's files. Functions only: Snakemake's lint wants no function beside
# a rule, so the rule files call these.
from hsitp.names import partition_tag
from hsitp.report import rules as report_rules
from hsitp.analysis.labels import stage_hardware
from hsitp.train import plan as train_plan


# --- each stage's final files ----------------------------------------------------------------------------------
def data_targets():
    """One prepared netCDF per configured dataset."""
    return expand(result("data/{dataset}.nc"), dataset=config["datasets"])


COST_TABLES = ["rho", "ccr", "boundary", "scale", "plan"]


def cost_targets():
    """Cost-model tables (modelled, not measured): rho, CCR grid, decision boundary, scale projection."""
    return expand(result("cost/{table}.nc"), table=COST_TABLES)


def bench_targets():
    """Measured layer timings, the calibration fitted to them, and model-vs-measured CCR."""
    return [
        result("bench/microbench.nc"),
        result("bench/calibration.nc"),
        result("bench/model_vs_measured.nc"),
    ]


def probe_targets():
    """Measured per-rank memory and throughput of every plan, and the fake-tensor estimates."""
    return [
        result("probe/memory.nc"),
        result("probe/throughput.nc"),
        result("probe/estimate.nc"),
    ]


def audit_targets():
    """The claims table and the drift check against results/reference/smoke (rules in audit.smk)."""
    return [result("tables/paper_claims.csv"), result("audit/report.md")]


def partition_tags():
    """The file-name tags of the data.partition.draws partitions of each protocol ("" for partition 0, then
    _k1, _k2, ...; hsitp.names.partition_tag)."""
    return [partition_tag(k) for k in range(config["data"]["partition"]["draws"])]


def baseline_targets():
    """Classical baseline per dataset x accuracy protocol (data.partition.protocols) x partition
    (data.partition.draws) x seed (baseline.seeds)."""
    return expand(
        result("baseline/{dataset}_{protocol}{part}_s{seed}.nc"),
        dataset=config["datasets"],
        protocol=config["data"]["partition"]["protocols"],
        part=partition_tags(),
        seed=config["baseline"]["seeds"],
    )


def tune_targets():
    """One tuning study per dataset x plan x accuracy protocol of the `tune` section (trained datasets only)."""
    return expand(
        result("tune/{dataset}/{plan}_{protocol}.nc"),
        dataset=list(TRAIN.datasets),
        plan=config["tune"]["plans"],
        protocol=config["tune"]["protocols"],
    )


def tuned():
    """train.recipe tuned: every plan trains on its own tuning study's best recipe (stage tune runs first)."""
    return config["train"]["recipe"] == "tuned"


def study_file(dataset, plan, protocol):
    """The tuning study of (dataset, plan, protocol): rule tune's output."""
    return result(f"tune/{dataset}/{plan}_{protocol}.nc")


def train_jobs(where=None):
    """The training jobs (those whose (dataset, plan, protocol) passes ``where``, default all); under train.recipe
    tuned each D-CHAG plan at its study's best g, read once that study's checkpoint job has run (Snakemake plans
    the jobs again then; a job whose (dataset, plan, protocol) ``where`` drops reads no study). Call it from input
    functions only."""
    from hsitp.train.recipe import best_groups

    keep = where or (lambda dataset, plan, protocol: True)
    if not tuned():
        return [j for j in train_plan.jobs(TRAIN) if keep(j[0], j[1], j[5])]

    def groups_of(dataset, plan, protocol):
        if not keep(dataset, plan, protocol):
            return []
        path = checkpoints.tune.get(
            dataset=dataset, plan=plan, protocol=protocol
        ).output[0]
        return [best_groups(path)]

    return [
        j for j in train_plan.jobs(TRAIN, groups_of=groups_of) if keep(j[0], j[1], j[5])
    ]


def train_record_targets(where=None):
    """One per-epoch training record per (dataset, plan, N, P, g, protocol, seed, partition) of the `train` section
    (those whose (dataset, plan, protocol) passes ``where``)."""
    return [
        result(f"train/{job[0]}/{train_plan.run_name(*job[1:])}.nc")
        for job in train_jobs(where)
    ]


def control_record_targets():
    """The untuned control (train.control under train.recipe tuned): one record per D-CHAG job on tp's recipe."""
    return [
        result(f"train/{job[0]}/control/{train_plan.run_name(*job[1:])}.nc")
        for job in train_plan.control_jobs(TRAIN)
    ]


def train_check_targets():
    """Under train.equivalent: one P-rank check run per (plan, P, g), stopped after train.equivalence.epochs."""
    return [
        result(f"train/{job[0]}/check/{train_plan.run_name(*job[1:])}.nc")
        for job in train_plan.check_runs(TRAIN)
    ]


def train_targets():
    """Every training record and their summary over seeds (train/summary.nc); under train.equivalent the
    equivalence of each (plan, P) with its single-process equivalent (train/equivalence.nc).
    """
    # under train.recipe tuned the records' g is known after tuning: the summary's input function names them
    out = ([] if tuned() else train_record_targets()) + [result("train/summary.nc")]
    if control_record_targets():
        out.append(result("train/control_summary.nc"))
    if train_check_targets():
        out.append(result("train/equivalence.nc"))
    return out


STAGE_TARGETS = {
    "data": data_targets,
    "cost": cost_targets,
    "bench": bench_targets,
    "probe": probe_targets,
    "train": train_targets,
    "baseline": baseline_targets,
    "tune": tune_targets,
    "audit": audit_targets,
}


def all_targets():
    """The final files of the stages listed in `stages` (all by default)."""
    return [f for stage in config["stages"] for f in STAGE_TARGETS[stage]()]


# The report pages (report.smk): the upstream files of each stage's page, from the stages' own target functions, and
# the pages of the stages `stages` lists (a page per stage that has one).
REPORT_INPUTS = {
    stage: report_rules.stage_inputs(
        stage,
        data_targets(),
        cost_targets(),
        bench_targets(),
        probe_targets(),
        train_targets(),
        config["stages"],
    )
    for stage in ("data", "cost", "bench", "probe", "train")
}
REPORT_TARGETS = report_rules.targets(
    RESULTS,
    config["datasets"],
    [s for s in report_rules.STAGES if s in config["stages"]],
)


# --- input functions of the rules --------------------------------------------------------------------------------
# Config keys (under `cost`) that name hardware, per table; `measured:PATH` names become rule inputs.
COST_HARDWARE_KEYS = {
    "rho": [("rho", "hardware")],
    "ccr": [("ccr", "hardware")],
    "boundary": [("boundary", "point_hardware"), ("boundary", "hardware")],
    "scale": [("scale", "hardware")],
    "plan": [("plan", "hardware")],
}


def cost_calibration_inputs(wildcards):
    """Calibration files a cost table reads through `measured:PATH` hardware names."""
    names = []
    for section, key in COST_HARDWARE_KEYS[wildcards.table]:
        value = config["cost"][section][key]
        names += value if isinstance(value, list) else [value]
    return [n[len("measured:") :] for n in names if n.startswith("measured:")]


def audit_measured_inputs(wildcards):
    """The run's own files that the claims' measured sub-checks read, when the stages writing them run: the probe and
    bench files (audit.measured_run null or this run's name: the audited run), and the training summary when the
    run is its own accuracy run (audit.accuracy_run, e.g. cpu-places). The claims wait for them instead of calling
    them pending.
    """
    audit = config.get("audit") or {}
    own = []
    if audit.get("measured_run") in (None, config["run"]):
        own += (probe_targets() if "probe" in config["stages"] else []) + (
            bench_targets() if "bench" in config["stages"] else []
        )
    if audit.get("accuracy_run") == config["run"] and "train" in config["stages"]:
        own.append(result("train/summary.nc"))
    return own


def audit_check_inputs(wildcards):
    """Every file `hsitp audit check` reads: the cost tables and, where the run has the bench stage, the bench files
    (so the check runs after them, in any order a scheduler picks, and again when they change).
    """
    bench = bench_targets() if "bench" in config["stages"] else []
    return [*expand(result("cost/{table}.nc"), table=COST_TABLES), *bench]


def train_recipe_input(wildcards):
    """Under train.recipe tuned, the job's own tuning study (its recipe); else nothing."""
    if not tuned():
        return []
    return study_file(wildcards.dataset, wildcards.plan, wildcards.protocol)


def control_recipe_input(wildcards):
    """A control job's recipe: tp's tuning study on the job's protocol."""
    return study_file(wildcards.dataset, "tp", wildcards.protocol)


def train_record_inputs():
    """The summary's training records as one named input function per (dataset, plan, protocol): Snakemake plans each
    one when its own tuning study has run, so tp's jobs (no g to choose) start with the studies and a D-CHAG
    plan's as soon as its study ends, not after the last study (which left a core idle: docs/measured.md).
    """
    cells = sorted({(job[0], job[1], job[5]) for job in train_plan.jobs(TRAIN)})

    def records(cell):
        return lambda wildcards: train_record_targets(lambda *key: key == cell)

    return {f"records_{'_'.join(cell)}": records(cell) for cell in cells}


def named_inputs(input, prefix):
    """Every file of the named inputs whose name starts with ``prefix``, in their order."""
    out = []
    for name, files in input.items():
        if name.startswith(prefix):
            out.extend([files] if isinstance(files, str) else files)
    return out


def control_summary_records(wildcards):
    """The control records and tp's own records (the control is paired with the same tp runs as the tuned cells)."""
    tp = train_record_targets(
        lambda dataset, plan, protocol: plan == "tp"
    )  # reads no study's checkpoint
    return control_record_targets() + tp


def train_equivalence_inputs(wildcards):
    """The check runs and the single-process equivalents they are compared with."""
    checks = train_plan.check_runs(TRAIN)
    pairs = sorted({train_plan.equivalent_of(TRAIN, job) for job in checks})
    return train_check_targets() + [
        result(f"train/{job[0]}/{train_plan.run_name(*job[1:])}.nc") for job in pairs
    ]


def train_summary_baselines(wildcards):
    """Baseline files on the datasets and protocols that were trained, every partition (the baseline rule's own
    grid)."""
    trained = {(job[0], job[5]) for job in train_plan.jobs(TRAIN)}
    return [
        f
        for d, protocol in sorted(trained)
        if d in config["datasets"]
        and protocol in config["data"]["partition"]["protocols"]
        for f in expand(
            result("baseline/{dataset}_{protocol}{part}_s{seed}.nc"),
            dataset=d,
            protocol=protocol,
            part=partition_tags(),
            seed=config["baseline"]["seeds"],
        )
    ]


def train_page_inputs():
    """The train report page's inputs. Under train.recipe tuned its records are known only after tuning: call it
    from input functions (Snakemake re-plans after the tune checkpoints), as report_train does.
    """
    records = train_record_targets() if tuned() else []
    return report_rules.stage_inputs(
        "train",
        data_targets(),
        cost_targets(),
        bench_targets(),
        probe_targets(),
        records + train_targets(),
        config["stages"],
        tune_targets() if "tune" in config["stages"] else [],
    )


# The inputs a page's caption reads its hardware line from (params.hardware), in this order.
HARDWARE_INPUTS = {
    "data": ["datasets"],
    "cost": ["rho", "ccr", "boundary", "scale", "plan"],
    "bench": ["model_vs_measured", "microbench"],
    "probe": ["memory", "throughput", "estimate"],
    "train": ["records"],  # none while the DAG waits on the tune checkpoints
}


def page_inputs(stage):
    """A report page's inputs: the stage's files, its notebook and the report code it runs."""
    return {
        **REPORT_INPUTS[stage],
        "notebook": f"notebooks/{stage}.ipynb",
        "code": report_rules.code_inputs(stage),
    }


def page_params(stage):
    """A report page's params: the stage, the notebook's parameters and the caption's hardware line (read from the
    inputs once they exist). The train page's inputs are known when its job is planned (train_page_inputs).
    """

    def train_nb(wildcards):
        return report_rules.notebook_params(train_page_inputs(), RESULTS)

    def hardware(wildcards, input):
        named = [input.get(name, []) for name in HARDWARE_INPUTS[stage]]
        return stage_hardware(
            stage, [f for x in named for f in ([x] if isinstance(x, str) else x)]
        )

    return {
        "stage": stage,
        "nb": (
            train_nb
            if stage == "train"
            else report_rules.notebook_params(REPORT_INPUTS[stage], RESULTS)
        ),
        "hardware": hardware,
    }

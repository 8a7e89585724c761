# Shared by every rule file, included first by the Snakefile. Config validation, run-rooted paths, the config
# keys each rule passes to its subcommand, the resources each job asks for, and the target functions.
import json
import sys
from pathlib import Path

from hsitp import launch
from hsitp.errors import HsitpError
from hsitp.preflight import error_log_path, one_line, preflight

# One check when the DAG is built, before any job: the schema, then every stage's sizes at every P it will run
# (hsitp.preflight). A refusal is one line naming the key; the full text goes to logs/<run>/config_error.log.
try:
    config.update(preflight(config))
except HsitpError as exc:
    print(one_line(exc, error_log_path(config)), file=sys.stderr)
    sys.exit(2)

# Conda environments (--software-deployment-method conda), paths relative to the rule files. Every rule runs in ENV
# except a rank rule whose ranks have GPUs (rank_env), which gets PyTorch's CUDA build.
ENV = "../../envs/hsitp.yaml"
ENV_CUDA = "../../envs/hsitp-cuda.yaml"

# Every output of a run lives under results/<run>/ and every log under logs/<run>/; the raw download cache
# (data.raw_dir) is shared by all runs. A rule names its files with result() and log_file(), never by hand.
RUN = config["run"]
RESULTS = f"results/{RUN}"  # this run's output root
LOGS = f"logs/{RUN}"  # this run's log root


def result(path):
    """``results/<run>/<path>``: where this run's outputs live."""
    return f"{RESULTS}/{path}"


def log_file(path):
    """``logs/<run>/<path>``: where this run's job logs live."""
    return f"{LOGS}/{path}"


def benchmark_file(rule, name):
    """``logs/<run>/benchmarks/<rule>/<name>.tsv``: Snakemake's per-job measurement (wall s, CPU s, max RSS; also
    under SLURM, where the job step writes it), read by `hsitp report jobs`. Not the benchmarks/ scripts.
    """
    return f"{LOGS}/benchmarks/{rule}/{name}.tsv"


# --- the config a rule passes to its subcommand --------------------------------------------------------------------
def _config_value(path):
    node = config
    for i, part in enumerate(path.split(".")):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(path.split(".")[:i]) or "the top level"
            raise ValueError(
                f"stage_config: no config key {path!r} ({part!r} is not under {where})"
            )
        node = node[part]
    return node


def stage_config(*paths):
    """JSON of only the config keys a rule's subcommand reads (dotted paths, e.g. "bench.ops", "seed").

    It is the rule's `params`, so editing a key that no rule reads (bench.roofline, the one-GPU check's) re-runs
    nothing, and a key that a rule does read makes Snakemake give "params changed" for exactly that rule. The
    subcommand validates what it gets and fills the schema's defaults for everything else, which it must not read.
    """
    picked = {}
    for path in paths:
        *parents, leaf = path.split(".")
        node = picked
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _config_value(path)
    return json.dumps(picked, sort_keys=True)


def keys_except(section, *excluded):
    """Dotted paths of every key of config section ``section`` except ``excluded``.

    Meant for a rule reading nearly a whole section. A key added to the section later reaches it (at worst an
    unneeded re-run) instead of silently arriving as the schema default.
    """
    return [
        f"{section}.{key}" for key in sorted(config[section]) if key not in excluded
    ]


# --- what each job asks the executor for (config `resources`; never the machine that plans the DAG) -----------
def job_resources(rule):
    """mem_mb and runtime (minutes) of a single-process rule, from config `resources.<rule>`."""
    res = config["resources"][rule]
    return {"mem_mb": res["mem_mb"], "runtime": res["runtime"]}


# A rule that starts P ranks (bench_run; later the probe and train rules) takes its threads, resources and launch
# line from one RankLayout (src/hsitp/launch.py), so what it asks for and what it starts cannot disagree.
# rank rules that share another rule's `resources` section (the equivalence checks are training jobs)
RESOURCES_OF = {"train_check": "train"}


def rank_resources_key(rule):
    """The `resources` section of a rank rule."""
    return RESOURCES_OF.get(rule, rule)


def launched_ranks(rule, wildcards):
    """Processes a rank job starts: P (wildcard), or 1 for train under train.equivalent (the single-process
    equivalent of the plan at P)."""
    equivalent = config["train"]["equivalent"] and rule == "train"
    return 1 if equivalent else int(wildcards.P)


def rank_layout_of(rule, section, wildcards):
    """The launched ranks (launched_ranks) of ``rule``: threads per rank from config
    ``<section>.threads_per_rank``, and memory, GPUs and ranks per node from ``resources.<rule>``.
    """
    res = config["resources"][rank_resources_key(rule)]
    return launch.rank_layout(
        launched_ranks(rule, wildcards),
        ranks_per_node=res["ranks_per_node"],
        threads_per_rank=config[section]["threads_per_rank"],
        mem_mb_per_rank=res["mem_mb_per_rank"],
        gpus_per_rank=res["gpus_per_rank"],
        key=f"resources.{rule}.ranks_per_node",
    )


RANK_RULES = (
    {}
)  # rank rule -> its config section (threads_per_rank), filled by rank_resources


# What a rank job asks the executor for, in its `message:` (the terminal line of a running job and of a dry run,
# which shows a rule's message instead of its resources): the keys every rank job carries (gpu, gres, mpi only
# where set, so not here; `snakemake -n` on a rule without a message lists them all).
RANK_REQUEST = (
    "asks for nodes={resources.nodes} tasks={resources.tasks} cpus_per_task={resources.cpus_per_task} "
    "mem_mb={resources.mem_mb} runtime={resources.runtime}"
)


def rank_threads(rule, section):
    """Snakemake ``threads`` of a rank job: P x threads_per_rank (never the cores of the host planning the DAG)."""
    return lambda wildcards: rank_layout_of(rule, section, wildcards).threads


def rank_resources(rule, section):
    """The job's resources (launch.RESOURCE_KEYS: mem_mb, nodes, tasks, cpus_per_task, gpu / gres, mpi, ...) and
    its runtime from ``resources.<rule>.runtime``."""

    RANK_RULES[rule] = section

    def one(key):
        return lambda wildcards: rank_layout_of(rule, section, wildcards).resources()[
            key
        ]

    return {key: one(key) for key in launch.RESOURCE_KEYS} | {
        "runtime": config["resources"][rank_resources_key(rule)]["runtime"]
    }


def rank_env(rule):
    """The conda environment of a rank rule: the CUDA build where resources.<rule>.gpus_per_rank > 0."""
    return (
        ENV_CUDA
        if config["resources"][rank_resources_key(rule)]["gpus_per_rank"] > 0
        else ENV
    )


def rank_launch(rule, section):
    """The start of the rank job's shell line (torchrun on one node, `hsitp launch` over several)."""
    return lambda wildcards: launch.launch_prefix(
        rank_layout_of(rule, section, wildcards)
    )


# --- before the first SLURM job is submitted: does every job fit a node of its partition? ----------------------
def resource_key(rule):
    """The `resources` section a single-process rule reads (report_* share `report`, the audit rules
    `cost_table`)."""
    if rule.startswith("report_"):
        return "report"
    if rule.startswith("audit"):
        return "cost_table"
    return rule


def job_request(job):
    """A job's per-node request and the config keys behind each amount (hsitp.cluster)."""
    from hsitp.cluster import request_from_resources

    name = job.rule.name
    label = ", ".join(f"{k}={v}" for k, v in job.wildcards_dict.items())
    if name in RANK_RULES:
        section = RANK_RULES[name]
        lay = rank_layout_of(name, section, job.wildcards)
        spread = config["resources"][rank_resources_key(name)]["ranks_per_node"]
        per = (
            f"x {lay.ranks_per_node} ranks per node; resources.{name}.ranks_per_node = "
            f"{'null' if spread is None else spread}"
        )
        keys = {
            "cpus": f"{section}.threads_per_rank = {lay.threads_per_rank} {per}",
            "mem": f"resources.{name}.mem_mb_per_rank = {lay.mem_mb_per_rank} {per}",
            "gpus": f"resources.{name}.gpus_per_rank = {lay.gpus_per_rank} {per}",
        }
    else:
        key = resource_key(name)
        threads = (
            f"resources.{key}.threads"
            if "threads" in config["resources"].get(key, {})
            else "threads: 1 in the rule"
        )
        keys = {
            "cpus": threads,
            "mem": f"resources.{key}.mem_mb",
            "gpus": "no GPU asked",
        }
    res = {
        k: job.resources.get(k)
        for k in ("cpus_per_task", "mem_mb", "gpu", "gres", "nodes", "slurm_partition")
    }
    return request_from_resources(name, label, res, job.threads, keys)


INVOCATION = (
    []
)  # the record of this snakemake call (hsitp.publish.jobs), set by onstart when jobs will run


def record_invocation():
    """Record this call's jobs and their benchmark files (`hsitp report jobs` reports one call, not a history)."""
    from hsitp.publish.jobs import start_invocation

    jobs = [
        (j.rule.name, str(j.benchmark) if j.benchmark else None)
        for j in workflow.dag.needrun_jobs()
    ]
    INVOCATION.append(start_invocation(Path(LOGS), jobs, sys.argv))


def finish_invocation():
    from hsitp.publish.jobs import finish_invocation as finish

    for record in INVOCATION:
        finish(record)


def audit_verdict():
    """The auditor's line, at the end of every call whose DAG holds the audit (onsuccess below): the
    present outputs re-checked against the reference (`hsitp audit verdict`: about a second, nothing written),
    PASS or FAIL with the claims' counts; a FAIL ends Snakemake with exit status 1. The README's audit command
    forces the audit job (--forcerun audit), so a finished run still prints it."""
    if not any(job.rule.name == "audit" for job in workflow.dag.jobs):
        return
    import subprocess

    verdict = subprocess.run(
        [
            "hsitp",
            "audit",
            "verdict",
            "--run-dir",
            RESULTS,
            "--reference",
            AUDIT_REFERENCE,
        ]
    )
    if verdict.returncode != 0:
        sys.exit(1)


onsuccess:
    finish_invocation()
    audit_verdict()


onstart:
    record_invocation()
    # Only for jobs that SLURM will run: a job larger than every node of its partition stays PENDING forever.
    if (
        workflow.executor_plugin is not None
        and workflow.executor_plugin.name == "slurm"
    ):
        from snakemake.exceptions import WorkflowError
        from hsitp.cluster import (
            ClusterFitError,
            fit_report,
            misfits,
            read_partitions,
        )

        jobs = [j for j in workflow.dag.needrun_jobs() if not j.is_local]
        try:
            lines = misfits([job_request(j) for j in jobs], read_partitions())
        except ClusterFitError as e:
            raise WorkflowError(f"hsitp: {e}")
        if lines:
            raise WorkflowError(f"hsitp: {fit_report(lines)}")


# --- targets --------------------------------------------------------------------------------------------------------
def data_targets():
    """One prepared netCDF per configured dataset."""
    return expand(result("data/{dataset}.nc"), dataset=config["datasets"])


COST_TABLES = ["rho", "ccr", "boundary", "scale", "plan"]
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


def audit_targets():
    """The claims table and the drift check against results/reference/smoke (rules in audit.smk)."""
    return [result("tables/paper_claims.csv"), result("audit/report.md")]


def audit_measured_inputs(wildcards):
    """The run's own files that the claims' measured sub-checks read, when the stages writing them run: the probe and
    bench files (audit.measured_run null: the audited run), and the training summary when the run is its own
    accuracy run (audit.accuracy_run, e.g. cpu-fair). The claims wait for them instead of calling them pending.
    """
    audit = config.get("audit") or {}
    own = []
    if not audit.get("measured_run"):
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


def partition_tags():
    """The file-name tags of the data.partition.draws partitions of each protocol ("" for partition 0, then
    _k1, _k2, ...; hsitp.names.partition_tag)."""
    from hsitp.names import partition_tag

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
    from hsitp.train.plan import trained_datasets

    return expand(
        result("tune/{dataset}/{plan}_{protocol}.nc"),
        dataset=trained_datasets(config),
        plan=config["tune"]["plans"],
        protocol=config["tune"]["protocols"],
    )


def probe_targets():
    """Measured per-rank memory and throughput of every plan, and the fake-tensor estimates."""
    return [
        result("probe/memory.nc"),
        result("probe/throughput.nc"),
        result("probe/estimate.nc"),
    ]


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
    from hsitp.train.plan import jobs
    from hsitp.train.recipe import best_groups

    keep = where or (lambda dataset, plan, protocol: True)
    if not tuned():
        return [j for j in jobs(config) if keep(j[0], j[1], j[5])]

    def groups_of(dataset, plan, protocol):
        if not keep(dataset, plan, protocol):
            return []
        path = checkpoints.tune.get(
            dataset=dataset, plan=plan, protocol=protocol
        ).output[0]
        return [best_groups(path)]

    return [j for j in jobs(config, groups_of=groups_of) if keep(j[0], j[1], j[5])]


def train_record_targets(where=None):
    """One per-epoch training record per (dataset, plan, N, P, g, protocol, seed, partition) of the `train` section
    (those whose (dataset, plan, protocol) passes ``where``)."""
    from hsitp.train.plan import run_name

    return [
        result(f"train/{job[0]}/{run_name(*job[1:])}.nc") for job in train_jobs(where)
    ]


def train_record_inputs():
    """The summary's training records as one named input function per (dataset, plan, protocol): Snakemake plans each
    one when its own tuning study has run, so tp's jobs (no g to choose) start with the studies and a D-CHAG
    plan's as soon as its study ends, not after the last study (which left a core idle: docs/measured.md).
    """
    from hsitp.train.plan import jobs

    cells = sorted({(job[0], job[1], job[5]) for job in jobs(config)})

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


def train_recipe_input(wildcards):
    """Under train.recipe tuned, the job's own tuning study (its recipe); else nothing."""
    if not tuned():
        return []
    return study_file(wildcards.dataset, wildcards.plan, wildcards.protocol)


def control_record_targets():
    """The untuned control (train.control under train.recipe tuned): one record per D-CHAG job on tp's recipe."""
    from hsitp.train.plan import control_jobs, run_name

    return [
        result(f"train/{job[0]}/control/{run_name(*job[1:])}.nc")
        for job in control_jobs(config)
    ]


def control_recipe_input(wildcards):
    """A control job's recipe: tp's tuning study on the job's protocol."""
    return study_file(wildcards.dataset, "tp", wildcards.protocol)


def control_summary_records(wildcards):
    """The control records and tp's own records (the control is paired with the same tp runs as the tuned cells)."""
    tp = train_record_targets(
        lambda dataset, plan, protocol: plan == "tp"
    )  # reads no study's checkpoint
    return control_record_targets() + tp


def train_check_targets():
    """Under train.equivalent: one P-rank check run per (plan, P, g), stopped after train.equivalence.epochs."""
    from hsitp.train.plan import check_runs, run_name

    return [
        result(f"train/{job[0]}/check/{run_name(*job[1:])}.nc")
        for job in check_runs(config)
    ]


def train_equivalence_inputs(wildcards):
    """The check runs and the single-process equivalents they are compared with."""
    from hsitp.train.plan import check_runs, equivalent_of, run_name

    checks = check_runs(config)
    pairs = sorted({equivalent_of(config, job) for job in checks})
    return train_check_targets() + [
        result(f"train/{job[0]}/{run_name(*job[1:])}.nc") for job in pairs
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


def train_page_inputs():
    """The train report page's inputs. Under train.recipe tuned its records are known only after tuning: call it
    from input functions (Snakemake re-plans after the tune checkpoints), as report_train does.
    """
    from hsitp.report import rules as report_rules

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


def train_summary_baselines(wildcards):
    """Baseline files on the datasets and protocols that were trained, every partition (the baseline rule's own
    grid)."""
    from hsitp.train.plan import jobs

    trained = {(job[0], job[5]) for job in jobs(config)}
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

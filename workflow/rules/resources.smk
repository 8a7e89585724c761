# What each job asks the executor for, from config `resources` (never the machine that plans the DAG): threads,
# memory, runtime, GPUs, nodes and tasks, and, for a job that starts ranks, its launch line and conda environment.
# job_request states a job's request per node for the SLURM fit check (hooks.smk).
from hsitp import launch


def job_resources(rule):
    """mem_mb and runtime (minutes) of a single-process rule, from config `resources.<rule>`."""
    res = config["resources"][rule]
    return {"mem_mb": res["mem_mb"], "runtime": res["runtime"]}


# A rule that starts P ranks (bench_run, probe_run, train, train_control, train_check) takes its threads, resources
# and launch line from one RankLayout (src/hsitp/launch.py), so what it asks for and what it starts cannot disagree.
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

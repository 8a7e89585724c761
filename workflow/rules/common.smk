# Included first by the Snakefile: the config's check, the wildcards every rule shares, where a run's files live,
# and the config keys each subcommand is given. The other shared files hold no rules (Snakemake's lint wants
# functions apart): targets.smk (each stage's final files and the input functions), resources.smk (what a job
# asks the executor for) and hooks.smk (onstart / onsuccess: the call's record, the SLURM fit check, the verdict).
import json
import os
import sys
from pathlib import Path

from hsitp.config import read_config_file
from hsitp.errors import HsitpError
from hsitp.names import PARTITION_TAG_PATTERN, PLAN_NAMES, PROTOCOLS
from hsitp.preflight import error_log_path, one_line, preflight
from hsitp.train.settings import TrainSettings

# One check when the DAG is built, before any job: the schema (filling its defaults), then what cannot exist, then
# every stage's sizes at every P it will run (hsitp.preflight). The same hsitp.config.validate_config checks every
# subcommand's config, without Snakemake; snakemake.utils.validate is not used (docs/stages.md, "The workflow").
# A refusal is one line naming the key; the full text goes to logs/<run>/config_error.log. Each config file is read
# again by hsitp's own reader first: Snakemake's YAML loader keeps the last of two equal keys without a word.
try:
    for path in workflow.configfiles:
        read_config_file(path)
    CONFIG = preflight(config)  # hsitp.sections.Config
except HsitpError as exc:
    print(one_line(exc, error_log_path(config)), file=sys.stderr)
    sys.exit(2)
# The rules pass keys on as JSON (stage_config): the config as validated, the schema's defaults filled in. The
# training targets read the train section typed (hsitp.train.plan).
config.update(CONFIG.as_json())
TRAIN = TrainSettings.from_config(CONFIG)


# The rules call `hsitp` and `python` (torchrun's line) by name: the bin folder of the Python running Snakemake, whose
# hsitp built this DAG, goes first on PATH, so `.venv/bin/snakemake ...` runs without the venv activated (else: exit
# 127 in a job's log) and never runs another installation's hsitp. A conda environment's activation still goes first.
envvars:
    "PATH",


os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]
)

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


# What each wildcard of a file name matches, in every rule. Where a rule makes fewer files it narrows one (data_fetch
# and data_prepare take a registry name only, the others any prepared scene, e.g. the tests' synthetic one;
# train_control the D-CHAG plans, train_check the parallel ones, tune the compared ones).
wildcard_constraints:
    dataset=r"[A-Za-z0-9_]+",
    plan="|".join(PLAN_NAMES),
    protocol="|".join(PROTOCOLS),
    part=PARTITION_TAG_PATTERN,  # the partition's tag: "" for partition 0, _k1, _k2, ...
    seed=r"\d+",
    N=r"\d+",  # a crop's spatial tokens
    P=r"\d+",  # ranks
    g=r"\d+",  # D-CHAG's band groups
    launch=r"\d+",  # a microbenchmark's launch


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

# hsitp: download and prepare datasets -> cost-model tables -> microbenchmarks (measured CCR, calibration, model vs
# measured) -> memory probe -> training (every plan) and the classical baseline -> notebooks, figures, tables ->
# the paper's claims and the drift audit. This file sets the config, names the final targets and includes the
# rules: common.smk validates the config, sets the shared wildcards and builds every path under results/<run>/;
# targets.smk names each stage's files, resources.smk what a job asks for, hooks.smk what runs around the jobs;
# one file per stage holds its rules, each calling one `hsitp` subcommand.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/targets.smk"
include: "workflow/rules/resources.smk"
include: "workflow/rules/hooks.smk"


rule all:
    input:
        all_targets(),
        REPORT_TARGETS,


include: "workflow/rules/data.smk"
include: "workflow/rules/cost.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/baseline.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/probe.smk"

# hsitp: download and prepare datasets -> cost-model tables -> microbenchmarks (measured CCR, calibration,
# model vs measured). This file sets the config, names the final targets and includes the rules; common.smk
# validates the config and builds every path under results/<run>/; each rule calls one `hsitp` subcommand.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


rule all:
    input:
        all_targets(),


include: "workflow/rules/data.smk"
include: "workflow/rules/cost.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/probe.smk"

# hsitp: download and prepare datasets -> CCR model tables -> microbenchmarks -> training -> report.
# This file sets the config, validates it (common.smk), names the final targets and includes the rules;
# each rule calls one `hsitp` subcommand.


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


rule all:
    input:
        all_targets(),
        lambda wildcards: REPORT_TARGETS,  # report.smk, included below


include: "workflow/rules/data.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/report.smk"

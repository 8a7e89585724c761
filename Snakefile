# hsitp: download and prepare datasets -> CCR model tables -> microbenchmarks -> training -> report.
# This file only sets the config, validates it and includes the rules; each rule calls one `hsitp` subcommand.


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/bench.smk"

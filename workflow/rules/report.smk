# Report stage: one papermill notebook per stage (notebooks/{data,cost,bench,probe,train}.ipynb, run by `hsitp report notebook`)
# reads that stage's netCDF and writes its figures (results/<run>/figures/, PNG + PDF) and tables
# (results/<run>/tables/, CSV + Markdown + LaTeX), the executed notebook and its HTML (results/<run>/notebooks/).
# The rules take the notebooks and src/hsitp/report/ as inputs, so editing either re-runs rendering jobs only.
# `snakemake --report results/<run>/report.html` collects every figure and table, with the captions in
# workflow/report/captions/ (each names the hardware, read from the stage's files: params.hardware).
from hsitp.report import rules as report_rules
from hsitp.report.labels import stage_hardware


report: "../report/workflow.rst"


# Upstream files from the stages' own target functions.
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
# Pages of the stages `stages` lists (a report page per stage that has one).
REPORT_TARGETS = report_rules.targets(
    RESULTS,
    config["datasets"],
    [s for s in report_rules.STAGES if s in config["stages"]],
)


# Rendering takes seconds: run it where Snakemake runs, never as a cluster job.
localrules:
    report_data,
    report_cost,
    report_bench,
    report_probe,
    report_train,


rule report_data:
    input:
        **REPORT_INPUTS["data"],
        notebook="notebooks/data.ipynb",
        code=report_rules.code_inputs("data"),
    output:
        report_rules.stage_files("data", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("data", RESULTS),
    log:
        log_file("report/data.log"),
    benchmark:
        benchmark_file("report_data", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("report"),
    params:
        nb=report_rules.notebook_params(REPORT_INPUTS["data"], RESULTS),
        hardware=lambda wildcards, input: stage_hardware("data", input.datasets),
    shell:
        "hsitp report notebook data --notebook {input.notebook:q} --params-json {params.nb:q}"
        " --out {output.notebook:q} --html {output.html:q} > {log} 2>&1"


rule report_cost:
    input:
        **REPORT_INPUTS["cost"],
        notebook="notebooks/cost.ipynb",
        code=report_rules.code_inputs("cost"),
    output:
        report_rules.stage_files("cost", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("cost", RESULTS),
    log:
        log_file("report/cost.log"),
    benchmark:
        benchmark_file("report_cost", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("report"),
    params:
        nb=report_rules.notebook_params(REPORT_INPUTS["cost"], RESULTS),
        hardware=lambda wildcards, input: stage_hardware(
            "cost", [input.rho, input.ccr, input.boundary, input.scale, input.plan]
        ),
    shell:
        "hsitp report notebook cost --notebook {input.notebook:q} --params-json {params.nb:q}"
        " --out {output.notebook:q} --html {output.html:q} > {log} 2>&1"


rule report_bench:
    input:
        **REPORT_INPUTS["bench"],
        notebook="notebooks/bench.ipynb",
        code=report_rules.code_inputs("bench"),
    output:
        report_rules.stage_files("bench", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("bench", RESULTS),
    log:
        log_file("report/bench.log"),
    benchmark:
        benchmark_file("report_bench", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("report"),
    params:
        nb=report_rules.notebook_params(REPORT_INPUTS["bench"], RESULTS),
        hardware=lambda wildcards, input: stage_hardware(
            "bench", [input.model_vs_measured, input.microbench]
        ),
    shell:
        "hsitp report notebook bench --notebook {input.notebook:q} --params-json {params.nb:q}"
        " --out {output.notebook:q} --html {output.html:q} > {log} 2>&1"


rule report_probe:
    input:
        **REPORT_INPUTS["probe"],
        notebook="notebooks/probe.ipynb",
        code=report_rules.code_inputs("probe"),
    output:
        report_rules.stage_files("probe", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("probe", RESULTS),
    log:
        log_file("report/probe.log"),
    benchmark:
        benchmark_file("report_probe", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("report"),
    params:
        nb=report_rules.notebook_params(REPORT_INPUTS["probe"], RESULTS),
        hardware=lambda wildcards, input: stage_hardware(
            "probe", [input.memory, input.throughput, input.estimate]
        ),
    shell:
        "hsitp report notebook probe --notebook {input.notebook:q} --params-json {params.nb:q}"
        " --out {output.notebook:q} --html {output.html:q} > {log} 2>&1"


rule report_train:
    input:
        unpack(lambda wildcards: report_rules.rule_inputs(train_page_inputs())),
        notebook="notebooks/train.ipynb",
        code=report_rules.code_inputs("train"),
    output:
        report_rules.stage_files("train", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("train", RESULTS),
    log:
        log_file("report/train.log"),
    benchmark:
        benchmark_file("report_train", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("report"),
    params:
        nb=lambda wildcards: report_rules.notebook_params(train_page_inputs(), RESULTS),
        # (no records yet while the DAG waits on the tune checkpoints)
        hardware=lambda wildcards, input: stage_hardware(
            "train", input.get("records", [])
        ),
    shell:
        "hsitp report notebook train --notebook {input.notebook:q} --params-json {params.nb:q}"
        " --out {output.notebook:q} --html {output.html:q} > {log} 2>&1"

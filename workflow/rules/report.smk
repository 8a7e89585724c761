# Report stage: one papermill notebook per stage (notebooks/{data,cost,bench,probe,train}.ipynb, run by `hsitp report notebook`)
# reads that stage's netCDF and writes its figures (results/<run>/figures/, PNG + PDF) and tables
# (results/<run>/tables/, CSV + Markdown + LaTeX), the executed notebook and its HTML (results/<run>/notebooks/).
# The rules take the notebooks and src/hsitp/report/ as inputs, so editing either re-runs rendering jobs only.
# `snakemake --report results/<run>/report.html` collects every figure and table, with the captions in
# workflow/report/captions/ (each names the hardware, read from the stage's files: params.hardware).
from hsitp.report import rules as report_rules


report: "../report/workflow.rst"


# Rendering takes seconds: run it where Snakemake runs, never as a cluster job.
localrules:
    report_data,
    report_cost,
    report_bench,
    report_probe,
    report_train,


# One rule per page, all rule report_data's but for the stage (page_inputs, page_params: targets.smk).
rule report_data:
    input:
        **page_inputs("data"),
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
        **page_params("data"),
    shell:
        "hsitp report notebook {params.stage} --notebook {input.notebook:q} --params-json {params.nb:q}"
        " --out {output.notebook:q} --html {output.html:q} > {log} 2>&1"


use rule report_data as report_cost with:
    input:
        **page_inputs("cost"),
    output:
        report_rules.stage_files("cost", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("cost", RESULTS),
    log:
        log_file("report/cost.log"),
    benchmark:
        benchmark_file("report_cost", "job")
    params:
        **page_params("cost"),


use rule report_data as report_bench with:
    input:
        **page_inputs("bench"),
    output:
        report_rules.stage_files("bench", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("bench", RESULTS),
    log:
        log_file("report/bench.log"),
    benchmark:
        benchmark_file("report_bench", "job")
    params:
        **page_params("bench"),


use rule report_data as report_probe with:
    input:
        **page_inputs("probe"),
    output:
        report_rules.stage_files("probe", RESULTS, config["datasets"], report),
        **report_rules.notebook_files("probe", RESULTS),
    log:
        log_file("report/probe.log"),
    benchmark:
        benchmark_file("report_probe", "job")
    params:
        **page_params("probe"),


# The train page's records are known only once the tune checkpoints ran (train.recipe tuned): its inputs come from
# an input function.
use rule report_data as report_train with:
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
    params:
        **page_params("train"),

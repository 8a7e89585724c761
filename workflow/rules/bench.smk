# Microbenchmarks: one torchrun launch per P -> microbench.nc -> calibration.nc -> model_vs_measured.nc.
# Timing rules hold the `bench_slot` resource; its default total of 1 (set below unless given on the command
# line, e.g. `--resources bench_slot=1`) means two benchmarks never run at once and skew each other; a timing
# run also claims every core Snakemake was given, so no other job shares the machine while it measures (the
# ranks themselves use bench.threads_per_rank threads each, recorded in the output).
if "bench_slot" not in workflow.global_resources:
    workflow.global_resources["bench_slot"] = 1


wildcard_constraints:
    P=r"\d+",


rule bench_run:
    output:
        "results/bench/partial/microbench_P{P}.nc",
    log:
        "logs/bench/run_P{P}.log",
    conda:
        ENV
    threads: lambda wildcards: workflow.cores
    resources:
        bench_slot=1,
    params:
        cfg=stage_config("bench", "parallel"),
    shell:
        "torchrun --standalone --nnodes 1 --nproc_per_node {wildcards.P} -m hsitp bench run"
        " --world-size {wildcards.P} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule bench_merge:
    input:
        expand(
            "results/bench/partial/microbench_P{P}.nc",
            P=config["bench"]["world_sizes"],
        ),
    output:
        "results/bench/microbench.nc",
    log:
        "logs/bench/merge.log",
    conda:
        ENV
    params:
        cfg=stage_config("bench", "parallel"),
    shell:
        "hsitp bench merge {input:q} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule bench_calibrate:
    input:
        "results/bench/microbench.nc",
    output:
        "results/bench/calibration.nc",
    log:
        "logs/bench/calibrate.log",
    conda:
        ENV
    params:
        cfg=stage_config("bench", "parallel"),
    shell:
        "hsitp bench calibrate --microbench {input:q} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule bench_compare:
    input:
        microbench="results/bench/microbench.nc",
        calibration="results/bench/calibration.nc",
    output:
        "results/bench/model_vs_measured.nc",
    log:
        "logs/bench/compare.log",
    conda:
        ENV
    params:
        cfg=stage_config("bench", "parallel"),
    shell:
        "hsitp bench compare --microbench {input.microbench:q} --calibration {input.calibration:q}"
        " --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"

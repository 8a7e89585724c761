# Memory probe under results/<run>/probe/: one torchrun launch per P -> memory.nc + throughput.nc (measured, with
# the memory model beside), and estimate.nc (paper-scale configs with fake tensors, one process). Probe launches
# time steps, so they hold the `bench_slot` resource like the microbenchmarks (never two timing jobs at once).
# Each launch ends with the throughput phase: every plan at its P timed interleaved (hsitp.bench.interleave).
# probe.match_train: the probe's sizes must equal the trained models' (checked with every P when the DAG is built,
# hsitp.preflight: one line naming both keys otherwise).

# What `hsitp probe run` reads: the probe section but the DAG's world_sizes and match_train and the estimate's settings.
PROBE_RUN_KEYS = [
    "seed",
    "parallel.backend",
    "parallel.timeout_s",
    *keys_except("probe", "world_sizes", "estimate", "match_train"),
]
PROBE_MERGE_KEYS = PROBE_RUN_KEYS
PROBE_ESTIMATE_KEYS = ["seed", "probe.estimate"]


rule probe_run:
    output:
        result("probe/partial/probe_P{P}.nc"),
    log:
        log_file("probe/run_P{P}.log"),
    benchmark:
        benchmark_file("probe_run", "P{P}")
    conda:
        rank_env("probe_run")
    threads: rank_threads("probe_run", "probe")
    resources:
        **rank_resources("probe_run", "probe"),
        bench_slot=1,
    params:
        cfg=stage_config(*PROBE_RUN_KEYS),
        launch=rank_launch("probe_run", "probe"),
    message:
        f"probe_run: P = {{wildcards.P}} ranks, {RANK_REQUEST}; "
        "minutes, quiet here; follow it with: tail -f {log}"
    shell:
        "{params.launch} probe run"
        " --world-size {wildcards.P} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule probe_merge:
    input:
        expand(
            result("probe/partial/probe_P{P}.nc"),
            P=config["probe"]["world_sizes"],
        ),
    output:
        memory=result("probe/memory.nc"),
        throughput=result("probe/throughput.nc"),
    log:
        log_file("probe/merge.log"),
    benchmark:
        benchmark_file("probe_merge", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("probe_merge"),
    params:
        cfg=stage_config(*PROBE_MERGE_KEYS),
    shell:
        "hsitp probe merge {input:q} --memory-out {output.memory:q} --throughput-out {output.throughput:q}"
        " --config-json {params.cfg:q} > {log} 2>&1"


rule probe_estimate:
    output:
        result("probe/estimate.nc"),
    log:
        log_file("probe/estimate.log"),
    benchmark:
        benchmark_file("probe_estimate", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("probe_estimate"),
    params:
        cfg=stage_config(*PROBE_ESTIMATE_KEYS),
    shell:
        "hsitp probe estimate --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"

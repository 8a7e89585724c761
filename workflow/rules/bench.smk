# Microbenchmarks under results/<run>/bench/: bench.launches independent torchrun launches per P (each its own
# job, so the run-to-run spread is measured, not assumed) -> microbench.nc -> calibration.nc -> model_vs_measured.nc. Timing rules hold the `bench_slot` resource; its default total of 1 (set below unless given
# on the command line, e.g. `--resources bench_slot=1`) means two benchmarks never run at once and skew each
# other. A timing job at P asks for P x bench.threads_per_rank threads (the ranks' torch threads, recorded in the
# output), so on a machine with that many cores nothing else runs beside it.
# workflow.global_resources is a Snakemake internal, kept: no public feature sets a default limit that --resources
# can still override (a profile's `resources:` is dropped by any --resources on the command line).
if "bench_slot" not in workflow.global_resources:
    workflow.global_resources["bench_slot"] = 1

# What `hsitp bench run` reads (bench/runner.py, ops.py, model.py): every bench key except the DAG's own
# world_sizes (each launch gets --world-size), the fit (calibrate's) and the one-GPU checks' shard and roofline;
# and the layers' settings from `parallel`. Editing bench.roofline or bench.fit re-runs no timing job.
BENCH_RUN_KEYS = [
    "seed",
    "parallel.backend",
    "parallel.timeout_s",
    "parallel.heads",
    "parallel.head_padding",
    *keys_except("bench", "world_sizes", "launches", "fit", "shard", "roofline"),
]
# merge reads no config; it records the sweep its inputs were measured with in its provenance.
BENCH_MERGE_KEYS = BENCH_RUN_KEYS
# calibrate: the seeded choice of held-out points (bench/calibrate.py); compare: nothing, all it needs is in its two inputs.
BENCH_CALIBRATE_KEYS = ["seed", "bench.fit"]
BENCH_COMPARE_KEYS = []


rule bench_run:
    output:
        result("bench/partial/microbench_P{P}_l{launch}.nc"),
    log:
        log_file("bench/run_P{P}_l{launch}.log"),
    benchmark:
        benchmark_file("bench_run", "P{P}_l{launch}")
    conda:
        rank_env("bench_run")
    threads: rank_threads("bench_run", "bench")
    # One node: one task in which torchrun --standalone starts the P ranks (the SLURM executor runs a non-MPI job
    # as `srun -n1`, so P tasks would confine the ranks to one task's CPUs). Several nodes
    # (resources.bench_run.ranks_per_node < P): one task per node, `hsitp launch` starts torchrun on each.
    # src/hsitp/launch.py derives both the resources and the launch line (torchrun through `python -m
    # hsitp.torchrun`, which exits 130/143 without a traceback when the job is cancelled). Under SLURM a timing
    # job has its nodes to itself (--exclusive; other executors ignore slurm_extra); locally bench_slot keeps
    # timing jobs apart.
    resources:
        **rank_resources("bench_run", "bench"),
        bench_slot=1,
        slurm_extra="--exclusive",
    params:
        launch=rank_launch("bench_run", "bench"),
        cfg=stage_config(*BENCH_RUN_KEYS),
    message:
        f"bench_run: P = {{wildcards.P}} ranks, launch {{wildcards.launch}}, {RANK_REQUEST} slurm_extra={{resources.slurm_extra}}; "
        "minutes, quiet here; follow it with: tail -f {log}"
    shell:
        "{params.launch} bench run --world-size {wildcards.P} --launch {wildcards.launch} --out {output:q}"
        " --config-json {params.cfg:q}"
        " > {log} 2>&1"


rule bench_merge:
    input:
        expand(
            result("bench/partial/microbench_P{P}_l{launch}.nc"),
            P=config["bench"]["world_sizes"],
            launch=range(config["bench"]["launches"]),
        ),
    output:
        result("bench/microbench.nc"),
    log:
        log_file("bench/merge.log"),
    benchmark:
        benchmark_file("bench_merge", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("bench_merge"),
    params:
        cfg=stage_config(*BENCH_MERGE_KEYS),
    shell:
        "hsitp bench merge {input:q} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule bench_calibrate:
    input:
        result("bench/microbench.nc"),
    output:
        result("bench/calibration.nc"),
    log:
        log_file("bench/calibrate.log"),
    benchmark:
        benchmark_file("bench_calibrate", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("bench_calibrate"),
    params:
        cfg=stage_config(*BENCH_CALIBRATE_KEYS),
    shell:
        "hsitp bench calibrate --microbench {input:q} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule bench_compare:
    input:
        microbench=result("bench/microbench.nc"),
        calibration=result("bench/calibration.nc"),
    output:
        result("bench/model_vs_measured.nc"),
    log:
        log_file("bench/compare.log"),
    benchmark:
        benchmark_file("bench_compare", "job")
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("bench_compare"),
    params:
        cfg=stage_config(*BENCH_COMPARE_KEYS),
    shell:
        "hsitp bench compare --microbench {input.microbench:q} --calibration {input.calibration:q}"
        " --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"

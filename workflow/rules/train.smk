# Training under results/<run>/train/DATASET/: one torchrun launch of P ranks per (dataset, plan, P, g, split,
# seed). Checkpoints live beside the records in checkpoints/<name>/ and are not rule outputs (Snakemake would
# delete them before a re-run, and a re-run resumes from them). A P the model does not fit is refused when the
# DAG is built (hsitp.train.plan.check_jobs, from the registry) and again by `hsitp train` before its runtime
# starts. Training jobs hold `bench_slot` too: timings never overlap.
from hsitp.train.plan import check_jobs, jobs

check_jobs(config)

# What `hsitp train` reads: every train key but the ones that shape the DAG (each job gets its own dataset, plan,
# P, g, split, seed on the command line), and the process-group settings.
TRAIN_KEYS = [
    "parallel.backend",
    "parallel.timeout_s",
    *keys_except(
        "train", "datasets", "plans", "world_sizes", "groups", "splits", "seeds"
    ),
]


rule train:
    input:
        result("data/{dataset}.nc"),
    output:
        result("train/{dataset}/{plan}_P{P}_g{g}_{split}_s{seed}.nc"),
    log:
        log_file("train/{dataset}/{plan}_P{P}_g{g}_{split}_s{seed}.log"),
    wildcard_constraints:
        dataset=r"[A-Za-z0-9_]+",
        plan="dense|tp|dchag_l|dchag_c|token",
        g=r"\d+",
        split="random|block",
        seed=r"\d+",
    conda:
        rank_env("train")
    threads: rank_threads("train", "train")
    resources:
        **rank_resources("train", "train"),
        bench_slot=1,
    params:
        cfg=stage_config(*TRAIN_KEYS),
        launch=rank_launch("train", "train"),
    shell:
        "{params.launch} train {input:q} --plan {wildcards.plan} --world-size {wildcards.P}"
        " --groups {wildcards.g} --split {wildcards.split} --seed {wildcards.seed} --out {output:q}"
        " --config-json {params.cfg:q} > {log} 2>&1"


# Mean +- std over seeds per (dataset, plan, P, g, split), plan-minus-tp accuracy, the baseline beside it.
rule train_summary:
    input:
        records=train_record_targets(),
        baselines=train_summary_baselines,
    output:
        result("train/summary.nc"),
    log:
        log_file("train/summary.log"),
    conda:
        ENV
    resources:
        **job_resources("train_summary"),
    shell:
        "hsitp train summary {input.records:q} --baseline {input.baselines:q} --out {output:q} > {log} 2>&1"

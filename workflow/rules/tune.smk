# Tuning under results/<run>/tune/DATASET/: one Optuna study per (dataset, plan, protocol) with the same budget
# (tune.trials trials of tune.epochs x tune.steps_per_epoch steps) and search space for every plan, scored on
# validation pixels only. The study's journal (PLAN_PROTOCOL.journal) and its trials' checkpoints (trials/) live
# beside the netCDF and are not rule outputs: a killed study resumes from them.
from hsitp.names import COMPARED_PLANS
from hsitp.train.plan import dataset_crops

# What `hsitp tune` reads: the tune section, the train keys its trials inherit (the model, the crops, the recipe's
# ingredients, how a job runs), the master seed and the process-group settings. Not the job matrix nor the keys a trial sets itself
# (lr, schedule, sampling, epochs, validation, ...): changing those must not re-run a finished study.
TUNE_KEYS = [
    "seed",
    "tune",
    "parallel.backend",
    "parallel.timeout_s",
    *(
        f"train.{k}"
        for k in (
            "crops",
            "model",
            "batch",
            "augment",
            "augmentation",
            "tta",
            "ema",
            "pretrain",
            "device",
            "threads_per_rank",
            "deterministic",
            "checkpoint",
            "debug",
        )
    ),
]


# A checkpoint: under train.recipe tuned the D-CHAG training jobs' g is the study's best, known when it has run.
checkpoint tune:
    input:
        result("data/{dataset}.nc"),
    output:
        result("tune/{dataset}/{plan}_{protocol}.nc"),
    log:
        log_file("tune/{dataset}/{plan}_{protocol}.log"),
    benchmark:
        benchmark_file("tune", "{dataset}/{plan}_{protocol}")
    wildcard_constraints:
        plan="|".join(COMPARED_PLANS),
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("tune"),
    params:
        cfg=stage_config(*TUNE_KEYS),
        tokens=lambda wildcards: dataset_crops(TRAIN, wildcards.dataset)[0][1],
    message:
        "tune: {wildcards.dataset} {wildcards.plan} {wildcards.protocol}, {config[tune][trials]} trials; "
        "a line per trial in {log}"
    shell:
        "hsitp tune {input:q} --plan {wildcards.plan} --protocol {wildcards.protocol} --tokens {params.tokens}"
        " --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"

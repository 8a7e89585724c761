# Training under results/<run>/train/DATASET/: one torchrun launch of P ranks per (dataset, crop N, plan, P, g,
# protocol, partition, seed); N (the crop's tokens, an entry of train.crops) is in the file name and the crop's patch
# is on the command line. The partition (one of data.partition.draws per protocol) is the wildcard `part`: "" for
# partition 0 (the names of runs with one partition), _kK for partition K. Checkpoints live beside the records in checkpoints/<name>/ and are not rule outputs (Snakemake
# would delete them before a re-run, and a re-run resumes from them). A P the model does not fit, or a crop larger
# than the scene, is refused when the DAG is built (hsitp.preflight: hsitp.train.plan.check_jobs, from the registry) and again by
# `hsitp train` before its runtime starts. Training jobs hold `bench_slot` too: timings never overlap. Under
# train.equivalent (accuracy runs) each job trains its plan's single-process equivalent on 1 rank and holds no
# bench_slot; train_check runs each (plan, P) for real on P ranks for a few epochs, train_equivalence compares them.
from hsitp.names import DCHAG_PLANS, PARALLEL_PLANS, partition_of_tag
from hsitp.train.plan import crop_patch

# What `hsitp train` reads: the master seed, every train key but the ones that shape the DAG (each job gets its own dataset, crop,
# plan, P, g, protocol, seed on the command line), and the process-group settings.
TRAIN_KEYS = [
    "seed",  # draws the validation pixels (train.validation); part of the recipe hash
    "parallel.backend",
    "parallel.timeout_s",
    *keys_except(
        "train",
        "datasets",
        "crops",
        "plans",
        "world_sizes",
        "groups",
        "protocols",
        "seeds",
        "control",
    ),
]

# A job's file stem (hsitp.train.plan.run_name): train/DATASET/STEM.nc, its log and benchmark named alike. A check
# run trains partition 0 only: its stem has no partition tag.
STEM = "{plan}_N{N}_P{P}_g{g}_{protocol}{part}_s{seed}"
CHECK_STEM = "{plan}_N{N}_P{P}_g{g}_{protocol}_s{seed}"


rule train:
    input:
        data=result("data/{dataset}.nc"),
        recipe=train_recipe_input,
    output:
        result(f"train/{{dataset}}/{STEM}.nc"),
    log:
        log_file(f"train/{{dataset}}/{STEM}.log"),
    benchmark:
        benchmark_file("train", f"{{dataset}}/{STEM}")
    conda:
        rank_env("train")
    threads: rank_threads("train", "train")
    resources:
        **rank_resources("train", "train"),
        bench_slot=0 if config["train"]["equivalent"] else 1,
    params:
        cfg=stage_config(*TRAIN_KEYS),
        ranks=lambda wildcards: launched_ranks("train", wildcards),
        patch=lambda wildcards: crop_patch(TRAIN, wildcards.dataset, int(wildcards.N)),
        launch=rank_launch("train", "train"),
        partition=lambda wildcards: partition_of_tag(wildcards.part),
        recipe=lambda wildcards, input: (
            f"--recipe {input.recipe}" if input.recipe else ""
        ),
    message:
        "train: {wildcards.dataset} {wildcards.plan} N={wildcards.N} P={wildcards.P} g={wildcards.g}"
        f" {{wildcards.protocol}}{{wildcards.part}} seed {{wildcards.seed}}, {RANK_REQUEST}; "
        "minutes, quiet here; follow it with: tail -f {log}"
    shell:
        "{params.launch} train {input.data:q} --plan {wildcards.plan} --tokens {wildcards.N} --patch {params.patch}"
        " --world-size {wildcards.P} --ranks {params.ranks} --groups {wildcards.g} --protocol {wildcards.protocol}"
        " --partition {params.partition} --seed {wildcards.seed} {params.recipe} --out {output:q}"
        " --config-json {params.cfg:q} > {log} 2>&1"


# The untuned control of train.recipe tuned (train.control): a D-CHAG job trained on tp's tuned recipe on its protocol,
# at its own g, as the plans were compared before each had its own recipe. Rule train's job but for its files, its
# plans and its recipe (`--recipe-plan tp`: the study's best trial applied as tp's).
use rule train as train_control with:
    input:
        data=result("data/{dataset}.nc"),
        recipe=control_recipe_input,
    output:
        result(f"train/{{dataset}}/control/{STEM}.nc"),
    log:
        log_file(f"train/{{dataset}}/control/{STEM}.log"),
    benchmark:
        benchmark_file("train_control", f"{{dataset}}/{STEM}")
    wildcard_constraints:
        plan="|".join(DCHAG_PLANS),
    params:
        recipe=lambda wildcards, input: f"--recipe {input.recipe} --recipe-plan tp",
    message:
        "train_control: {wildcards.dataset} {wildcards.plan} on tp's recipe N={wildcards.N} P={wildcards.P}"
        f" g={{wildcards.g}} {{wildcards.protocol}}{{wildcards.part}} seed {{wildcards.seed}}, {RANK_REQUEST}; "
        "minutes, quiet here; follow it with: tail -f {log}"


# One real P-rank run per (plan, P >= 2, g) under train.equivalent, on the whole run's LR schedule, stopped after
# train.equivalence.epochs: it holds bench_slot (its tokens/s and memory are the plan's own). Rule train's command on
# P ranks (--ranks and --partition at their defaults: P, 0) on the config's recipe (hsitp.config.check_run refuses
# the checks under train.recipe tuned); not `use rule train`: a changed train command would re-run every finished
# training job (Snakemake's "code has changed" trigger).
rule train_check:
    input:
        result("data/{dataset}.nc"),
    output:
        result(f"train/{{dataset}}/check/{CHECK_STEM}.nc"),
    log:
        log_file(f"train/{{dataset}}/check/{CHECK_STEM}.log"),
    benchmark:
        benchmark_file("train_check", f"{{dataset}}/{CHECK_STEM}")
    wildcard_constraints:
        plan="|".join(PARALLEL_PLANS),
    conda:
        rank_env("train_check")
    threads: rank_threads("train_check", "train")
    resources:
        **rank_resources("train_check", "train"),
        bench_slot=1,
    params:
        cfg=stage_config(*TRAIN_KEYS),
        patch=lambda wildcards: crop_patch(TRAIN, wildcards.dataset, int(wildcards.N)),
        epochs=config["train"]["equivalence"]["epochs"],
        launch=rank_launch("train_check", "train"),
    message:
        "train_check: {wildcards.dataset} {wildcards.plan} P={wildcards.P} g={wildcards.g} for"
        f" {{params.epochs}} epochs, {RANK_REQUEST}; follow it with: tail -f {{log}}"
    shell:
        "{params.launch} train {input:q} --plan {wildcards.plan} --tokens {wildcards.N} --patch {params.patch}"
        " --world-size {wildcards.P} --groups {wildcards.g} --protocol {wildcards.protocol} --seed {wildcards.seed}"
        " --stop-after {params.epochs} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


# Each check run against its single-process equivalent at the check epoch (OA within train.equivalence.tolerance).
rule train_equivalence:
    input:
        train_equivalence_inputs,
    output:
        result("train/equivalence.nc"),
    log:
        log_file("train/equivalence.log"),
    benchmark:
        benchmark_file("train_equivalence", "job")
    conda:
        ENV
    resources:
        **job_resources("train_summary"),
    params:
        tolerance=config["train"]["equivalence"]["tolerance"],
    shell:
        "hsitp train equivalence {input:q} --tolerance {params.tolerance} --out {output:q} > {log} 2>&1"


# Mean +- std over seeds per (dataset, plan, P, g, protocol, N), plan-minus-tp accuracy at the same N, the baseline
# beside it.
rule train_summary:
    input:
        **train_record_inputs(),
        baselines=train_summary_baselines,
    output:
        result("train/summary.nc"),
    log:
        log_file("train/summary.log"),
    benchmark:
        benchmark_file("train_summary", "job")
    conda:
        ENV
    resources:
        **job_resources("train_summary"),
    params:
        records=lambda wildcards, input: named_inputs(input, "records_"),
        margin=config["train"]["verdict"]["margin"],
        level=config["train"]["verdict"]["level"],
    shell:
        "hsitp train summary {params.records:q} --baseline {input.baselines:q} --margin {params.margin}"
        " --level {params.level} --out {output:q} > {log} 2>&1"


# The untuned control's summary: its D-CHAG cells on tp's recipe against the same tp runs (train/summary.nc's tp).
use rule train_summary as train_control_summary with:
    input:
        records=control_summary_records,
        baselines=train_summary_baselines,
    output:
        result("train/control_summary.nc"),
    log:
        log_file("train/control_summary.log"),
    benchmark:
        benchmark_file("train_control_summary", "job")
    params:
        records=lambda wildcards, input: input.records,

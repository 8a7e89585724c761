# Classical baseline: RBF SVM and random forest on pixel spectra, tuned on the train pixels of one accuracy protocol's
# partition of the prepared file and scored on its test pixels ->
# results/<run>/baseline/{dataset}_{protocol}{part}_s{seed}.nc, part "" for partition 0 and _kK for partition K.
# The seed and the partition are wildcards, so adding a seed to baseline.seeds, or raising data.partition.draws,
# runs only the new jobs.
from hsitp.names import partition_of_tag

# What the grid search reads (baseline/classical.py); the block size comes from the prepared file, not the config.
BASELINE_KEYS = ["baseline.methods", "baseline.cv_folds", "baseline.svm", "baseline.rf"]


rule baseline:
    input:
        result("data/{dataset}.nc"),
    output:
        result("baseline/{dataset}_{protocol}{part}_s{seed}.nc"),
    log:
        log_file("baseline/{dataset}_{protocol}{part}_s{seed}.log"),
    benchmark:
        benchmark_file("baseline", "{dataset}_{protocol}{part}_s{seed}")
    conda:
        ENV
    threads: config["resources"]["baseline"]["threads"]
    resources:
        **job_resources("baseline"),
    params:
        cfg=stage_config(*BASELINE_KEYS),
        partition=lambda wildcards: partition_of_tag(wildcards.part),
    shell:
        "hsitp baseline {wildcards.dataset} --protocol {wildcards.protocol} --partition {params.partition}"
        " --seed {wildcards.seed}"
        " --data {input:q} --out {output:q} --threads {threads} --config-json {params.cfg:q} > {log} 2>&1"

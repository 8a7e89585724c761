# Classical baseline: RBF SVM and random forest on pixel spectra, tuned on the train pixels of one accuracy protocol
# of the prepared file and scored on its test pixels -> results/<run>/baseline/{dataset}_{protocol}_s{seed}.nc.
# The seed is a wildcard, so adding a seed to baseline.seeds runs only the new jobs.
from hsitp.names import PROTOCOLS

# What the grid search reads (evaluate/baseline.py); the block size comes from the prepared file, not the config.
BASELINE_KEYS = ["baseline.methods", "baseline.cv_folds", "baseline.svm", "baseline.rf"]


wildcard_constraints:
    protocol="|".join(PROTOCOLS),
    seed=r"\d+",


rule baseline:
    input:
        result("data/{dataset}.nc"),
    output:
        result("baseline/{dataset}_{protocol}_s{seed}.nc"),
    log:
        log_file("baseline/{dataset}_{protocol}_s{seed}.log"),
    benchmark:
        benchmark_file("baseline", "{dataset}_{protocol}_s{seed}")
    conda:
        ENV
    threads: config["resources"]["baseline"]["threads"]
    resources:
        **job_resources("baseline"),
    params:
        cfg=stage_config(*BASELINE_KEYS),
    shell:
        "hsitp baseline {wildcards.dataset} --protocol {wildcards.protocol} --seed {wildcards.seed}"
        " --data {input:q} --out {output:q} --threads {threads} --config-json {params.cfg:q} > {log} 2>&1"

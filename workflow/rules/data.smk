# Dataset stage: verified raw files in the shared cache (data.raw_dir) -> results/<run>/data/{dataset}.nc.
# Each run keeps its own copy of the fetch manifest (results/<run>/data/fetch/), so runs share downloads without
# making each other's jobs look out of date. Only a dataset of the registry can be fetched (the other rules take any
# prepared scene).
from hsitp.data import registry

# the wildcard `dataset` of data_fetch and data_prepare
REGISTERED = "|".join(registry.names())

# Where files come from (data/fetch.py: FetchSettings.from_config): editing data.partition re-runs prepare only.
DATA_FETCH_KEYS = [
    "data.raw_dir",
    "data.mirror",
    "data.source_order",
    "data.sources",
    "data.connect_timeout_s",
    "data.read_timeout_s",
    "data.retries",
]
# What becomes of them (data/prepare.py); the raw files are known from the manifest, not from the fetch keys.
DATA_PREPARE_KEYS = [
    "seed",
    "data.clip_quantiles",
    "data.pca_components",
    "data.partition",
]


# Downloads run where the network is (the head node on a cluster).
localrules:
    data_fetch,


rule data_fetch:
    output:
        result("data/fetch/{dataset}.json"),
    log:
        log_file("data/fetch_{dataset}.log"),
    benchmark:
        benchmark_file("data_fetch", "{dataset}")
    wildcard_constraints:
        dataset=REGISTERED,
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("data_fetch"),
    params:
        cfg=stage_config(*DATA_FETCH_KEYS),
    shell:
        "hsitp data fetch {wildcards.dataset} --out {output:q} --config-json {params.cfg:q} > {log} 2>&1"


rule data_prepare:
    input:
        result("data/fetch/{dataset}.json"),
    output:
        result("data/{dataset}.nc"),
    log:
        log_file("data/prepare_{dataset}.log"),
    benchmark:
        benchmark_file("data_prepare", "{dataset}")
    wildcard_constraints:
        dataset=REGISTERED,
    conda:
        ENV
    threads: 1
    resources:
        **job_resources("data_prepare"),
    params:
        cfg=stage_config(*DATA_PREPARE_KEYS),
    shell:
        "hsitp data prepare {wildcards.dataset} --manifest {input:q} --out {output:q}"
        " --config-json {params.cfg:q} > {log} 2>&1"

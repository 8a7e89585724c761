# Dataset stage: verified raw files in the cache (fetch.json lists them) -> results/data/{dataset}.nc.
# Fetch sees only the keys that decide where files come from, so editing e.g. data.split re-runs prepare only.
from hsitp.data import registry

DATA_RAW_DIR = config["data"]["raw_dir"]
DATA_FETCH_CFG = json.dumps(
    {
        "data": {
            k: config["data"][k]
            for k in (
                "raw_dir",
                "mirror",
                "source_order",
                "sources",
                "connect_timeout_s",
                "read_timeout_s",
                "retries",
            )
        }
    },
    sort_keys=True,
)


wildcard_constraints:
    dataset="|".join(registry.names()),


# Downloads run where the network is (the head node on a cluster).
localrules:
    data_fetch,


rule data_fetch:
    output:
        f"{DATA_RAW_DIR}/{{dataset}}/fetch.json",
    log:
        "logs/data/fetch_{dataset}.log",
    conda:
        ENV
    params:
        cfg=DATA_FETCH_CFG,
    shell:
        "hsitp data fetch {wildcards.dataset} --config-json {params.cfg:q} > {log} 2>&1"


rule data_prepare:
    input:
        f"{DATA_RAW_DIR}/{{dataset}}/fetch.json",
    output:
        "results/data/{dataset}.nc",
    log:
        "logs/data/prepare_{dataset}.log",
    conda:
        ENV
    params:
        cfg=stage_config("data"),
    shell:
        "hsitp data prepare {wildcards.dataset} --manifest {input:q} --output {output:q}"
        " --config-json {params.cfg:q} > {log} 2>&1"

# Config validation, shared helpers and target functions. Included first by the Snakefile.
import json

from hsitp.config import validate_config

# One validation when the DAG starts: a bad key or value stops here with a message naming it.
config.update(validate_config(config))

ENV = "../../envs/hsitp.yaml"


def stage_config(*sections):
    """JSON of the config sections one stage reads, passed to its subcommand as --config-json.

    Passing only those sections means editing e.g. `bench` does not re-run the dataset stage.
    """
    return json.dumps(
        {"seed": config["seed"], **{s: config[s] for s in sections if s in config}},
        sort_keys=True,
    )


def data_targets():
    return expand("results/data/{dataset}.nc", dataset=config["datasets"])


def all_targets():
    return data_targets()


rule all:
    default_target: True
    input:
        all_targets(),

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


def bench_targets():
    """Measured layer timings, the calibration fitted to them, and model-vs-measured CCR."""
    return [
        "results/bench/microbench.nc",
        "results/bench/calibration.nc",
        "results/bench/model_vs_measured.nc",
    ]


# Config keys (under `cost`) that name hardware, per model table; `measured:PATH` names become rule inputs.
MODEL_HARDWARE_KEYS = {
    "rho": [("rho", "hardware")],
    "ccr": [("ccr", "hardware")],
    "boundary": [("boundary", "point_hardware"), ("boundary", "hardware")],
    "scale": [("scale", "hardware")],
}


def model_calibration_inputs(wildcards):
    """Calibration files a model table reads through `measured:PATH` hardware names."""
    names = []
    for section, key in MODEL_HARDWARE_KEYS[wildcards.table]:
        value = config["cost"][section][key]
        names += value if isinstance(value, list) else [value]
    return [n[len("measured:") :] for n in names if n.startswith("measured:")]


def model_targets():
    """Cost-model tables (modelled, not measured): rho, CCR grid, decision boundary, scale projection."""
    return expand("results/model/{table}.nc", table=["rho", "ccr", "boundary", "scale"])


def all_targets():
    return data_targets() + bench_targets() + model_targets()

"""The classical baseline: tuned on train pixels only, scored on the protocol's test pixels, written with units,
long names and provenance; its Snakemake rule covers datasets x protocols x seeds."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from nc_checks import described

from hsitp.baseline.classical import BaselineError, run_baseline
from hsitp.cli import main
from hsitp.config import validate_config
from hsitp.data.prepare import prepare_arrays
from hsitp.data.registry import DatasetSpec
from hsitp.io import json_attr, read_netcdf, read_provenance, write_netcdf
from hsitp.sections.baseline import BaselineSection
from hsitp.settings import DataSettings

FAST = {
    "cv_folds": 2,
    "svm": {"C": [1, 10], "gamma": ["scale"]},
    "rf": {"n_estimators": [10], "max_features": ["sqrt"]},
}


def _scene() -> tuple[DatasetSpec, np.ndarray, np.ndarray]:
    """48 x 48, 3 classes in vertical stripes (separable by a band each, plus noise), class 3 one small patch."""
    labels = np.zeros((48, 48), np.uint8)
    labels[2:-2, 2:24] = 1
    labels[2:-2, 24:-2] = 2
    labels[4:9, 4:10] = 3  # 30 px
    rng = np.random.default_rng(0)
    cube = rng.normal(0, 0.3, (48, 48, 5))
    for c in (1, 2, 3):
        cube[labels == c, c] += 2.0  # (y, x, band): class c lights band c
    spec = DatasetSpec(
        name="synthetic",
        title="Synthetic",
        rows=48,
        cols=48,
        bands=5,
        raw_bands=None,
        classes={1: "a", 2: "b", 3: "c"},
        class_counts={c: int((labels == c).sum()) for c in (1, 2, 3)},
        sensor="none",
        citation="none",
        licence="none",
        verified=True,
        variants=(),
        band_numbers=tuple(range(1, 6)),
    )
    return spec, cube, labels


def _prepared() -> xr.Dataset:
    spec, cube, labels = _scene()
    cfg = validate_config(
        {"data": {"partition": {"train_fraction": 0.3, "block": 8, "patch": 2, "min_train_per_class": 5}}}
    )
    return prepare_arrays(spec, cube, labels, uncorrected=False, settings=DataSettings.from_config(cfg))


def _settings(**kw) -> BaselineSection:
    return BaselineSection.model_validate({**validate_config({"baseline": FAST}).baseline.model_dump(), **kw})


def test_a_grid_value_keeps_its_type() -> None:
    """Catches the section's model turning an integer grid value into a float: scikit-learn reads max_features 1 as
    one feature and 1.0 as every feature, and the grids and chosen parameters the output records would change."""
    s = BaselineSection.model_validate({"rf": {"max_features": [1, 0.5, "sqrt"]}, "svm": {"C": [1, 2.5]}})
    assert [type(v) for v in s.rf.max_features] == [int, float, str]
    assert [type(v) for v in s.svm.C] == [int, float]
    with pytest.raises(ValueError, match="repeats an item"):
        BaselineSection(methods=("svm", "svm"))


@pytest.mark.parametrize("protocol", ["random", "block"])
def test_baseline_scores_test_pixels_with_units_everywhere(protocol: str) -> None:
    """Catches: training on test pixels (counts), hyper-parameters outside the grid, a variable without units or
    long_name, scores not those of the metrics on the file's own confusion matrix, or a classifier that learned
    nothing (a separable scene must be classified well above chance)."""
    ds = _prepared()
    res = run_baseline(ds, protocol, seed=0, settings=_settings())
    counts = ds.attrs["partition_counts"][protocol][0]  # partition 0 of the protocol's draws
    assert res["train_pixels"].values.tolist() == [counts[str(c)]["train"] for c in (1, 2, 3)]
    assert res["test_pixels"].values.tolist() == [counts[str(c)]["test"] for c in (1, 2, 3)]
    assert res["confusion"].sum(("label", "predicted_label")).values.tolist() == [res.attrs["n_test"]] * 2
    for name, var in res.variables.items():
        assert "long_name" in var.attrs, name
        if name in res.data_vars:
            assert var.attrs["units"] in {"1", "s"}, name
    cm = res["confusion"].sel(classifier="svm").values
    assert float(res["overall_accuracy"].sel(classifier="svm")) == pytest.approx(np.trace(cm) / cm.sum())
    assert res.attrs["hyperparameters"]["svm"]["C"] in FAST["svm"]["C"]
    assert res.attrs["protocol"] == protocol and ("grouped by" in res.attrs["cv"]) == (protocol == "block")
    assert (res["overall_accuracy"] > 0.8).all() and (res["kappa"] > 0.6).all()


def test_class_without_test_pixels_is_nan_and_block_folds_need_enough_blocks() -> None:
    """Catches an absent class scored 0 (dragging AA down) and a grouped CV silently run with fewer blocks than
    folds."""
    ds = _prepared()
    part = ds["partition"].values.copy()  # (protocol, partition_index, y, x)
    random = part[0, 0]
    random[(ds["labels"].values == 3) & (random == 2)] = 0  # random protocol: class 3 loses its test pixels
    ds = ds.assign(partition=(ds["partition"].dims, part))
    res = run_baseline(ds, "random", seed=1, settings=_settings(methods=["svm"]))
    acc = res["class_accuracy"].sel(classifier="svm").values
    assert np.isnan(acc[2]) and not np.isnan(acc[:2]).any()
    assert float(res["average_accuracy"][0]) == pytest.approx(acc[:2].mean())
    with pytest.raises(BaselineError, match="baseline.cv_folds = 500 .* training blocks"):
        run_baseline(ds, "block", seed=0, settings=_settings(cv_folds=500))


def test_cli_writes_netcdf_with_provenance(tmp_path) -> None:
    """Catches the subcommand not registered, not reading the prepared file, or writing without provenance."""
    ds = _prepared()
    data = write_netcdf(described(ds), tmp_path / "synthetic.nc", kind="dataset", prov={"test": 1})
    out = tmp_path / "bl.nc"
    overrides = json.dumps({"baseline": {**FAST, "methods": ["rf"]}})
    args = [
        "baseline",
        "synthetic",
        "--protocol",
        "block",
        "--seed",
        "3",
        "--data",
        str(data),
        "--out",
        str(out),
    ]
    assert main([*args, "--config-json", overrides]) == 0
    res = read_netcdf(out, kind="baseline")
    assert res["classifier"].values.tolist() == ["rf"] and res.attrs["seed"] == 3
    assert json_attr(res, "partition_counts") == json_attr(read_netcdf(data), "partition_counts")["block"][0]
    assert set(read_provenance(res)["input_sha256"]) == {"dataset"}
    assert main([*args[:2], "--protocol", "blok", "--data", str(data)]) == 2  # argparse names the choices


@pytest.mark.slow
def test_snakemake_plans_one_job_per_dataset_protocol_seed(workflow_copy) -> None:
    """Catches baseline targets missing from `rule all`, or not crossing datasets x protocols x seeds."""
    (workflow_copy.root / "config" / "seeds.yaml").write_text("baseline: {seeds: [0, 4]}\n")
    plan = workflow_copy.planned("--configfile", "config/smoke.yaml", "config/seeds.yaml")
    jobs = sorted(p for p, (rule, _) in plan.items() if rule == "baseline" and p.endswith(".nc"))
    assert jobs == [
        f"results/smoke/baseline/indian_pines_{p}_s{s}.nc" for p in ("block", "random") for s in (0, 4)
    ]


def test_cli_refuses_a_scene_under_another_name(tmp_path) -> None:
    """Catches scores of one scene filed under another's name (`hsitp baseline salinas --data <indian pines>`
    wrote 'salinas ... OA 0.80' computed on Indian Pines): the prepared file's own scene must be the one named."""
    data = write_netcdf(described(_prepared()), tmp_path / "synthetic.nc", kind="dataset", prov={"test": 1})
    out = tmp_path / "bl.nc"
    args = ["baseline", "salinas", "--protocol", "block", "--data", str(data), "--out", str(out)]
    assert main(args) == 2 and not out.exists()

"""A classical baseline on the same partition: RBF SVM and random forest on pixel spectra, scored like the models.

Why: "at equal accuracy" means nothing without a protocol and a yardstick. Under the random protocol on Indian Pines
an SVM on pixel spectra is already in the 80s (%) and one on 7x7 window means near 96 %, because test pixels sit
next to training pixels; under the spatially disjoint block protocol the same methods fall a long way. A
transformer's number is read against this one, on the same train/test partition.

Features are the prepared cube's per-pixel vector (bands, or PCA scores), standardised on training pixels for the
SVM (inside the pipeline, so cross-validation folds never see their validation pixels' statistics). Hyper-parameters
are chosen on training pixels only, by a small grid and k-fold cross-validation: stratified folds for the random
protocol, stratified folds *grouped by block* (``data.partition.block`` squares, read from the prepared file) for the
block protocol, so a validation fold is not the neighbour of its training pixels. Grouped folds still touch at
block edges (no guard band inside the training area): a mild optimism in model selection only, never in the test
numbers. Test pixels are scored once, with :mod:`hsitp.evaluate.metrics`.

The seed drives the folds and the forest, not the partition: the partition is the prepared file's (``partition``
picks one of each protocol's K draws, ``data.partition.draws``), so the spread over seeds is the methods' variance on
one partition, and the spread over partitions the draw's (the SVM's block OA over five draws of Indian Pines
spans 16 pp, its spread over seeds on one draw 0.0).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from hsitp.data.partition import TEST, TRAIN, per_partition, read_partition
from hsitp.errors import HsitpError
from hsitp.evaluate.metrics import scores
from hsitp.io import variable
from hsitp.sections.baseline import BaselineSection

log = logging.getLogger(__name__)

METHOD_NAMES = {
    "svm": "support vector machine, RBF kernel, on standardised pixel spectra",
    "rf": "random forest on pixel spectra",
}


class BaselineError(HsitpError):
    """The baseline cannot run on this file or with these settings (names the key)."""


def _estimator(method: str, settings: BaselineSection, seed: int) -> tuple[Any, dict[str, list[Any]]]:
    """The scikit-learn estimator and its parameter grid (keys as GridSearchCV wants them)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    if method == "svm":
        est = make_pipeline(StandardScaler(), SVC(kernel="rbf"))
        return est, {"svc__C": list(settings.svm.C), "svc__gamma": list(settings.svm.gamma)}
    est = RandomForestClassifier(random_state=seed, n_jobs=1)  # rf: the section's methods allow no other
    return est, {
        "n_estimators": list(settings.rf.n_estimators),
        "max_features": list(settings.rf.max_features),
    }


def _folds(protocol: str, y: np.ndarray, groups: np.ndarray, n_folds: int, seed: int) -> tuple[Any, str]:
    """CV splitter over training pixels and a sentence saying what it is."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if protocol == "block":
        n_groups = np.unique(groups).size
        if n_groups < n_folds:
            raise BaselineError(
                f"baseline.cv_folds = {n_folds} but the block partition has only {n_groups} training blocks; "
                "lower baseline.cv_folds or data.partition.block"
            )
        return (
            StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed),
            f"{n_folds}-fold stratified CV grouped by the partition's blocks (a block's pixels stay in one fold)",
        )
    return (
        StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed),
        f"{n_folds}-fold stratified CV over training pixels",
    )


def _attr(ds: xr.Dataset, key: str) -> Any:
    """An attribute of the prepared file, decoded from JSON when read from disk (in memory it is the object)."""
    if key not in ds.attrs:
        raise BaselineError(f"the prepared file has no {key!r} attribute; re-run `hsitp data prepare`")
    value = ds.attrs[key]
    return json.loads(value) if isinstance(value, str) else value


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class _Pixels:
    """The labelled pixels of one accuracy protocol: features and labels of its train and test pixels."""

    classes: np.ndarray  # the class labels 1..K
    x_train: np.ndarray  # (n_train, F) features
    y_train: np.ndarray  # (n_train,) labels
    groups: np.ndarray  # (n_train,) the block (data.partition.block square) of each train pixel
    x_test: np.ndarray  # (n_test, F)
    y_test: np.ndarray  # (n_test,)


def run_baseline(
    ds: xr.Dataset,
    protocol: str,
    seed: int,
    settings: BaselineSection,
    threads: int = 1,
    *,
    partition: int = 0,
) -> xr.Dataset:
    """Fit every method of ``settings.methods`` on the train pixels of ``protocol``'s partition ``partition``,
    score its test pixels."""
    t_start = time.perf_counter()
    px = _pixels(ds, protocol, partition)
    cv, cv_text = _folds(protocol, px.y_train, px.groups, settings.cv_folds, seed)
    methods = list(settings.methods)
    out: dict[str, Any] = {
        k: [] for k in ("oa", "aa", "kappa", "per_class", "confusion", "cv", "fit", "pred")
    }
    chosen: dict[str, dict[str, Any]] = {}
    grids: dict[str, dict[str, list[Any]]] = {}
    for method in methods:
        found, grid, best = _fit_one(method, px, cv, protocol, seed, settings, threads)
        for k, v in found.items():
            out[k].append(v)
        chosen[method] = {k.removeprefix("svc__"): _plain(v) for k, v in best.items()}
        grids[method] = {k.removeprefix("svc__"): v for k, v in grid.items()}
    res = xr.Dataset(_result_vars(out, px), coords=_result_coords(methods, px.classes))
    res.attrs.update(
        {
            "title": f"{ds.attrs.get('dataset', 'dataset')}: classical baseline, {protocol} protocol, partition "
            f"{partition}, seed {seed}",
            "dataset": ds.attrs.get("dataset", ""),
            "protocol": protocol,
            "seed": seed,
            "partition_index": partition,  # which of the protocol's K partitions
            "partition_seed": ds.attrs.get("seed", ""),
            "partition_counts": per_partition(_attr(ds, "partition_counts")[protocol], partition),
            "partition_warnings": per_partition(_attr(ds, "partition_warnings")[protocol], partition),
            "n_train": int(px.y_train.size),
            "n_test": int(px.y_test.size),
            "features": f"per-pixel vector of the prepared cube ({ds['cube'].shape[-1]} {ds['cube'].dims[-1]}s)",
            "methods": {m: METHOD_NAMES[m] for m in methods},
            "class_names": _attr(ds, "class_names"),
            "hyperparameters": chosen,
            "grids": grids,
            "cv": cv_text,
            "cv_scoring": "accuracy",
            "threads": threads,
            "wall_time_s": time.perf_counter() - t_start,
            "comment": "classes without train pixels (see partition_warnings) cannot be predicted: their test "
            "pixels count as errors. The seed drives CV folds and the forest, not the partition.",
        }
    )
    return res


def _pixels(ds: xr.Dataset, protocol: str, index: int = 0) -> _Pixels:
    """The train and test pixels of ``protocol``'s partition ``index`` in the prepared file, with each train pixel's
    block."""
    partition = read_partition(ds, protocol, index)  # (y, x)
    labels = ds["labels"].values.astype(np.int64)  # (y, x)
    cube = ds["cube"].transpose("y", "x", ...).values  # (y, x, F)
    classes = np.array(sorted(int(c) for c in _attr(ds, "class_names")), dtype=np.int64)
    if not np.array_equal(classes, np.arange(1, classes.size + 1)):
        raise BaselineError(f"class labels {classes.tolist()} are not 1..K; the metrics need 1..K")
    block = int(_attr(ds, "partition_settings")["block"])
    train = (partition == TRAIN) & (labels > 0)
    test = (partition == TEST) & (labels > 0)
    if not train.any() or not test.any():
        raise BaselineError(f"protocol {protocol!r}: {train.sum()} train and {test.sum()} test pixels")
    yy, xx = np.nonzero(train)
    n_bx = -(-partition.shape[1] // block)
    return _Pixels(
        classes=classes,
        x_train=cube[train].astype(np.float64),
        y_train=labels[train],
        groups=(yy // block) * n_bx + (xx // block),
        x_test=cube[test].astype(np.float64),
        y_test=labels[test],
    )


def _fit_one(
    method: str,
    px: _Pixels,
    cv: Any,
    protocol: str,
    seed: int,
    settings: BaselineSection,
    threads: int,
) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, Any]]:
    """Grid search one method on the train pixels and score its refit on the test pixels: (its numbers, the grid,
    the chosen parameters)."""
    from sklearn.model_selection import GridSearchCV

    est, grid = _estimator(method, settings, seed)
    search = GridSearchCV(
        est, grid, cv=cv, scoring="accuracy", n_jobs=threads, refit=True, error_score="raise"
    )
    t0 = time.perf_counter()
    search.fit(px.x_train, px.y_train, groups=px.groups if protocol == "block" else None)
    t1 = time.perf_counter()
    pred = search.predict(px.x_test)  # (n_test,) labels 1..K (only classes seen in training)
    t2 = time.perf_counter()
    s = scores(px.y_test, pred, int(px.classes.size))
    log.info(
        "%s %s seed %d: OA %.4f AA %.4f kappa %.4f (%s)",
        method,
        protocol,
        seed,
        s.oa,
        s.aa,
        s.kappa,
        search.best_params_,
    )
    found = {
        "oa": s.oa,
        "aa": s.aa,
        "kappa": s.kappa,
        "per_class": s.per_class,
        "confusion": s.confusion,
        "cv": search.best_score_,
        "fit": t1 - t0,
        "pred": t2 - t1,
    }
    return found, grid, search.best_params_


def _result_vars(out: Mapping[str, list[Any]], px: _Pixels) -> dict[str, Any]:
    """Test scores, CV accuracy and times per classifier; train and test pixels per class."""
    train_pixels, test_pixels = (
        np.array([np.count_nonzero(y == c) for c in px.classes]) for y in (px.y_train, px.y_test)
    )
    return {
        "overall_accuracy": variable(
            "classifier", np.array(out["oa"]), "overall accuracy (OA) on test pixels"
        ),
        "average_accuracy": variable(
            "classifier",
            np.array(out["aa"]),
            "average accuracy (AA): mean per-class accuracy over classes with test pixels",
        ),
        "kappa": variable("classifier", np.array(out["kappa"]), "Cohen's kappa on test pixels"),
        "class_accuracy": variable(
            ("classifier", "label"),
            np.array(out["per_class"]),
            "per-class accuracy (recall) on test pixels; NaN = no test pixel",
        ),
        "confusion": variable(
            ("classifier", "label", "predicted_label"),
            np.array(out["confusion"], dtype=np.int64),
            "test pixels by true class (rows) and predicted class (columns)",
        ),
        "cv_accuracy": variable(
            "classifier",
            np.array(out["cv"]),
            "mean cross-validation accuracy of the chosen hyper-parameters (train pixels)",
        ),
        "fit_time": variable(
            "classifier",
            np.array(out["fit"]),
            "wall time of the grid search and the refit on all train pixels",
            "s",
        ),
        "predict_time": variable(
            "classifier", np.array(out["pred"]), "wall time to predict test pixels", "s"
        ),
        "train_pixels": variable("label", train_pixels, "training pixels per class"),
        "test_pixels": variable("label", test_pixels, "test pixels per class"),
    }


def _result_coords(methods: Sequence[str], classes: np.ndarray) -> dict[str, Any]:
    return {
        # not `method`/`class`: ds.sel(method=...) is xarray's inexact-match argument, `class` a Python keyword
        "classifier": ("classifier", np.array(methods, dtype=object), {"long_name": "classifier"}),
        "label": variable("label", classes, "true class label (1..K)"),
        "predicted_label": variable("predicted_label", classes, "predicted class label (1..K)"),
    }

"""OA, AA, Cohen's kappa and per-class accuracy of a classification, on the test pixels of one train/test partition.

Conventions (see ../shared/notes/measuring.md for the pitfalls they avoid):

- Labels are the dataset's 1..K, 0 = unlabelled. Pixels whose true label is 0 are *dropped* before anything is
  counted, and 1..K are remapped to 0..K-1 for the confusion matrix. Nothing is "ignored" by an index: an
  ``ignore_index`` keeps the ignored class in a macro average.
- A class with no test pixels has no accuracy: its per-class value is NaN and it is left out of AA. Averaging it
  in as 0 (torchmetrics' macro average does) makes AA depend on which classes a partition happened to leave out.
- OA = correct / evaluated pixels; AA = mean recall over the classes present; kappa = (p_o - p_e) / (1 - p_e) from
  the confusion matrix (NaN when p_e = 1, as scikit-learn).

Predictions must be labels in 1..K too (a model predicting 0..K-1 adds 1): a prediction outside 1..K on an
evaluated pixel is an error, since it means a remapping bug, not a wrong class.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hsitp.data.partition import TEST
from hsitp.errors import HsitpError


class MetricsError(HsitpError):
    """Inputs a metric cannot be computed from (shapes, label ranges)."""


@dataclass(frozen=True)
class Scores:
    """Accuracy of one prediction. Fractions in [0, 1]; per-class arrays indexed by class 1..K -> 0..K-1."""

    oa: float
    aa: float
    kappa: float
    per_class: np.ndarray  # (K,) recall; NaN for a class absent from the evaluated pixels
    support: np.ndarray  # (K,) evaluated pixels per true class
    confusion: np.ndarray  # (K, K) int64: rows true class, columns predicted class
    n: int  # evaluated pixels

    @property
    def absent(self) -> np.ndarray:
        """(K,) bool: classes with no evaluated pixel (reported NaN, not averaged)."""
        return self.support == 0


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> np.ndarray:
    """(K, K) counts from labels already in 0..K-1 (rows true, columns predicted)."""
    idx = y_true.astype(np.int64) * n_classes + y_pred.astype(np.int64)
    return np.bincount(idx, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def scores_from_confusion(confusion: np.ndarray) -> Scores:
    """OA, AA, kappa and per-class recall from a (K, K) confusion matrix."""
    cm = np.asarray(confusion, dtype=np.int64)
    n = int(cm.sum())
    support = cm.sum(axis=1)  # (K,)
    diag = np.diag(cm)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_class = np.where(support > 0, diag / np.maximum(support, 1), np.nan)
    present = support > 0
    oa = float(diag.sum() / n) if n else float("nan")
    aa = float(per_class[present].mean()) if present.any() else float("nan")
    if n:
        p_o = diag.sum() / n
        p_e = float((support.astype(np.float64) * cm.sum(axis=0)).sum()) / float(n) ** 2
        kappa = float((p_o - p_e) / (1 - p_e)) if p_e < 1 else float("nan")
    else:
        kappa = float("nan")
    return Scores(oa=oa, aa=aa, kappa=kappa, per_class=per_class, support=support, confusion=cm, n=n)


def scores(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> Scores:
    """Scores of predictions ``y_pred`` against ``y_true`` (both labels 1..K, any matching shape).

    Pixels with ``y_true == 0`` (unlabelled) are dropped; a ``y_pred`` outside 1..K on a kept pixel is an error.
    """
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise MetricsError(f"true labels {y_true.shape} and predictions {y_pred.shape} differ in shape")
    if n_classes < 1:
        raise MetricsError(f"n_classes = {n_classes}: need at least one class")
    keep = y_true != 0
    t, p = y_true[keep].astype(np.int64), y_pred[keep].astype(np.int64)
    if t.size and (t.min() < 1 or t.max() > n_classes):
        raise MetricsError(f"true labels {t.min()}..{t.max()} outside 1..{n_classes} (0 = unlabelled)")
    bad = (p < 1) | (p > n_classes)
    if bad.any():
        raise MetricsError(
            f"{int(bad.sum())} predictions outside 1..{n_classes} on labelled pixels (values "
            f"{sorted(set(p[bad].tolist()))[:5]}); predictions must use the dataset's labels 1..K "
            "(a model predicting 0..K-1 adds 1)"
        )
    return scores_from_confusion(confusion_matrix(t - 1, p - 1, n_classes))


def score_map(pred: np.ndarray, labels: np.ndarray, partition: np.ndarray, n_classes: int) -> Scores:
    """Scores of a whole-scene predicted map (y, x) on the test pixels of ``partition`` (y, x) (2 = test).

    Only labelled test pixels count; predictions elsewhere (train, unused, unlabelled) are not looked at.
    """
    pred, labels, partition = np.asarray(pred), np.asarray(labels), np.asarray(partition)
    if not pred.shape == labels.shape == partition.shape:
        raise MetricsError(
            f"predicted map {pred.shape}, labels {labels.shape} and partition {partition.shape} must share one grid"
        )
    test = (partition == TEST) & (labels != 0)  # (y, x)
    return scores(labels[test], pred[test], n_classes)

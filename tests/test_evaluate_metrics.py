"""Metrics on test pixels: OA, AA, kappa and per-class accuracy against scikit-learn, and the pitfalls of
measuring.md (unlabelled pixels, absent classes, a 0..K-1 / 1..K mix-up)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, balanced_accuracy_score, cohen_kappa_score, recall_score

from hsitp.evaluate.metrics import MetricsError, score_map, scores

K = 6


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_to_scikit_learn_on_random_data(seed: int) -> None:
    """Catches a wrong OA/AA/kappa formula (e.g. kappa from row instead of column marginals, AA as OA) or an
    off-by-one remapping of 1..K."""
    rng = np.random.default_rng(seed)
    freq = np.arange(1, K + 1) ** 2 / np.sum(np.arange(1, K + 1) ** 2)  # imbalanced, as hyperspectral scenes
    y_true = rng.choice(np.arange(1, K + 1), size=2000, p=freq)
    # better than chance and unevenly so (frequent classes easier), so AA != OA and kappa is neither 0 nor 1
    y_pred = np.where(rng.random(2000) < 0.3 + 0.1 * y_true, y_true, rng.integers(1, K + 1, size=2000))
    s = scores(y_true, y_pred, K)
    assert s.oa == pytest.approx(accuracy_score(y_true, y_pred), abs=1e-12)
    assert s.aa == pytest.approx(balanced_accuracy_score(y_true, y_pred), abs=1e-12)
    assert s.kappa == pytest.approx(cohen_kappa_score(y_true, y_pred), abs=1e-12)
    ref = recall_score(y_true, y_pred, labels=np.arange(1, K + 1), average=None)
    np.testing.assert_allclose(s.per_class, ref, rtol=0, atol=1e-12)
    assert s.n == 2000 and s.support.sum() == 2000 and s.confusion.shape == (K, K)
    assert abs(s.aa - s.oa) > 1e-3  # the data really tells AA from OA


def test_unlabelled_pixels_dropped_not_counted() -> None:
    """Catches unlabelled pixels (0) counted as a class or as errors (an ignore_index-style bug)."""
    rng = np.random.default_rng(3)
    y_true = rng.integers(1, K + 1, size=500)
    y_pred = np.where(rng.random(500) < 0.7, y_true, rng.integers(1, K + 1, size=500))
    padded_true = np.concatenate([y_true, np.zeros(300, np.int64)])
    padded_pred = np.concatenate([y_pred, rng.integers(1, K + 1, size=300)])
    a, b = scores(y_true, y_pred, K), scores(padded_true, padded_pred, K)
    assert (a.oa, a.aa, a.kappa, a.n) == (b.oa, b.aa, b.kappa, b.n)


def test_absent_class_is_nan_and_left_out_of_aa() -> None:
    """Catches an absent class averaged into AA as 0 (torchmetrics' macro average does), which makes AA depend on
    which classes the partition left without test pixels."""
    y_true = np.array([1, 1, 1, 1, 2, 2, 4, 4, 4, 4])  # class 3 has no test pixel
    y_pred = np.array([1, 1, 1, 2, 2, 3, 4, 4, 1, 4])  # ... but is predicted once (a wrong prediction)
    s = scores(y_true, y_pred, 4)
    assert np.isnan(s.per_class[2]) and s.absent.tolist() == [False, False, True, False]
    np.testing.assert_allclose(s.per_class[[0, 1, 3]], [0.75, 0.5, 0.75])
    assert s.aa == pytest.approx((0.75 + 0.5 + 0.75) / 3)  # not / 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns that y_pred holds a class y_true lacks
        assert s.aa == pytest.approx(balanced_accuracy_score(y_true, y_pred))
    assert s.oa == pytest.approx(accuracy_score(y_true, y_pred))
    assert s.kappa == pytest.approx(cohen_kappa_score(y_true, y_pred))


def test_map_scored_on_test_pixels_only_and_bad_predictions_refused() -> None:
    """Catches train or unused pixels counted in test accuracy, and a 0..K-1 prediction map accepted silently."""
    labels = np.array([[1, 1, 2, 0], [2, 3, 3, 0]])
    part = np.array([[1, 2, 2, 2], [2, 2, 0, 1]])  # 1 train, 2 test, 0 unused
    pred = np.array([[2, 1, 2, 3], [1, 3, 1, 2]])  # wrong on the train (0,0) and unused (1,2) pixels
    s = score_map(pred, labels, part, 3)
    assert s.n == 4 and s.oa == pytest.approx(3 / 4)  # test pixels (0,1) (0,2) (1,0) (1,1); (0,3) unlabelled
    with pytest.raises(MetricsError, match=r"outside 1\.\.3 .*adds 1"):
        score_map(pred - 1, labels, part, 3)
    with pytest.raises(MetricsError, match="share one grid"):
        score_map(pred[:, :3], labels, part, 3)

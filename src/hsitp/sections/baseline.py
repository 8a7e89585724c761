"""The ``baseline`` section: the classical SVM and random forest and their grids."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hsitp.sections.base import Section, distinct, number, sized


class Svm(Section):
    """Grid of the SVM."""

    C: distinct(number(gt=0)) = (1, 10, 100, 1000)  # type: ignore[valid-type]
    """Penalty values tried."""
    gamma: distinct(number(gt=0) | Literal["scale"]) = ("scale", 0.001, 0.01, 0.1)  # type: ignore[valid-type]
    """RBF widths tried: numbers, or `scale` (1 / (features x variance), after standardisation 1 / features)."""


class Rf(Section):
    """Grid of the random forest."""

    n_estimators: distinct(Annotated[int, Field(ge=1, le=10000)]) = (100, 300)  # type: ignore[valid-type]
    """Numbers of trees tried, each at most 10,000 (a forest of more takes hours to fit and gains nothing
    measurable)."""
    max_features: distinct(number(gt=0, le=1) | Literal["sqrt", "log2"]) = ("sqrt", 0.2)  # type: ignore[valid-type]
    """Features tried at each tree node: `sqrt`, `log2` or a fraction in (0, 1]."""


class BaselineSection(Section):
    """Classical baseline on the prepared file's partitions (`hsitp baseline`, rule baseline): RBF SVM and random
    forest on pixel spectra, hyper-parameters chosen by grid search with k-fold cross-validation on training pixels
    only (grouped by block for the block protocol), scored on the test pixels. One job per dataset x protocol
    (data.partition.protocols) x seed."""

    seeds: distinct(sized("seed")) = (0, 1, 2)  # type: ignore[valid-type]
    """Seeds of the CV folds and the random forest (not of the partition, which is the prepared file's); one output
    file each."""
    methods: distinct(Literal["svm", "rf"]) = ("svm", "rf")  # type: ignore[valid-type]
    """Classifiers: svm = RBF support vector machine on standardised spectra; rf = random forest."""
    cv_folds: int = Field(5, ge=2)
    """Cross-validation folds for the grid search (at most the smallest class's training pixels for a clean
    stratification)."""
    svm: Svm = Svm()
    """Grid of the SVM."""
    rf: Rf = Rf()
    """Grid of the random forest."""

"""The ``tune`` section: the equal-budget hyper-parameter study per dataset x plan x accuracy protocol."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, NonNegativeInt, PositiveFloat

from hsitp.sections.base import Section, distinct, named, sized


def pair(item: Any) -> Any:
    """A searched [low, high] range of ``item`` (low above high is refused by ``hsitp.config.check_values``)."""
    return Annotated[tuple[item, ...], Field(min_length=2, max_length=2)]


class BlockValidation(Section):
    """The block protocol's tuning validation."""

    folds: int = Field(1, ge=1)
    """Inner folds over the block protocol's training squares (1 = the single hold-out of validation_fraction)."""
    min_pixels: int = Field(0, ge=0)
    """The fewest validation pixels (pooled over the folds) the study accepts; 0 = no check."""
    min_classes: int = Field(0, ge=0)
    """The fewest classes among the validation pixels (pooled over the folds) the study accepts; 0 = no check."""


class Prune(Section):
    """Median pruner."""

    startup_trials: int = Field(4, ge=0)
    """Trials that run to the end before any is pruned."""
    warmup_epochs: int = Field(3, ge=0)
    """No trial is pruned before this many epochs."""


class Space(Section):
    """The search space, the same for every plan."""

    lr: pair(PositiveFloat) = (0.0003, 0.01)  # type: ignore[valid-type]
    """Peak learning rate, searched log-uniform."""
    weight_decay: pair(PositiveFloat) = (0.01, 0.5)  # type: ignore[valid-type]
    """AdamW weight decay, searched log-uniform."""
    label_smoothing: pair(Annotated[float, Field(ge=0, le=0.5)]) = (0.0, 0.2)  # type: ignore[valid-type]
    """Label smoothing, searched uniform."""
    warmup_steps: pair(NonNegativeInt) = (0, 100)  # type: ignore[valid-type]
    """Linear warm-up steps, searched over the integers."""
    per_class: pair(Annotated[int, Field(ge=1)]) = (4, 32)  # type: ignore[valid-type]
    """Stratified sampling, loss pixels per class per step, searched over the integers."""
    groups: distinct(sized("groups")) = (1, 2, 4)  # type: ignore[valid-type]
    """D-CHAG groups per rank g, searched where the bands per rank allow (the band partition)."""


class TuneSection(Section):
    """Hyper-parameter tuning with an equal budget per plan (`hsitp tune`, rule tune): one Optuna study (TPE sampler,
    median pruner on validation OA) per dataset x plan x accuracy protocol, the same search space, trials and steps
    per trial for every plan, validation pixels only. Each trial trains the plan's single-process equivalent at
    world_size on train.model and the first train.crops entry of the dataset."""

    plans: distinct(named("compared_plan")) = ("tp", "dchag_l", "dchag_c")  # type: ignore[valid-type]
    """Plans tuned, each with the same budget."""
    protocols: distinct(named("protocol")) = ("random", "block")  # type: ignore[valid-type]
    """Accuracy protocols (random, block; not the TP split; each one of data.partition.protocols), each tuned on
    its own validation pixels."""
    world_size: sized("world_size") = 2  # type: ignore[valid-type]
    """P whose D-CHAG architecture is tuned (tp's architecture is the same at every P)."""
    trials: int = Field(24, ge=1)
    """Trials per study, counting completed, pruned and diverged ones (the equal budget)."""
    startup_trials: int = Field(8, ge=1)
    """TPE's random start-up trials (Dodge et al.'s expected-best curve is computed on them)."""
    epochs: int = Field(10, ge=1)
    """Epochs per trial; validation OA is scored after each (the pruner's steps)."""
    steps_per_epoch: int = Field(40, ge=1)
    """Training steps per epoch of a trial."""
    validation_fraction: float = Field(0.2, gt=0, lt=1)
    """Share of the protocol's training pixels held out as validation pixels (the score)."""
    block_validation: BlockValidation = BlockValidation()
    """The block protocol's tuning validation. folds = 1: the single hold-out of validation_fraction (whole training
    squares until they hold that share; on Indian Pines 565 pixels of 7 classes). folds >= 2: inner folds over the
    partition's training squares, class-stratified; each trial trains once per fold on the other folds' squares
    (folds x the steps of a trial: the same for every plan), and its score is the OA over every fold's validation
    pixels pooled (every train pixel validated once). The study refuses to start when the pooled validation holds
    fewer than min_pixels pixels or min_classes classes; the study file records its counts per fold and per class."""
    seed: sized("seed") = 0  # type: ignore[valid-type]
    """Seed of the sampler and of every trial's training (the same for every plan)."""
    prune: Prune = Prune()
    """Median pruner."""
    space: Space = Space()
    """The search space, the same for every plan ([low, high] ranges; groups for the D-CHAG plans only)."""

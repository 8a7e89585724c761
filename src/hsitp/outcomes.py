"""The project's vocabularies of outcomes, one type each: no other module spells a verdict as a string.

Each is a :class:`enum.StrEnum` whose values are the very strings the stages write into their files (netCDF flag
meanings, CSV and Markdown cells, JSON reports), so a member compares equal to the string read back from a file and
every committed reference reads unchanged. ``tests/test_outcomes.py`` fails when a module outside this one types one
of these words as a string literal (a second spelling would drift from the first).
"""

from __future__ import annotations

from enum import StrEnum


class Accuracy(StrEnum):
    """Is a plan as accurate as its reference (pure TP, or an ingredient's baseline)? From the seed- or
    partition-paired 95 % interval of the difference and the margin δ (``hsitp.evaluate.verdict``)."""

    EQUAL = "equal"  # the whole interval inside [-δ, δ]
    BETTER = "better"  # the interval above 0 (and not inside the margin)
    WORSE = "worse"  # the interval below 0
    UNDECIDED = "undecided"  # the interval straddles a margin edge: more seeds or partitions would decide it
    PENDING = "pending"  # nothing paired yet (an ingredient row before its runs); never a summary's flag


# The decided accuracy outcomes, in the order of the summary's CF flag values (``*_verdict``).
ACCURACY_FLAGS: tuple[Accuracy, ...] = (Accuracy.EQUAL, Accuracy.BETTER, Accuracy.WORSE, Accuracy.UNDECIDED)


class Claim(StrEnum):
    """The verdict on one of the paper's claims in the claims table (docs/audit.md)."""

    HOLDS = "holds"  # the pipeline's value meets the claim
    CONSISTENT = (
        "consistent"  # holds, but only by the paper's own formulas at the paper's own numbers (circular)
    )
    CONDITIONAL = "conditional"  # holds under some of the claim's conditions only
    CONTRADICTED = "contradicted"  # the pipeline's value does not meet the claim
    NOT_REPRODUCIBLE = "not_reproducible"  # the paper gives too little to compute or measure it
    NEEDS_GPU = "needs_gpu"  # only a GPU (NCCL, CUDA memory) can decide it
    PENDING = "pending"  # waits on a stage's file, named in its reason


class Basis(StrEnum):
    """How a claim's verdict was reached."""

    COMPUTED = "computed"  # from cached results of the pipeline's own stages
    CIRCULAR = "circular"  # the paper's formulas applied to the paper's numbers (rule 11)
    READING = "reading"  # stated from a source read, with a reason
    PENDING = "pending"  # waiting on a stage
    MEASURED = "measured"  # every compared quantity measured in one run
    HALF_MEASURED = "half-measured"  # one half measured, the other modelled: a finding, never a verdict


class Reproduction(StrEnum):
    """A spot-checked cell of a committed reference, retrained (``hsitp audit reproduce``)."""

    REPRODUCED = "reproduced"  # every judged check within its tolerance
    DIFFERS = "differs"  # a check outside its tolerance (the report says by how much)
    FAILED = "failed"  # the retraining itself did not finish


class Reliance(StrEnum):
    """What a claims.yaml row's ``relies_on`` says of another row's verdict: a class of :class:`Claim` verdicts."""

    HOLDS = "holds"  # holds or consistent (the paper's formulas agree with themselves)
    CONTRADICTED = "contradicted"
    CONDITIONAL = "conditional"
    UNDECIDED = "undecided"  # pending, needs_gpu or not_reproducible
    ANY = "any"  # any verdict: the reason names the row without resting on its verdict

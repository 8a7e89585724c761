"""Deprecated alias of :mod:`hsitp.data.partition`, kept for one release.

Issue 38 gave each meaning of "split" its own word: the train/test partition of labelled pixels is now
``hsitp.data.partition`` (variable ``partition``, config section ``data.partition``, :func:`read_partition`);
"split" is left to the TP split (channel / token / 2d). Import from ``hsitp.data.partition``.
"""

from __future__ import annotations

from hsitp.data.partition import (  # noqa: F401 (re-exported under the old names)
    PROTOCOLS,
    TEST,
    TRAIN,
    UNUSED,
    PartitionError,
    PartitionResult,
    block_partition,
    make_partition,
    near_train_fraction,
    ordered_protocols,
    protocol_seed,
    random_partition,
    read_partition,
)

SplitError = PartitionError
SplitResult = PartitionResult
random_split = random_partition
block_split = block_partition
make_split = make_partition
read_split = read_partition

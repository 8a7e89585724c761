"""The ``data`` section (fetch + prepare): where the scenes' files come from, how they are normalised and how their labelled pixels are partitioned into train and test."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from hsitp.sections.base import BOUNDS, DEF_MARKER, Section, distinct, named, number, sized

# The registry's scene names (hsitp.data.registry.names(); tests/test_data_registry.py holds the two equal).
DatasetName = Literal[
    "indian_pines", "salinas", "salinas_a", "pavia_university", "pavia_centre", "ksc", "botswana", "houston2013",
    "whu_hi_longkou",
]  # fmt: skip
Source = Literal["cache", "mirror", "official", "package"]
Quantile = Annotated[float, Field(ge=0, le=1)]


class Partition(Section):
    """``data.partition``: how the labelled pixels are drawn into train and test."""

    protocols: distinct(named("protocol")) = ("random", "block")  # type: ignore[valid-type]
    """Accuracy protocols the prepared file carries (replaces the former `mode`): random = stratified per class
    (test pixels share most of their patch with training pixels, so it overstates accuracy; the literature's
    protocol); block = spatially disjoint blocks with a one-patch guard band (the honest one). Stored in the order
    random, block whatever the order here."""
    train_fraction: float = Field(0.1, gt=0, lt=1)
    """Fraction of each class's labelled pixels used for training."""
    min_train_per_class: int = Field(5, ge=1)
    """At least this many training pixels per class (Oats has only 20 pixels)."""
    patch: sized("pixels") = 8  # type: ignore[valid-type]
    """Patch size p in pixels; the guard band of the block protocol is one patch wide."""
    # a pixels size with a floor of its own: the schema refers to $defs/pixels and adds the floor
    block: Annotated[
        int, Field(ge=2, le=BOUNDS["pixels"][1]), WithJsonSchema({DEF_MARKER: "pixels", "minimum": 2})
    ] = 16
    """Side of the square blocks (pixels) assigned whole to train or test by the block protocol."""
    draws: int = Field(1, ge=1, le=100)
    """K, the partitions drawn per accuracy protocol: K seeded draws of the same protocol (for block, K block
    assignments, each with the guard band; not a K-fold over the squares, which would change the train fraction:
    docs/stages.md), stored along the prepared file's partition_index. A replicate is (partition, training seed):
    training and the classical baseline run on every partition, and the verdicts' intervals are over partitions.
    Draw k is the same whatever K (index 0 is the draw of K = 1); config/cpu-places.yaml draws 5."""

    def attrs(self) -> dict[str, float | int]:
        """The settings a prepared file records (``partition_settings``)."""
        return self.model_dump(exclude={"protocols"})


class DataSection(Section):
    """The dataset stage (fetch + prepare)."""

    raw_dir: str = "resources/raw"
    """Local cache of raw downloaded files; one subfolder per dataset."""
    mirror: str | None = None
    """A folder or base URL holding copies of the raw files, tried after the cache (official path layout first,
    then the ../shared/datasets layout). The env var HSITP_DATA_MIRROR is used when this is null."""
    source_order: distinct(Source) = ("cache", "mirror", "official", "package")  # type: ignore[valid-type]
    """Default order in which sources are tried for every dataset."""
    sources: dict[DatasetName, distinct(Source)] = {}  # type: ignore[valid-type]
    """Per-dataset override of source_order, e.g. {indian_pines: [package]}."""
    connect_timeout_s: number(gt=0) = 5  # type: ignore[valid-type]
    """Seconds to wait for a server connection before moving to the next source (offline = fast)."""
    read_timeout_s: number(gt=0) = 60  # type: ignore[valid-type]
    """Seconds without data before a download is abandoned."""
    retries: int = Field(2, ge=0)
    """Extra attempts for a download that broke off or stalled mid-file (never after an HTTP error, a refused
    connection or a checksum mismatch: those move on to the next source at once)."""
    clip_quantiles: Annotated[tuple[Quantile, ...], Field(min_length=2, max_length=2)] = (0.01, 0.99)
    """Per-band robust normalisation: clip to these quantiles (the paper's 0.01 quantile), then scale to [0, 1]."""
    pca_components: int | None = Field(None, ge=1)
    """Reduce the band axis to this many PCA components (null = off; the dim is then `component`)."""
    partition: Partition = Partition()
    """The train/test partition of labelled pixels, `draws` per accuracy protocol (variable `partition`, dims
    protocol, partition_index, y, x, of the prepared file); training and the classical baseline pick one by protocol
    and partition index. Not `data.split`: a split is how a layer is cut across the TP ranks."""

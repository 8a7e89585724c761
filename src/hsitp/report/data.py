"""Report page of the data stage: each prepared scene (false colour, ground truth, train/test partition) and its
class table.

Nothing here depends on hardware: the prepared cube is a deterministic function of the raw files and the config.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hsitp.analysis.labels import computed_on
from hsitp.analysis.read import json_attr, load
from hsitp.contracts import DATASET
from hsitp.data.partition import TEST, TRAIN, UNUSED, read_partition
from hsitp.report import style
from hsitp.report.common import headline

# Fractions along the band axis used as red, green and blue: long, middle and short wavelengths of the cube
# (the prepared file carries band numbers, not wavelengths, so the composite names the bands it used).
RGB_FRACTIONS = (0.75, 0.45, 0.15)


def load_scene(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, DATASET, "cube", "labels", "partition")


def rgb_bands(ds: xr.Dataset) -> list[int]:
    """Indices of the three bands of the false-colour composite (positions along the band axis)."""
    n = ds.sizes[ds["cube"].dims[-1]]
    return [min(n - 1, int(round(f * (n - 1)))) for f in RGB_FRACTIONS]


def false_colour(ds: xr.Dataset) -> np.ndarray:
    """(H, W, 3) in [0, 1]: three bands, each stretched between its 2nd and 98th percentile."""
    cube = ds["cube"]  # (y, x, band) or (y, x, component)
    planes = []
    for i in rgb_bands(ds):
        plane = cube.isel({cube.dims[-1]: i}).values.astype(float)
        lo, hi = np.nanpercentile(plane, [2, 98])
        planes.append(np.clip((plane - lo) / (hi - lo if hi > lo else 1.0), 0, 1))
    return np.stack(planes, axis=-1)


def scene_figure(ds: xr.Dataset) -> Figure:
    """False-colour composite, ground-truth classes and the train/test partition of each protocol of one prepared
    scene."""
    labels = ds["labels"].values
    protocols = file_protocols(ds)
    names = {int(k): v for k, v in (json_attr(ds, "class_names", {}) or {}).items()}
    classes = sorted(int(c) for c in np.unique(labels) if c != 0)
    band_dim = ds["cube"].dims[-1]
    band_ids = [ds[band_dim].values[i].item() for i in rgb_bands(ds)]

    n = 2 + len(protocols)
    # two per row: four panels in one row would be a strip
    fig, axes = style.panel_grid(n, 2 if n > 3 else n, lambda ncol, nrow: (9.5, 4.4 * nrow + 0.6))
    axes[0].imshow(false_colour(ds), interpolation="nearest")
    axes[0].set_title(f"false colour: {band_dim}s {band_ids[0]}, {band_ids[1]}, {band_ids[2]}\nas R, G, B")

    axes[1].imshow(class_image(labels, classes), interpolation="nearest")
    axes[1].set_title(f"ground truth: {len(classes)} classes,\n{int((labels > 0).sum())} labelled pixels")
    # each key right of its panel
    beside = {"loc": "upper left", "bbox_to_anchor": (1.0, 1.0), "fontsize": 7, "frameon": False}
    axes[1].legend(handles=class_handles(classes, names), **beside)

    partition_colours = ListedColormap(["#ffffff", "#1b9e77", "#d95f02"])  # unused, train, test
    for ax, protocol in zip(axes[2:], protocols, strict=True):
        partition = read_partition(ds, protocol)
        ax.imshow(partition, cmap=partition_colours, vmin=0, vmax=2, interpolation="nearest")
        counts = {code: int((partition == code).sum()) for code in (TRAIN, TEST)}
        ax.set_title(f"protocol '{protocol}':\n{counts[TRAIN]} train, {counts[TEST]} test pixels")
    unused = Patch(facecolor="#ffffff", edgecolor="0.6", label="unused / unlabelled")
    key = [Patch(color="#1b9e77", label="train"), Patch(color="#d95f02", label="test"), unused]
    axes[-1].legend(handles=key, **beside)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    name = ds.attrs.get("title", ds.attrs.get("dataset", "scene"))
    grid = f"{ds.sizes['y']} x {ds.sizes['x']} pixels, {ds.sizes[band_dim]} {band_dim}s"
    basis = "read from the prepared file (no hardware-dependent number)"
    fig.suptitle(headline(f"{name} ({grid})", basis, f"prepared on {computed_on(ds.attrs)}"))
    return fig


def class_image(labels: np.ndarray, classes: list[int]) -> np.ndarray:
    """(H, W, 3) RGB of a class map in the shared class colours (style.class_colours); label 0 (unlabelled) and
    labels outside ``classes`` white."""
    colours = style.class_colours(classes)
    lut = np.ones((max(int(np.nanmax(labels)), max(classes, default=0)) + 1, 3))
    for c, col in colours.items():
        lut[c] = col
    return lut[np.clip(labels.astype(int), 0, len(lut) - 1)]


def class_handles(classes: list[int], names: dict[int, str]) -> list[Patch]:
    """Legend entries of the class colour key: 'label name' per class."""
    colours = style.class_colours(classes)
    return [Patch(color=colours[c], label=f"{c} {names.get(c, '')}".strip()) for c in sorted(classes)]


def file_protocols(ds: xr.Dataset) -> list[str]:
    """The accuracy protocols a prepared file holds (``random``, ``block``), in file order."""
    return [str(p) for p in ds["protocol"].values]


def class_table(ds: xr.Dataset) -> pd.DataFrame:
    """Labelled pixels per class and how each protocol's partition divides them (counted from the file's arrays)."""
    labels = ds["labels"].values
    partitions = {p: read_partition(ds, p) for p in file_protocols(ds)}
    names = {int(k): v for k, v in (json_attr(ds, "class_names", {}) or {}).items()}
    rows = []
    for c in sorted(int(c) for c in np.unique(labels) if c != 0):
        in_class = labels == c
        row = {"class": c, "name": names.get(c, ""), "pixels": int(in_class.sum())}
        for p, partition in partitions.items():
            for code, word in ((TRAIN, "train"), (TEST, "test"), (UNUSED, "unused")):
                row[f"{p}_{word}"] = int((in_class & (partition == code)).sum())
        rows.append(row)
    df = pd.DataFrame(rows)
    counted = [k for k in df.columns if k not in ("class", "name")]
    total = {"class": "all", "name": "", **{k: int(df[k].sum()) for k in counted}}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def class_caption(ds: xr.Dataset) -> str:
    return (
        f"{ds.attrs.get('title', ds.attrs.get('dataset', 'scene'))}: labelled pixels per class and how the partition "
        f"of each protocol ({', '.join(file_protocols(ds))}) divides them (seed {ds.attrs.get('seed', '?')}); counted from "
        "the prepared file, no hardware-dependent number."
    )

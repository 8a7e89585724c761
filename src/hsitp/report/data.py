"""Report page of the data stage: each prepared scene (false colour, ground truth, split) and its class table.

Nothing here depends on hardware: the prepared cube is a deterministic function of the raw files and the config.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hsitp.data.split import TEST, TRAIN, UNUSED, read_split
from hsitp.report.common import computed_on, headline, json_attr, load, need

# Fractions along the band axis used as red, green and blue: long, middle and short wavelengths of the cube
# (the prepared file carries band numbers, not wavelengths, so the composite names the bands it used).
RGB_FRACTIONS = (0.75, 0.45, 0.15)


def load_scene(path: str | os.PathLike[str]) -> xr.Dataset:
    ds = load(path, kind="dataset")
    need(ds, "cube", "labels", "split")
    return ds


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
    """False-colour composite, ground-truth classes and the train/test split of one prepared scene."""
    labels = ds["labels"].values
    protocols = split_protocols(ds)
    names = {int(k): v for k, v in (json_attr(ds, "class_names", {}) or {}).items()}
    classes = sorted(int(c) for c in np.unique(labels) if c != 0)
    band_dim = ds["cube"].dims[-1]
    band_ids = [ds[band_dim].values[i].item() for i in rgb_bands(ds)]

    n = 2 + len(protocols)
    fig, axes = plt.subplots(1, n, figsize=(4.4 * n, 4.8), layout="constrained")
    axes[0].imshow(false_colour(ds), interpolation="nearest")
    axes[0].set_title(f"false colour: {band_dim}s {band_ids[0]}, {band_ids[1]}, {band_ids[2]} as R, G, B")

    palette = sns.color_palette("tab20" if len(classes) <= 20 else "husl", max(len(classes), 1))
    lut = np.zeros((int(labels.max()) + 1, 3))
    for colour, c in zip(palette, classes, strict=False):
        lut[c] = colour
    gt = lut[labels]
    gt[labels == 0] = 1.0  # unlabelled: white
    axes[1].imshow(gt, interpolation="nearest")
    axes[1].set_title(f"ground truth: {len(classes)} classes, {int((labels > 0).sum())} labelled pixels")
    handles = [
        Patch(color=palette[i], label=f"{c} {names.get(c, '')}".strip()) for i, c in enumerate(classes)
    ]
    axes[1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=6, frameon=False)

    split_colours = ListedColormap(["#ffffff", "#1b9e77", "#d95f02"])  # unused, train, test
    for ax, protocol in zip(axes[2:], protocols, strict=True):
        split = read_split(ds, protocol)
        ax.imshow(split, cmap=split_colours, vmin=0, vmax=2, interpolation="nearest")
        counts = {code: int((split == code).sum()) for code in (TRAIN, TEST)}
        ax.set_title(f"split '{protocol}': {counts[TRAIN]} train, {counts[TEST]} test pixels")
    axes[-1].legend(
        handles=[
            Patch(color="#1b9e77", label="train"),
            Patch(color="#d95f02", label="test"),
            Patch(facecolor="#ffffff", edgecolor="0.6", label="unused / unlabelled"),
        ],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=7,
        frameon=False,
    )
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    name = ds.attrs.get("title", ds.attrs.get("dataset", "scene"))
    grid = f"{ds.sizes['y']} x {ds.sizes['x']} pixels, {ds.sizes[band_dim]} {band_dim}s"
    fig.suptitle(
        headline(
            f"{name} ({grid})",
            "read from the prepared file (no hardware-dependent number)",
            f"prepared on {computed_on(ds)}",
        )
    )
    return fig


def split_protocols(ds: xr.Dataset) -> list[str]:
    """The split protocols a prepared file holds (``random``, ``block``), in file order."""
    return [str(p) for p in ds["protocol"].values]


def class_table(ds: xr.Dataset) -> pd.DataFrame:
    """Labelled pixels per class and how each split protocol divides them (counted from the file's arrays)."""
    labels = ds["labels"].values
    splits = {p: read_split(ds, p) for p in split_protocols(ds)}
    names = {int(k): v for k, v in (json_attr(ds, "class_names", {}) or {}).items()}
    rows = []
    for c in sorted(int(c) for c in np.unique(labels) if c != 0):
        in_class = labels == c
        row = {"class": c, "name": names.get(c, ""), "pixels": int(in_class.sum())}
        for p, split in splits.items():
            for code, word in ((TRAIN, "train"), (TEST, "test"), (UNUSED, "unused")):
                row[f"{p}_{word}"] = int((in_class & (split == code)).sum())
        rows.append(row)
    df = pd.DataFrame(rows)
    counted = [k for k in df.columns if k not in ("class", "name")]
    total = {"class": "all", "name": "", **{k: int(df[k].sum()) for k in counted}}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


def class_caption(ds: xr.Dataset) -> str:
    return (
        f"{ds.attrs.get('title', ds.attrs.get('dataset', 'scene'))}: labelled pixels per class and how each split "
        f"protocol ({', '.join(split_protocols(ds))}) divides them (seed {ds.attrs.get('seed', '?')}); counted from "
        "the prepared "
        "file, no hardware-dependent number."
    )

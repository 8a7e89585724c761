"""One look for every report figure, and the check that a figure can be read at page width.

Style: a colour-blind-safe palette (Okabe & Ito's eight colours, then Paul Tol's "muted" set; categories beyond
eight also get distinct markers), fonts of at least :data:`MIN_FONT_PT` points on figures at most
:data:`MAX_WIDTH_IN` inches wide, saved at :data:`DPI` (so a figure shown at page width keeps its text legible),
and no figure wider than :data:`MAX_WIDTH_PX` pixels or more elongated than :data:`MAX_ASPECT` : 1.

The check (:func:`figure_problems`) runs on a figure laid out as it is saved: every text artist (titles, suptitle,
legends, axis and tick labels, annotations) must lie inside the figure, no two tick labels of one axis, no two
annotations of one axes and no two titles or axis labels may overlap,
no text may be smaller than the minimum, and the size and aspect must be within the limits. Its wording is
checked too (:func:`wording_problems`): no title over :data:`MAX_TITLE_LINES` lines, no line broken inside a
hyphenated name or after an ``=``, no word twice in a row ("measured — measured"), no "1" with a plural unit
("1 threads/rank"), and no legend titled with a raw column name ("label", "scheme"). :class:`Publisher`
(``hsitp.report.common``) runs it on every figure it saves and records the result in the PNG
(:data:`CHECK_KEY`); :func:`png_problems` / :func:`check_figures` check saved PNGs (size, aspect, the recorded
result, and a blank border: text cut at an edge leaves ink there), as ``hsitp report check-figures DIR`` does.
"""

from __future__ import annotations

import itertools
import os
import re
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.axis import Axis
from matplotlib.backend_bases import RendererBase
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
from matplotlib.transforms import Bbox

DPI = 150  # savefig resolution
MAX_WIDTH_PX = 2400
MAX_WIDTH_IN = MAX_WIDTH_PX / DPI  # 16 in; figures are drawn narrower (FULL_WIDTH_IN) so text stays legible
FULL_WIDTH_IN = 11.0  # a full-width figure: 9 pt text on 11 in still reads as ~6 pt on a 7 in printed page
MAX_ASPECT = 3.0  # longer side / shorter side
MIN_FONT_PT = 7.0
CHECK_KEY = "hsitp-layout-check"  # PNG text chunk: "ok" or the problems found when the figure was saved
MAX_TITLE_LINES = 2  # a title longer than this is a caption: shorten it, move detail to a panel or the legend
MIN_TITLE_PT = 9.0  # wrap_suptitle shrinks a suptitle down to this size before it wraps to a third line

# Okabe & Ito (2008), colour-blind safe; then Paul Tol's "muted" scheme (also colour-blind safe) for more.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
TOL_MUTED = [
    "#332288",
    "#88CCEE",
    "#44AA99",
    "#117733",
    "#999933",
    "#DDCC77",
    "#CC6677",
    "#882255",
    "#AA4499",
]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]


def palette(n: int) -> list[str]:
    """``n`` colour-blind-safe colours: Okabe-Ito first, then Tol muted; beyond 17 the colours repeat (pair
    them with :func:`markers`)."""
    base = OKABE_ITO + TOL_MUTED
    return [base[i % len(base)] for i in range(n)]


def class_colours(classes: list[int]) -> dict[int, tuple[float, float, float]]:
    """One colour per class label, the same in every figure (the scene's ground truth, each run's prediction):
    tab20 (up to 20 classes: Indian Pines has 16; no palette keeps 16 hues apart for every colour vision)."""
    cols = sns.color_palette("tab20" if len(classes) <= 20 else "husl", max(len(classes), 1))
    return {int(c): tuple(col) for c, col in zip(sorted(classes), cols, strict=False)}


def markers(n: int) -> list[str]:
    return [MARKERS[i % len(MARKERS)] for i in range(n)]


def theme() -> None:
    """Apply the style to matplotlib's rcParams (every report page calls it through ``Publisher``)."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.0)
    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": DPI,
            "font.size": 9,
            "axes.titlesize": 9.5,
            "axes.labelsize": 9,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "legend.fontsize": 8,
            "legend.title_fontsize": 8,
            "figure.titlesize": 10,
            "axes.prop_cycle": plt.cycler(color=OKABE_ITO),
            "image.cmap": "viridis",
            "figure.facecolor": "white",
            "savefig.facecolor": "white",
            "figure.constrained_layout.h_pad": 0.06,
            "figure.constrained_layout.w_pad": 0.06,
        }
    )


NBSP = "\u00a0"
# joins a line must not break at: 'L = 200', 'P > 1', '80 GB', '18 MiB', '5 %' (a value away from its name or unit)
_JOINS = (
    re.compile(r"(?<=\S) ([=<>≤≥≈×≡]) (?=\S)"),
    re.compile(r"(?<=\d) (?=(?:[KMGT]i?B|[KMGT]?FLOP|ms|s|%|pp|px|pt)\b)"),
)


def keep_together(text: str) -> str:
    """``text`` with non-breaking spaces where a line must not break: around ``=``, ``>``, ``≡``... between a name
    and its value ('L = 200'), and between a number and its unit ('80 GB')."""
    text = _JOINS[0].sub(lambda m: f"{NBSP}{m.group(1)}{NBSP}", text)
    return _JOINS[1].sub(NBSP, text)


def wrap_lines(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` characters, broken at spaces only: never inside a hyphenated name
    ('h100-nvlink-ib') nor inside a join of :func:`keep_together`."""
    out: list[str] = []
    for line in keep_together(text).split("\n"):
        out += textwrap.wrap(line, width=width, break_on_hyphens=False, break_long_words=False) or [""]
    return out


def wrap_suptitle(fig: Figure) -> None:
    """Fit the figure's suptitle to the figure's width (a title wider than its figure is cut at both sides): each
    line wrapped at spaces only (:func:`wrap_lines`), the font shrunk towards :data:`MIN_TITLE_PT` first when that
    keeps the title within :data:`MAX_TITLE_LINES` lines; lines already short enough are kept as they are."""
    t = getattr(fig, "_suptitle", None)
    if t is None or not t.get_text():
        return
    text, size = t.get_text(), t.get_fontsize()

    def wrapped(pt: float) -> list[str]:  # average glyph of DejaVu Sans ~0.56 em
        return wrap_lines(text, max(20, int(fig.get_figwidth() * 72.0 / (0.56 * pt) * 0.95)))

    sizes = [size] + [s for s in np.arange(size - 0.5, MIN_TITLE_PT - 1e-9, -0.5) if s < size]
    # too long at any size: wrapped at the figure's own size (the check names it)
    fit = next((s for s in sizes if len(wrapped(s)) <= MAX_TITLE_LINES), size)
    t.set_fontsize(fit)
    t.set_text("\n".join(wrapped(fit)))


def figsize(width: float, height: float) -> tuple[float, float]:
    """(width, height) in inches within the limits: at most FULL_WIDTH_IN wide, neither side more than
    MAX_ASPECT - 0.1 times the other (the height grows, never the text shrinks)."""
    width = min(width, FULL_WIDTH_IN)
    limit = MAX_ASPECT - 0.1
    return width, min(max(height, width / limit), width * limit)


def panel_grid(
    n: int, ncol: int, size: Callable[[int, int], tuple[float, float]]
) -> tuple[Figure, list[plt.Axes]]:
    """A constrained-layout figure of ``n`` panels in rows of at most ``ncol``, ``size(ncol, nrow)`` inches; the
    cells left over in the last row hidden. Returns the figure and its ``n`` panels in reading order."""
    ncol = min(ncol, n)
    nrow = int(np.ceil(n / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=size(ncol, nrow), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def key_below(fig: Figure, handles: Sequence[Any], ncol: int, **kw: Any) -> None:
    """The figure's key (``fig.legend`` with ``kw``: labels, title, fontsize) under its panels and unframed, as
    every report figure draws it: inside, a legend hides data."""
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False, **kw)


def log2_axis(ax: plt.Axes, values: Sequence[int]) -> None:
    """A base-2 log x axis with a tick named at each of ``values`` (P, a TP degree: powers of two)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(values, [str(int(v)) for v in values])


def plain_log_ticks(axis: Axis) -> None:
    """Log-axis ticks at 1, 2 and 5 times each power of ten, written as plain numbers (10, 20, 50, 100)."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_formatter(NullFormatter())


# --- the check -----------------------------------------------------------------------------------------------------
def _name(ax: plt.Axes) -> str:
    title = ax.get_title() or ax.get_title("left") or ax.get_label() or "untitled"
    return f"axes {title.splitlines()[0][:40]!r}"


def drawn_ticklabels(axis: Axis) -> list[Text]:
    """The tick labels an axis draws: visible, non-empty, at a tick inside the view interval."""
    lo, hi = sorted(axis.get_view_interval())
    eps = 1e-9 * max(abs(lo), abs(hi), 1.0)
    out = []
    for ticks, locs in (
        (axis.get_major_ticks(len(axis.get_majorticklocs())), axis.get_majorticklocs()),
        (axis.get_minor_ticks(len(axis.get_minorticklocs())), axis.get_minorticklocs()),
    ):
        for tick, loc in zip(ticks, locs, strict=False):
            if not lo - eps <= loc <= hi + eps:
                continue
            for label in (tick.label1, tick.label2):
                if label.get_visible() and label.get_text().strip():
                    out.append(label)
    return out


def _texts(fig: Figure) -> Iterator[tuple[str, Text]]:
    """(where, artist) for every text a reader must see."""
    for attr in ("_suptitle", "_supxlabel", "_supylabel"):
        t = getattr(fig, attr, None)
        if t is not None:
            yield "suptitle" if attr == "_suptitle" else attr[1:], t
    for t in fig.texts:
        if t is not getattr(fig, "_suptitle", None):
            yield "figure text", t
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        name = _name(ax)
        for loc, t in (("", ax.title), (" left", ax._left_title), (" right", ax._right_title)):
            yield f"{name}{loc} title", t
        yield f"{name} x label", ax.xaxis.label
        yield f"{name} y label", ax.yaxis.label
        for t in ax.texts:
            yield f"{name} annotation", t
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if axis.get_visible():
                for t in drawn_ticklabels(axis):
                    yield f"{name} {which} tick label", t


def _legends(fig: Figure) -> Iterator[tuple[str, object]]:
    for leg in fig.legends:
        yield "figure legend", leg
    for ax in fig.axes:
        if ax.get_visible() and ax.get_legend() is not None:
            yield f"{_name(ax)} legend", ax.get_legend()


def _shown(t: Text) -> bool:
    return t.get_visible() and bool(t.get_text().strip())


def figure_problems(fig: Figure, dpi: float = DPI) -> list[str]:
    """What a reader of ``fig`` saved at ``dpi`` could not read, one line each (empty: none).

    Draws the figure (running its layout engine, as ``savefig`` does) and checks every text artist and legend
    against the figure's edges, tick labels of one axis against each other, font sizes, width and aspect."""
    problems: list[str] = []
    w_in, h_in = fig.get_size_inches()
    w_px, h_px = w_in * dpi, h_in * dpi
    if w_px > MAX_WIDTH_PX + 0.5:
        problems.append(f"width {w_px:.0f} px > {MAX_WIDTH_PX} px")
    if max(w_in / h_in, h_in / w_in) > MAX_ASPECT + 1e-9:
        problems.append(f"aspect {w_px:.0f} x {h_px:.0f} px beyond {MAX_ASPECT:g}:1")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox.padded(1.0)  # one pixel of rounding
    for where, t in _texts(fig):
        if not _shown(t):
            continue
        box = t.get_window_extent(renderer)
        label = t.get_text().strip().splitlines()[0][:50]
        if not _contains(inside, box):
            problems.append(f"{where} {label!r} extends beyond the figure ({_overhang(fig.bbox, box)})")
        if t.get_fontsize() < MIN_FONT_PT - 1e-9:
            problems.append(f"{where} {label!r} is {t.get_fontsize():g} pt (< {MIN_FONT_PT:g} pt)")
    for where, leg in _legends(fig):
        box = leg.get_window_extent(renderer)
        if not _contains(inside, box):
            problems.append(f"{where} extends beyond the figure ({_overhang(fig.bbox, box)})")
        for t in leg.get_texts():
            if _shown(t) and t.get_fontsize() < MIN_FONT_PT - 1e-9:
                problems.append(f"{where} entry {t.get_text()!r} is {t.get_fontsize():g} pt")
    return problems + _overlap_problems(fig, renderer) + wording_problems(fig)


def _overlap_problems(fig: Figure, renderer: RendererBase) -> list[str]:
    """Texts that run into each other: titles and axis labels of different axes, one axes' annotations, one
    axis' tick labels."""
    # titles, axis labels and legends of different axes apart (two panels' x labels running into each other)
    named = [
        (w, t) for w, t in _texts(fig) if _shown(t) and ("label" in w or "title" in w) and "tick" not in w
    ]
    problems = [
        f"{named[i][0]} {_first(named[i][1])!r} and {named[j][0]} {_first(named[j][1])!r} overlap"
        for i, j in _overlapping([t.get_window_extent(renderer) for _, t in named])
    ]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        notes = [t for t in ax.texts if _shown(t)]  # annotations (e.g. dataset names on a map) apart
        # the text only: an annotation's leader line is no text to keep apart
        problems += [
            f"{_name(ax)} annotations {notes[i].get_text()!r} and {notes[j].get_text()!r} overlap"
            for i, j in _overlapping([Text.get_window_extent(t, renderer) for t in notes])
        ]
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            labels = [t for t in drawn_ticklabels(axis) if _shown(t)]
            problems += [
                f"{_name(ax)} {which} tick labels {labels[i].get_text()!r} and {labels[j].get_text()!r} overlap"
                for i, j in _overlapping([t.get_window_extent(renderer) for t in labels])
            ]
    return problems


def _overlapping(boxes: list[Bbox]) -> list[tuple[int, int]]:
    """Every pair (i, j), i < j, of ``boxes`` that overlap."""
    return [(i, j) for i, j in itertools.combinations(range(len(boxes)), 2) if _overlap(boxes[i], boxes[j])]


# --- wording: what reads wrong although it fits ---------------------------------------------------------------------
# "the the", "measured — measured"
_REPEATED = re.compile(r"\b([A-Za-z]{2,})\b(?:\s*[—–-]\s*|\s+)\1\b", re.IGNORECASE)
_ONE_PLURAL = re.compile(r"(?<![\w.,/])1\s+([A-Za-z]{3,}(?<![su])s)\b")  # "1 threads/rank", "1 seeds"
# verbs after a "1" ("P = 1 means"), not plural units
_VERBS = frozenset(
    {"does", "means", "holds", "shows", "keeps", "gives", "takes", "makes", "goes", "lies", "runs"}
)
# a legend title that is a column or variable name: an identifier with "_" ("tokens_per_s"), or a bare lower-case
# word ("label", "scheme", "plan"); a symbol ("P", "N", "g") or words with a space or unit read as a label
_RAW_NAME = re.compile(r"[A-Za-z0-9]*_[A-Za-z0-9_]*|[a-z][a-z0-9]+")


def text_problems(text: str) -> list[str]:
    """What reads wrong in one text, whatever its place: a word twice in a row or around a dash ("measured —
    measured"), a "1" with a plural unit ("1 threads/rank"), a line broken inside a hyphenated name
    ("h100-nvlink-" / "ib") or between a name and its value ("L =" / "200")."""
    out = []
    flat = " ".join(text.split())
    for m in _REPEATED.finditer(flat):
        out.append(f"repeats {m.group(1)!r} ({m.group(0)!r})")
    for m in _ONE_PLURAL.finditer(flat):
        if m.group(1).lower() not in _VERBS:
            out.append(f"'1' with a plural unit ({m.group(0)!r})")
    lines = [line.strip() for line in text.strip().split("\n")]
    for a, b in zip(lines, lines[1:], strict=False):
        if re.search(r"\w-$", a) or a.endswith(("=", "<", ">")) or b.startswith(("=", "<", ">")):
            out.append(f"breaks a line inside a name or a value ({a[-20:]!r} / {b[:20]!r})")
    return out


def wording_problems(fig: Figure) -> list[str]:
    """Wording a reader stumbles on although every text fits: a title (suptitle or axes title) over
    :data:`MAX_TITLE_LINES` lines, a legend titled with a raw column name, and :func:`text_problems` in any text
    (titles, labels, annotations, legend entries and titles, tick labels)."""
    problems: list[str] = []
    for where, t in _texts(fig):
        n = len(t.get_text().strip().split("\n"))
        if (where == "suptitle" or where.endswith(" title")) and _shown(t) and n > MAX_TITLE_LINES:
            problems.append(
                f"{where} {_first(t)!r} runs to {n} lines (> {MAX_TITLE_LINES}): shorten it, move detail to a "
                "panel title, the legend or the caption"
            )
    texts = [(w, t) for w, t in _texts(fig) if _shown(t)]
    for where, leg in _legends(fig):
        title = leg.get_title()
        if _shown(title):
            texts.append((f"{where} title", title))
            if _RAW_NAME.fullmatch(title.get_text().strip()):
                problems.append(
                    f"{where} is titled with the raw column name {title.get_text()!r}: name what it shows"
                )
        texts += [(f"{where} entry", e) for e in leg.get_texts() if _shown(e)]
    for where, t in texts:
        problems += [f"{where} {_first(t)!r} {p}" for p in text_problems(t.get_text())]
    return problems


def _first(t: Text) -> str:
    return t.get_text().strip().splitlines()[0][:50].replace(NBSP, " ")


def _contains(outer: Bbox, box: Bbox) -> bool:
    return box.x0 >= outer.x0 and box.y0 >= outer.y0 and box.x1 <= outer.x1 and box.y1 <= outer.y1


def _overlap(a: Bbox, b: Bbox, tol: float = 1.0) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def _overhang(fig_box: Bbox, box: Bbox) -> str:
    sides = {
        "left": fig_box.x0 - box.x0,
        "right": box.x1 - fig_box.x1,
        "bottom": fig_box.y0 - box.y0,
        "top": box.y1 - fig_box.y1,
    }
    return ", ".join(f"{k} by {v:.0f} px" for k, v in sides.items() if v > 1.0) or "by < 1 px"


# --- saved PNGs ----------------------------------------------------------------------------------------------------
def png_problems(path: str | os.PathLike[str]) -> list[str]:
    """What is wrong with a saved report PNG: size, aspect, the layout check recorded when it was saved (absent:
    not saved through ``Publisher``), and ink on its outermost pixels (text or a legend cut at the edge)."""
    from PIL import Image

    problems: list[str] = []
    with Image.open(path) as im:
        w, h = im.size
        recorded = im.info.get(CHECK_KEY)
        px = np.asarray(im.convert("RGB"), dtype=np.int16)
    if w > MAX_WIDTH_PX:
        problems.append(f"width {w} px > {MAX_WIDTH_PX} px")
    if max(w / h, h / w) > MAX_ASPECT + 1e-9:
        problems.append(f"aspect {w} x {h} px beyond {MAX_ASPECT:g}:1")
    if recorded is None:
        problems.append(f"no {CHECK_KEY} record (not saved by hsitp.report's Publisher)")
    elif recorded != "ok":
        problems += [f"when saved: {p}" for p in recorded.split("\n")]
    border = np.concatenate([px[0], px[-1], px[:, 0], px[:, -1]])
    ink = np.abs(border - border[0]).max(axis=1) > 40  # anything clearly unlike the background
    if ink.any():
        problems.append(f"{int(ink.sum())} border pixels are not background: something is cut at an edge")
    return problems


def check_figures(folder: str | os.PathLike[str]) -> dict[Path, list[str]]:
    """Every PNG under ``folder`` with its problems (:func:`png_problems`); figures with none are left out."""
    return {p: probs for p in sorted(Path(folder).rglob("*.png")) if (probs := png_problems(p))}

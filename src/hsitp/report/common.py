"""What every report page shares: reading a stage's netCDF and writing figures (PNG + PDF) and tables (CSV +
Markdown + LaTeX) under the names of :mod:`hsitp.report.outputs`; the hardware behind a number is named by
:mod:`hsitp.analysis.labels` on the file's attributes.

Report code reads results only (``hsitp.io.read_netcdf``); it never runs a stage, so re-rendering after a change
to a notebook or a plotting function costs seconds.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hsitp.analysis.read import load
from hsitp.contracts import COST
from hsitp.io import atomic_write_text
from hsitp.markdown import markdown_table
from hsitp.report import style
from hsitp.report.outputs import Output, output

log = logging.getLogger(__name__)

MODELLED = "modelled, not measured"
MEASURED = "measured"


# --- reading -----------------------------------------------------------------------------------------------------


def load_cost(path: str | os.PathLike[str], table: str) -> xr.Dataset:
    """A cost-model table (rho, ccr, boundary, scale, plan): :func:`load` by its contract."""
    return load(path, COST[table])


# --- figures -------------------------------------------------------------------------------------------------------
def headline(what: str, basis: str, hardware: str, width: int | None = None) -> str:
    """Figure title of two lines: what is shown, then whether it is measured or modelled and on which hardware
    ('measured (mean over repeats) — CPU: ...'). A hardware line that starts with the basis itself ('measured on
    CPU: ...' after 'measured') stands alone, so no word is said twice. ``Publisher`` fits each line to the
    figure's width when it saves (:func:`hsitp.report.style.wrap_suptitle`); ``width`` (characters) wraps it here
    already, at spaces only. Keep each line short enough to fit one line: the figure check fails a title of more
    than two lines (detail belongs in a panel title, the legend or the caption)."""
    second = hardware if hardware.startswith(f"{basis} ") else f"{basis} — {hardware}"
    lines = [what, second]
    return "\n".join(line for t in lines for line in (style.wrap_lines(t, width) if width else [t]))


def log_limits(values: Iterable[float], pad: float = 1.6) -> tuple[float, float]:
    """Log-axis limits around the positive finite values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=float)
    if v.size == 0:
        return 0.1, 10.0
    return float(v.min()) / pad, float(v.max()) * pad


def fmt_num(x: Any, digits: int = 3) -> str:
    """Short number for tables and labels: 3 significant digits, '—' for NaN/None."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not math.isfinite(xf):
        return "—"
    if xf == 0:
        return "0"
    if xf.is_integer() and abs(xf) < 1e9:
        return str(int(xf))
    if 1e3 <= abs(xf) < 1e9:
        return f"{xf:.0f}"
    if 1e-3 <= abs(xf) < 1e3:
        return f"{xf:.{digits}g}"
    return f"{xf:.{digits - 1}e}"


# --- writing -------------------------------------------------------------------------------------------------------
class SavedFigure:
    """A figure written to disk; a notebook displays the saved PNG itself (what the report shows, byte for byte)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths

    @property
    def png(self) -> Path:
        return next(p for p in self.paths if p.suffix == ".png")

    def _repr_png_(self) -> bytes:
        return self.png.read_bytes()

    def __repr__(self) -> str:
        return f"SavedFigure({', '.join(str(p) for p in self.paths)})"


class Publisher:
    """Writes one stage's figures and tables under ``out_dir`` (figures/ and tables/), by their registered names.

    Each method returns what it wrote in a form a notebook displays (the Figure, the DataFrame)."""

    def __init__(self, out_dir: str | os.PathLike[str], stage: str) -> None:
        self.out_dir = Path(out_dir)
        self.stage = stage
        self.written: list[Path] = []
        style.theme()  # one look for every figure: colour-blind-safe palette, legible fonts

    def _paths(self, out: Output, dataset: str | None) -> list[Path]:
        base = out.base(dataset)
        folder = self.out_dir / out.folder
        folder.mkdir(parents=True, exist_ok=True)
        return [folder / f"{base}.{ext}" for ext in out.formats]

    def figure(self, fig: Figure, name: str, dataset: str | None = None) -> SavedFigure:
        """Save PNG and PDF (:func:`save_figure`: checked as drawn, no time stamp in the PDF) under the output's
        registered name."""
        out = output(self.stage, name)
        if out.kind != "figure":
            raise ValueError(f"{out.base()} is a table")
        saved = save_figure(fig, self._paths(out, dataset))
        self.written += saved.paths
        return saved

    def table(self, df: pd.DataFrame, name: str, caption: str, dataset: str | None = None) -> pd.DataFrame:
        """CSV (full precision), Markdown and LaTeX (3 significant digits, '—' for missing), caption on top."""
        out = output(self.stage, name)
        if out.kind != "table":
            raise ValueError(f"{out.base()} is a figure")
        csv_path, md_path, tex_path = self._paths(out, dataset)
        atomic_write_text(csv_path, df.to_csv(index=False))
        shown = df.map(fmt_num) if hasattr(df, "map") else df.applymap(fmt_num)
        atomic_write_text(md_path, f"{caption}\n\n{markdown_table(shown, floatfmt='g')}\n")
        label = out.base(dataset).replace("_", "-")
        tex = shown.to_latex(index=False, caption=_tex_escape(caption), label=f"tab:{label}", escape=True)
        atomic_write_text(tex_path, tex)
        self.written += [csv_path, md_path, tex_path]
        return df


def save_figure(fig: Figure, paths: list[Path]) -> SavedFigure:
    """Write ``fig`` to each of ``paths`` (PNG, PDF) and close it: the suptitle fitted to the width, the
    readability check (:func:`hsitp.report.style.figure_problems`) run on the figure as drawn for the PNG, each
    problem logged and the result recorded in the PNG (``hsitp report check-figures`` reads it); no time stamp in
    the PDF, so re-rendering unchanged data gives the same bytes. Closing it keeps an inline backend from showing
    it a second time. Every report figure is saved through here (``Publisher.figure``, the headline page)."""
    try:
        style.wrap_suptitle(fig)
        fig.set_dpi(style.DPI)
        problems = style.figure_problems(fig)
        for p in problems:
            log.warning("%s: %s", paths[0].stem, p)
        for path in paths:
            tmp = path.with_name(f".{path.name}.tmp")
            if path.suffix == ".png":
                _save_drawn_png(fig, tmp, {"Software": None, style.CHECK_KEY: "\n".join(problems) or "ok"})
            else:
                fig.savefig(tmp, format=path.suffix[1:], metadata={"CreationDate": None})
            os.replace(tmp, path)
    finally:
        plt.close(fig)
    return SavedFigure(list(paths))


def _save_drawn_png(fig: Figure, path: Path, metadata: dict[str, str | None]) -> None:
    """The PNG of the pixels the readability check just drew: the bytes ``savefig`` would write at the figure's
    dpi (it draws the same figure again and calls the same ``imsave``), without a second layout and draw."""
    if not isinstance(fig.canvas, FigureCanvasAgg):  # no pixels kept: draw them
        fig.savefig(path, format="png", metadata=metadata)
        return
    mpl.image.imsave(
        path, fig.canvas.buffer_rgba(), format="png", origin="upper", dpi=fig.dpi, metadata=metadata
    )


def _tex_escape(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
        text = text.replace(a, b)
    return text.replace("ρ", r"$\rho$").replace("β", r"$\beta$").replace("·", r"$\cdot$")

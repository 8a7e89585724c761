"""Every report figure readable at page width (issue 26): text inside the figure, tick labels apart, fonts of at
least 7 pt, width <= 2400 px and aspect <= 3:1, checked on figures rendered from small files and on saved PNGs
(what ``hsitp report check-figures DIR`` runs on a real run's figures)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from report_synthetic import render_every_figure  # noqa: E402

from hsitp.cli import main  # noqa: E402
from hsitp.report import style  # noqa: E402
from hsitp.report.common import Publisher  # noqa: E402
from hsitp.report.outputs import OUTPUTS  # noqa: E402


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figures")
    with pytest.MonkeyPatch.context() as mp:  # PNG only: the PDF is the same figure, and a third of the time
        mp.setattr("hsitp.report.outputs.FIGURE_FORMATS", ("png",))
        return folder, render_every_figure(folder)


def test_every_figure_is_readable_at_page_width(rendered):
    """Catches a title, legend, tick or axis label cut off at an edge, overlapping tick labels, text below 7 pt, a
    figure wider than 2400 px or a strip beyond 3:1 (issue 26: train_curves' legend cut at both sides, the
    3393 x 390 px bench_compute_vs_comm) in any registered figure."""
    folder, pngs = rendered
    assert set(pngs) == {f"{o.stage}_{o.name}" for o in OUTPUTS if o.kind == "figure"}
    problems = style.check_figures(folder / "figures")
    assert problems == {}, "\n".join(f"{p.name}: {'; '.join(v)}" for p, v in problems.items())
    assert (
        main(["report", "check-figures", str(folder / "figures")]) == 0
    )  # what CI runs on its smoke figures


@pytest.mark.filterwarnings("ignore:constrained_layout not applied")  # the deliberately broken figures
def test_the_check_sees_cut_text_and_strips(tmp_path, capsys):
    """Catches a figure check that passes what issue 26 found: a legend outside the figure, a suptitle wider than
    the figure, a 3393 x 390 px strip, overlapping tick labels, two panels' axis labels running into each other
    and 5 pt text; and a PNG check that misses ink at the edge or a PNG not saved through the Publisher."""
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot([0, 1], [0, 1], label="a run whose label is long")
    ax.legend(loc="center left", bbox_to_anchor=(1.6, 0.5))
    fig.suptitle("a title much wider than the four-inch figure it belongs to, cut at both sides " * 2)
    ax.set_xticks([0, 0.01, 1], ["first long label", "second long label", "1"])
    ax.set_ylabel("y", fontsize=5)
    found = "\n".join(style.figure_problems(fig))
    assert "axes 'untitled' legend extends beyond the figure (right" in found
    assert "suptitle 'a title much wider" in found and "left by" in found and "right by" in found
    assert "x tick labels 'first long label' and 'second long label' overlap" in found
    assert "y label 'y' is 5 pt" in found
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 3), layout="constrained")  # train_resources before
    left.set_xlabel("peak memory of the tracked step [MiB] (bar: fullest rank; dots: ranks)")
    right.set_xlabel("tokens / s (batch x N per slowest rank's mean step)")
    assert any(
        "x label 'peak memory of the tracked step" in p and "tokens / s (batch" in p and p.endswith("overlap")
        for p in style.figure_problems(fig)
    )
    strip = plt.figure(figsize=(3393 / style.DPI, 390 / style.DPI))
    found = style.figure_problems(strip)
    assert any("width 3393 px > 2400 px" in p for p in found) and any("beyond 3:1" in p for p in found)
    plt.close("all")
    # saved PNGs: the recorded check, and ink on the border of a PNG from elsewhere
    pub = Publisher(tmp_path, "bench")
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.set_title("W" * 120, loc="left")  # no word gap where the edge cuts it
    png = pub.figure(fig, "ccr_vs_p").png
    assert any("when saved: axes" in p and "extends beyond" in p for p in style.png_problems(png))
    assert any("border pixels" in p for p in style.png_problems(png))
    other = tmp_path / "other.png"
    fig, ax = plt.subplots(figsize=(4, 3))
    fig.savefig(other)
    assert any("not saved by hsitp.report's Publisher" in p for p in style.png_problems(other))
    capsys.readouterr()
    assert main(["report", "check-figures", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "other.png: no hsitp-layout-check record" in out and "2 of 2 figures have problems" in out
    plt.close("all")

"""Open a Snakemake report in headless Chromium and check it: every embedded figure decodes (natural width > 0),
every entry's caption names its hardware, the page logs no error; screenshots of the front page and of one figure
page opened through the report's own navigation.

Used by ``hsitp report check`` (for any run's report.html) and by tests/test_workflow_run.py. Drives Debian's
``chromium`` through Playwright (``pip install '.[test]'``; never ``playwright install``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hsitp.errors import HsitpError

# What a caption must say about hardware, per stage (the category of the report entry: the name's first part).
CAPTION_HARDWARE: Mapping[str, tuple[str, ...]] = {
    "data": ("no hardware-dependent number",),
    "cost": ("modelled for",),
    "bench": ("measured on",),
    "probe": ("measured on",),
    "train": ("measured on",),
}

_IMAGE_WIDTHS = """async () => Promise.all(Object.values(results)
    .filter(r => r.data_uri.startsWith('data:image/'))
    .map(r => new Promise(done => {
        const img = new Image();
        img.onload = () => done([r.name, img.naturalWidth]);
        img.onerror = () => done([r.name, 0]);
        img.src = r.data_uri;
    })))"""


class BrowserCheckError(HsitpError):
    """The report failed a check in the browser (or no browser could be started); the message says which."""


@dataclass
class ReportCheck:
    """What the browser saw."""

    entries: dict[str, str]  # file name -> caption text
    image_widths: dict[str, int]  # embedded image name -> natural width in pixels
    errors: list[str] = field(default_factory=list)  # console errors and page errors
    screenshots: list[Path] = field(default_factory=list)


def chromium_path() -> str | None:
    """``$HSITP_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on PATH, else None."""
    return os.environ.get("HSITP_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def check_report(
    report: str | os.PathLike[str],
    shots: str | os.PathLike[str],
    *,
    figure: str,
    chromium: str | None = None,
) -> ReportCheck:
    """Open ``report`` and check it; screenshots ``front.png`` and ``figure.png`` (the entry whose name starts with
    ``figure``, opened through its category, subcategory and view link) go to ``shots``.

    Raises BrowserCheckError naming every failure: an image that does not decode, a caption without its hardware,
    console or page errors, or a figure that cannot be found through the navigation."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise BrowserCheckError("playwright is not installed: pip install '.[test]'") from exc
    exe = chromium or chromium_path()
    if not exe:
        raise BrowserCheckError("no chromium found: apt-get install chromium, or set HSITP_CHROMIUM")
    report, shots = Path(report).resolve(), Path(shots)
    if not report.is_file():
        raise BrowserCheckError(f"{report}: no such report (snakemake --report {report} ...)")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        try:
            entries, widths, errors = _visit(browser, report, shots, figure)
        finally:
            browser.close()
    problems = [f"{name}: image does not decode" for name, w in widths.items() if w <= 0]
    problems += _caption_problems(entries) + [f"browser: {e}" for e in errors]
    if problems:
        raise BrowserCheckError(f"{report}: " + "; ".join(problems))
    return ReportCheck(entries, widths, errors, [shots / "front.png", shots / "figure.png"])


def _caption_problems(entries: dict[str, str]) -> list[str]:
    """Every entry whose caption does not name the hardware its stage ran on (``CAPTION_HARDWARE``)."""
    problems = []
    for name, caption in entries.items():
        wanted = CAPTION_HARDWARE.get(name.split("_", 1)[0], ())
        if wanted and not any(w in caption for w in wanted):
            problems.append(f"{name}: caption does not name its hardware ({' or '.join(wanted)})")
    return problems


def _visit(
    browser: Any, report: Path, shots: Path, figure: str
) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """The front page's entries (name -> caption), its images' natural widths and the console's errors, with the
    front page and one figure page (opened through the report's own navigation) screenshot to ``shots``."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(shots / "front.png"))
    entries = {
        e["name"]: e["caption"] or ""
        for e in page.evaluate("() => Object.values(results).map(r => ({name: r.name, caption: r.caption}))")
    }
    widths = dict(page.evaluate(_IMAGE_WIDTHS))
    target = next((n for n in sorted(entries) if n.startswith(figure) and n.endswith(".png")), None)
    if target is None:
        raise BrowserCheckError(f"{report}: no figure entry starting with {figure!r}")
    stage = target.split("_", 1)[0]
    page.get_by_role("link", name=stage, exact=True).click()
    page.get_by_role("link", name="figures", exact=True).click()
    page.locator("tr", has_text=target.removesuffix(".png")).locator("a").first.click()
    shown = page.locator("img[src^='data:image/png']")
    shown.first.wait_for()
    if page.evaluate("(img) => img.naturalWidth", shown.first.element_handle()) <= 0:
        errors.append(f"{target}: the figure page's image does not decode")
    page.screenshot(path=str(shots / "figure.png"))
    return entries, widths, errors

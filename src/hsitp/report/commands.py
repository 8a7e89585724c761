"""``hsitp report notebook STAGE``: execute one stage's notebook with papermill and convert it to HTML;
``hsitp report check-figures DIR``: every figure readable at page width (hsitp.report.style);
``hsitp report check-metadata DIR``: every netCDF name labelled (hsitp.io.tree_metadata_problems);
``hsitp report headline``: the headline experiment's figures from its committed reference
(hsitp.report.headline).
``register`` returns the group so that ``hsitp.publish.commands`` adds its actions (reference, measured, jobs, check).

The notebook (``notebooks/STAGE.ipynb``) reads the stage's netCDF files and writes its figures and tables through
:mod:`hsitp.report`; this command only injects the parameters (input paths, output folder), runs it, and writes
the executed notebook and its HTML rendering. One Snakemake rule per stage calls it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any

from hsitp.errors import HsitpError

log = logging.getLogger(__name__)


class NotebookError(HsitpError):
    """A report notebook failed; the message names the notebook, the cell's error and the executed copy."""


def register(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    p = sub.add_parser("report", help="figures, tables and notebooks from the stages' netCDF (no recompute)")
    rsub = p.add_subparsers(dest="report_command", required=True, metavar="ACTION")
    nb = rsub.add_parser("notebook", help="run notebooks/STAGE.ipynb (papermill) and convert it to HTML")
    nb.add_argument("stage", help="report stage: data, cost, bench, probe or train")
    nb.add_argument("--notebook", required=True, help="the parameterised notebook, e.g. notebooks/cost.ipynb")
    nb.add_argument("--params-json", default="{}", help="papermill parameters as JSON (input paths, out_dir)")
    nb.add_argument("--out", required=True, help="executed notebook (.ipynb)")
    nb.add_argument("--html", required=True, help="HTML rendering of the executed notebook")
    nb.add_argument("--timeout", type=int, default=600, help="seconds per cell before the run is abandoned")
    nb.set_defaults(func=_notebook)
    cf = rsub.add_parser(
        "check-figures",
        help="every PNG under DIR readable at page width: text inside the figure, tick labels apart, fonts >= 7 pt "
        "(recorded when saved), width <= 2400 px, aspect <= 3:1, nothing cut at the border; exit 1 otherwise",
    )
    cf.add_argument("dir", help="a folder of report figures, e.g. results/smoke/figures")
    cf.set_defaults(func=_check_figures)
    cm = rsub.add_parser(
        "check-metadata",
        help="every variable and coordinate of every .nc under DIR has a long_name (and units where numeric) and "
        "each file a descriptive title; exit 1 otherwise",
    )
    cm.add_argument("dir", help="a run's results folder, e.g. results/smoke")
    cm.set_defaults(func=_check_metadata)
    hl = rsub.add_parser(
        "headline",
        help="the headline experiment's figures (accuracy forest plot, memory per rank vs tokens/s, time to "
        "accuracy; PNG + PDF, checked) and a Markdown page, from a committed reference alone",
    )
    hl.add_argument(
        "--reference", required=True, type=Path, help="the reference, e.g. results/reference/cpu-places"
    )
    hl.add_argument("--out", required=True, type=Path, help="output folder, e.g. results/headline")
    hl.set_defaults(out_is_folder=True)  # hsitp.config.check_outputs: a folder is what --out names here
    hl.add_argument(
        "--docs",
        type=Path,
        help="also write a compact copy of each PNG here (palette PNG), e.g. docs/figures",
    )
    hl.set_defaults(func=_headline)
    return rsub


def _report_problems(what: str, found: dict[Path, list[str]], checked: int) -> int:
    for path, problems in found.items():
        for problem in problems:
            print(f"{path}: {problem}")
    if found:
        print(f"{len(found)} of {checked} {what} have problems")
        return 1
    print(f"{checked} {what}: no problem")
    return 0


def _walk(command: str, folder: str, pattern: str, what: str, check) -> int:  # noqa: ANN001 (a checker)
    """Run ``check(folder)`` over the files ``pattern`` finds under ``folder``; one line per problem, exit 1 on any."""
    if not Path(folder).is_dir():
        found = "a file, not a folder" if Path(folder).exists() else "no such folder"
        raise HsitpError(f"report {command}: {folder}: {found}; give the folder that holds the {what}")
    checked = len(list(Path(folder).rglob(pattern)))
    if not checked:
        raise HsitpError(f"report {command}: {folder} holds no {pattern} file")
    return _report_problems(what, check(folder), checked)


def _check_figures(args: argparse.Namespace) -> int:
    from hsitp.report.style import check_figures

    return _walk("check-figures", args.dir, "*.png", "figures", check_figures)


def _check_metadata(args: argparse.Namespace) -> int:
    from hsitp.io import tree_metadata_problems

    return _walk("check-metadata", args.dir, "*.nc", "netCDF files", tree_metadata_problems)


def _headline(args: argparse.Namespace) -> int:
    import time

    from hsitp.report.headline import FIGURES, FILES, render
    from hsitp.report.style import png_problems

    start = time.perf_counter()
    print(f"headline: reading {args.reference} ({', '.join(FILES.values())})", flush=True)
    command = f"hsitp report headline --reference {args.reference} --out {args.out}"
    if args.docs is not None:
        command += f" --docs {args.docs}"
    written = render(args.reference, args.out, command, args.docs)
    pngs = [p for p in written if p.suffix == ".png"]
    copies = f", compact PNG copies in {args.docs}" if args.docs is not None else ""
    print(
        f"headline: wrote {len(FIGURES)} figures (PNG + PDF), their tables (CSV) and "
        f"{args.out / 'headline.md'}{copies} in {time.perf_counter() - start:.1f} s"
    )
    found = {p: problems for p in pngs if (problems := png_problems(p))}
    return _report_problems("figures", found, len(pngs))


def _notebook(args: argparse.Namespace) -> int:
    from hsitp.report.outputs import STAGES

    if args.stage not in STAGES:
        raise HsitpError(f"report notebook: unknown stage {args.stage!r}; one of {', '.join(STAGES)}")
    try:
        params = json.loads(args.params_json)
    except json.JSONDecodeError as exc:
        raise HsitpError(f"report notebook: --params-json is not JSON ({exc})") from exc
    if not isinstance(params, dict):
        raise HsitpError(
            f"report notebook: --params-json must be a JSON object ({{...}}), found {type(params).__name__}"
        )
    run_notebook(args.notebook, params, args.out, args.html, timeout=args.timeout)
    print(f"wrote {args.out} and {args.html}")
    return 0


def _check_notebook_file(notebook: Path) -> None:
    """Refuse, naming the file, a notebook papermill would fail on with a traceback: empty, not UTF-8, not JSON."""
    import nbformat

    raw = notebook.read_bytes()
    if not raw.strip():
        raise NotebookError(f"{notebook}: is empty, not a notebook (.ipynb JSON)")
    try:
        nbformat.reads(raw.decode("utf-8"), as_version=4)
    except UnicodeDecodeError as exc:
        raise NotebookError(
            f"{notebook}: is not UTF-8 text (byte at offset {exc.start}), not a notebook"
        ) from exc
    # nbformat's NotJSONError, a ValidationError, a KeyError on a JSON of another kind
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotebookError(f"{notebook}: not a readable notebook ({first[:160]})") from exc


def run_notebook(
    notebook: str | os.PathLike[str],
    params: dict[str, Any],
    out: str | os.PathLike[str],
    html: str | os.PathLike[str],
    *,
    timeout: int = 600,
) -> None:
    """Execute ``notebook`` with ``params`` in this working directory; write the executed copy and its HTML."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    notebook, out, html = Path(notebook), Path(out), Path(html)
    if not notebook.is_file():
        raise NotebookError(f"{notebook}: no such notebook")
    _check_notebook_file(notebook)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        pm.execute_notebook(
            str(notebook),
            str(out),
            parameters=params,
            kernel_name="python3",
            cwd=os.getcwd(),  # input paths are relative to the directory Snakemake runs in
            progress_bar=False,
            request_save_on_cell_execute=False,  # a page takes seconds: one write at the end, not one per cell
            execution_timeout=timeout,
        )
    except PapermillExecutionError as exc:
        raise NotebookError(
            f"{notebook}: cell {exc.exec_count} raised {exc.ename}: {exc.evalue} (executed copy: {out})"
        ) from exc
    write_html(out, html)


def write_html(executed: str | os.PathLike[str], html: str | os.PathLike[str]) -> Path:
    """HTML of an executed notebook (figures embedded as data URIs), written atomically."""
    import nbformat
    from nbconvert import HTMLExporter

    from hsitp.io import atomic_write_text

    nb = nbformat.read(str(executed), as_version=4)
    body, _ = HTMLExporter().from_notebook_node(nb)
    return atomic_write_text(html, body)

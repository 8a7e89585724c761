"""The generated blocks of docs/measured.md and README.md: every table of a headline run written from its
committed reference (``results/reference/RUN/``, ``hsitp report reference``), never typed by hand.

A document holds a block between two markers::

    <!-- generated: RUN/NAME (hsitp report measured) -->
    ...
    <!-- end generated: RUN/NAME -->

``hsitp report measured --reference results/reference/RUN`` rewrites the text between the markers of RUN's blocks
in each document; ``--check`` rewrites nothing and exits 1 when a block differs from its regeneration (a test runs
it, so committed prose and data cannot drift apart). Blocks: ``recipes`` (each study's best trial), ``budget`` (best
validation OA after k trials and Dodge et al.'s expected best), ``fair`` (accuracy per plan, P and protocol with the
verdicts vs tp, beside the SVM and the random forest), ``tuning`` (the untuned control beside the tuned cells) and
``answer`` (memory, throughput and time to accuracy vs tp, where the reference has the probe's files) and
``headline`` (the README's sentences: tp against the SVM, the other cells' verdicts counted)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from hsitp.analysis.answer import answer_table, load_probe, tuning_effect_table
from hsitp.analysis.cells import several_partitions, verdict_name
from hsitp.contracts import KERNEL_CHECK, TRAIN_SUMMARY, TUNE_STUDY, summary_cells
from hsitp.errors import HsitpError
from hsitp.io import atomic_write_text
from hsitp.markdown import markdown_table

BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w.-]+/[\w-]+) \(hsitp report measured\) -->\n)(?P<body>.*?)(<!-- end generated: "
    r"(?P=name) -->)",
    re.S,
)
PERCENT = 100.0
MIB = 2.0**20
# d_oa_vs_baseline_{mean, ci_low, ci_high}: a cell's OA minus the baseline's, paired by partition
VS_SVM = ("mean", "ci_low", "ci_high")


class MeasuredDocError(HsitpError):
    """A reference that cannot fill a block, or a block marker without its end."""


def _md(df: pd.DataFrame) -> str:
    return markdown_table(df, floatfmt=".3g") + "\n"


@dataclass
class Reference:
    """A committed reference folder (``results/reference/RUN``), each of its files read once for every block."""

    path: Path

    @cached_property
    def summary(self) -> xr.Dataset:
        return TRAIN_SUMMARY.read(self.path / "train" / "summary.nc")

    @cached_property
    def cells(self) -> pd.DataFrame:
        """The summary's cells (:func:`hsitp.contracts.summary_cells`), coordinates as columns, in file order."""
        return summary_cells(self.summary).reset_index()

    @cached_property
    def keys(self) -> list[str]:
        """What a cell's baselines, tp and README line are per: the protocol, and the scene where the reference
        trained several (the first scene's SVM and tp stood beside every scene's cells)."""
        return ["dataset", "protocol"] if self.cells["dataset"].nunique() > 1 else ["protocol"]

    @cached_property
    def control(self) -> xr.Dataset | None:
        path = self.path / "train" / "control_summary.nc"
        return TRAIN_SUMMARY.read(path) if path.exists() else None

    @cached_property
    def studies(self) -> list[xr.Dataset]:
        return [TUNE_STUDY.read(p) for p in sorted(self.path.glob("tune/*/*.nc"))]


def recipes_block(ref: Reference) -> str:
    """Each study's best trial: the tuned recipe of each plan and protocol, with the study's trial counts and time."""
    rows = []
    for s in ref.studies:
        best = json.loads(str(s.attrs["best_params"]))
        states = pd.Series(s["state"].values.astype(str)).value_counts()
        rows.append(
            {
                "plan": s.attrs["plan"], "protocol": s.attrs["protocol"], "g": int(best.get("groups", 1)),
                "lr": best["lr"], "weight decay": best["weight_decay"], "label smoothing": best["label_smoothing"],
                "warm-up steps": int(best["warmup_steps"]), "per_class": int(best["per_class"]),
                "best validation OA": float(s["best_so_far"].values[-1]),  # of the completed trials
                "trials (complete / pruned / failed)": " / ".join(
                    str(int(states.get(k, 0))) for k in ("complete", "pruned", "failed")
                ),
                "study wall time [min]": float(np.nansum(s["wall_s"].values)) / 60,
            }
        )  # fmt: skip
    if not rows:
        raise MeasuredDocError(f"{ref.path}: no tuning study under tune/ (the recipes block needs them)")
    return _md(pd.DataFrame(rows).sort_values(["protocol", "plan"], kind="stable"))


def budget_block(ref: Reference) -> str:
    """Best validation OA after 4, 8, 12 and all trials (the search as run), and Dodge et al.'s expected best of
    1 and of all start-up trials with its spread: a curve still rising at the end says the budget was short."""
    rows = []
    for s in ref.studies:
        best = s["best_so_far"].values
        n = len(best)
        row: dict[str, object] = {"plan": s.attrs["plan"], "protocol": s.attrs["protocol"]}
        for k in sorted({min(4, n), min(8, n), min(12, n), n}):
            row[f"best after {k}"] = float(best[k - 1])
        eb, sd = s["expected_best"].values, s["expected_best_std"].values
        row["expected best of 1 start-up trial"] = f"{eb[0]:.3f} ± {sd[0]:.3f}"
        row[f"expected best of {len(eb)}"] = f"{eb[-1]:.3f} ± {sd[-1]:.3f}"
        row["gain in the last half [pp]"] = PERCENT * float(best[-1] - best[n // 2 - 1])
        rows.append(row)
    return _md(pd.DataFrame(rows).sort_values(["protocol", "plan"], kind="stable"))


def _pp(x: float, fmt: str = ".1f") -> str:
    """A fraction in percent (points); "–" where it does not exist (a spread over one seed)."""
    return f"{PERCENT * float(x):{fmt}}" if np.isfinite(float(x)) else "–"


def _summary_rows(ref: Reference, recipe: str) -> list[dict[str, object]]:
    rows = []
    for c in ref.cells.itertuples(index=False):
        k = float(getattr(c, "seeds_to_decide", np.nan))
        tp = c.plan == "tp"
        row: dict[str, object] = {
            **{k: getattr(c, k) for k in ref.keys}, "plan": c.plan, "recipe": recipe, "P": c.P, "g": c.g if not tp else "",
            "seeds": int(c.seeds), "OA [%] mean ± std": f"{_pp(c.oa_mean)} ± {_pp(c.oa_std)}",
            "ΔOA vs tp [pp] (95 % CI)": "reference" if tp else
            f"{_pp(c.d_oa_vs_tp_mean, '+.1f')} [{_pp(c.d_oa_vs_tp_ci_low, '+.1f')}, {_pp(c.d_oa_vs_tp_ci_high, '+.1f')}]",
            "verdict": "" if tp else verdict_name(ref.summary, c.i),
            "seeds to decide": "" if tp or not np.isfinite(k) or k <= 0 else int(k),
        }  # fmt: skip
        if several_partitions(ref.summary):
            from hsitp.train.summary import UNIT_FLAGS

            unit = UNIT_FLAGS[int(c.verdict_unit_flag)] if hasattr(c, "verdict_unit_flag") else "seed"
            spreads = f"{_pp(c.oa_partition_std)} / {_pp(c.oa_seed_std)}"
            row = _with_partitions(
                row, int(c.partitions), spreads, str(row["ΔOA vs tp [pp] (95 % CI)"]), unit
            )
        rows.append(row)
    return rows


def _with_partitions(
    row: dict[str, object], partitions: int, spreads: str, d_oa: str, unit: str = "seed"
) -> dict[str, object]:
    """A fair-table row (a cell's or a baseline's) of a summary with partitions: replicates as partitions x
    seeds, the OA's spread across partitions and across seeds apart (``spreads``), the OA difference to tp
    ``d_oa``, and the units to decide named by what the interval is over (``unit``)."""
    k = row["seeds to decide"]
    return {
        **{key: row[key] for key in ("dataset", "protocol", "plan", "recipe", "P", "g") if key in row},
        "partitions × seeds": f"{partitions} × {row['seeds']}",
        "OA [%] mean ± std": row["OA [%] mean ± std"],
        "OA sd across partitions / seeds [pp]": spreads,
        "ΔOA vs tp [pp] (95 % CI)": d_oa,
        "verdict": row["verdict"],
        "to decide": "" if k == "" else f"{k} {unit}s",
    }


def _baseline_rows(ref: Reference) -> list[dict[str, object]]:
    summary, rows = ref.summary, []
    if "classifier" not in summary.coords:
        return rows
    for key, cells in ref.cells.groupby(ref.keys, sort=False):
        first = cells.iloc[0]  # every cell of (scene, protocol) holds the same baseline numbers
        for j, clf in enumerate(summary["classifier"].values):
            row: dict[str, object] = {
                **dict(zip(ref.keys, key, strict=True)), "plan": {"svm": "SVM", "rf": "random forest"}.get(str(clf), str(clf)),
                "recipe": "classical baseline", "P": "", "g": "",
                "seeds": int(first["baseline_seeds"]) if "baseline_seeds" in cells else "",
                "OA [%] mean ± std": f"{_pp(summary['baseline_oa_mean'].values[first['i'], j])} ± "
                f"{_pp(summary['baseline_oa_std'].values[first['i'], j])}",
                "ΔOA vs tp [pp] (95 % CI)": "", "verdict": "", "seeds to decide": "",
            }  # fmt: skip
            if several_partitions(summary):  # its OA minus tp's paired by partition (the row minus tp)
                tp = cells[cells["plan"] == "tp"]
                i = int((tp if len(tp) else cells).iloc[0]["i"])
                d, lo, hi = (
                    -PERCENT * float(summary[f"d_oa_vs_baseline_{v}"].values[i, j])
                    for v in ("mean", "ci_high", "ci_low")
                )
                spreads = f"{_pp(summary['baseline_oa_partition_std'].values[i, j])} / –"
                d_oa = f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]" if len(tp) else ""
                row = _with_partitions(row, int(summary["baseline_partitions"].values[i]), spreads, d_oa)
            rows.append(row)
    return rows


def fair_block(ref: Reference) -> str:
    """Test OA (§7.4: the mean of the last summary epochs) per protocol, plan and P on each plan's own recipe, with
    the paired difference to tp, its 95 % interval and the verdict, beside the classical baselines."""
    df = pd.DataFrame(_summary_rows(ref, "own tuned") + _baseline_rows(ref))
    return _md(df.sort_values(ref.keys, kind="stable"))


def tuning_block(ref: Reference) -> str:
    """The untuned control (D-CHAG on tp's tuned recipe) beside the same cells on their own recipe."""
    return _md(tuning_effect_table(ref.summary, ref.control).drop(columns=["dataset"], errors="ignore"))


def answer_block(ref: Reference) -> str:
    """The one-table answer: per plan and P, memory and throughput vs tp from the probe, the accuracy verdict and
    the time to accuracy from the summary (the train page's answer table, without activation checkpointing)."""
    memory, throughput = ref.path / "probe" / "memory.nc", ref.path / "probe" / "throughput.nc"
    if not (memory.exists() and throughput.exists()):
        return "No probe files in this reference: memory and throughput were not measured in this run.\n"
    df = answer_table(*load_probe(memory, throughput), ref.summary)
    df = df[df["activation checkpointing"] == "none"].drop(columns=["L", "N", "measured on"], errors="ignore")
    return _md(df)


def kernels_block(ref: Reference) -> str:
    """tp at P = 2 under both single-query attention kernels (``benchmarks/kernel_check.py``): the fullest rank's
    peak and tokens/s, exact against sdpa timed in alternation in one launch."""
    path = ref.path / "probe" / "kernels.nc"
    if not path.exists():
        return "No kernel check in this reference (benchmarks/kernel_check.py was not run).\n"
    ds = KERNEL_CHECK.read(path)
    peak = ds["peak_allocated"].max("rank")
    tps = ds["tokens_per_s"]
    ratio = ds["ratio_exact_vs_sdpa"].values
    on = f"activation checkpointing {ds.attrs.get('checkpointing', 'unrecorded')}, measured on {ds.attrs.get('device', '?')}"
    rows = [
        {
            "plan": f"tp, {k} kernel",
            "P": int(ds.attrs["P"]),
            f"peak per rank [MiB] (fullest rank, {on})": f"{float(peak.sel(kernel=k)) / MIB:.1f}",
            "peak vs sdpa": f"{float(peak.sel(kernel=k) / peak.sel(kernel='sdpa')):.2f}",
            "tokens/s, median [min, max]": _range(tps.sel(kernel=k).values, "{:.0f}"),
            "tokens/s vs sdpa, median [min, max] (interleaved rounds)": "1 (reference)"
            if k == "sdpa"
            else _range(ratio, "{:.2f}"),
        }
        for k in map(str, ds["kernel"].values)
    ]
    return _md(pd.DataFrame(rows))


def _range(values: np.ndarray, fmt: str) -> str:
    v = np.asarray(values, dtype=float)
    return f"{fmt.format(np.median(v))} [{fmt.format(v.min())}, {fmt.format(v.max())}]"


def headline_block(ref: Reference) -> str:
    """The README's sentences: per protocol, tp's OA against the SVM's, and the D-CHAG cells' verdicts on their own
    recipes counted, with the range of their OA differences to tp."""
    summary, lines = ref.summary, []
    clf = list(map(str, summary["classifier"].values)) if "classifier" in summary.coords else []
    for key, cells in ref.cells.groupby(ref.keys, sort=False):
        protocol = ", ".join(
            map(str, key)
        )  # 'random', or 'salinas, random' for a reference of several scenes
        tp = next(c for c in cells.itertuples(index=False) if c.plan == "tp")
        others = cells[cells["plan"] != "tp"]
        counts = pd.Series([verdict_name(summary, i) for i in others["i"]]).value_counts()
        svm = (
            f" (SVM {_pp(summary['baseline_oa_mean'].values[tp.i, clf.index('svm')])})"
            if "svm" in clf
            else ""
        )
        replicates = f"{int(tp.seeds)} seed{'s' * (int(tp.seeds) != 1)}"
        # the replicates and the two spreads (one seed: no spread across seeds)
        if several_partitions(summary):
            seeds = f", across seeds {_pp(tp.oa_seed_std)}" if int(tp.seeds) > 1 else ""
            replicates = (
                f"{int(tp.partitions)} partitions × {replicates} (sd across partitions {_pp(tp.oa_partition_std)}"
                f"{seeds} pp)"
            )
            if "svm" in clf:  # the target's test: tp - SVM paired by partition
                j = clf.index("svm")
                d, lo, hi = (
                    PERCENT * float(summary[f"d_oa_vs_baseline_{v}"].values[tp.i, j]) for v in VS_SVM
                )
                svm = f"{svm[:-1]}; tp − SVM {d:+.1f} [{lo:+.1f}, {hi:+.1f}] pp)"
        d = PERCENT * others["d_oa_vs_tp_mean"].to_numpy(dtype=float)
        lines.append(
            f"- {protocol} protocol: tp OA {_pp(tp.oa_mean)} ± {_pp(tp.oa_std)} %{svm}, {replicates}; the "
            f"{len(others)} other cells vs tp: {', '.join(f'{int(n)} {v}' for v, n in counts.items())} "
            f"(ΔOA {np.nanmin(d):+.1f} to {np.nanmax(d):+.1f} pp)"
        )
    return "\n".join(lines) + "\n"


BLOCKS: Mapping[str, Callable[[Reference], str]] = {
    "recipes": recipes_block,
    "budget": budget_block,
    "fair": fair_block,
    "tuning": tuning_block,
    "answer": answer_block,
    "kernels": kernels_block,
    "headline": headline_block,
}


def regenerate(text: str, references: Mapping[str, Reference]) -> str:
    """``text`` with every block of a run in ``references`` (run name -> its reference) rewritten."""
    cache: dict[str, str] = {}

    def body(match: re.Match[str]) -> str:
        name = match["name"]
        run, block = name.split("/", 1)
        if run not in references:
            return match.group(0)
        if block not in BLOCKS:
            raise MeasuredDocError(f"unknown generated block {name!r}; one of {', '.join(BLOCKS)}")
        if name not in cache:
            cache[name] = BLOCKS[block](references[run])
        return match.group(1) + cache[name] + match.group(4)

    return BLOCK.sub(body, text)


def update(docs: Sequence[Path], references: Sequence[Path], check: bool = False) -> list[Path]:
    """Rewrite the blocks of ``docs`` from ``references``; the documents that differ (with ``check``, only
    reported). A marker without its end is an error (a block would swallow the rest of the document)."""
    refs = {Path(r).name: Reference(Path(r)) for r in references}  # each file read once for every document
    for r in (ref.path for ref in refs.values()):
        found = (r / "train" / "summary.nc").exists() or (r / "probe" / "kernels.nc").exists()
        if not found and not list(r.glob("tune/*/*.nc")):
            raise MeasuredDocError(
                f"{r}: not a run's reference (no train/summary.nc, no tune/*/*.nc, no probe/kernels.nc)"
            )
    for doc in docs:
        if not Path(doc).is_file():
            raise MeasuredDocError(
                f"--doc {doc}: no such file (a document holding generated blocks: docs/measured.md)"
            )
    texts = {Path(doc): Path(doc).read_text(encoding="utf-8") for doc in docs}
    for doc, text in texts.items():
        # a marker is a line of its own: prose may quote one in backticks (docs/measured.md's introduction does)
        if len(re.findall(r"^<!-- generated: ", text, re.M)) != len(BLOCK.findall(text)):
            raise MeasuredDocError(f"{doc}: a `<!-- generated: ... -->` marker without its end marker")
    named = {m["name"].split("/", 1)[0] for text in texts.values() for m in BLOCK.finditer(text)}
    unnamed = sorted(set(refs) - named)
    if unnamed:  # a reference no block names would pass the check having compared nothing
        raise MeasuredDocError(
            f"no generated block of {', '.join(map(str, texts))} names the reference {', '.join(unnamed)} (blocks "
            f"name {', '.join(sorted(named)) or 'none'}): nothing to compare; give the reference its run's name"
        )
    changed = []
    for doc, text in texts.items():
        new = regenerate(text, refs)
        if new != text:
            changed.append(doc)
            if not check:
                atomic_write_text(doc, new)
    return changed

"""The generated blocks of docs/measured.md and README.md (issue 41): every table of a headline run written from its
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
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from hsitp.errors import HsitpError
from hsitp.io import atomic_write_text, read_netcdf

BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w.-]+/[\w-]+) \(hsitp report measured\) -->\n)(?P<body>.*?)(<!-- end generated: "
    r"(?P=name) -->)",
    re.S,
)
PERCENT = 100.0
MIB = 2.0**20


class MeasuredDocError(HsitpError):
    """A reference that cannot fill a block, or a block marker without its end."""


def _md(df: pd.DataFrame) -> str:
    return df.to_markdown(index=False, floatfmt=".3g") + "\n"


def _studies(reference: Path) -> list[xr.Dataset]:
    return [read_netcdf(p, kind="tune_study") for p in sorted(reference.glob("tune/*/*.nc"))]


def recipes_block(reference: Path) -> str:
    """Each study's best trial: the tuned recipe of each plan and protocol, with the study's trial counts and time."""
    rows = []
    for s in _studies(reference):
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
        raise MeasuredDocError(f"{reference}: no tuning study under tune/ (the recipes block needs them)")
    return _md(pd.DataFrame(rows).sort_values(["protocol", "plan"], kind="stable"))


def budget_block(reference: Path) -> str:
    """Best validation OA after 4, 8, 12 and all trials (the search as run), and Dodge et al.'s expected best of
    1 and of all start-up trials with its spread: a curve still rising at the end says the budget was short."""
    rows = []
    for s in _studies(reference):
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


def _verdict_name(summary: xr.Dataset, i: int) -> str:
    from hsitp.report.train import _verdict_name as name

    return name(summary, i)


def _several_partitions(summary: xr.Dataset) -> bool:
    from hsitp.report.train import several_partitions

    return several_partitions(summary)


def _summary_rows(summary: xr.Dataset, recipe: str) -> list[dict[str, object]]:
    rows = []
    for i in range(summary.sizes["cell"]):
        plan = str(summary["plan"].values[i])
        lo, hi = (PERCENT * float(summary[f"d_oa_vs_tp_ci_{e}"].values[i]) for e in ("low", "high"))
        k = float(summary["seeds_to_decide"].values[i]) if "seeds_to_decide" in summary else np.nan
        tp = plan == "tp"
        row: dict[str, object] = {
            "protocol": str(summary["protocol"].values[i]), "plan": plan, "recipe": recipe,
            "P": int(summary["P"].values[i]), "g": int(summary["g"].values[i]) if not tp else "",
            "seeds": int(summary["seeds"].values[i]),
            "OA [%] mean ± std": f"{PERCENT * float(summary['oa_mean'].values[i]):.1f} ± "
            f"{PERCENT * float(summary['oa_std'].values[i]):.1f}",
            "ΔOA vs tp [pp] (95 % CI)": "reference" if tp else
            f"{PERCENT * float(summary['d_oa_vs_tp_mean'].values[i]):+.1f} [{lo:+.1f}, {hi:+.1f}]",
            "verdict": "" if tp else _verdict_name(summary, i),
            "seeds to decide": "" if tp or not np.isfinite(k) or k <= 0 else int(k),
        }  # fmt: skip
        if _several_partitions(
            summary
        ):  # issue 50: replicates are (partition, seed); intervals over partitions
            row = _with_partitions(row, summary, i, tp)
        rows.append(row)
    return rows


def _with_partitions(row: dict[str, object], summary: xr.Dataset, i: int, tp: bool) -> dict[str, object]:
    """A fair-table row of a summary with partitions: replicates as partitions x seeds, the OA's spread across
    partitions and across seeds apart, and the units to decide named by what the interval is over."""
    from hsitp.train.summary import UNIT_FLAGS

    k = row.pop("seeds to decide")
    unit = (
        UNIT_FLAGS[int(summary["verdict_unit_flag"].values[i])] if "verdict_unit_flag" in summary else "seed"
    )
    out = {key: v for key, v in row.items() if key != "seeds"}
    out = {
        **{key: out[key] for key in ("protocol", "plan", "recipe", "P", "g")},
        "partitions × seeds": f"{int(summary['partitions'].values[i])} × {int(summary['seeds'].values[i])}",
        "OA [%] mean ± std": out["OA [%] mean ± std"],
        "OA sd across partitions / seeds [pp]": f"{PERCENT * float(summary['oa_partition_std'].values[i]):.1f} / "
        f"{PERCENT * float(summary['oa_seed_std'].values[i]):.1f}",
        "ΔOA vs tp [pp] (95 % CI)": out["ΔOA vs tp [pp] (95 % CI)"],
        "verdict": out["verdict"],
        "to decide": "" if tp or k == "" else f"{k} {unit}s",
    }
    return out


def _baseline_rows(summary: xr.Dataset) -> list[dict[str, object]]:
    rows, seen = [], set()
    for i in range(summary.sizes["cell"]):
        protocol = str(summary["protocol"].values[i])
        if protocol in seen or "classifier" not in summary.coords:
            continue
        seen.add(protocol)
        for j, clf in enumerate(summary["classifier"].values):
            row: dict[str, object] = {
                "protocol": protocol, "plan": {"svm": "SVM", "rf": "random forest"}.get(str(clf), str(clf)),
                "recipe": "classical baseline", "P": "", "g": "",
                "seeds": int(summary["baseline_seeds"].values[i]) if "baseline_seeds" in summary else "",
                "OA [%] mean ± std": f"{PERCENT * float(summary['baseline_oa_mean'].values[i, j]):.1f} ± "
                f"{PERCENT * float(summary['baseline_oa_std'].values[i, j]):.1f}",
                "ΔOA vs tp [pp] (95 % CI)": "", "verdict": "", "seeds to decide": "",
            }  # fmt: skip
            if _several_partitions(summary):
                row = _baseline_with_partitions(row, summary, protocol, j)
            rows.append(row)
    return rows


def _baseline_with_partitions(
    row: dict[str, object], summary: xr.Dataset, protocol: str, j: int
) -> dict[str, object]:
    """A baseline row of a summary with partitions: its partitions x seeds, its spread across partitions, and its
    OA minus tp's paired by partition (the sign of the column: the row minus tp)."""
    cells = [c for c in range(summary.sizes["cell"]) if str(summary["protocol"].values[c]) == protocol]
    tp = next((c for c in cells if str(summary["plan"].values[c]) == "tp"), cells[0])
    d = -PERCENT * float(summary["d_oa_vs_baseline_mean"].values[tp, j])
    lo = -PERCENT * float(summary["d_oa_vs_baseline_ci_high"].values[tp, j])
    hi = -PERCENT * float(summary["d_oa_vs_baseline_ci_low"].values[tp, j])
    return {
        **{key: row[key] for key in ("protocol", "plan", "recipe", "P", "g")},
        "partitions × seeds": f"{int(summary['baseline_partitions'].values[tp])} × {row['seeds']}",
        "OA [%] mean ± std": row["OA [%] mean ± std"],
        "OA sd across partitions / seeds [pp]":
            f"{PERCENT * float(summary['baseline_oa_partition_std'].values[tp, j]):.1f} / –",
        "ΔOA vs tp [pp] (95 % CI)": f"{d:+.1f} [{lo:+.1f}, {hi:+.1f}]" if str(summary["plan"].values[tp]) == "tp"
        else "",
        "verdict": "",
        "to decide": "",
    }  # fmt: skip


def fair_block(reference: Path) -> str:
    """Test OA (§7.4: the mean of the last summary epochs) per protocol, plan and P on each plan's own recipe, with
    the paired difference to tp, its 95 % interval and the verdict, beside the classical baselines."""
    summary = read_netcdf(reference / "train" / "summary.nc", kind="train_summary")
    df = pd.DataFrame(_summary_rows(summary, "own tuned") + _baseline_rows(summary))
    return _md(df.sort_values("protocol", kind="stable"))


def tuning_block(reference: Path) -> str:
    """The untuned control (D-CHAG on tp's tuned recipe) beside the same cells on their own recipe."""
    from hsitp.report.train import tuning_effect_table

    control = reference / "train" / "control_summary.nc"
    summary = read_netcdf(reference / "train" / "summary.nc", kind="train_summary")
    df = tuning_effect_table(
        summary, read_netcdf(control, kind="train_summary") if control.exists() else None
    )
    return _md(df.drop(columns=["dataset"], errors="ignore"))


def answer_block(reference: Path) -> str:
    """The one-table answer: per plan and P, memory and throughput vs tp from the probe, the accuracy verdict and
    the time to accuracy from the summary (the train page's answer table, without activation checkpointing)."""
    from hsitp.report.train import answer_table, load_probe

    memory, throughput = reference / "probe" / "memory.nc", reference / "probe" / "throughput.nc"
    if not (memory.exists() and throughput.exists()):
        return "No probe files in this reference: memory and throughput were not measured in this run.\n"
    summary = read_netcdf(reference / "train" / "summary.nc", kind="train_summary")
    df = answer_table(*load_probe(memory, throughput), summary)
    df = df[df["activation checkpointing"] == "none"].drop(columns=["L", "N", "measured on"], errors="ignore")
    return _md(df)


def kernels_block(reference: Path) -> str:
    """tp at P = 2 under both single-query attention kernels (``benchmarks/kernel_check.py``): the fullest rank's
    peak and tokens/s, exact against sdpa timed in alternation in one launch."""
    path = reference / "probe" / "kernels.nc"
    if not path.exists():
        return "No kernel check in this reference (benchmarks/kernel_check.py was not run).\n"
    ds = read_netcdf(path, kind="kernel_check")
    peak = ds["peak_allocated"].max("rank")
    tps = ds["tokens_per_s"]
    ratio = ds["ratio_exact_vs_sdpa"].values
    on = f"measured on {ds.attrs.get('device', '?')}"
    rows = []
    for k in map(str, ds["kernel"].values):
        rows.append(
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
        )
    return _md(pd.DataFrame(rows))


def _range(values: np.ndarray, fmt: str) -> str:
    v = np.asarray(values, dtype=float)
    return f"{fmt.format(np.median(v))} [{fmt.format(v.min())}, {fmt.format(v.max())}]"


def headline_block(reference: Path) -> str:
    """The README's sentences: per protocol, tp's OA against the SVM's, and the D-CHAG cells' verdicts on their own
    recipes counted, with the range of their OA differences to tp."""
    summary = read_netcdf(reference / "train" / "summary.nc", kind="train_summary")
    lines = []
    for protocol in dict.fromkeys(map(str, summary["protocol"].values)):
        cells = [i for i in range(summary.sizes["cell"]) if str(summary["protocol"].values[i]) == protocol]
        tp = next(i for i in cells if str(summary["plan"].values[i]) == "tp")
        others = [i for i in cells if str(summary["plan"].values[i]) != "tp"]
        verdicts = pd.Series([_verdict_name(summary, i) for i in others]).value_counts()
        counts = ", ".join(f"{int(n)} {v}" for v, n in verdicts.items())
        d = PERCENT * summary["d_oa_vs_tp_mean"].values[others]
        clf = list(map(str, summary["classifier"].values)) if "classifier" in summary.coords else []
        svm = (
            f" (SVM {PERCENT * float(summary['baseline_oa_mean'].values[tp, clf.index('svm')]):.1f})"
            if "svm" in clf
            else ""
        )
        replicates = f"{int(summary['seeds'].values[tp])} seeds"
        if _several_partitions(summary):  # issue 50: the replicates and the two spreads
            replicates = (
                f"{int(summary['partitions'].values[tp])} partitions × {replicates} (sd across partitions "
                f"{PERCENT * float(summary['oa_partition_std'].values[tp]):.1f}, across seeds "
                f"{PERCENT * float(summary['oa_seed_std'].values[tp]):.1f} pp)"
            )
        lines.append(
            f"- {protocol} protocol: tp OA {PERCENT * float(summary['oa_mean'].values[tp]):.1f} "
            f"± {PERCENT * float(summary['oa_std'].values[tp]):.1f} %{svm}, {replicates}; "
            f"the {len(others)} other cells vs tp: {counts} (ΔOA {np.nanmin(d):+.1f} to {np.nanmax(d):+.1f} pp)"
        )
    return "\n".join(lines) + "\n"


BLOCKS: Mapping[str, Callable[[Path], str]] = {
    "recipes": recipes_block,
    "budget": budget_block,
    "fair": fair_block,
    "tuning": tuning_block,
    "answer": answer_block,
    "kernels": kernels_block,
    "headline": headline_block,
}


def regenerate(text: str, references: Mapping[str, Path]) -> str:
    """``text`` with every block of a run in ``references`` (run name -> reference folder) rewritten."""
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
    refs = {Path(r).name: Path(r) for r in references}
    for r in refs.values():
        found = (r / "train" / "summary.nc").exists() or (r / "probe" / "kernels.nc").exists()
        if not found and not list(r.glob("tune/*/*.nc")):
            raise MeasuredDocError(
                f"{r}: not a run's reference (no train/summary.nc, no tune/*/*.nc, no probe/kernels.nc)"
            )
    changed = []
    for doc in map(Path, docs):
        text = doc.read_text(encoding="utf-8")
        # a marker is a line of its own: prose may quote one in backticks (docs/measured.md's introduction does)
        opened = len(re.findall(r"^<!-- generated: ", text, re.M))
        if opened != len(BLOCK.findall(text)):
            raise MeasuredDocError(f"{doc}: a `<!-- generated: ... -->` marker without its end marker")
        new = regenerate(text, refs)
        if new != text:
            changed.append(doc)
            if not check:
                atomic_write_text(doc, new)
    return changed

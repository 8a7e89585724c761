"""The equal-accuracy claim judged per D-CHAG variant and per accuracy protocol (docs/audit.md, rule 13).

§7.1 sets how the plans are compared: memory and throughput *at equal accuracy*. Whether that comparison can be made
is a question per variant (D-CHAG-L and D-CHAG-C are different models) and per protocol (the random and the
spatially disjoint block partition), read from the accuracy run's ``train/summary.nc``:

1. A protocol counts only where some trained model (tp or a D-CHAG cell) beats the classical baseline (the RBF SVM):
   the 95 % Welch t interval of OA(model) − OA(SVM) over seeds lies above 0, or, where the run's replicates are
   several partitions with the SVM fit on each, the 95 % t interval of the difference paired by
   partition. Below the baseline no model is trained enough to be compared; such a protocol is reported and decides
   nothing.
2. A variant's outcome on the counting protocols, from its cells' ``oa_verdict`` (each P): ``worse`` if any cell is
   worse (the premise breaks for it); else ``better`` if any cell is better (the paper's comparison is conservative
   for it: at equal accuracy it would only look better); else ``equal`` if any cell is equal; else ``undecided``.
3. The claim: every variant equal or better → holds; some equal or better, the others worse or undecided →
   conditional (naming which); none equal or better and one worse → contradicted; none decided → pending (the train
   stage with more seeds, or a protocol where a model beats the baseline), never not reproducible (rule 15).

The outcome is a share of the decided variants that are equal or better, so it can flip and be contradicted like any
other measured claim (rules 6 and 10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import xarray as xr

from hsitp.analysis.cells import cell_table
from hsitp.audit.claims import checks
from hsitp.audit.claims.checks import ClaimsError
from hsitp.audit.claims.core import Context, Outcome, _fmt, pending
from hsitp.contracts import TRAIN_SUMMARY, flag_meanings
from hsitp.outcomes import Accuracy, Basis, Claim

OK_OUTCOMES = (Accuracy.EQUAL, Accuracy.BETTER)  # the premise met (better: conservatively)
VARIANT_NAMES = {"dchag_l": "D-CHAG-L", "dchag_c": "D-CHAG-C"}
LEVEL = 0.95


def beats_baseline(
    oa: float, sd: float, n: int, base: float, base_sd: float, base_n: int
) -> tuple[bool, float]:
    """(whether the model beats the baseline, the low end of the 95 % Welch t interval of OA(model) − OA(base))."""
    from scipy import stats

    if not (math.isfinite(oa) and math.isfinite(base)) or n < 2 or base_n < 1:
        return False, math.nan
    va, vb = (
        (sd if math.isfinite(sd) else 0.0) ** 2 / n,
        (base_sd if math.isfinite(base_sd) else 0.0) ** 2 / max(base_n, 1),
    )
    se = math.sqrt(va + vb)
    if se == 0:
        return oa > base, oa - base
    df = (va + vb) ** 2 / ((va**2 / (n - 1) if n > 1 else 0) + (vb**2 / (base_n - 1) if base_n > 1 else 0))
    low = (oa - base) - float(stats.t.ppf(0.5 + LEVEL / 2, df)) * se
    return low > 0, low


def _paired_by_partition(ds: xr.Dataset) -> bool:
    """Whether the summary's replicates span several partitions with every model and the baseline on the same ones
    (a summary of one partition, as the committed cpu-fair ones, has neither): then OA(model) − OA(baseline)
    is judged paired by partition (``d_oa_vs_baseline_ci_low``)."""
    return "d_oa_vs_baseline_ci_low" in ds and "partitions" in ds and int(ds["partitions"].max(initial=0)) > 1


def _beats_paired(ds: xr.Dataset, i: int, k: int) -> tuple[bool, float]:
    """(whether cell ``i`` beats classifier ``k``, the low end of the 95 % t interval of OA(cell) − OA(baseline)
    paired by partition), from the summary (each partition's seed mean against the baseline on that partition)."""
    low = float(ds["d_oa_vs_baseline_ci_low"].values[i, k])
    return (math.isfinite(low) and low > 0), low


def variant_outcome(verdicts: Sequence[str]) -> Accuracy:
    """Rule 13.2: worse > better > equal > undecided over one variant's cells on the counting protocols."""
    for v in (Accuracy.WORSE, Accuracy.BETTER, Accuracy.EQUAL):
        if v in verdicts:
            return v
    return Accuracy.UNDECIDED


def _cells(ds: xr.Dataset) -> list[Any]:
    """The accuracy run's cells (:func:`hsitp.contracts.summary_cells`), each with its ``oa_verdict`` by name."""
    table = cell_table(ds)
    return list(table.itertuples(index=False))


def _pp(x: float) -> str:
    return f"{100 * x:+.1f}" if math.isfinite(x) else "n/a"


def _interval_unit(ds: xr.Dataset) -> str:
    """What the D-CHAG cells' ΔOA intervals are over, read from the summary (``verdict_unit_flag``, ``partitions``,
    ``seeds``): e.g. "paired by partition, 5 partitions × 1 seed", so the row never states a replicate count the
    file does not have."""
    units = flag_meanings(ds["verdict_unit_flag"]) if "verdict_unit_flag" in ds else []
    paired = [m for m in units if m != "none"]
    counts = [
        f"{'/'.join(str(v) for v in sorted({int(x) for x in ds[k].values}))} {k if k != 'seeds' else 'seed(s)'}"
        for k in ("partitions", "seeds")
        if k in ds
    ]
    by = f"paired by {'/'.join(sorted(set(paired)))}" if paired else "unpaired"
    return ", ".join([by, " × ".join(counts)]) if counts else by


def check_accuracy_verdicts(ctx: Context, a: checks.AccuracyVerdicts) -> Outcome:
    """The equal-accuracy premise per variant and protocol (the module's rule) from
    ``results/<audit.accuracy_run>/train/summary.nc`` (or its committed reference): a share of the decided variants
    whose outcome is equal or better; pending, naming the stage, while nothing decides."""
    path = ctx.accuracy_summary
    variants = list(a.variants or ["dchag_l", "dchag_c"])
    if not path.exists():
        why = f"pending: no {path} (the train stage of the accuracy run `{ctx.accuracy_run}`: audit.accuracy_run)"
        return pending(path, why)
    ds = TRAIN_SUMMARY.read(path)
    ctx.inputs["accuracy_summary"] = path
    if "oa_verdict" not in ds:
        return pending(
            f"{path}:oa_verdict", f"pending: {path} has no oa_verdict yet (the train stage's summary)"
        )
    cells = _cells(ds)
    protocols = sorted({c.protocol for c in cells})
    counted, notes = _counting_protocols(ds, cells, protocols, a.baseline, path)
    per_variant, decided_by, parts = _variant_outcomes(cells, variants, protocols, counted, path)
    decided = [v for v, o in per_variant.items() if o != Accuracy.UNDECIDED]
    summary = "; ".join(
        f"{VARIANT_NAMES.get(v, v)}: {o}"
        + (" (conservative: better than tp)" if o == Accuracy.BETTER else "")
        for v, o in per_variant.items()
    )
    how = (
        f"per variant and protocol, OA vs tp (oa_verdict, ΔOA pp [95 % CI, {_interval_unit(ds)}], "
        f"±{_fmt(100 * float(ds.attrs.get('verdict_margin', 0.01)))} pp margin): {'; '.join(parts)}. {'; '.join(notes)}. Variants: {summary}"
    )
    source = f"{path}:oa_verdict,d_oa_vs_tp_ci_low,d_oa_vs_tp_ci_high,oa_mean,baseline_oa_mean"
    ref = f"; from the committed reference {path}, not re-run here" if ctx.accuracy_from_reference else ""
    if not decided:
        why = (
            "no protocol where a trained model beats the baseline"
            if not counted
            else "every variant's cells undecided on the counting protocols"
        )
        return Outcome(
            verdict=Claim.PENDING, basis=Basis.MEASURED, how=how, source=source,
            reason=f"pending: {why}; the train stage of `{ctx.accuracy_run}` with more seeds (seeds_to_decide) "
            f"could decide it{ref}",
        )  # fmt: skip
    ok = [v for v in decided if per_variant[v] in OK_OUTCOMES]
    frac = len(ok) / len(variants)
    return Outcome(
        value=frac,
        how=how,
        source=source,
        fraction=frac,
        n_points=len(variants),
        tolerance=f"holds if every variant is equal or better (share ≥ {a.min_fraction})",
        basis="measured",
        reason=f"decided by {'; '.join(decided_by)}{ref}",
    )


def _counting_protocols(
    ds: xr.Dataset, cells: Sequence[Any], protocols: Sequence[str], baseline: str, path: Any
) -> tuple[list[str], list[str]]:
    """Rule 13.1: the protocols where some trained model beats the classical ``baseline`` (Welch 95 % low end of
    OA(model) - OA(baseline) above 0), and a note per protocol saying why it counts or not."""
    classifiers = [str(x) for x in ds["classifier"].values] if "classifier" in ds.coords else []
    if baseline not in classifiers:
        raise ClaimsError(f"accuracy_verdicts: no classifier {baseline!r} in {path} ({classifiers})")
    k = classifiers.index(baseline)
    counted, notes = [], []
    for proto in protocols:
        trained = [c for c in cells if c.protocol == proto]
        i0 = trained[0].i
        base = float(ds["baseline_oa_mean"].values[i0, k])
        base_sd = float(ds["baseline_oa_std"].values[i0, k])
        base_n = int(ds["baseline_seeds"].values[i0]) if "baseline_seeds" in ds else 1
        # the same partitions on both sides: the draw's spread cancels in the difference
        if _paired_by_partition(ds):
            lows = [(c, *_beats_paired(ds, c.i, k)) for c in trained]
            test = "paired by partition, 95 % t low end"
        else:
            lows = [
                (c, *beats_baseline(c.oa_mean, c.oa_std, int(c.seeds), base, base_sd, base_n))
                for c in trained
            ]
            test = "Welch 95 % low end"
        winners = [(c, low) for c, ok, low in lows if ok]
        if winners:
            counted.append(proto)
            c, low = max(winners, key=lambda t: t[1])
            notes.append(
                f"{proto} protocol counts ({len(winners)} of {len(trained)} trained cells beat the {baseline.upper()}'s "
                f"{100 * base:.1f} %, e.g. {c.plan} P = {c.P} {100 * c.oa_mean:.1f} %, {test} {_pp(low)} pp)"
            )
        else:
            c, _, low = max(lows, key=lambda t: t[0].oa_mean)
            notes.append(
                f"{proto} protocol reported, does not count (no trained model beats the {baseline.upper()}'s "
                f"{100 * base:.1f} %: best {c.plan} P = {c.P} {100 * c.oa_mean:.1f} %, {test} {_pp(low)} pp)"
            )
    return counted, notes


def _tp_at(cells: Sequence[Any], c: Any) -> str:
    """The note " vs tp P = p" when the tp cell ``c`` is compared with (``tp_cell``) ran at another P (tp's one
    single-process equivalent model stands for every P), so a D-CHAG cell at P = 8 is not read as against tp at 8."""
    k = int(getattr(c, "tp_cell", -1))
    tp = next((t for t in cells if t.i == k), None)
    return f" vs tp P = {tp.P}" if tp is not None and int(tp.P) != int(c.P) else ""


def _variant_outcomes(
    cells: Sequence[Any], variants: Sequence[str], protocols: Sequence[str], counted: Sequence[str], path: Any
) -> tuple[dict[str, str], list[str], list[str]]:
    """Rule 13.2: each variant's outcome on the counting protocols, which variants decided, and a text per variant
    and protocol listing its cells' verdicts and OA differences to tp."""
    per_variant: dict[str, str] = {}
    decided_by: list[str] = []
    parts: list[str] = []
    for var in variants:
        mine = [c for c in cells if c.plan == var]
        if not mine:
            raise ClaimsError(f"accuracy_verdicts: no cell of plan {var!r} in {path}")
        for proto in protocols:
            pc = sorted((c for c in mine if c.protocol == proto), key=lambda c: c.P)
            if not pc:
                continue
            cells_text = ", ".join(
                f"P = {c.P} {c.verdict} {_pp(c.d_oa_vs_tp_mean)} [{_pp(c.d_oa_vs_tp_ci_low)}, {_pp(c.d_oa_vs_tp_ci_high)}]"
                + _tp_at(cells, c)
                for c in pc
            )
            tag = "" if proto in counted else " (not counted)"
            parts.append(
                f"{VARIANT_NAMES.get(var, var)} {proto} (g = {'/'.join(sorted({str(c.g) for c in pc}))}){tag}: "
                f"{variant_outcome([c.verdict for c in pc])} ({cells_text})"
            )
        out = variant_outcome([c.verdict for c in mine if c.protocol in counted])
        per_variant[var] = out
        if out != Accuracy.UNDECIDED:
            decided_by.append(f"{VARIANT_NAMES.get(var, var)} on {', '.join(counted)} ({out})")
    return per_variant, decided_by, parts

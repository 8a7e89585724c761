"""Issue 24: single-process equivalents, their equivalence check over P ranks, §7.4's window-mean accuracy and the
per-cell verdict of train/summary.nc."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from nc_checks import described
from train_utils import tiny_config

from hsitp.evaluate.verdict import paired_verdict
from hsitp.io import provenance, write_netcdf
from hsitp.train.loop import evaluated_epochs
from hsitp.train.plan import TrainConfigError, check_jobs, check_runs, equivalent_of, jobs
from hsitp.train.settings import TrainSettings
from hsitp.train.summary import VERDICT_FLAGS, summarize


def _record(tmp: Path, plan: str, P: int, seed: int, oa_window: list[float], *, ranks: int = 1) -> Path:  # noqa: N803
    """A training record of `len(oa_window)` epochs, all evaluated; the last differs from the window mean."""
    one = {"units": "1", "long_name": "x"}
    oa = np.asarray(oa_window, dtype=float)
    ds = xr.Dataset(
        {
            **{m: ("epoch", oa, one) for m in ("oa", "aa", "kappa")},
            **{f"{m}_summary": ((), float(oa.mean()), one) for m in ("oa", "aa", "kappa")},
            "per_class_accuracy": (("epoch", "label"), np.stack([oa, oa], axis=1), one),
            "tokens_per_s_summary": ((), 1.0, {"units": "1/s", "long_name": "t"}),
            "peak_allocated_summary": (("rank",), [1.0] * ranks, {"units": "bytes", "long_name": "m"}),
            "ccr_inline_summary": (("rank",), [0.0] * ranks, one),
        },
        coords={"epoch": np.arange(1, oa.size + 1)},
    )
    g = 2 if plan.startswith("dchag") else 1
    ds.attrs.update({"title": "record", "dataset": "s", "plan": plan, "P": P, "g": g, "protocol": "random"})
    ds.attrs.update({"seed": seed, "tokens": 9, "recipe_hash": "r", "recipe": "{}", "ranks": ranks})
    ds.attrs.update({"partition_index": 0, "steps_per_epoch": 1, "attention_kernel": "exact"})
    name = f"{plan}_P{P}_s{seed}_r{ranks}.nc"
    return write_netcdf(described(ds), tmp / name, kind="train", prov=provenance({}))


def test_summary_gives_each_plan_a_verdict_against_the_one_tp_equivalent(tmp_path: Path) -> None:
    """Catches a verdict computed from the last epoch instead of §7.4's mean over the last epochs, a dchag cell at
    P = 4 or 8 left unpaired because tp was trained once (at P = 2), flags whose meanings do not decode to the
    verdicts, an interval or seeds_to_decide that disagrees with hsitp.evaluate.verdict, and tp given a verdict
    against itself."""
    tp = [0.70, 0.75, 0.80]
    # (plan, P): per-seed window means; the last epoch of each record is 0.1 off its window mean
    plans = {
        ("dchag_l", 4): [t + d for t, d in zip(tp, (0.001, 0.002, 0.0015), strict=True)],  # equal
        ("dchag_c", 2): [t + d for t, d in zip(tp, (-0.05, -0.06, -0.055), strict=True)],  # worse
        ("dchag_l", 8): [t + d for t, d in zip(tp, (0.0, 0.012, -0.008), strict=True)],  # undecided
    }
    files = [_record(tmp_path, "tp", 2, s, [tp[s] + 0.05, tp[s] - 0.05]) for s in range(3)]
    for (plan, P), means in plans.items():  # noqa: N806
        files += [_record(tmp_path, plan, P, s, [m + 0.05, m - 0.05]) for s, m in enumerate(means)]
    ds = summarize(files, margin=0.01, level=0.95)

    meanings = str(ds["oa_verdict"].attrs["flag_meanings"]).split()
    assert meanings == list(VERDICT_FLAGS)

    def cell(plan: str, P: int) -> xr.Dataset:  # noqa: N803
        i = int(np.flatnonzero((ds["plan"].values == plan) & (ds["P"].values == P))[0])
        return ds.isel(cell=i)

    assert meanings[int(cell("tp", 2)["oa_verdict"])] == "reference"
    assert float(cell("tp", 2)["oa_mean"]) == pytest.approx(np.mean(tp))  # window mean, not the last epoch
    assert float(cell("tp", 2)["oa_final_mean"]) == pytest.approx(np.mean(tp) - 0.05)
    for (plan, P), means in plans.items():  # noqa: N806
        c = cell(plan, P)
        want = paired_verdict(means, tp, 0.01, 0.95)
        assert meanings[int(c["oa_verdict"])] == want.verdict, (plan, P)
        assert meanings[int(c["aa_verdict"])] == want.verdict
        assert float(c["d_oa_vs_tp_ci_low"]) == pytest.approx(want.ci_low)
        assert float(c["d_oa_vs_tp_ci_high"]) == pytest.approx(want.ci_high)
        assert int(c["seeds_to_decide"]) == (want.seeds_to_decide or -1)
        assert int(c["ranks"]) == 1
    assert [meanings[int(cell(p, P)["oa_verdict"])] for p, P in plans] == ["equal", "worse", "undecided"]
    assert int(cell("dchag_l", 8)["seeds_to_decide"]) > 3  # undecided at 3 seeds: more would decide it
    assert ds.attrs["verdict_margin"] == 0.01


def test_summary_refuses_equivalents_and_rank_runs_in_one_cell(tmp_path: Path) -> None:
    """Catches a cell that silently mixes single-process equivalents with P-rank runs (their tokens/s and memory
    mean different things)."""
    from hsitp.train.summary import SummaryError

    a = _record(tmp_path, "tp", 2, 0, [0.7], ranks=1)
    b = _record(tmp_path, "tp", 2, 1, [0.7], ranks=2)
    with pytest.raises(SummaryError, match="rank"):
        summarize([a, b])


def _cfg(**train: object) -> TrainSettings:
    matrix = {
        "plans": ["tp", "dchag_l", "dchag_c"],
        "world_sizes": [2, 4],
        "groups": {"dchag_l": [2], "dchag_c": [2]},
        "seeds": [0, 1],
        "protocols": ["random", "block"],
        "datasets": ["synthetic"],
        "equivalent": True,
    }
    return TrainSettings.from_config(tiny_config(**{**matrix, **train}))


def test_equivalent_mode_trains_tp_once_and_checks_every_plan_and_p() -> None:
    """Catches tp trained at every P under train.equivalent (one model: wasted runs), a check run missing for a
    (plan, P), a check whose equivalent is not among the accuracy jobs, and a check seed outside train.seeds."""
    cfg = _cfg()
    matrix = jobs(cfg)
    assert sorted({P for _, plan, _, P, *_ in matrix if plan == "tp"}) == [2]
    assert (
        len(matrix) == (1 + 2 + 2) * 2 * 2
    )  # tp once, dchag_l and dchag_c at P 2 and 4; 2 protocols, 2 seeds
    checks = check_runs(cfg)
    assert sorted((plan, P) for _, plan, _, P, *_ in checks) == [
        ("dchag_c", 2), ("dchag_c", 4), ("dchag_l", 2), ("dchag_l", 4), ("tp", 2), ("tp", 4),
    ]  # fmt: skip
    assert all(protocol == "random" and seed == 0 and k == 0 for *_, protocol, seed, k in checks)
    assert all(equivalent_of(cfg, c) in matrix for c in checks)
    assert check_runs(_cfg(equivalence={"epochs": 0})) == []
    assert check_runs(TrainSettings.from_config(tiny_config())) == []  # not in equivalent mode
    bad = _cfg(equivalence={"epochs": 2, "seed": 5})
    with pytest.raises(TrainConfigError, match="train.equivalence.seed = 5"):
        check_jobs(bad)


def test_no_check_run_at_one_rank() -> None:
    """Catches an equivalence check planned at P = 1 (train.world_sizes holding 1 under train.equivalent): one rank
    is the single-process equivalent itself, so the check repeated its first epochs and passed by construction."""
    cfg = _cfg(world_sizes=[1, 2])
    checks = check_runs(cfg)
    assert sorted({(plan, P) for _, plan, _, P, *_ in checks}) == [("dchag_c", 2), ("dchag_l", 2), ("tp", 2)]
    assert ("synthetic", "tp", 9, 1, 1, "random", 0, 0) in [equivalent_of(cfg, c) for c in checks]
    assert check_runs(_cfg(world_sizes=[1])) == []


def test_evaluated_epochs_cover_the_summary_window_and_the_check() -> None:
    """Catches a §7.4 mean taken over epochs that were never evaluated (NaN skipped silently: a mean of 2 when the
    paper says 10), and an equivalent not evaluated at the check's epoch."""
    cfg = tiny_config(epochs=12, eval_every=5, summary_epochs=4, equivalent=True, equivalence={"epochs": 2})
    assert evaluated_epochs(TrainSettings.from_config(cfg)) == {2, 5, 9, 10, 11, 12}
    assert evaluated_epochs(TrainSettings.from_config(cfg), stop_after=3) == {2, 3, 5, 9, 10, 11, 12}

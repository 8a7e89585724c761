"""The one interleaved timer (hsitp.bench.interleave), on a fake clock the sides advance: exact, instant."""

from __future__ import annotations

import pytest

from hsitp.bench import interleave as il


class FakeClock:
    """perf_counter stand-in: each step advances it by its cost times the machine's load, which drifts upward by
    ``drift`` per step (a shared machine getting busier over the run)."""

    def __init__(self, drift: float = 0.0) -> None:
        self.t = 0.0
        self.load = 1.0
        self.drift = drift
        self.calls: list[str] = []

    def __call__(self) -> float:
        return self.t

    def side(self, name: str, cost: float, first: float | None = None, first_n: int = 0) -> il.Side:
        """A side costing ``cost`` per step; its first ``first_n`` steps cost ``first`` (warm-up: lazy state)."""
        count = [0]

        def step() -> None:
            count[0] += 1
            c = first if first is not None and count[0] <= first_n else cost
            self.t += c * self.load
            self.load += self.drift
            self.calls.append(name)

        return step, lambda: None


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(il.time, "perf_counter", c)
    return c


def test_warmup_is_excluded_and_rounds_alternate(clock: FakeClock) -> None:
    """Catches warm-up steps counted in a sample (AdamW's lazy state and allocator growth in the first steps would
    inflate one side's first sample), rounds that do not reverse their order, or a sample that is not per step."""
    a = clock.side("a", 1.0, first=100.0, first_n=2)
    b = clock.side("b", 3.0, first=100.0, first_n=2)
    res = il.interleave({"a": a, "b": b}, warmup=2, repeats=5, steps=4)
    assert res.times["a"] == [1.0] * 5 and res.times["b"] == [3.0] * 5  # seconds per step, warm-up excluded
    assert res.orders == [["a", "b"], ["b", "a"], ["a", "b"], ["b", "a"], ["a", "b"]]
    assert clock.calls[:4] == ["a", "a", "b", "b"]  # warm-up of every side first
    assert len(clock.calls) == 2 * (2 + 5 * 4)
    assert res.summary("a", "b") == {"ratio_min": 1 / 3, "ratio_median": 1 / 3, "ratio_max": 1 / 3}


def test_alternation_brackets_the_true_ratio_under_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a timer that runs the sides in the same order every round: on a machine whose load drifts over the
    run, every round then favours the side that runs first, and [min, max] of the ratio no longer contains the
    true ratio (0.5 here)."""
    clock = FakeClock(drift=0.01)
    monkeypatch.setattr(il.time, "perf_counter", clock)
    sides = {"a": clock.side("a", 1.0), "b": clock.side("b", 2.0)}
    res = il.interleave(sides, warmup=1, repeats=6, steps=2)
    s = res.summary("a", "b")
    assert s["ratio_min"] < 0.5 < s["ratio_max"]
    # rounds in the same order (what the alternation prevents): every ratio biased the same way
    same = [il.timed(*sides["a"], 2) / il.timed(*sides["b"], 2) for _ in range(6)]
    assert max(same) < 0.5


def test_two_sided_helper_and_bad_arguments(clock: FakeClock) -> None:
    """Catches the benchmarks' two-sided summary (ours / torch) diverging from the shared timer's, and a repeat
    or step count of zero producing an empty, silently NaN result."""
    out = il.interleaved(clock.side("o", 2.0), clock.side("t", 4.0), warmup=1, repeats=3, steps=1)
    assert out["ours_median_s"] == 2.0 and out["torch_median_s"] == 4.0
    assert out["ratio_median"] == 0.5 and out["ratios"] == [0.5] * 3
    with pytest.raises(ValueError, match="repeats 0"):
        il.interleave({"a": clock.side("a", 1.0)}, warmup=1, repeats=0, steps=1)


def test_no_warmup_reads_nothing_before_the_first_sample(clock: FakeClock) -> None:
    """Catches a timer that calls ``finish`` after zero warm-up steps: the benchmarks' finish reads the input
    gradient, which does not exist before the first backward (tp_vs_torch_model.py --warmup 0 crashed so)."""
    ran = []

    def finish() -> None:
        assert ran, "finish before any step"

    step = clock.side("a", 1.0)[0]
    res = il.interleave({"a": (lambda: (ran.append(1), step()), finish)}, warmup=0, repeats=1, steps=1)
    assert res.times["a"] == [1.0]

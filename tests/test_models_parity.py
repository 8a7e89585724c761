"""Every plan of the spectral-spatial transformer equals the dense model of the same architecture at P = 2 and 4
(gloo): outputs, input gradients, every weight gradient, and the weights after two AdamW steps.

One spawned world per P runs every plan in float64 and float32 (tests/model_checks.py), to keep CI fast.
"""

from __future__ import annotations

import pytest
from dist_utils import run_world
from model_checks import CASES, model_parity_suite

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("world", [2, 4])
def test_every_plan_matches_dense(world: int) -> None:
    """Catches any plan bug that changes training: a weight sliced from the wrong rows or ranks (tokenizer bands,
    heads, hidden units, D-CHAG's rank-local partial aggregators), a missing or doubled all-reduce (Megatron f/g,
    the token plan's gradient sync), a token-parallel K/V gather whose backward does not reduce-scatter, band or
    location padding (L = 10, N = 15 over P = 4) leaking into outputs or gradients, (un)patchify or the token
    strip layout swapping h and w (a 3 x 5 grid), the position embedding added at the wrong locations, parameters
    the optimizer does not see or that drift after a step, and ranks that together leave some dense weight
    unchecked."""
    results = run_world(model_parity_suite, world, timeout_s=60.0, deadline_s=420.0)
    want = {f"{dt}:{name}" for dt in ("float64", "float32") for name, *_ in CASES}
    for rank, done in enumerate(results):
        assert set(done) == want, f"rank {rank} ran {sorted(set(done) ^ want)} differently from expected"
    for case in sorted(want):
        covered = set().union(*(set(r[case]["covered"]) for r in results))
        missing = set(results[0][case]["all"]) - covered
        assert not missing, f"{case}: no rank compared the dense parameters {sorted(missing)}"

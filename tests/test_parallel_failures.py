"""A lost rank turns into an error on the surviving ranks within the configured timeout, never a hang."""

from __future__ import annotations

import re

import pytest
from dist_utils import spawn_world
from parallel_checks import lose_rank_mid_collective

pytestmark = pytest.mark.slow

TIMEOUT_S = 5.0  # process-group timeout given to runtime.start (parallel.timeout_s in the config)


@pytest.mark.parametrize(("world", "signal_name"), [(3, "SIGKILL"), (2, "SIGSTOP")])
def test_lost_rank_errors_instead_of_hanging(world: int, signal_name: str) -> None:
    """Catches a missing or ignored process-group timeout (a stuck peer, SIGSTOP, would hang the survivors
    forever) and collectives that swallow a dead peer (SIGKILL) instead of raising on every survivor."""
    victim = world - 1
    out = spawn_world(
        lose_rank_mid_collective,
        world,
        victim,
        signal_name,
        timeout_s=TIMEOUT_S,
        deadline_s=90.0,
        expect_reports=world - 1,
    )
    for rank in range(world):
        if rank == victim:
            continue
        assert rank in out.reports, f"rank {rank} never reported (hung); exit codes {out.exitcodes}"
        status, payload = out.reports[rank]
        assert status == "error", f"rank {rank} finished without error: {payload}"
        found = re.search(r"COLLECTIVE FAILED after ([0-9.]+)s", payload)
        assert found, f"rank {rank} failed for another reason:\n{payload}"
        # Within the timeout (+ margin for a loaded 2-core machine), measured from the loop start.
        assert float(found.group(1)) < TIMEOUT_S + 10.0, payload
        assert out.exitcodes[rank] not in (None, 0), (
            f"rank {rank} did not exit with an error: {out.exitcodes}"
        )

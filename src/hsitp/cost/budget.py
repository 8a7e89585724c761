"""A job whose modelled size is past any machine is refused before it starts, naming its keys.

Sizes inside their schema bounds can still multiply past what exists (D = 65,536 x 1,024 blocks x a batch of
65,536 crops): such a job would be killed for memory, or swap for hours, after its ranks start. Its modelled peak per
rank (:func:`hsitp.cost.memory.plan_memory`, the model the probe checks against its measurements) is compared
with :data:`ANY_MACHINE_BYTES` when the DAG is built and by the job itself before it allocates anything.
"""

from __future__ import annotations

from hsitp.config import ConfigError
from hsitp.cost.memory import PlanSize, plan_memory
from hsitp.shape import DTYPE_BYTES, LayerShape

GIB = 2.0**30
# A timed layer holds its input, output and their gradients, and the tensors between (an MLP's hidden units, the
# bands' tokens): 8 copies of its largest activation is what a bench point needs at the least.
BENCH_COPIES = 8
# 4 TiB per rank: past the memory of any one accelerator (an H200 holds 141 GB) and of common CPU nodes; a job
# above it cannot run anywhere this pipeline is meant for.
ANY_MACHINE_BYTES = 4 * 2.0**40


def host_bytes() -> float:
    """This machine's physical memory (what one process on its CPU can hold at most)."""
    import os

    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def peak_per_rank(plan: str, size: PlanSize, P: int, g: int = 1, checkpointing: str = "none") -> float:  # noqa: N803
    """The modelled peak bytes of rank 0 in one training step (parameters, gradients, AdamW, activations)."""
    return plan_memory(plan, size, P, g, checkpointing)[("step", "peak")]


def check_fits(what: str, need: float, keys: str, limit: float = ANY_MACHINE_BYTES) -> None:
    """ConfigError, in one line naming ``keys``, when ``need`` bytes per rank are past ``limit``."""
    if need > limit:
        raise ConfigError(
            f"{what} needs {need / GIB:,.0f} GiB per rank (modelled), past the {limit / GIB:,.0f} GiB "
            f"{'any machine holds' if limit == ANY_MACHINE_BYTES else 'this machine holds'}; lower {keys}"
        )


def bench_point_bytes(shape: LayerShape) -> float:
    """The least a timed layer holds: :data:`BENCH_COPIES` of its largest activation, B x N x D x the larger of
    the bands L (tokenisation, aggregation) and the MLP ratio, at its element size."""
    largest = shape.batch * shape.N * shape.D * max(shape.L, shape.mlp_ratio) * DTYPE_BYTES[shape.dtype]
    return BENCH_COPIES * float(largest)


def check_bench_sizes(
    roofline_shapes: list[list[int]], copy_bytes: int, collective_bytes: list[int], limit: float
) -> None:
    """The roofline's GEMMs (A, B and C in float32) and copy (source and destination), and the collectives'
    buffers (input and output), against ``limit`` bytes."""
    for m, n, k in roofline_shapes:
        check_fits(f"bench.roofline.shapes: the {m} x {n} x {k} GEMM", 4.0 * (m * k + k * n + m * n),
                   "bench.roofline.shapes", limit)  # fmt: skip
    check_fits("bench.roofline.copy_bytes", 2.0 * copy_bytes, "bench.roofline.copy_bytes", limit)
    for size in collective_bytes:
        check_fits(
            f"bench.collectives.sizes_bytes: {size}", 2.0 * size, "bench.collectives.sizes_bytes", limit
        )

"""Where a benchmark runs: ranks, backend, device, threads and whether the machine is oversubscribed.

Every number the bench stage writes is labelled with this record, so a CPU/gloo timing can never be mistaken
for a GPU one, and a point with more busy threads than cores is flagged instead of silently slow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hsitp.errors import HsitpError
from hsitp.io import device_description
from hsitp.shape import DTYPE_BYTES

if TYPE_CHECKING:
    import torch

TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
DTYPE_NAMES = tuple(DTYPE_BYTES)  # the dtypes a LayerShape knows


class BenchSetupError(HsitpError):
    """The benchmark cannot start as configured (world size, device or backend mismatch)."""


@dataclass
class BenchRuntime:
    """One rank's view of the benchmark job; ``group`` is None when P = 1 (no process group needed)."""

    rank: int
    world_size: int
    local_rank: int
    backend: str  # "gloo" | "nccl" | "none" (P = 1)
    device: Any  # torch.device
    group: Any  # torch ProcessGroup | None
    threads_per_rank: int
    cores: int
    oversubscribed: bool
    device_label: str

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def attrs(self) -> dict[str, Any]:
        """Attributes recorded beside every timing written by this run."""
        return {
            "device": self.device_label,
            "backend": self.backend,
            "world_size": self.world_size,
            "threads_per_rank": self.threads_per_rank,
            "cores": self.cores,
            "oversubscribed": int(self.oversubscribed),
            "hardware": device_description(),
        }


def available_cores() -> int:
    """Cores this process may run on (affinity-aware, unlike os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def is_oversubscribed(world_size: int, threads_per_rank: int, cores: int, *, cuda_devices: int = 0) -> bool:
    """True when ranks would share compute: more rank threads than cores on CPU, more ranks than GPUs on CUDA."""
    if cuda_devices > 0:
        return world_size > cuda_devices
    return world_size * threads_per_rank > cores


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA on a machine without one is an error, not a fallback."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise BenchSetupError(
            "bench.device is 'cuda' but torch sees no GPU; set bench.device to 'auto' or 'cpu'."
        )
    if name not in ("cpu", "cuda"):
        raise BenchSetupError(f"bench.device must be auto, cpu or cuda, got {name!r}")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on GPU (the paper's setting) and float32 on CPU (bf16 GEMMs on CPU are not representative)."""
    import torch

    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPE_NAMES:
        raise BenchSetupError(
            f"bench.dtypes: unknown dtype {name!r}; use auto or one of {', '.join(DTYPE_NAMES)}"
        )
    return getattr(torch, name)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _label(device: torch.device, backend: str, threads: int) -> str:
    import torch

    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} ({backend})"
    desc = device_description()
    return f"CPU: {desc['cpu']} ({threads} threads/rank, {backend})"


def start_runtime(
    *,
    device: str = "auto",
    backend: str = "auto",
    threads_per_rank: int = 1,
    timeout_s: float = 300.0,
    expected_world_size: int | None = None,
) -> BenchRuntime:
    """Initialise this rank: fix threads, pick the device, and join the process group when launched by torchrun.

    Without torchrun's variables the run is a single rank (P = 1) and no process group is created.
    """
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads_per_rank)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if expected_world_size is not None and world_size != expected_world_size:
        raise BenchSetupError(
            f"launched with WORLD_SIZE={world_size} but --world-size {expected_world_size} was asked for; "
            f"launch with `torchrun --standalone --nproc_per_node {expected_world_size} -m hsitp bench run ...`"
        )
    dev = resolve_device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    if backend == "auto":
        backend = "nccl" if dev.type == "cuda" else "gloo"
    if backend == "nccl" and dev.type != "cuda":
        raise BenchSetupError("parallel.backend 'nccl' needs a CUDA device; use 'auto' or 'gloo' on CPU.")
    group = None
    if world_size > 1:
        missing = [k for k in TORCHRUN_ENV if k not in os.environ]
        if missing:
            raise BenchSetupError(
                f"WORLD_SIZE={world_size} but {', '.join(missing)} unset; launch with torchrun."
            )
        kwargs: dict[str, Any] = {"backend": backend, "timeout": timedelta(seconds=timeout_s)}
        if dev.type == "cuda":
            kwargs["device_id"] = dev
        dist.init_process_group(**kwargs)
        group = dist.group.WORLD
    else:
        backend = "none"
    cores = available_cores()
    cuda_devices = torch.cuda.device_count() if dev.type == "cuda" else 0
    return BenchRuntime(
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        backend=backend,
        device=dev,
        group=group,
        threads_per_rank=threads_per_rank,
        cores=cores,
        oversubscribed=is_oversubscribed(world_size, threads_per_rank, cores, cuda_devices=cuda_devices),
        device_label=_label(dev, backend, threads_per_rank),
    )


def stop_runtime(rt: BenchRuntime) -> None:
    import torch.distributed as dist

    if rt.group is not None and dist.is_initialized():
        # every rank finishes its last collective before any rank tears the group down
        dist.barrier(group=rt.group)
        dist.destroy_process_group()

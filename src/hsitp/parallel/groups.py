"""Process groups for tensor parallelism, passed explicitly to every layer (no globals, no env-var switches).

A :class:`TPGroup` bundles a torch ProcessGroup with its size and this process's rank in it, plus two knobs the
benchmark stage needs: ``comm="noop"`` replaces every collective by a local op of the same output shape and
dtype (compute-only timing), and ``trace=[]`` records one :class:`CommRecord` per collective issued (bytes moved,
replaying collectives alone). ``dataclasses.replace(g, comm="noop")`` gives the no-op twin of a group.

Backend choice: NCCL when CUDA is available, gloo otherwise (``backend="auto"``). The process-group timeout comes
from the config (``parallel.timeout_s``) so that a dead or stuck rank turns into an error, not a hang.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from hsitp.parallel.errors import DistributedSetupError, ShardingError

BACKENDS = ("auto", "gloo", "nccl")
COMM_MODES = ("real", "noop")


@dataclass(frozen=True)
class CommRecord:
    """One collective as issued: ``nbytes`` is the full (unsharded) tensor size, as in the ring cost model.

    all_reduce: the reduced tensor; all_gather: the gathered output; reduce_scatter: the full input.
    ``shape`` is that full tensor's shape; ``phase`` says whether autograd's forward or backward issued it.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    group_size: int
    phase: str = "forward"


@dataclass(frozen=True)
class TPGroup:
    """A tensor-parallel group: ``group`` is None only for P = 1 (every collective is then the identity)."""

    group: Any  # torch.distributed.ProcessGroup | None
    size: int
    rank: int
    comm: str = "real"
    trace: list[CommRecord] | None = field(default=None, compare=False, hash=False)
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.size < 1 or not 0 <= self.rank < self.size:
            raise ShardingError(f"TPGroup: rank {self.rank} is not in [0, size={self.size})")
        if self.comm not in COMM_MODES:
            raise ShardingError(f"TPGroup.comm must be one of {COMM_MODES}, got {self.comm!r}")
        if self.size > 1 and self.group is None and self.comm == "real":
            raise ShardingError(
                f"TPGroup of size {self.size} needs a process group for comm='real' (use comm='noop' to time "
                "compute alone without one)"
            )

    @classmethod
    def single(cls) -> TPGroup:
        """The P = 1 group: layers built on it equal the dense layers and issue no communication."""
        return cls(group=None, size=1, rank=0)

    @classmethod
    def from_process_group(cls, group: Any, timeout_s: float | None = None) -> TPGroup:
        """Wrap an existing ProcessGroup (this process must be a member)."""
        rank = dist.get_rank(group)
        if rank < 0:
            raise DistributedSetupError("this process is not a member of the given process group")
        return cls(group=group, size=dist.get_world_size(group), rank=rank, timeout_s=timeout_s)

    def record(self, name: str, full: torch.Tensor | torch.Size, dtype: torch.dtype, phase: str) -> None:
        """Append a CommRecord when tracing (``full`` = the unsharded tensor or its shape)."""
        if self.trace is None:
            return
        shape = tuple(full.shape if isinstance(full, torch.Tensor) else full)
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        self.trace.append(
            CommRecord(name, shape, str(dtype).removeprefix("torch."), nbytes, self.size, phase)
        )


@dataclass(frozen=True)
class Mesh2D:
    """P = P_c x P_t: ``channel`` splits heads / hidden D, ``token`` splits the N spatial tokens.

    Global rank = t * P_c + c, so the (more talkative) channel groups are contiguous ranks (one node first).
    """

    channel: TPGroup
    token: TPGroup

    @property
    def size(self) -> int:
        return self.channel.size * self.token.size


def resolve_backend(backend: str = "auto") -> str:
    """'auto' -> 'nccl' on CUDA, 'gloo' on CPU; an explicit choice is checked against the machine."""
    if backend not in BACKENDS:
        raise DistributedSetupError(f"parallel.backend must be one of {BACKENDS}, got {backend!r}")
    cuda = torch.cuda.is_available()
    if backend == "auto":
        return "nccl" if cuda and dist.is_nccl_available() else "gloo"
    if backend == "nccl" and not (cuda and dist.is_nccl_available()):
        raise DistributedSetupError(
            "parallel.backend is 'nccl' but CUDA/NCCL is not available on this machine; use 'auto' or 'gloo'"
        )
    return backend


def check_world_size(actual: int, expected: int | None) -> None:
    """Fail before any collective when the launched world does not match the config."""
    if expected is not None and actual != expected:
        raise DistributedSetupError(
            f"world size mismatch: {actual} processes were launched but the config asks for P = {expected}; "
            f"launch with `torchrun --nproc-per-node {expected}` or change the config"
        )


def _env_int(name: str) -> int | None:
    val = os.environ.get(name)
    if val is None or val == "":
        return None
    try:
        return int(val)
    except ValueError as exc:
        raise DistributedSetupError(f"environment variable {name}={val!r} is not an integer") from exc


def init_distributed(
    backend: str = "auto",
    timeout_s: float = 300.0,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    init_method: str | None = None,
    expected_world_size: int | None = None,
) -> TPGroup:
    """Initialise the default process group and return it as a TPGroup.

    Rank and world size come from the arguments, else from torchrun's RANK / WORLD_SIZE (LOCAL_RANK picks the
    GPU under NCCL). Without either, this is a single process and P = 1 (no process group is created). The
    world size is checked against ``expected_world_size`` before the rendezvous.
    """
    rank = rank if rank is not None else _env_int("RANK")
    world_size = world_size if world_size is not None else _env_int("WORLD_SIZE")
    if world_size is None:
        check_world_size(1, expected_world_size)
        return TPGroup.single()
    check_world_size(world_size, expected_world_size)
    if rank is None or not 0 <= rank < world_size:
        raise DistributedSetupError(f"rank {rank} is not in [0, {world_size}); set RANK or pass rank=")
    if timeout_s <= 0:
        raise DistributedSetupError(f"parallel.timeout_s must be > 0, got {timeout_s}")
    chosen = resolve_backend(backend)
    if dist.is_initialized():
        if dist.get_world_size() != world_size or dist.get_rank() != rank:
            raise DistributedSetupError(
                f"a process group is already initialised as rank {dist.get_rank()}/{dist.get_world_size()}, "
                f"not {rank}/{world_size}"
            )
        return TPGroup(dist.group.WORLD, world_size, rank, timeout_s=timeout_s)
    if init_method is None and not os.environ.get("MASTER_ADDR"):
        raise DistributedSetupError("WORLD_SIZE is set but MASTER_ADDR is not; launch with torchrun")
    kwargs: dict[str, Any] = {}
    if chosen == "nccl":
        local_rank = _env_int("LOCAL_RANK")
        local_rank = local_rank if local_rank is not None else rank % torch.cuda.device_count()
        torch.cuda.set_device(local_rank)
        kwargs["device_id"] = torch.device("cuda", local_rank)
    dist.init_process_group(
        backend=chosen,
        init_method=init_method or "env://",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
        **kwargs,
    )
    return TPGroup(dist.group.WORLD, world_size, rank, timeout_s=timeout_s)


def init_from_config(
    config: Mapping[str, Any], *, expected_world_size: int | None = None, **kwargs: Any
) -> TPGroup:
    """:func:`init_distributed` with backend and timeout read from the config's ``parallel`` section."""
    par = config.get("parallel", {})
    return init_distributed(
        par.get("backend", "auto"),
        float(par.get("timeout_s", 300.0)),
        expected_world_size=expected_world_size,
        **kwargs,
    )


def make_mesh_2d(world: TPGroup, p_channel: int, p_token: int) -> Mesh2D:
    """Split the world group into channel groups (size P_c) and token groups (size P_t).

    Every rank must call this with the same arguments (new_group is collective over the world). The shape is
    checked before any group is created.
    """
    if p_channel < 1 or p_token < 1 or p_channel * p_token != world.size:
        raise ShardingError(
            f"2-D mesh P_c x P_t = {p_channel} x {p_token} = {p_channel * p_token} does not match the world size "
            f"P = {world.size}; choose factors whose product is P"
        )
    c, t = world.rank % p_channel, world.rank // p_channel
    if world.size == 1 or world.group is None:
        single = TPGroup(None, 1, 0, comm=world.comm, trace=world.trace)
        if world.size == 1:
            return Mesh2D(single, single)
        # noop world without a process group: both axes are noop groups of the right size.
        return Mesh2D(
            TPGroup(None, p_channel, c, comm="noop", trace=world.trace),
            TPGroup(None, p_token, t, comm="noop", trace=world.trace),
        )
    timeout = datetime.timedelta(seconds=world.timeout_s) if world.timeout_s else None
    channel_ranks = [[tt * p_channel + cc for cc in range(p_channel)] for tt in range(p_token)]
    token_ranks = [[tt * p_channel + cc for tt in range(p_token)] for cc in range(p_channel)]
    channel_pg, _ = dist.new_subgroups_by_enumeration(channel_ranks, timeout=timeout)
    token_pg, _ = dist.new_subgroups_by_enumeration(token_ranks, timeout=timeout)
    common = {"comm": world.comm, "trace": world.trace, "timeout_s": world.timeout_s}
    return Mesh2D(
        channel=TPGroup(channel_pg, p_channel, c, **common),
        token=TPGroup(token_pg, p_token, t, **common),
    )


def destroy_distributed() -> None:
    """Tear down the default process group if one exists (safe to call twice)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

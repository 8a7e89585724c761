"""Process groups for tensor parallelism, passed explicitly to every layer (no globals, no env-var switches).

A :class:`TPGroup` bundles a torch ProcessGroup with its size and this process's rank in it, plus two knobs the
benchmark stage needs: ``comm="noop"`` replaces every collective by a local op of the same output shape and
dtype (compute-only timing), and ``trace=[]`` records one :class:`CommRecord` per collective issued (bytes moved,
replaying collectives alone). ``g.noop()`` gives the no-op twin of a group (or of a :class:`Mesh2D`),
``g.traced()`` a no-op twin that records every collective, per axis.

The world group and its 2-D meshes come from :func:`hsitp.parallel.runtime.start` (backend, device, timeout).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

from hsitp.parallel.errors import DistributedSetupError, ShardingError

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


class AxisTrace(NamedTuple):
    """The collectives a traced twin recorded on one axis, and the real group of that axis (to replay them on)."""

    group: TPGroup
    records: list[CommRecord]


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

    def noop(self) -> TPGroup:
        """The no-op twin: same size, rank and trace, every collective a local op of the same shape and dtype."""
        return dataclasses.replace(self, comm="noop")

    def traced(self) -> tuple[TPGroup, list[AxisTrace]]:
        """A no-op twin that records every collective it is asked for, and that record list beside this group.

        Layers built on the twin issue no communication (no peer is needed), yet their trace says exactly what the
        real group would move.
        """
        records: list[CommRecord] = []
        return dataclasses.replace(self, comm="noop", trace=records), [AxisTrace(self, records)]

    def record(self, name: str, full: torch.Tensor | torch.Size, dtype: torch.dtype, phase: str) -> None:
        """Append a CommRecord when tracing (``full`` = the unsharded tensor or its shape)."""
        if self.trace is None:
            return
        shape = tuple(full.shape if isinstance(full, torch.Tensor) else full)
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
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

    def noop(self) -> Mesh2D:
        """Both axes' no-op twins (a mesh with one axis still communicating would not time compute alone)."""
        return Mesh2D(channel=self.channel.noop(), token=self.token.noop())

    def traced(self) -> tuple[Mesh2D, list[AxisTrace]]:
        """A no-op twin whose axes record into separate lists, channel first, so each record's group is known."""
        channel, ch = self.channel.traced()
        token, tok = self.token.traced()
        return Mesh2D(channel=channel, token=token), ch + tok


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

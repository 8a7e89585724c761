"""The one way a rank starts: threads, device, backend and process group for the pipeline, tests and benchmarks/.

``start(RuntimeSettings.from_config(config, section="bench", world_size=P))`` checks everything it can *before*
any rendezvous (a misconfigured launch otherwise blocks in ``init_process_group`` waiting for ranks that never
come): the settings themselves, the device and backend against the machine, torchrun's variables and the launched
world size against the expected one. It then joins the process group with the configured timeout and returns a
:class:`Runtime`: rank, world size, device, backend, the world :class:`TPGroup`, cached 2-D meshes, the attributes
recorded beside every measurement, and ``stop()``.

Without torchrun (no WORLD_SIZE) the process is a single rank, P = 1, and no process group is created. Tests that
spawn their own ranks pass ``rank=``, ``world_size=`` and ``init_method=`` instead of torchrun's variables.
"""

from __future__ import annotations

import ctypes
import datetime
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hsitp.parallel.errors import DistributedSetupError
from hsitp.parallel.groups import Mesh2D, TPGroup, make_mesh_2d
from hsitp.shape import DTYPE_BYTES

if TYPE_CHECKING:
    from hsitp.sections import Config

BACKENDS = ("auto", "gloo", "nccl")
DEVICES = ("auto", "cpu", "cuda")
DTYPE_NAMES = tuple(DTYPE_BYTES)  # the dtypes a LayerShape knows
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class RuntimeSettings:
    """How this rank starts. Every field is checked here, and errors name the config key it came from."""

    # Process-group backend (parallel.backend): auto = nccl on a CUDA device, gloo otherwise.
    backend: str = "auto"
    # Process-group timeout in seconds (parallel.timeout_s): a dead or stuck peer makes the others raise, not hang.
    timeout_s: float = 300.0
    # Compute device (<section>.device): auto = CUDA when torch sees a GPU, else CPU; cuda without a GPU is an error.
    device: str = "auto"
    # torch.set_num_threads of this rank (<section>.threads_per_rank); ranks x threads > cores is flagged.
    threads_per_rank: int = 1
    # Ranks the caller expects (e.g. `hsitp bench run --world-size`); None accepts any. Checked before rendezvous.
    world_size: int | None = None
    # Config section that gave device and threads_per_rank (e.g. "bench"), to name them in errors; "" for none.
    section: str = ""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise DistributedSetupError(f"parallel.backend must be one of {BACKENDS}, got {self.backend!r}")
        if not _is_number(self.timeout_s) or not self.timeout_s > 0:
            raise DistributedSetupError(f"parallel.timeout_s must be a number > 0, got {self.timeout_s!r}")
        if self.device not in DEVICES:
            raise DistributedSetupError(f"{self.key('device')} must be one of {DEVICES}, got {self.device!r}")
        if not _is_int(self.threads_per_rank) or self.threads_per_rank < 1:
            raise DistributedSetupError(
                f"{self.key('threads_per_rank')} must be an integer >= 1, got {self.threads_per_rank!r}"
            )
        if self.world_size is not None and (not _is_int(self.world_size) or self.world_size < 1):
            raise DistributedSetupError(
                f"world_size (the expected number of ranks) must be an integer >= 1, got {self.world_size!r}"
            )

    def key(self, name: str) -> str:
        """The config key of a caller-supplied field, as error messages name it."""
        return f"{self.section}.{name}" if self.section else name

    @classmethod
    def from_config(
        cls, config: Config, *, section: str | None = None, world_size: int | None = None
    ) -> RuntimeSettings:
        """backend and timeout_s from the config's ``parallel`` section; device and threads_per_rank from the
        caller's stage section (e.g. "bench")."""
        own = (
            {k: getattr(config.section(section), k) for k in ("device", "threads_per_rank")}
            if section
            else {}
        )
        par = config.parallel
        return cls(
            backend=par.backend, timeout_s=par.timeout_s, **own, world_size=world_size, section=section or ""
        )


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


@dataclass
class Runtime:
    """This rank's view of the job, from :func:`start`; ``world.group`` is None when P = 1 (no process group)."""

    settings: RuntimeSettings
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str  # "gloo" | "nccl" | "none" (P = 1: no process group)
    world: TPGroup
    cores: int
    oversubscribed: bool
    device_label: str
    _meshes: dict[tuple[int, int], Mesh2D] = field(default_factory=dict, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def group(self) -> Any:
        """The world ProcessGroup (None at P = 1), for raw torch.distributed calls."""
        return self.world.group

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def mesh(self, p_channel: int, p_token: int) -> Mesh2D:
        """The world split P_c x P_t, built once per shape (creating sub-groups is collective and not free).

        Every rank must ask for the same shapes in the same order.
        """
        if self._stopped:
            raise DistributedSetupError("this runtime was stopped; start a new one to build meshes")
        shape = (p_channel, p_token)
        if shape not in self._meshes:
            self._meshes[shape] = make_mesh_2d(self.world, p_channel, p_token)
        return self._meshes[shape]

    def attrs(self) -> dict[str, Any]:
        """Attributes recorded beside every measurement of this run (bench output files keep these names)."""
        from hsitp.io import device_description  # lazy: spawned test ranks need not import xarray

        return {
            "device": self.device_label,
            "backend": self.backend,
            "world_size": self.world_size,
            "threads_per_rank": self.settings.threads_per_rank,
            "cores": self.cores,
            "oversubscribed": int(self.oversubscribed),
            "hardware": device_description(),
        }

    def stop(self) -> None:
        """Wait for every rank, then tear the process group down; safe to call twice (and at P = 1)."""
        if self._stopped:
            return
        self._stopped = True
        self._meshes.clear()
        if self.world.group is not None and dist.is_initialized():
            # every rank finishes its last collective before any rank tears the group down
            dist.barrier(group=self.world.group)
            dist.destroy_process_group()


# glibc's malloc hands every freed block above its (dynamic) mmap threshold back to the OS and maps it again on the
# next allocation; a step's MiB-sized temporaries (D-CHAG-L's chunked products, the tokenizer's rows) then fault in
# fresh pages on every touch. Which way a process goes is decided by its first allocations: the same dchag_l step ran
# at 38 or 52 ms in fresh processes, and at 37-39 ms in every one with these thresholds (docs/measured.md).
MMAP_THRESHOLD = 64 << 20  # bytes: blocks below it come from the heap and are reused, not unmapped
TRIM_THRESHOLD = 256 << 20  # bytes of free heap top kept before glibc returns it to the OS


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed blocks below 64 MiB for reuse (``mallopt`` M_MMAP_THRESHOLD and
    M_TRIM_THRESHOLD). The same arithmetic and the same tensors (the memory tracker counts tensors, not pages);
    the process keeps up to ``TRIM_THRESHOLD`` of freed heap. False (nothing changed) off glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's <malloc.h>
    return bool(mallopt(m_mmap_threshold, MMAP_THRESHOLD)) and bool(mallopt(m_trim_threshold, TRIM_THRESHOLD))


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


def resolve_device(name: str, *, key: str = "device") -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA on a machine without one is an error, not a fallback.
    ``name`` is one of DEVICES (RuntimeSettings and the typed config refuse any other)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DistributedSetupError(f"{key} is 'cuda' but torch sees no GPU; set {key} to 'auto' or 'cpu'")
    return torch.device(name)


def resolve_backend(name: str, device: torch.device, *, device_key: str = "device") -> str:
    """'auto' -> nccl on a CUDA device, gloo otherwise; an explicit nccl needs a CUDA device and NCCL (``name``,
    one of BACKENDS, was checked by RuntimeSettings)."""
    nccl_ok = device.type == "cuda" and dist.is_nccl_available()
    if name == "auto":
        return "nccl" if nccl_ok else "gloo"
    if name == "nccl" and not nccl_ok:
        why = "this torch build has no NCCL" if device.type == "cuda" else f"{device_key} resolved to the CPU"
        raise DistributedSetupError(
            f"parallel.backend is 'nccl', which needs a CUDA device, but {why}; use 'auto' or 'gloo'"
        )
    return name


def resolve_dtype(name: str, device: torch.device, *, key: str = "dtype") -> torch.dtype:
    """``auto`` is bfloat16 on GPU (the paper's setting) and float32 on CPU (bf16 GEMMs on CPU are not representative)."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPE_NAMES:
        raise DistributedSetupError(
            f"{key}: unknown dtype {name!r}; use auto or one of {', '.join(DTYPE_NAMES)}"
        )
    return getattr(torch, name)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _env_int(name: str) -> int | None:
    val = os.environ.get(name, "")
    if val == "":
        return None
    try:
        return int(val)
    except ValueError as exc:
        raise DistributedSetupError(f"environment variable {name}={val!r} is not an integer") from exc


def check_world_size(actual: int, expected: int | None, *, source: str) -> None:
    """Fail before any rendezvous when the launched world is not the one asked for."""
    if expected is not None and actual != expected:
        raise DistributedSetupError(
            f"{source} = {actual} but world_size = {expected} was asked for; launch "
            f"`torchrun --nproc_per_node {expected} ...` or ask for world_size = {actual}"
        )


def _torchrun_ranks(expected: int | None) -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables; a single rank when WORLD_SIZE is unset."""
    world_size = _env_int("WORLD_SIZE")
    if world_size is None:  # not launched by torchrun
        check_world_size(1, expected, source="WORLD_SIZE (unset: a single process)")
        return 0, 1, 0
    check_world_size(world_size, expected, source="WORLD_SIZE")
    if world_size > 1:
        missing = [k for k in TORCHRUN_ENV if not os.environ.get(k)]
        if missing:
            raise DistributedSetupError(
                f"WORLD_SIZE={world_size} but {', '.join(missing)} unset; launch with torchrun, which sets "
                f"{', '.join(TORCHRUN_ENV)}"
            )
    rank, local_rank = _env_int("RANK") or 0, _env_int("LOCAL_RANK") or 0
    return rank, world_size, local_rank


def _label(device: torch.device, backend: str, threads: int) -> str:
    from hsitp.io import device_description

    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} ({backend})"
    unit = "thread" if threads == 1 else "threads"
    return f"CPU: {device_description()['cpu']} ({threads} {unit}/rank, {backend})"


def start(
    settings: RuntimeSettings,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    init_method: str | None = None,
) -> Runtime:
    """Set threads, resolve device and backend, check the launch, join the process group; see the module doc.

    Ranks come from torchrun's variables, or, for ranks spawned by a test, from ``rank``, ``world_size`` and
    ``init_method`` (e.g. ``tcp://127.0.0.1:PORT``), given together. No process group is created at P = 1.
    """
    explicit = (rank is not None, world_size is not None, init_method is not None)
    if any(explicit) and not all(explicit):
        raise DistributedSetupError(
            "start(): give rank, world_size and init_method together, or none of them"
        )
    torch.set_num_threads(settings.threads_per_rank)
    keep_freed_memory()
    device = resolve_device(settings.device, key=settings.key("device"))
    backend = resolve_backend(settings.backend, device, device_key=settings.key("device"))
    if all(explicit):
        assert rank is not None and world_size is not None  # for the type checker
        check_world_size(world_size, settings.world_size, source="world_size passed to start()")
        local_rank = rank
    else:
        rank, world_size, local_rank = _torchrun_ranks(settings.world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise DistributedSetupError(f"rank {rank} is not in [0, world_size = {world_size})")
    if device.type == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    world = TPGroup.single()
    if world_size > 1:
        world = _join(backend, device, rank, world_size, init_method, settings.timeout_s)
    else:
        backend = "none"
    cores = available_cores()
    cuda_devices = torch.cuda.device_count() if device.type == "cuda" else 0
    return Runtime(
        settings=settings,
        rank=rank,
        world_size=world_size,
        local_rank=local_rank,
        device=device,
        backend=backend,
        world=world,
        cores=cores,
        oversubscribed=is_oversubscribed(
            world_size, settings.threads_per_rank, cores, cuda_devices=cuda_devices
        ),
        device_label=_label(device, backend, settings.threads_per_rank),
    )


def _join(
    backend: str, device: torch.device, rank: int, world_size: int, init_method: str | None, timeout_s: float
) -> TPGroup:
    """Join the process group of ``world_size`` ranks (torchrun's env:// unless ``init_method``): the world group."""
    if dist.is_initialized():
        raise DistributedSetupError(
            "a process group is already initialised in this process; stop() its Runtime before starting another"
        )
    kwargs: dict[str, Any] = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(
        backend=backend,
        init_method=init_method or "env://",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
        **kwargs,
    )
    return TPGroup.from_process_group(dist.group.WORLD, timeout_s=timeout_s)

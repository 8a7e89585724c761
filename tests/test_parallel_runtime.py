"""The one runtime (hsitp.parallel.runtime) on a single process: settings validation, the launch checks that must
fail before any rendezvous, and a P = 1 start/stop. Spawned multi-rank starts are exercised by every parity and
failure test (tests/dist_utils.py) and, under torchrun, by the bench jobs of a workflow run (tests/test_workflow_run.py)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from hsitp.config import ConfigError, validate_config
from hsitp.parallel.errors import DistributedSetupError, ShardingError
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.runtime import TORCHRUN_ENV, RuntimeSettings, resolve_dtype, start

ATTR_KEYS = {"device", "backend", "world_size", "threads_per_rank", "cores", "oversubscribed", "hardware"}


@pytest.fixture
def no_rendezvous(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reaching init_process_group fails the test at once (it would block on ranks that never come)."""

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("init_process_group was reached before the launch was checked")

    monkeypatch.setattr(dist, "init_process_group", reached)


@pytest.fixture
def torchrun_env(monkeypatch: pytest.MonkeyPatch, no_rendezvous: None) -> pytest.MonkeyPatch:
    """Rank 0 of a 2-rank torchrun launch whose master nobody listens on."""
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    for key, val in env.items():
        monkeypatch.setenv(key, val)
    return monkeypatch


@pytest.fixture
def no_torchrun(monkeypatch: pytest.MonkeyPatch, no_rendezvous: None) -> None:
    for key in TORCHRUN_ENV:
        monkeypatch.delenv(key, raising=False)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"backend": "mpi"}, "parallel.backend"),
        ({"timeout_s": 0}, "parallel.timeout_s"),
        ({"timeout_s": "300"}, "parallel.timeout_s"),
        ({"device": "tpu"}, "bench.device"),
        ({"threads_per_rank": 0}, "bench.threads_per_rank"),
        ({"threads_per_rank": 1.5}, "bench.threads_per_rank"),
        ({"world_size": 0}, "world_size"),
    ],
)
def test_settings_validation_names_the_key(kwargs: dict, key: str) -> None:
    """Catches a bad setting accepted at construction (and failing later, inside torch, without naming the key)."""
    with pytest.raises(DistributedSetupError, match=key):
        RuntimeSettings(**kwargs, section="bench")


def test_settings_from_config() -> None:
    """Catches backend/timeout not read from the parallel section, or device/threads not from the caller's."""
    cfg = validate_config(
        {"parallel": {"backend": "gloo", "timeout_s": 7}, "bench": {"device": "cpu", "threads_per_rank": 2}}
    )
    got = RuntimeSettings.from_config(cfg, section="bench", world_size=2)
    assert got == RuntimeSettings("gloo", 7, "cpu", 2, world_size=2, section="bench")
    assert RuntimeSettings.from_config(validate_config({})) == RuntimeSettings()
    with pytest.raises(ConfigError, match="bench.device"):  # the typed config refuses it before any runtime
        validate_config({"bench": {"device": "gpu"}})


def test_missing_master_addr_fails_before_rendezvous(torchrun_env: pytest.MonkeyPatch) -> None:
    """Catches a launch without torchrun's rendezvous variables reaching init_process_group (env:// would raise
    late and cryptically, or wait); the error must name the missing variable."""
    torchrun_env.delenv("MASTER_ADDR")
    with pytest.raises(DistributedSetupError, match="MASTER_ADDR unset; launch with torchrun"):
        start(RuntimeSettings(backend="gloo", device="cpu", threads_per_rank=torch.get_num_threads()))


def test_world_size_mismatch_fails_before_rendezvous(torchrun_env: pytest.MonkeyPatch) -> None:
    """Catches a launch whose world size differs from the one asked for reaching the rendezvous (where it would
    block waiting for ranks that never come): both sizes must be named."""
    settings = RuntimeSettings(
        backend="gloo", device="cpu", threads_per_rank=torch.get_num_threads(), world_size=4
    )
    with pytest.raises(DistributedSetupError, match="WORLD_SIZE = 2 but world_size = 4 was asked for"):
        start(settings)


def test_single_process_asked_for_two_ranks(no_torchrun: None) -> None:
    """Catches `hsitp bench run --world-size 2` started without torchrun silently running as P = 1."""
    settings = RuntimeSettings(device="cpu", threads_per_rank=torch.get_num_threads(), world_size=2)
    with pytest.raises(
        DistributedSetupError, match="WORLD_SIZE .unset: a single process. = 1 but world_size = 2"
    ):
        start(settings)


def test_bad_env_values(torchrun_env: pytest.MonkeyPatch) -> None:
    """Catches a non-integer or out-of-range RANK turning into a torch error (or a hang) instead of ours."""
    settings = RuntimeSettings(backend="gloo", device="cpu", threads_per_rank=torch.get_num_threads())
    torchrun_env.setenv("RANK", "first")
    with pytest.raises(DistributedSetupError, match="RANK='first' is not an integer"):
        start(settings)
    torchrun_env.setenv("RANK", "2")
    with pytest.raises(DistributedSetupError, match=r"rank 2 is not in \[0, world_size = 2\)"):
        start(settings)
    with pytest.raises(DistributedSetupError, match="rank, world_size and init_method together"):
        start(settings, rank=0, world_size=2)


def test_nccl_without_cuda_device_is_an_error(torchrun_env: pytest.MonkeyPatch) -> None:
    """Catches nccl requested for CPU tensors reaching init_process_group (NCCL cannot reduce CPU tensors);
    the error must name parallel.backend and the device key."""
    settings = RuntimeSettings(
        backend="nccl", device="cpu", threads_per_rank=torch.get_num_threads(), section="bench"
    )
    with pytest.raises(
        DistributedSetupError, match="parallel.backend is 'nccl'.*bench.device resolved to the CPU"
    ):
        start(settings)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only case")
def test_cpu_only_machine(torchrun_env: pytest.MonkeyPatch) -> None:
    """Catches 'auto' picking a GPU or nccl on a machine without one, and an explicit cuda request silently
    falling back to the CPU."""
    threads = torch.get_num_threads()
    with pytest.raises(DistributedSetupError, match="parallel.backend is 'nccl'"):
        start(RuntimeSettings(backend="nccl", threads_per_rank=threads))
    with pytest.raises(DistributedSetupError, match="bench.device is 'cuda' but torch sees no GPU"):
        start(RuntimeSettings(device="cuda", threads_per_rank=threads, section="bench"))


def test_single_process_runtime(no_torchrun: None) -> None:
    """Catches a P = 1 run that creates a process group, records other attribute names than the bench files
    expect, rebuilds meshes, or fails when stopped twice."""
    threads = torch.get_num_threads()  # keep this test process's thread count unchanged
    rt = start(RuntimeSettings(device="cpu", threads_per_rank=threads, world_size=1, section="bench"))
    assert (rt.rank, rt.world_size, rt.backend, rt.group) == (0, 1, "none", None)
    assert rt.world == TPGroup.single() and rt.device == torch.device("cpu") and not rt.is_cuda
    attrs = rt.attrs()
    assert set(attrs) == ATTR_KEYS and attrs["device"].startswith("CPU: ") and attrs["backend"] == "none"
    assert attrs["threads_per_rank"] == threads and attrs["oversubscribed"] == int(threads > rt.cores)
    mesh = rt.mesh(1, 1)
    assert rt.mesh(1, 1) is mesh and mesh.size == 1
    with pytest.raises(ShardingError, match="does not match the world size"):
        rt.mesh(2, 1)
    rt.stop()
    rt.stop()
    with pytest.raises(DistributedSetupError, match="stopped"):
        rt.mesh(1, 1)


def test_resolve_dtype_names_the_key() -> None:
    """Catches an unknown dtype name passing through to getattr(torch, ...) (AttributeError, no key named)."""
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    with pytest.raises(DistributedSetupError, match="bench.dtypes: unknown dtype 'float8'"):
        resolve_dtype("float8", torch.device("cpu"), key="bench.dtypes")


def test_freed_memory_is_kept_for_reuse_on_glibc() -> None:
    """Catches the allocator setting silently not applied (a wrong mallopt parameter number returns 0), which leaves a
    training process in glibc's unmap-and-refault mode (dchag_l's step 52 instead of 38 ms, docs/measured.md)."""
    import platform

    from hsitp.parallel.runtime import keep_freed_memory

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt's thresholds are glibc's")
    assert keep_freed_memory() is True

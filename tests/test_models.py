"""The spectral-spatial transformer and its plans, in one process: config and plan checks, layouts, P = 1
parity of every plan, and models built and run on the meta device and under FakeTensorMode at P = 8."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from model_checks import BASE, check_model

from hsitp.errors import HsitpError
from hsitp.models import (
    PLANS,
    ModelConfig,
    ModelConfigError,
    PlanError,
    SpectralSpatialTransformer,
    architecture_for,
    check_plan,
    parallelize,
)
from hsitp.models.model import unpatchify
from hsitp.parallel.groups import TPGroup

PAPER = ModelConfig(bands=103, height=72, width=72, classes=9, patch=4, dim=256, heads=8, depth=2)  # N = 324


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"height": 7}, "model.height"),
        ({"width": 9}, "model.width"),
        ({"heads": 5}, "model.heads"),
        ({"bands": 0}, "model.bands"),
        ({"aggregation": "mean"}, "model.aggregation"),
        ({"partial": "max"}, "model.partial"),
        ({"aggregation": "hierarchical", "parts": 11}, "model.parts"),
        ({"groups": 0}, "model.groups"),
        ({"depth": 2.0}, "model.depth"),
    ],
)
def test_bad_model_config_names_the_key(change: dict, key: str) -> None:
    """Catches a bad size (a crop that is not a multiple of the patch, heads not dividing D, more band chunks
    than bands) surfacing later as a reshape error instead of a message naming the config key."""
    with pytest.raises(ModelConfigError, match=key.replace(".", r"\.")):
        dataclasses.replace(BASE, **change)


@pytest.mark.parametrize(
    ("config", "plan", "P", "g", "match"),
    [
        (BASE, "pipeline", 2, None, "unknown plan"),
        (BASE, "dense", 2, None, "one device"),
        (BASE, "tp", 3, None, r"model\.heads = 4 is not divisible by P = 3"),
        (architecture_for(BASE, "dchag_l", 2), "tp", 2, None, r"model\.aggregation"),
        (BASE, "dchag_l", 2, None, r"model\.aggregation = 'hierarchical'"),
        (architecture_for(BASE, "dchag_c", 2), "dchag_l", 2, None, r"model\.partial = 'linear'"),
        (architecture_for(BASE, "dchag_l", 2), "dchag_l", 4, None, r"model\.parts = 2"),
        (architecture_for(BASE, "dchag_l", 2, 2), "dchag_l", 2, 1, r"model\.groups = 2"),
        (BASE, "token", 16, None, r"N = 15 locations"),
        (BASE, "token", 2, 4, "dchag plans only"),
        (BASE, "tp", 0, None, "positive integer"),
    ],
)
def test_check_plan_refuses_what_does_not_fit(
    config: ModelConfig, plan: str, P: int, g: int | None, match: str
) -> None:  # noqa: N803
    """Catches a launch that would fail (or silently pad) inside the ranks: heads not divisible by P, a D-CHAG
    architecture built for another P or g, N < P for the token split, a plan run on the wrong architecture."""
    with pytest.raises(PlanError, match=match):
        check_plan(config, plan, P, g)


def test_check_plan_accepts_the_paper_grid() -> None:
    """Catches check_plan refusing a run the paper makes: D = 256, 8 heads, P = 2, 4, 8, D-CHAG g = 4 and 8,
    Pavia University's 103 (prime) bands, N = 324 and 5776."""
    for crop in (72, 304):
        base = dataclasses.replace(PAPER, height=crop, width=crop, depth=12)
        for p in (2, 4, 8):
            for plan in ("tp", "token"):
                check_plan(architecture_for(base, plan, p), plan, p)
            for plan in ("dchag_l", "dchag_c"):
                for g in (4, 8):
                    check_plan(architecture_for(base, plan, p, g), plan, p, g)


def test_parallelize_refuses_before_building() -> None:
    """Catches a plan check that runs only after layers are built (or not at all): the error must be the
    PlanError naming the key, not a ShardingError from deep inside a layer."""
    dense = SpectralSpatialTransformer(BASE)
    with pytest.raises(PlanError, match=r"model\.heads"):
        parallelize(dense, "tp", TPGroup(None, 3, 0, comm="noop"))
    assert issubclass(PlanError, HsitpError) and issubclass(ModelConfigError, HsitpError)


def test_config_and_plan_check_do_not_import_torch() -> None:
    """Catches hsitp.models (config, check_plan) pulling in torch, which a launcher or the cost model (no torch)
    must be able to use before any rank starts."""
    code = (
        "import sys, hsitp.models as m; "
        "c = m.architecture_for(m.ModelConfig(bands=103, height=72, width=72, classes=9), 'dchag_c', 4, 4); "
        "m.check_plan(c, 'dchag_c', 4, 4); assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unpatchify_places_every_pixel() -> None:
    """Catches a head whose p * p * classes outputs land on the wrong pixel or class (h / w or class / pixel axes
    swapped): logit (location i j, class c, pixel a b) must land at [c, i p + a, j p + b]."""
    h, w, p, classes = 2, 3, 2, 3
    logits = torch.arange(h * w * classes * p * p, dtype=torch.float64).view(1, h * w, classes * p * p)
    out = unpatchify(logits, (h, w), p, classes)  # (1, C, h p, w p)
    assert out.shape == (1, classes, h * p, w * p)
    for i in range(h):
        for j in range(w):
            for c in range(classes):
                for a in range(p):
                    for b in range(p):
                        want = logits[0, i * w + j, (c * p + a) * p + b]
                        assert out[0, c, i * p + a, j * p + b] == want


def test_dense_model_shapes_and_seed() -> None:
    """Catches a model whose output is not one logit per class and pixel, or whose weights depend on the global
    RNG instead of its seed (ranks would then hold different masters)."""
    x = torch.randn(2, BASE.bands, BASE.height, BASE.width)
    torch.manual_seed(1)
    a = SpectralSpatialTransformer(BASE, seed=3)
    torch.manual_seed(2)
    b = SpectralSpatialTransformer(BASE, seed=3)
    assert a(x).shape == (2, BASE.classes, BASE.height, BASE.width)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(pa, pb), name
    c = SpectralSpatialTransformer(BASE, seed=4)
    assert not torch.equal(a.head.weight, c.head.weight)
    with pytest.raises(ModelConfigError, match="N = 15"):
        a(torch.randn(1, BASE.bands, 8, 10))  # a 4 x 5 grid: 20 locations


@pytest.mark.parametrize("plan", PLANS)
def test_every_plan_at_p1_matches_dense(plan: str) -> None:
    """Catches a plan that changes the model even without splitting (a lost layer, a re-initialised weight, a
    token strip that reorders patches) and the P = 1 path the GPU check runs: two AdamW steps, float64."""
    config = architecture_for(BASE, plan, 1, 2 if plan.startswith("dchag") else 1)
    covered, names = check_model(plan, config, plan, TPGroup.single(), torch.float64)
    assert covered == set(names)


def test_parallelize_leaves_the_dense_model_alone() -> None:
    """Catches a plan that edits the dense model it was given (torchtitan style means: copy, then swap)."""
    dense = SpectralSpatialTransformer(architecture_for(BASE, "dchag_c", 2, 2))
    before = {k: v.clone() for k, v in dense.state_dict().items()}
    modules = [type(m) for m in dense.modules()]
    parallelize(dense, "dchag_c", TPGroup(None, 2, 1, comm="noop"))
    assert [type(m) for m in dense.modules()] == modules
    for k, v in dense.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_token_layout_owns_contiguous_locations() -> None:
    """Catches a token strip that gives rank r other locations than [start(r), start(r) + count(r)) in row-major
    order, or does not mark the padded slot (N = 15 over P = 4: rank 3 holds 3 locations and 1 padding)."""
    p = BASE.patch
    h, w = BASE.grid
    loc = torch.arange(h * w, dtype=torch.float64).view(1, 1, h, 1, w, 1).expand(1, 1, h, p, w, p)
    image = loc.reshape(1, 1, h * p, w * p)  # every pixel holds its location index
    dense = SpectralSpatialTransformer(BASE)
    for rank, first in ((0, 0), (3, 12)):
        model = parallelize(dense, "token", TPGroup(None, 4, rank, comm="noop"))
        strip = model.shard_output(image)  # (1, 1, p, 4 p)
        valid = model.output_valid()
        assert strip.shape == valid.shape == (1, 1, p, 4 * p)
        count = 4 if rank == 0 else 3
        for k in range(4):
            block = strip[0, 0, :, k * p : (k + 1) * p]
            if k < count:
                assert torch.all(block == first + k) and valid[0, 0, :, k * p : (k + 1) * p].all()
            else:
                assert torch.all(block == 0) and not valid[0, 0, :, k * p : (k + 1) * p].any()


def _expected_shapes(config: ModelConfig, plan: str, P: int) -> dict[str, tuple[int, ...]]:  # noqa: N803
    """A few parameters whose local shape shows the plan's split (D = 256, 8 heads, hidden 1024)."""
    d, hid = config.dim, config.hidden
    if plan == "token":
        return {"model.blocks.0.attn.qkv.weight": (3 * d, d), "model.pos.weight": (config.n_tokens, d)}
    shapes = {
        "model.blocks.0.attn.qkv.weight": (3 * d // P, d),
        "model.blocks.1.mlp.fc2.weight": (d, hid // P),
    }
    if plan in ("tp", "dense"):
        shapes["model.aggregate.tokenizer.band_embed"] = (config.bands, d)
        shapes["model.aggregate.attn.kv.weight"] = (2 * d // P, d)
    else:
        shapes["model.aggregate.final.kv.weight"] = (2 * d // P, d)
    return shapes


def _build_and_run(plan: str, tp: TPGroup, batch: int = 2) -> tuple[torch.nn.Module, torch.Tensor]:
    config = architecture_for(PAPER, plan, tp.size, 4 if plan.startswith("dchag") else 1)
    model = parallelize(SpectralSpatialTransformer(config), plan, tp)
    x = torch.randn(batch, config.bands, config.height, config.width)
    y = model(model.shard_input(x))
    y.sum().backward()
    model.reduce_grads()
    for name, shape in _expected_shapes(config, plan, tp.size).items():
        assert tuple(dict(model.named_parameters())[name].shape) == shape, (plan, name)
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.shape == param.shape, (plan, name)
    return model, y


@pytest.fixture
def fake_world() -> Iterator[TPGroup]:
    """Rank 5 of a P = 8 fake process group (torch.testing._internal.distributed.fake_pg: collectives return at
    once without moving data), for building and tracing paper-scale models in one process."""
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    assert not dist.is_initialized(), "a default process group already exists in the test process"
    dist.init_process_group("fake", store=FakeStore(), rank=5, world_size=8)
    try:
        yield TPGroup.from_process_group(dist.group.WORLD)
    finally:
        dist.destroy_process_group()


def test_every_plan_runs_under_fake_tensor_mode_at_p8(fake_world: TPGroup) -> None:
    """Catches host syncs and init paths that FakeTensorMode cannot run (a data-dependent .item() / bool(), a
    rejection-sampled init, a deepcopy or Module.to that mixes fake modes), which would block estimating
    paper-scale memory: every plan at P = 8 (103 bands, N = 324, D = 256, 8 heads, g = 4; dense at P = 1) builds,
    runs forward and backward with fake tensors, issues its collectives on the fake group, and has the split's
    shapes."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    kinds = {
        "tp": {"all_reduce"},
        "dchag_l": {"all_gather", "all_reduce"},
        "token": {"all_gather", "reduce_scatter"},
    }
    kinds["dchag_c"] = kinds["dchag_l"]
    for plan in ("tp", "dchag_l", "dchag_c", "token"):
        trace: list = []
        tp = dataclasses.replace(fake_world, trace=trace)
        with FakeTensorMode():
            model, y = _build_and_run(plan, tp)
        assert isinstance(y, FakeTensor) and isinstance(next(model.parameters()), FakeTensor), plan
        assert kinds[plan] <= {c.name for c in trace}, (plan, trace)
    with FakeTensorMode():
        model, y = _build_and_run("dense", TPGroup.single())
    assert isinstance(y, FakeTensor)


def test_every_plan_builds_on_the_meta_device_at_p8() -> None:
    """Catches init or forward code that reads tensor values (impossible on the meta device) in any plan, with
    P = 8 no-op groups (comm='noop': collectives become local ops of the same shapes, no process group)."""
    for plan in PLANS:
        tp = TPGroup.single() if plan == "dense" else TPGroup(None, 8, 7, comm="noop")
        with torch.device("meta"):
            model, y = _build_and_run(plan, tp)
        assert y.is_meta and all(p.is_meta for p in model.parameters()), plan


@pytest.mark.slow
def test_model_check_script_runs_on_cpu(repo_root, tmp_path) -> None:  # noqa: ANN001
    """Catches benchmarks/model_check.py (run by gpu_check.sh on a GPU) breaking where no GPU is around to
    notice: every plan at P = 1, bf16 autocast, on the CPU at tiny sizes."""
    out = tmp_path / "model_check.json"
    args = ["--device", "cpu", "--crops", "8", "--bands", "10", "--dim", "32", "--heads", "4", "--depth", "1"]
    args += ["--patch", "2", "--groups", "2", "--json", str(out)]
    proc = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "model_check.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import json

    results = json.loads(out.read_text())["results"]
    assert [r["plan"] for r in results] == list(PLANS)
    assert all(not r["failures"] for r in results), results


@pytest.mark.parametrize("plan", [p for p in PLANS if p != "dense"])
def test_parallelize_keeps_every_tensor_on_the_dense_models_device(plan: str) -> None:
    """Catches a plan that builds a buffer on the CPU while the dense model it shards already lives on another
    device: on the H200 (benchmarks/gpu_check.sh, 2026-12-04) D-CHAG's band-padding mask stayed on the CPU and the
    first CUDA forward failed with 'found at least two devices, cuda:0 and cpu'. The meta device stands in for the
    GPU here: a CPU tensor beside meta ones fails the same way. 103 bands over g = 4 groups pad, so the mask
    exists."""
    small = dataclasses.replace(PAPER, height=8, width=8, depth=1, dim=32, heads=4)
    config = architecture_for(small, plan, 1, 4 if plan.startswith("dchag") else 1)
    dense = SpectralSpatialTransformer(config).to("meta")
    model = parallelize(dense, plan, TPGroup.single())
    off = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if not t.is_meta]
    assert not off, (plan, off)
    x = torch.randn(2, config.bands, config.height, config.width, device="meta")  # (B, L, H, W)
    assert model(model.shard_input(x)).is_meta

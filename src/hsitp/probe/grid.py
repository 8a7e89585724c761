"""The probe's grid without torch: which (plan, P, g, L, N, checkpointing) points a probe section names, and the
check that every plan can split its model at P. Light enough for the DAG's preflight (hsitp.preflight), where a P
that a plan cannot split stops the run before any job starts; the probe's runner checks the same again.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from hsitp.config import ConfigError
from hsitp.cost.budget import ANY_MACHINE_BYTES, check_fits, peak_per_rank
from hsitp.cost.memory import PlanSize
from hsitp.cost.paper import DCHAG_SETTINGS
from hsitp.models.config import ModelConfig, architecture_for, check_plan, config_keys
from hsitp.names import DCHAG_PLANS
from hsitp.settings import Estimate, ProbeModel, ProbeSettings


@dataclass(frozen=True)
class Point:
    """One probed configuration: plan at P ranks, g groups (D-CHAG), L bands, N tokens, checkpointing policy."""

    plan: str
    P: int
    g: int
    L: int
    N: int
    checkpointing: str


def crop_side(N: int, patch: int, *, key: str = "probe.N") -> int:  # noqa: N803
    """Pixels per side of a square crop of N = (side / patch)^2 tokens."""
    root = math.isqrt(N)
    if root * root != N:
        raise ConfigError(
            f"{key}: N = {N} is not a square number of tokens (square crops: N = (side / patch)^2)"
        )
    return root * patch


def section_keys(section: str) -> dict[str, str]:
    """ModelConfig field -> the key of a probe section (``probe``, ``probe.estimate.grid``) that sets it, for
    errors that name the key as the user writes it."""
    fields = ("dim", "heads", "depth", "mlp_ratio", "patch", "classes", "groups")
    return {k: f"{section}.{k}" for k in fields} | {"bands": f"{section}.L"}


def base_config(pc: ProbeModel, L: int, N: int) -> ModelConfig:  # noqa: N803
    """The dense model of a probe section at L bands and N tokens (architecture_for then picks the plan's); a
    section with ``height`` and ``width`` (the estimate's D-CHAG configs) gives the crop itself."""
    if pc.height is not None and pc.width is not None:
        height, width = int(pc.height), int(pc.width)
    else:
        height = width = crop_side(N, int(pc.patch))
    sizes = {k: int(getattr(pc, k)) for k in ("classes", "patch", "dim", "heads", "depth", "mlp_ratio")}
    return ModelConfig(bands=L, height=height, width=width, attention_kernel=pc.attention_kernel, **sizes)


def point_architecture(pc: ProbeModel, pt: Point) -> ModelConfig:
    """The model ``pt``'s plan splits over its P ranks (D-CHAG plans into ``pt.g`` groups per rank)."""
    return architecture_for(base_config(pc, pt.L, pt.N), pt.plan, pt.P, pt.g if pt.plan in DCHAG_PLANS else 1)


def check_point_fits(pc: ProbeModel, pt: Point, section: str, memory: float = ANY_MACHINE_BYTES) -> None:
    """Refuse a point whose modelled peak per rank is past ``memory`` bytes (any machine's, or this one's:
    hsitp.cost.budget), naming its keys."""
    arch = point_architecture(pc, pt)
    size = PlanSize(B=pc.batch, N=arch.n_tokens, D=arch.dim, L=arch.bands, heads=arch.heads, depth=arch.depth,
                    patch=arch.patch, classes=arch.classes, mlp_ratio=arch.mlp_ratio)  # fmt: skip
    need = peak_per_rank(pt.plan, size, pt.P, pt.g, pt.checkpointing)
    check_fits(f"{section}: plan {pt.plan!r} at P = {pt.P}, L = {pt.L}, N = {pt.N}", need,
               f"{section}.batch, .dim, .depth, .mlp_ratio, .L or .N", memory)  # fmt: skip


def points(pc: ProbeSettings, P: int) -> list[Point]:  # noqa: N803
    """Every point of the probe grid at P (dense only at P = 1; plans without groups once, at the first g).

    Raises ConfigError, naming the key, when a plan cannot split the model at P or no plan runs at P (the launch
    would probe nothing and fail writing an empty file)."""
    if not any((plan == "dense") == (P == 1) for plan in pc.plans):
        need = "dense, the only plan at P = 1" if P == 1 else "a plan but dense (dense runs at P = 1 only)"
        raise ConfigError(
            f"probe: P = {P} probes nothing with probe.plans = {list(pc.plans)}: it needs {need}; drop {P} from "
            "probe.world_sizes or change probe.plans"
        )
    out = []
    for plan in pc.plans:
        if (plan == "dense") != (P == 1):
            continue
        groups = pc.groups if plan in DCHAG_PLANS else pc.groups[:1]
        for L, N, g in itertools.product(pc.L, pc.N, groups):
            try:
                with config_keys(section_keys("probe")):
                    check_plan(
                        point_architecture(pc, Point(plan, P, int(g), int(L), int(N), "none")), plan, P
                    )
            except Exception as exc:
                raise ConfigError(
                    f"probe: plan {plan!r} at P = {P}, L = {L}, N = {N}, g = {g}: {exc}"
                ) from exc
            out += [Point(plan, P, int(g), int(L), int(N), ck) for ck in pc.checkpointing]
    for pt in out:
        check_point_fits(pc, pt, "probe")
    return out


def estimate_points(ec: Estimate) -> list[tuple[str, Point, ProbeModel]]:
    """(label, point, model section) for the paper grid and the D-CHAG configs."""
    out: list[tuple[str, Point, ProbeModel]] = []
    gc = ec.grid
    for plan in gc.plans:
        sizes = [1] if plan == "dense" else gc.world_sizes
        groups = gc.groups if plan in DCHAG_PLANS else [1]
        for P, g, L, N, ck in itertools.product(sizes, groups, gc.L, gc.N, gc.checkpointing):  # noqa: N806
            out.append((f"grid/{plan}/P{P}/g{g}/L{L}/N{N}/{ck}", Point(plan, P, g, L, N, ck), gc))
    for cfg in ec.dchag:
        sec = ProbeModel.of({**DCHAG_SETTINGS, "dim": cfg.dim})
        N = (sec.height // sec.patch) * (sec.width // sec.patch)  # noqa: N806
        for plan, ck in itertools.product(ec.dchag_plans, ec.dchag_checkpointing):
            pt = Point(plan, cfg.tp, 1, cfg.bands, N, ck)
            out.append((f"dchag/{cfg.name}/{plan}/{ck}", pt, sec))
    if not out:  # the estimate would write an empty file, which its contract refuses after the job ran
        raise ConfigError(
            "probe.estimate: no point to estimate (the grid's plans x world_sizes x groups x L x N x checkpointing "
            "and the D-CHAG configs x dchag_plans x dchag_checkpointing are all empty); give the grid a point"
        )
    for label, pt, sec in out:
        # the D-CHAG configs' sizes are fixed here (DCHAG_SETTINGS), not config keys
        with config_keys(section_keys("probe.estimate.grid") if label.startswith("grid/") else {}):
            check_plan(point_architecture(sec, pt), pt.plan, pt.P)
        check_point_fits(sec, pt, "probe.estimate.grid")
    return out

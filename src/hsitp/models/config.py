"""The transformer's configuration and the plan check, in pure Python (no torch): a launcher can refuse a P that
does not fit the model before any rank starts, and the cost model can read the same dataclass.

Plans (how the model is split over P ranks; ``hsitp.models.plans`` builds them):

- ``dense``: one device, P = 1.
- ``tp``: Megatron tensor parallelism. Every rank tokenises all L bands (replicated), the cross-band attention and
  the blocks are sharded by heads / hidden units. Needs the "attention" aggregation and heads divisible by P.
- ``dchag_l`` / ``dchag_c``: D-CHAG + TP. Rank r tokenises only its chunk of bands and aggregates it locally
  ("linear" / "cross-attention" partial aggregators, g groups per rank), then the chunk tokens are gathered and
  the rest is as ``tp``. Needs the "hierarchical" aggregation built for ``parts = P``.
- ``token``: the spatial split. Rank r owns N/P locations, tokenises and aggregates only those (replicated
  weights), attention gathers keys and values, weight gradients are all-reduced. Any aggregation; N >= P.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from hsitp.errors import HsitpError
from hsitp.names import (
    ATTENTION_KERNELS,
    BY_VARIANT,
    DCHAG_PLANS,
    ONE_RANK,
    PARALLEL_PLANS,
    PLAN_NAMES,
    PLANS,
    TOKEN_RANKS,
)
from hsitp.sections import Config

# the model's cross-band aggregations: attention, hierarchical
AGGREGATIONS = tuple(dict.fromkeys(p.aggregation for p in PLANS.values() if p.aggregation))
# D-CHAG's partial aggregators: linear, cross-attention
PARTIALS = tuple(v.partial for v in BY_VARIANT.values())
# the config's attention kernel choices: "auto" resolves per device (resolve_attention_kernel)
KERNEL_CHOICES = ("auto", *ATTENTION_KERNELS)
# "auto" per device type: exact on the CPU (measured faster there, benchmarks/step_speed.py); CUDA keeps SDPA's
# flash kernel until benchmarks/gpu_check.sh has timed both on a GPU (docs/measured-history.md, "Step speed")
AUTO_KERNEL = {"cpu": "exact", "meta": "exact", "cuda": "sdpa"}


def resolve_attention_kernel(choice: str, device_type: str) -> str:
    """The kernel a run uses: ``choice`` ("auto", "exact" or "sdpa", the config's ``model.attention_kernel``) on
    a device of type ``device_type`` ("cpu", "cuda", ...); "auto" takes ``AUTO_KERNEL``'s (SDPA elsewhere)."""
    if choice not in KERNEL_CHOICES:
        raise ModelConfigError(f"model.attention_kernel must be one of {KERNEL_CHOICES}, got {choice!r}")
    return AUTO_KERNEL.get(device_type, "sdpa") if choice == "auto" else choice


def config_attention_kernel(config: Config, device_type: str) -> str:
    """The kernel a validated config's ``model.attention_kernel`` resolves to on ``device_type``."""
    return resolve_attention_kernel(config.model.attention_kernel, device_type)


class ModelConfigError(HsitpError, ValueError):
    """A model configuration value is invalid on its own (names the ``model.`` key)."""


class PlanError(HsitpError, ValueError):
    """A parallel plan cannot split this model over P ranks (names the plan and the key that does not fit)."""


_MODEL_KEY = re.compile(r"\bmodel\.([a-z_]+)\b")


@contextmanager
def config_keys(keys: Mapping[str, str]) -> Iterator[None]:
    """Inside the block, a ModelConfigError or PlanError names the keys as the user writes them in the config:
    ``keys`` maps a ModelConfig field to its config key (``{"heads": "train.model.heads"}``); fields not in
    ``keys`` keep their ``model.`` name. ModelConfig knows no config file, so its callers say where it came from.
    """
    try:
        yield
    except (ModelConfigError, PlanError) as exc:
        text = _MODEL_KEY.sub(lambda m: keys.get(m.group(1), m.group(0)), str(exc))
        raise type(exc)(text) from exc


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and architecture of the spectral-spatial transformer (keys under ``model.`` in a config)."""

    bands: int  # L: spectral bands of the input cube (Pavia University: 103, Indian Pines: 200)
    height: int  # crop height in pixels; a multiple of patch
    width: int  # crop width in pixels; a multiple of patch
    classes: int  # classes predicted for every pixel of the crop
    patch: int = 4  # p: patch edge; kernel = stride = p per band, N = (height / p) * (width / p) tokens
    dim: int = 256  # D: token width
    heads: int = 8  # attention heads of the blocks and of every cross-attention aggregator; divides D
    depth: int = 12  # number of pre-norm transformer blocks
    mlp_ratio: int = 4  # MLP hidden width = mlp_ratio * D
    aggregation: str = "attention"  # "attention": one learned query over all L bands; "hierarchical": D-CHAG
    # hierarchical: the per-group aggregator, "linear" (D-CHAG-L) or "cross-attention" (-C)
    partial: str = "linear"
    # hierarchical: band chunks = the TP size the architecture is built for (dchag plans check it)
    parts: int = 1
    groups: int = 1  # hierarchical: g groups per chunk, one shared-weight partial aggregator per chunk
    norm_eps: float = 1e-5  # LayerNorm epsilon
    # the single-query cross-attentions' kernel: "exact" (no k or v formed) or "sdpa"; the same numbers, so not
    # the architecture (hsitp.parallel.attention_kernels); see resolve_attention_kernel for the config's "auto"
    attention_kernel: str = "exact"

    def __post_init__(self) -> None:
        sizes = ("bands", "height", "width", "classes", "patch", "dim", "heads", "depth", "mlp_ratio")
        for key in (*sizes, "parts", "groups"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ModelConfigError(f"model.{key} must be a positive integer, got {value!r}")
        for key in ("height", "width"):
            if getattr(self, key) % self.patch:
                raise ModelConfigError(
                    f"model.{key} = {getattr(self, key)} is not a multiple of model.patch = {self.patch}"
                )
        if self.dim % self.heads:
            raise ModelConfigError(f"model.heads = {self.heads} does not divide model.dim = {self.dim}")
        if self.aggregation not in AGGREGATIONS:
            raise ModelConfigError(
                f"model.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}"
            )
        if self.partial not in PARTIALS:
            raise ModelConfigError(f"model.partial must be one of {PARTIALS}, got {self.partial!r}")
        if self.aggregation == "hierarchical" and self.parts > self.bands:
            raise ModelConfigError(
                f"model.parts = {self.parts} band chunks but model.bands = {self.bands}: every chunk needs a band"
            )
        held = -(-self.bands // self.parts)  # the bands the fullest rank holds
        if self.aggregation == "hierarchical" and self.groups > held:
            raise ModelConfigError(
                f"model.groups = {self.groups} D-CHAG groups per rank, but a rank holds at most {held} of the "
                f"{self.bands} bands at P = {self.parts}: every group needs a band (g <= {held})"
            )
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ModelConfigError(
                f"model.attention_kernel must be one of {ATTENTION_KERNELS}, got {self.attention_kernel!r}"
            )
        if not self.norm_eps > 0:
            raise ModelConfigError(f"model.norm_eps must be > 0, got {self.norm_eps!r}")

    @property
    def grid(self) -> tuple[int, int]:
        """(h, w) tokens: the crop in patches."""
        return self.height // self.patch, self.width // self.patch

    @property
    def n_tokens(self) -> int:
        """N: spatial tokens (locations) per crop."""
        h, w = self.grid
        return h * w

    @property
    def hidden(self) -> int:
        return self.mlp_ratio * self.dim

    @property
    def variant(self) -> str:
        """D-CHAG's name for the partial aggregator: "L" (linear) or "C" (cross-attention)."""
        return next(v for v, p in BY_VARIANT.items() if p.partial == self.partial)


def architecture_for(base: ModelConfig, plan: str, P: int, g: int = 1) -> ModelConfig:  # noqa: N803
    """The architecture ``plan`` parallelises, from ``base``'s sizes: ``tp`` the TP-baseline aggregation,
    ``dchag_*`` the hierarchical one built for P chunks of g groups, ``dense`` / ``token`` ``base`` unchanged.

    The dense model of the returned config is the reference the plan must equal.
    """
    spec = PLANS.get(plan)
    if spec is not None and spec.groups:
        arch = dataclasses.replace(
            base, aggregation=spec.aggregation, partial=spec.partial, parts=P, groups=g
        )
    elif spec is not None and spec.aggregation is not None:
        arch = dataclasses.replace(base, aggregation=spec.aggregation, parts=1, groups=1)
    else:
        arch = base
    check_plan(arch, plan, P, g if plan in DCHAG_PLANS else None)
    return arch


def check_plan(config: ModelConfig, plan: str, P: int, g: int | None = None) -> None:  # noqa: N803
    """Raise PlanError, naming the key, when ``plan`` cannot split ``config`` over ``P`` ranks (``g``: D-CHAG
    groups per rank, checked against ``model.groups`` when given). Pure Python: call it before launching."""
    if plan not in PLANS:
        raise PlanError(f"unknown plan {plan!r}; expected one of {', '.join(PLAN_NAMES)}")
    if not isinstance(P, int) or isinstance(P, bool) or P < 1:
        raise PlanError(f"plan {plan!r}: P (ranks) must be a positive integer, got {P!r}")
    if g is not None and plan not in DCHAG_PLANS and g != 1:
        raise PlanError(f"plan {plan!r} has no band groups; g = {g} applies to the dchag plans only")
    n = config.n_tokens
    ranks = PLANS[plan].ranks
    if ranks == ONE_RANK:
        if P != 1:
            others = ", ".join(repr(p) for p in PARALLEL_PLANS[:-1]) + f" or {PARALLEL_PLANS[-1]!r}"
            raise PlanError(f"plan {plan!r} runs on one device, got P = {P}; use {others}")
        return
    if ranks == TOKEN_RANKS:
        if n < P:
            raise PlanError(
                f"plan 'token' splits N = {n} locations ((model.height / model.patch) x (model.width / "
                f"model.patch) = {config.grid[0]} x {config.grid[1]}) over P = {P}: P must be <= N"
            )
        return
    # tp and dchag_*: heads and hidden units sharded over P (whole heads per rank: no head padding here).
    if config.heads % P:
        raise PlanError(
            f"plan {plan!r}: model.heads = {config.heads} is not divisible by P = {P} (every rank holds whole heads)"
        )
    if plan not in DCHAG_PLANS:  # tp
        if config.aggregation != PLANS[plan].aggregation:
            raise PlanError(
                f"plan 'tp' parallelises the TP-baseline aggregation (model.aggregation = 'attention'), got "
                f"{config.aggregation!r}; use a dchag plan or architecture_for(config, 'tp', P)"
            )
        return
    want = PLANS[plan].partial
    if config.aggregation != "hierarchical" or config.partial != want:
        raise PlanError(
            f"plan {plan!r} needs model.aggregation = 'hierarchical' with model.partial = {want!r}, got "
            f"{config.aggregation!r} / {config.partial!r}; build it with architecture_for(config, {plan!r}, P, g)"
        )
    if config.parts != P:
        raise PlanError(
            f"plan {plan!r}: model.parts = {config.parts} (the D-CHAG architecture is built for that many band "
            f"chunks, one per rank) but P = {P}"
        )
    if g is not None and g != config.groups:
        raise PlanError(f"plan {plan!r}: g = {g} groups per rank but model.groups = {config.groups}")

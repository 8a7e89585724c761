"""The claim language typed: one model per check kind, validated as a union tagged by ``fn`` when claims.yaml loads.

Each model names the fields its check reads, with their types; a field no check reads (a typo such as ``lw`` for
``low``) and a field of the wrong type are refused with the claim's id and the field's path. A model reads like the
mapping it replaces (``check["file"]``, ``check.get("min_fraction", 1.0)``, ``"undecided" in check``) over the
fields the file set, so a default a check function gives stays the function's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from hsitp.audit.claims.core import ClaimsError
from hsitp.outcomes import Claim

# What a boundary_moves check may name: the boundary, the factor that changes, and the way the boundary moves.
BOUNDARIES = ("threshold", "split", "max_P", "layers", "decision")
FACTORS = ("dtype", "beta", "preset", "width", "rho")
DIRECTIONS = ("moves", "up", "down", "none")
Num = int | float  # a number kept as written (5 stays 5, not 5.0: the table prints it)
Sel = dict[str, Any]  # a selection of a netCDF's coordinates (xarray .sel)


class Check(BaseModel, Mapping[str, Any]):
    """What every check may carry: a label (inside any_of / first_decided), the verdict it maps its outcome to,
    the band or share that decides it, and the source it names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str | None = None
    if_true: Claim | None = None
    if_false: Claim | None = None
    if_partial: Claim | None = None
    low: Num | None = None
    high: Num | None = None
    expect: Num | None = None
    rtol: float | None = None
    min_fraction: float | None = None
    source: str | None = None

    def __getitem__(self, key: str) -> Any:
        if key in self.model_fields_set:
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # a mapping's keys, not pydantic's pairs
        return iter([k for k in type(self).model_fields if k in self.model_fields_set])

    def __len__(self) -> int:
        return len(self.model_fields_set)


class Quote(Check):
    """A quote of ccr.nc: consistent with what the formulas give, or (``agrees_with``: another quote's key) naming
    the same split as that quote."""

    fn: Literal["quote"]
    key: str
    agrees_with: str | None = None


class FormulaValue(Check):
    fn: Literal["formula_value"]
    expr: str
    at: dict[str, Any] | None = None


class FormulaIdentity(Check):
    fn: Literal["formula_identity"]
    lhs: str
    rhs: str
    points: list[dict[str, Any]] | None = None
    at: dict[str, Any] | None = None


class TableCheck(Check):
    """A check of a cost table (``file``: its name) at a selection of its coordinates."""

    file: str
    variable: str
    sel: Sel | None = None


class TableValue(TableCheck):
    fn: Literal["table_value"]
    reduce: str | None = None
    ratio_to: Sel | None = None
    over: dict[str, Any] | None = None


class TableCompare(TableCheck):
    fn: Literal["table_compare"]
    op: str
    lhs: Sel | None = None
    rhs: Sel | None = None
    rhs_variable: str | None = None
    rhs_factor: Num | None = None
    rhs_min_over: str | None = None


class TableFraction(TableCheck):
    fn: Literal["table_fraction"]
    op: str | None = None
    value: Num | None = None
    min_over: str | None = None
    ratio_to: Sel | None = None


class TableSpread(TableCheck):
    fn: Literal["table_spread"]
    dim: str


class TableAttr(Check):
    fn: Literal["table_attr"]
    file: str
    equals: Any
    attr: str | None = None
    coord: str | None = None


class LowerSplitRule(Check):
    fn: Literal["lower_split_rule"]
    rule: str
    model: str


class SplitRegime(Check):
    fn: Literal["split_regime"]
    sel: Sel


class DatasetGrid(Check):
    fn: Literal["dataset_grid"]
    dataset: str
    bands: int
    rows: int | None = None
    cols: int | None = None


class DatasetAttr(Check):
    fn: Literal["dataset_attr"]
    dataset: str
    attr: str
    equals: Any = None
    contains: str | None = None


class DatasetRange(Check):
    fn: Literal["dataset_range"]
    attr: str
    datasets: list[str] | None = None
    patch: int | None = None


class ConfigValue(Check):
    fn: Literal["config_value"]
    key: str
    equals: Any


class PresetValue(Check):
    fn: Literal["preset_value"]
    preset: str
    field: str


class AnyOf(Check):
    """Holds where any (or, for a 可能-hedged claim, each) of its labelled sub-checks holds."""

    fn: Literal["any_of"]
    checks: list[Annotated[AnyCheck, Field(discriminator="fn")]] = Field(min_length=2)


class FirstDecided(Check):
    """Its labelled sub-checks in order; the first not pending decides, with its own mapping."""

    fn: Literal["first_decided"]
    checks: list[Annotated[AnyCheck, Field(discriminator="fn")]] = Field(min_length=2)


class Reading(Check):
    fn: Literal["reading"]
    verdict: Claim
    reason: str = Field(min_length=1)
    source: str = Field(min_length=1)


class Pending(Check):
    fn: Literal["pending"]
    stage: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class NeedsGpu(Check):
    fn: Literal["needs_gpu"]
    reason: str = Field(min_length=1)


class Measured(Check):
    """A variable of the accuracy run's training summary."""

    fn: Literal["measured"]
    variable: str = Field(min_length=1)
    equals: Any = None
    sel: Sel | None = None
    undecided: str | None = None
    waits_for: str | None = None


class AccuracyVerdicts(Check):
    fn: Literal["accuracy_verdicts"]
    variants: list[str] | None = None
    baseline: str | None = None


class ProbeMemory(Check):
    fn: Literal["probe_memory"]
    lhs: Sel
    against: Sel
    op: str | None = None
    value: Num | None = None
    variable: str | None = None
    sel: Sel | None = None
    sum: list[Any] | None = None
    scale_P: bool | None = None  # noqa: N815
    sizes: dict[str, Any] | None = None
    P_min: int | None = None  # noqa: N815


class ProbeEstimate(Check):
    fn: Literal["probe_estimate"]
    lhs: Any
    against: Any
    op: str | None = None
    value: Num | None = None
    variable: str | None = None
    sel: Sel | None = None
    sizes: dict[str, Any] | None = None


class ProbeThroughput(Check):
    fn: Literal["probe_throughput"]
    plans: list[str]
    op: str
    value: Num
    quantity: str | None = None
    P_min: int | None = None  # noqa: N815
    P: Any = None
    sel: Sel | None = None


class BenchCheck(Check):
    """A check of the run's measured microbenchmark."""

    op: str
    where: Sel | None = None
    sel: Sel | None = None
    variable: str | None = None


class BenchCompare(BenchCheck):
    fn: Literal["bench_compare"]
    lhs: str
    rhs: str
    agree_with: str | None = None


class BenchTrend(BenchCheck):
    fn: Literal["bench_trend"]
    direction: str | None = None


class BenchValue(BenchCheck):
    fn: Literal["bench_value"]
    of: str
    value: Num


class ShardCompare(Check):
    fn: Literal["shard_compare"]
    lhs: str
    rhs: str
    op: str
    sel: Sel | None = None


class ShardValue(Check):
    fn: Literal["shard_value"]
    ops: list[str]
    op: str
    value: Num
    sel: Sel | None = None


class BoundaryMoves(Check):
    """Which way the split rule's boundary moves when one factor changes (docs/audit.md, rule 6)."""

    fn: Literal["boundary_moves"]
    boundary: Literal[BOUNDARIES] | list[Literal[BOUNDARIES]]  # type: ignore[valid-type]
    factor: Literal[FACTORS]  # type: ignore[valid-type]
    hardware: list[str]
    P: list[int]
    to: list[Any]
    direction: Literal[DIRECTIONS]  # type: ignore[valid-type]
    D: int | None = None
    X: int | None = None
    rate: dict[str, Any] | None = None
    dtype: str | None = None
    mlp_ratio: int | None = None
    patch: int | None = None


AnyCheck = (
    Quote | FormulaValue | FormulaIdentity | TableValue | TableCompare | TableFraction
    | TableSpread | TableAttr | LowerSplitRule | SplitRegime | DatasetGrid | DatasetAttr | DatasetRange
    | ConfigValue | PresetValue | AnyOf | FirstDecided | Reading | Pending | NeedsGpu | Measured | AccuracyVerdicts
    | ProbeMemory | ProbeEstimate | ProbeThroughput | BenchCompare | BenchTrend | BenchValue | ShardCompare
    | ShardValue | BoundaryMoves
)  # fmt: skip
AnyOf.model_rebuild()
FirstDecided.model_rebuild()
CHECK = TypeAdapter(Annotated[AnyCheck, Field(discriminator="fn")])
KINDS_TYPED = tuple(m.model_fields["fn"].annotation.__args__[0] for m in AnyCheck.__args__)  # every fn


def check_errors(cid: str, raw: Any) -> list[str]:
    """Every way ``raw`` is not a check of its kind, one line each naming the claim and the field's path."""
    try:
        CHECK.validate_python(raw)
    except ValidationError as exc:
        return [_line(cid, e) for e in exc.errors()]
    return []


def parse_check(cid: str, raw: Any) -> Check:
    """A claim's check as its kind's model; ClaimsError (its first error, see :func:`check_errors`) otherwise."""
    try:
        return CHECK.validate_python(raw)
    except ValidationError as exc:
        raise ClaimsError(_line(cid, exc.errors()[0])) from None


def _line(cid: str, e: Any) -> str:
    """'ID: check.checks.0.key: Field required': the path without the union's tags."""
    skip = KINDS_TYPED + ("int", "float", "str", "bool", "none")  # the union's tags and members in the path
    path = [
        str(p)
        for p in e["loc"]
        if str(p) not in skip and not str(p).startswith(("literal[", "list[", "dict["))
    ]
    shown = f" (got {e['input']!r})" if e["type"] in ("literal_error", "enum") else ""
    if e["type"] == "union_tag_invalid":
        shown = f" (got {e['ctx']['tag']!r})"
    return f"{cid}: {'.'.join(['check', *path])}: {e['msg']}{shown}"

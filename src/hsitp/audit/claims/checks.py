"""The claim language typed: one model per check kind, validated as a union tagged by ``fn`` when claims.yaml loads.

Each model names the fields its check reads, with their types; a field no check reads (a typo such as ``lw`` for
``low``) and a field of the wrong type are refused with the claim's id and the field's path. A check function reads
its model by attribute (``check.file``, ``check.min_fraction``): a default the functions give is the field's own
default, None says the file did not set it, and where an explicit null would differ from an absent key the function
asks whether the file wrote it (``"undecided" in check.model_fields_set``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from hsitp import contracts
from hsitp.cost import paper
from hsitp.errors import HsitpError
from hsitp.outcomes import Claim

# What a boundary_moves check may name: the boundary, the factor that changes, and the way the boundary moves.
BOUNDARIES = ("threshold", "split", "max_P", "layers", "decision")
FACTORS = ("dtype", "beta", "preset", "width", "rho")
DIRECTIONS = ("moves", "up", "down", "none")
# Checks reading the measured run's probe/bench files (config key audit.measured_run), and all measured checks.
RUN_MEASURED_CHECKS = frozenset(
    {"probe_memory", "probe_estimate", "probe_throughput", "bench_compare", "bench_trend", "bench_value"}
)
MEASURED_CHECKS = RUN_MEASURED_CHECKS | {"measured", "accuracy_verdicts", "shard_compare", "shard_value"}
# Bytes per element of the number formats the paper names (§9.2, §11: FP8, INT8) beside the training formats.
FORMAT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1}
VERDICT_KEYS = ("if_true", "if_false", "if_partial")  # the verdict mapping a check may set
Num = int | float  # a number kept as written (5 stays 5, not 5.0: the table prints it)
Op = Literal["<", "<=", ">", ">=", "==", "!="]  # a comparison (hsitp.audit.claims.core.OPS)
Sel = dict[str, Any]  # a selection of a netCDF's coordinates (xarray .sel)
CostTable = Literal[tuple(contracts.COST)]  # type: ignore[valid-type]  # results/RUN/cost/NAME.nc


class ClaimsError(HsitpError):
    """claims.yaml is malformed, or a check cannot be evaluated (names the claim and the key)."""


class Check(BaseModel):
    """What every check may carry: a label (inside any_of / first_decided), the verdict it maps its outcome to
    (held, partly held, not held), the band or share that decides it, and the source it names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fn: str  # the kind: each model narrows it to its own name
    label: str | None = None
    if_true: Claim = Claim.HOLDS
    if_false: Claim = Claim.CONTRADICTED
    if_partial: Claim = Claim.CONDITIONAL
    low: Num = -math.inf
    high: Num = math.inf
    expect: Num | None = None  # an exact number (within rtol) instead of the band low/high
    rtol: float = 1e-12  # of expect: exact up to rounding
    min_fraction: float = 1.0  # the share of points that must hold (default every point)
    source: str | None = None


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

    file: CostTable
    variable: str
    sel: Sel | None = None


class TableValue(TableCheck):
    fn: Literal["table_value"]
    reduce: Literal["value", "min", "max", "median", "count_positive", "count_distinct"] = "value"
    ratio_to: Sel | None = None
    over: dict[str, Any] | None = None  # a second value of the same table this one is divided by

    def over_check(self) -> TableValue:
        """``over`` as the check of that second value."""
        return TableValue(fn="table_value", file=self.file, **(self.over or {}))


class TableCompare(TableCheck):
    fn: Literal["table_compare"]
    op: Op
    lhs: Sel | None = None
    rhs: Sel | None = None
    rhs_variable: str | None = None
    rhs_factor: Num | None = None
    rhs_min_over: str | None = None


class TableFraction(TableCheck):
    fn: Literal["table_fraction"]
    op: Op | None = None
    value: Num | None = None
    min_over: str | None = None
    ratio_to: Sel | None = None

    @model_validator(mode="after")
    def _valued(self) -> TableFraction:
        if "op" in self.model_fields_set and "value" not in self.model_fields_set:
            raise ValueError("a table_fraction check with op needs its value")
        return self


class TableSpread(TableCheck):
    fn: Literal["table_spread"]
    dim: str
    rtol: float = 1e-9  # the largest spread max/min - 1 that counts as no dependence


class TableAttr(Check):
    fn: Literal["table_attr"]
    file: CostTable
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

    @model_validator(mode="after")
    def _compared(self) -> DatasetAttr:
        if not {"equals", "contains"} & self.model_fields_set:
            raise ValueError("a dataset_attr check needs equals or contains")
        return self


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

    @model_validator(mode="after")
    def _labelled(self) -> AnyOf:
        if not all(s.label for s in self.checks):
            raise ValueError(f"every {self.fn} check needs a label")
        return self


class FirstDecided(AnyOf):
    """Its labelled sub-checks in order; the first not pending decides, with its own mapping: a measured one
    before the last, none a first_decided itself."""

    fn: Literal["first_decided"]  # type: ignore[assignment]

    @model_validator(mode="after")
    def _ordered(self) -> FirstDecided:
        if any(s.fn == "first_decided" for s in self.checks):
            raise ValueError("first_decided does not nest")
        if not any(s.fn in MEASURED_CHECKS for s in self.checks[:-1]):
            raise ValueError("first_decided tries a measured check before its last one")
        if keys := [k for k in VERDICT_KEYS if k in self.model_fields_set]:
            raise ValueError(f"first_decided takes its mapping from each sub-check, not check.{keys[0]}")
        return self


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
    source: str = "-"


class Measured(Check):
    """A variable of the accuracy run's training summary."""

    fn: Literal["measured"]
    variable: str = Field(min_length=1)
    equals: Any = None
    sel: Sel | None = None
    undecided: str | None = None
    waits_for: str = ""


class AccuracyVerdicts(Check):
    fn: Literal["accuracy_verdicts"]
    variants: list[str] | None = None
    baseline: str = "svm"  # the classical classifier a protocol's trained models must beat


class ProbeCheck(Check):
    """A ratio of the probe's memory, ``variable`` at ``lhs`` over ``against``: decided by ``op``/``value`` or the
    band ``low``/``high``, at the model ``sizes`` a claim speaks of."""

    lhs: Any
    against: Any
    op: Op | None = None
    value: Num | None = None
    variable: str = "peak_allocated"
    sel: Sel | None = None
    sizes: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _decided(self) -> ProbeCheck:
        if not {"op", "low", "high"} & self.model_fields_set:
            raise ValueError(f"a {self.fn} check needs op/value or low/high")
        return self


class ProbeMemory(ProbeCheck):
    fn: Literal["probe_memory"]
    lhs: Sel
    against: Sel
    sum: list[Any] | None = None
    scale_P: bool | None = None  # noqa: N815
    P_min: int = 2  # noqa: N815


class ProbeEstimate(ProbeCheck):
    fn: Literal["probe_estimate"]


class ProbeThroughput(Check):
    fn: Literal["probe_throughput"]
    plans: list[str]
    op: Op
    value: Num
    quantity: Literal["ratio", "ccr_ratio"] = "ratio"
    P_min: int = 2  # noqa: N815
    P: Any = None
    sel: Sel | None = None


class BenchCheck(Check):
    """A check of the run's measured microbenchmark."""

    op: str  # a comparison (Op) of bench_compare and bench_value; the op whose trend bench_trend follows
    where: dict[str, tuple[Op, Num]] | None = None  # on N, D or rho = D/N
    sel: Sel | None = None
    variable: str = "ccr_measured"
    # the claim speaks of a GPU interconnect (NVLink/NCCL): a bench on CPU (gloo) decides nothing for it
    gpu_only: bool = False


class BenchCompare(BenchCheck):
    fn: Literal["bench_compare"]
    op: Op
    lhs: str
    rhs: str
    agree_with: str | None = None


class BenchTrend(BenchCheck):
    fn: Literal["bench_trend"]
    direction: str = "falls"  # or rises


class BenchValue(BenchCheck):
    fn: Literal["bench_value"]
    op: Op
    of: str
    value: Num


class ShardCompare(Check):
    fn: Literal["shard_compare"]
    lhs: str
    rhs: str
    op: Op
    sel: Sel | None = None


class ShardValue(Check):
    fn: Literal["shard_value"]
    ops: list[str]
    op: Op
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
    rtol: float = 0.01  # a number moves when it changes by more than this share of itself
    D: int = paper.PAPER_C
    X: int = paper.PAPER_N[1]
    rate: dict[str, Any] | None = None
    dtype: str = "bfloat16"
    mlp_ratio: int = 4
    patch: int = 8

    @model_validator(mode="after")
    def _formats(self) -> BoundaryMoves:
        if self.factor == "dtype":
            if not self.rate or not self.source:
                raise ValueError("a number-format change needs its rates (rate) and their source")
            if bad := [to for to in self.to if to not in FORMAT_BYTES]:
                raise ValueError(f"format {bad[0]!r} not in {', '.join(FORMAT_BYTES)}")
        return self


AnyCheck = (
    Quote | FormulaValue | FormulaIdentity | TableValue | TableCompare | TableFraction
    | TableSpread | TableAttr | LowerSplitRule | SplitRegime | DatasetGrid | DatasetAttr | DatasetRange
    | ConfigValue | PresetValue | AnyOf | FirstDecided | Reading | Pending | NeedsGpu | Measured | AccuracyVerdicts
    | ProbeMemory | ProbeEstimate | ProbeThroughput | BenchCompare | BenchTrend | BenchValue | ShardCompare
    | ShardValue | BoundaryMoves
)  # fmt: skip
AnyOf.model_rebuild()
FirstDecided.model_rebuild()
KIND_NAMES = tuple(get_args(m.model_fields["fn"].annotation)[0] for m in get_args(AnyCheck))  # each kind's fn
CHECK_FIELD: Any = Field(discriminator="fn")
CHECK = TypeAdapter(Annotated[AnyCheck, CHECK_FIELD])
MEMBERS = ("int", "float", "str", "bool", "none", "literal[", "list[", "dict[", "tuple[")  # a union's members


def check_errors(cid: str, raw: Any) -> list[str]:
    """Every way ``raw`` is not a check of its kind, one line each naming the claim and the field's path."""
    try:
        CHECK.validate_python(raw)
    except ValidationError as exc:
        return [error_line(cid, e, raw, "check") for e in exc.errors()]
    return []


def parse_check(cid: str, raw: Any) -> Check:
    """A claim's check as its kind's model; ClaimsError (its first error, see :func:`check_errors`) otherwise."""
    try:
        return CHECK.validate_python(raw)
    except ValidationError as exc:
        raise ClaimsError(error_line(cid, exc.errors()[0], raw, "check")) from None


def error_line(cid: str, e: Any, raw: Any, *prefix: str) -> str:
    """'ID: check.checks.0.key: Field required': the path into ``raw`` without the unions' tags (a check's
    ``fn``, a row's ``kind``) and members (int, float, ...); a model's own rule as 'ID: check: its words'."""
    path, node = list(prefix), raw
    for p in e["loc"]:
        if isinstance(node, dict) and p not in node and p in (node.get("fn"), node.get("kind")):
            continue  # the tag of a union the value was validated as
        if not isinstance(node, dict | list) and str(p).startswith(MEMBERS):
            continue  # the member of a plain union (int | float) the value was tried as
        path.append(str(p))
        has = (
            isinstance(node, dict)
            and p in node
            or isinstance(node, list)
            and isinstance(p, int)
            and p < len(node)
        )
        node = node[p] if has else None
    if e["type"] == "union_tag_invalid":  # its words name the tag it got
        path.append(e["ctx"]["discriminator"].strip("'"))
    shown = f" (got {e['input']!r})" if e["type"] in ("literal_error", "enum") else ""
    msg = e["msg"].removeprefix("Value error, ")
    return f"{cid}: {'.'.join(path)}: {msg}{shown}" if path else f"{cid}: {msg}"

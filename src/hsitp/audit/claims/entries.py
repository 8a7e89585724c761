"""claims.yaml typed: a row is a claim of the paper (:class:`PaperClaim`) or a finding bearing on claims it refines
(:class:`Finding`), a union tagged by ``kind``; ``tags:`` maps each tag to its :class:`Tag`.

A row's fields are typed (its check as its kind's model, :mod:`~hsitp.audit.claims.checks`), a key no row reads is
refused, and what one row alone must say is checked as it loads: a finding names what it refines and sets no
``rests_on``, a claim refines nothing, a quote saying 约 states its tolerance (``about``), a claim naming D-CHAG
its variant, evidence by construction its reading (docs/audit.md). What needs every row (unique ids, what a
``refines`` or ``relies_on`` names, the tags) is :mod:`~hsitp.audit.claims.validate`'s.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from hsitp.audit.claims.checks import CHECK_FIELD, AnyCheck, ClaimsError, error_line
from hsitp.audit.claims.core import KINDS, RESTS_ON
from hsitp.audit.claims.verdicts import approximate
from hsitp.outcomes import Claim, Reliance

# Rule 14: a claim that names D-CHAG (its words or its check) says which variant it judges.
VARIANTS = ("L", "C", "both")
NAMES_DCHAG = re.compile(r"D-CHAG|dchag|分层聚合|hierarchical aggregation", re.I)
Text = Annotated[str, Field(min_length=1)]


class Typed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Reading(Typed):
    """The verdict a reading gives a claim whose evidence holds by our own construction (rule 3)."""

    verdict: Claim
    reason: Text
    source: Text


class Tag(Typed):
    """One rule or comparison several rows state (rule 16), and the committed references that bear on it or not."""

    states: Text
    references: dict[str, str] = {}
    not_read: dict[str, str] = {}


class Entry(Typed):
    """What every row of claims.yaml carries: the quote and its gloss, the check, and how it sits among the rows."""

    id: Text
    section: Text
    zh: Text
    en: Text
    check: AnyCheck = CHECK_FIELD
    paper_value: str = ""
    reason: str = ""
    variant: Literal[VARIANTS] | None = None  # type: ignore[valid-type]
    about: str | None = None  # the tolerance a quote saying 约/大约/左右 states
    by_construction: str | None = None  # evidence that holds by our own construction: the reading decides
    reading: Reading | None = None
    tag: str | None = None
    stance: Literal["affirms", "negates"] = "affirms"
    scope: str | None = None
    relies_on: dict[str, Reliance] = {}  # other rows whose verdict its reason takes as given

    @model_validator(mode="after")
    def _one_row(self) -> Entry:
        if approximate(self.zh) and not self.about:
            raise ValueError("the quote says 约/大约/左右; state the tolerance (about: ...)")
        if self.by_construction and self.reading is None:
            raise ValueError("by_construction evidence needs a reading verdict (reading: verdict, reason)")
        if self.variant is None and names_dchag(self):
            raise ValueError("names D-CHAG; say which variant it judges (variant: L, C or both)")
        return self


def names_dchag(c: Entry) -> bool:
    """The claim's quote, gloss or check names D-CHAG (or its hierarchical aggregation)."""
    check = json.dumps(c.check.model_dump(exclude_unset=True), default=str)
    return bool(NAMES_DCHAG.search(f"{c.zh} {c.en} {check}"))


class PaperClaim(Entry):
    """A sentence of the paper, judged (its verdict counts)."""

    kind: Literal[tuple(k for k in KINDS if k != "finding")]  # type: ignore[valid-type]
    rests_on: Literal[RESTS_ON] | None = None  # type: ignore[valid-type]  # rule 2: formulas or a measurement
    refines: ClassVar[tuple[str, ...]] = ()  # a claim refines nothing: only a finding does


class Finding(Entry):
    """A modelled, half-measured or measured answer bearing on the claims it ``refines`` (one id or a list); its
    verdict is of its own statement, never counted (rule 2)."""

    kind: Literal["finding"]
    refines: Annotated[tuple[Text, ...], BeforeValidator(lambda r: [r] if isinstance(r, str) else r)] = Field(
        min_length=1
    )
    rests_on: ClassVar[None] = None  # a finding rests on nothing it judges


ClaimEntry = PaperClaim | Finding
ENTRY = TypeAdapter(Annotated[ClaimEntry, Field(discriminator="kind")])


def entry_errors(i: int, raw: Any) -> tuple[ClaimEntry | None, list[str]]:
    """Row ``i`` of claims.yaml as its model, or None and every way it is not one (one line each, naming the row's
    id and the field's path)."""
    cid = str(raw.get("id", f"#{i}")) if isinstance(raw, dict) else f"claim #{i}"
    try:
        return ENTRY.validate_python(raw), []
    except ValidationError as exc:
        return None, [error_line(cid, e, raw) for e in exc.errors()]


def parse_entry(raw: Any) -> ClaimEntry:
    """One row as its model; :class:`ClaimsError` naming its first problem otherwise."""
    entry, problems = entry_errors(0, raw)
    if entry is None:
        raise ClaimsError(problems[0])
    return entry


def parse_tags(raw: Any, path: Any) -> dict[str, Tag]:
    """claims.yaml's ``tags:``, each as its :class:`Tag`."""
    if not isinstance(raw, dict):
        raise ClaimsError(f"{path}: 'tags' must map each tag to its statement and references")
    out = {}
    for name, t in raw.items():
        try:
            out[str(name)] = Tag.model_validate(t or {})
        except ValidationError as exc:
            raise ClaimsError(f"{path}: " + error_line(f"tag {name}", exc.errors()[0], t)) from None
    return out

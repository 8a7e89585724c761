"""Loading ``claims.yaml`` into its models (:mod:`~hsitp.audit.claims.entries`) and what no one row's type can
say: unique ids, what a finding refines, what each verdict rests on
(:func:`~hsitp.audit.claims.grounds.grounds_problems`), the tags and relies_on; and the config keys the claims
read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from hsitp.audit.claims.checks import RUN_MEASURED_CHECKS, ClaimsError
from hsitp.audit.claims.coherence import tag_problems
from hsitp.audit.claims.core import CLAIMS_FILE
from hsitp.audit.claims.entries import ClaimEntry, Tag, entry_errors, parse_tags
from hsitp.audit.claims.grounds import grounds_problems, leaf_checks
from hsitp.config import yaml_load


def read_claims_file(path: Path = CLAIMS_FILE) -> tuple[list[Any], dict[str, Tag]]:
    """claims.yaml's rows as written and its tags as :class:`Tag`; :class:`ClaimsError` naming the file when it
    cannot be read or is not a mapping with a list under ``claims``."""
    try:
        data = yaml_load(Path(path).read_text())  # libyaml: the DAG loads this file at every start
    except (OSError, yaml.YAMLError) as exc:
        raise ClaimsError(f"{path}: cannot read the claims: {exc}") from exc
    claims = data.get("claims") if isinstance(data, Mapping) else None
    if not isinstance(claims, list):
        raise ClaimsError(f"{path}: expected a mapping with a list under 'claims'")
    return claims, parse_tags(data.get("tags") or {}, path)


def load_tags(path: Path = CLAIMS_FILE) -> dict[str, Tag]:
    """claims.yaml's ``tags:``: each tag's statement and the references that bear on it (and why the others not)."""
    return read_claims_file(path)[1]


def load_claims(path: Path = CLAIMS_FILE) -> list[ClaimEntry]:
    """The claims, each as its model, checked as a whole (see :func:`parse_claims`)."""
    raw, tags = read_claims_file(path)
    claims, problems = parse_claims(raw, tags)
    if problems:
        raise ClaimsError(f"{path}: " + "; ".join(problems[:10]))
    return claims


def parse_claims(
    raw: Sequence[Any], tags: Mapping[str, Tag] | None = None
) -> tuple[list[ClaimEntry], list[str]]:
    """The rows that are their models, and every problem of the list: each row's type errors, then (over the rows
    that typed) unique ids, what each verdict rests on, what a finding refines and, with ``tags``, the tags,
    stances and relies_on (:func:`~hsitp.audit.claims.coherence.tag_problems`)."""
    claims: list[ClaimEntry] = []
    problems: list[str] = []
    for i, r in enumerate(raw):
        c, errors = entry_errors(i, r)
        problems += errors
        claims += [c] if c is not None else []
    seen: set[str] = set()
    for c in claims:
        if c.id in seen:
            problems.append(f"{c.id}: duplicate id")
        seen.add(c.id)
        problems += grounds_problems(c)
    kind_of = {c.id: c.kind for c in claims}
    for c in claims:
        for target in c.refines:
            if target not in kind_of:
                problems.append(f"{c.id}: refines {target!r}, which is not a claim")
            elif kind_of[target] == "finding":
                problems.append(f"{c.id}: refines {target!r}, itself a finding")
    if tags is not None:
        problems += tag_problems(claims, tags)
    return claims, problems


def validate_claims(raw: Sequence[Any], tags: Mapping[str, Tag] | None = None) -> list[str]:
    """Every problem of a list of claims.yaml rows (see :func:`parse_claims`); empty when it loads."""
    return parse_claims(raw, tags)[1]


def config_keys(claims: Sequence[ClaimEntry] | None = None) -> list[str]:
    """Config keys the claims read (the audit rule passes exactly these to ``hsitp audit claims``)."""
    keys: set[str] = set()
    for c in claims if claims is not None else load_claims():
        for check in leaf_checks(c.check):
            if check.fn == "config_value":
                keys.add(check.key)
            if check.fn in ("measured", "accuracy_verdicts"):
                keys.add("audit.accuracy_run")
            if check.fn in RUN_MEASURED_CHECKS:
                keys.add("audit.measured_run")
    return sorted(keys)

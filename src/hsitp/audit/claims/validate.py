"""Loading ``claims.yaml`` and validating it: required fields, unique ids, known kinds, checks and verdicts, each
check's required arguments; and the config keys the claims read."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from hsitp.audit.claims.boundary import FORMAT_BYTES
from hsitp.audit.claims.checks import check_errors, parse_check
from hsitp.audit.claims.core import (
    CLAIMS_FILE,
    KINDS,
    MEASURED_CHECKS,
    RUN_MEASURED_CHECKS,
    VERDICTS,
    ClaimsError,
)
from hsitp.audit.claims.verdicts import VERDICT_KEYS, approximate
from hsitp.config import yaml_load

REQUIRED_FIELDS = ("id", "section", "kind", "zh", "en", "check")
# Rule 14: a claim that names D-CHAG (its words or its check) says which variant it judges.
VARIANTS = ("L", "C", "both")
NAMES_DCHAG = re.compile(r"D-CHAG|dchag|分层聚合|hierarchical aggregation", re.I)


def names_dchag(c: Mapping[str, Any]) -> bool:
    """The claim's quote, gloss or check names D-CHAG (or its hierarchical aggregation)."""
    import json

    return bool(
        NAMES_DCHAG.search(
            f"{c.get('zh', '')} {c.get('en', '')} {json.dumps(c.get('check', {}), default=dict)}"
        )
    )


def load_claims(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    """The claims, schema-checked (see :func:`validate_claims`)."""
    try:
        data = yaml_load(Path(path).read_text())  # libyaml: the DAG loads this file at every start
    except (OSError, yaml.YAMLError) as exc:
        raise ClaimsError(f"{path}: cannot read the claims: {exc}") from exc
    claims = data.get("claims") if isinstance(data, Mapping) else None
    if not isinstance(claims, list):
        raise ClaimsError(f"{path}: expected a mapping with a list under 'claims'")
    from hsitp.audit.claims.coherence import tags_of

    problems = validate_claims(claims, tags_of(data, path))
    if problems:
        raise ClaimsError(f"{path}: " + "; ".join(problems[:10]))
    for c in claims:  # each check as its kind's model from here on
        c["check"] = parse_check(str(c["id"]), c["check"])
    return claims


def _check_problems(cid: str, check: Any) -> list[str]:
    """The check's type errors (its kind's model, :mod:`hsitp.audit.claims.checks`), then what a type cannot say."""
    out = check_errors(cid, check)
    if not isinstance(check, Mapping):
        return out
    fn = check.get("fn")
    if fn in ("probe_memory", "probe_estimate") and not ("op" in check or "low" in check or "high" in check):
        out.append(f"{cid}: a {fn} check needs op/value or low/high")
    if fn == "boundary_moves" and check.get("factor") == "dtype":
        if not check.get("rate") or not check.get("source"):
            out.append(f"{cid}: a number-format change needs its rates (rate) and their source")
        for to in check.get("to") or []:
            if to not in FORMAT_BYTES:
                out.append(f"{cid}: format {to!r} not in {', '.join(FORMAT_BYTES)}")
    subs = check.get("checks") if fn in ("any_of", "first_decided") else None
    for s in subs if isinstance(subs, list) else []:
        if isinstance(s, Mapping) and not s.get("label"):
            out.append(f"{cid}: every {fn} check needs a label")
        if isinstance(s, Mapping) and fn == "first_decided" and s.get("fn") == "first_decided":
            out.append(f"{cid}: first_decided does not nest")
        elif isinstance(s, Mapping):
            out += [p for p in _check_problems(cid, s) if p not in out]
    if fn == "first_decided" and isinstance(subs, list) and len(subs) >= 2:
        if not any(isinstance(s, Mapping) and s.get("fn") in MEASURED_CHECKS for s in subs[:-1]):
            out.append(f"{cid}: first_decided tries a measured check before its last one")
        out += [f"{cid}: first_decided takes its mapping from each sub-check, not check.{k}" for k in VERDICT_KEYS
                if k in check]  # fmt: skip
    return out


def validate_claims(claims: Sequence[Any], tags: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """Problems of the claims list: required fields, unique ids, valid kinds, check names and verdicts, what each
    verdict rests on (:func:`~hsitp.audit.claims.grounds.grounds_problems`), and with ``tags`` the tags, stances and
    relies_on (:func:`~hsitp.audit.claims.coherence.tag_problems`)."""
    from hsitp.audit.claims.coherence import refined_ids, tag_problems
    from hsitp.audit.claims.grounds import grounds_problems

    problems: list[str] = []
    seen: set[str] = set()
    for i, c in enumerate(claims):
        if not isinstance(c, Mapping):
            problems.append(f"claim #{i}: not a mapping")
            continue
        cid = str(c.get("id", f"#{i}"))
        missing = [f for f in REQUIRED_FIELDS if not c.get(f)]
        if missing:
            problems.append(f"{cid}: missing {', '.join(missing)}")
        if cid in seen:
            problems.append(f"{cid}: duplicate id")
        seen.add(cid)
        if c.get("kind") not in KINDS:
            problems.append(f"{cid}: kind {c.get('kind')!r} not in {', '.join(KINDS)}")
        if "check" in c:
            problems += _check_problems(cid, c["check"])
            problems += grounds_problems(c)
        if c.get("kind") == "finding" and not c.get("refines"):
            problems.append(f"{cid}: a finding names the claim it refines (refines: ID)")
        if c.get("refines") and c.get("kind") != "finding":
            problems.append(f"{cid}: only a finding (kind: finding) refines another claim")
        if c.get("variant") is not None and c.get("variant") not in VARIANTS:
            problems.append(f"{cid}: variant {c.get('variant')!r} not in {', '.join(VARIANTS)}")
        elif names_dchag(c) and not c.get("variant"):
            problems.append(f"{cid}: names D-CHAG; say which variant it judges (variant: L, C or both)")
        if approximate(c.get("zh", "")) and not c.get("about"):
            problems.append(f"{cid}: the quote says 约/大约/左右; state the tolerance (about: ...)")
        if c.get("by_construction"):
            r = c.get("reading")
            if not isinstance(r, Mapping) or r.get("verdict") not in VERDICTS or not r.get("reason"):
                problems.append(
                    f"{cid}: by_construction evidence needs a reading verdict (reading: verdict, reason)"
                )
            elif not r.get("source"):
                problems.append(f"{cid}: a reading verdict needs a source")
    ids = {str(c.get("id")) for c in claims if isinstance(c, Mapping)}
    kind_of = {str(c.get("id")): c.get("kind") for c in claims if isinstance(c, Mapping)}
    for c in claims:
        for target in refined_ids(c) if isinstance(c, Mapping) else []:
            if target not in ids:
                problems.append(f"{c.get('id')}: refines {target!r}, which is not a claim")
            elif kind_of[target] == "finding":
                problems.append(f"{c.get('id')}: refines {target!r}, itself a finding")
    if tags is not None:
        problems += tag_problems([c for c in claims if isinstance(c, Mapping)], tags)
    return problems


def config_keys(claims: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """Config keys the claims read (the audit rule passes exactly these to ``hsitp audit claims``)."""
    keys: set[str] = set()

    def walk(check: Mapping[str, Any]) -> None:
        if check.get("fn") == "config_value":
            keys.add(check["key"])
        if check.get("fn") in ("measured", "accuracy_verdicts"):
            keys.add("audit.accuracy_run")
        if check.get("fn") in RUN_MEASURED_CHECKS:
            keys.add("audit.measured_run")
        for sub in check.get("checks") or []:
            walk(sub)

    for c in claims if claims is not None else load_claims():
        walk(c["check"])
    return sorted(keys)

"""The claims table agrees with itself (docs/audit.md rules 16 and 17).

*One verdict per rule.* Rows that state one rule or one comparison carry a shared ``tag`` (claims.yaml's ``tags:``
lists each, with what it states). A row states the tag's statement or its negation (``stance: negates``), under
conditions: its ``scope`` (free text, default the tag's own), its D-CHAG ``variant`` and what it rests on (the
paper's formulas and real hardware are different conditions). Two rows of one tag under the same conditions may not
have opposite verdicts once their stances are aligned. A row whose reason speaks of another row's verdict declares
it (``relies_on: {ID: holds | contradicted | conditional | undecided | any}``), and that row's verdict must be it.

*Evidence used evenly.* A committed reference that bears on one row of a tag bears on every row of it (through the
row's own check or a finding refining it), or on none: the tag names the references that bear on it and why
(``references``), and why the others do not (``not_read``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from hsitp.audit.claims.core import CLAIMS_FILE, DEFAULT_ACCURACY_RUN, GPU_REFERENCE, ClaimsError
from hsitp.audit.claims.grounds import leaf_checks
from hsitp.outcomes import Claim, Reliance

STANCES = ("affirms", "negates")
# Verdict classes a row may rely on; "holds" takes consistent too (the paper's formulas agree with themselves).
RELIES = {
    Reliance.HOLDS: (Claim.HOLDS, Claim.CONSISTENT),
    Reliance.CONTRADICTED: (Claim.CONTRADICTED,),
    Reliance.CONDITIONAL: (Claim.CONDITIONAL,),
    Reliance.UNDECIDED: (Claim.PENDING, Claim.NEEDS_GPU, Claim.NOT_REPRODUCIBLE),
    Reliance.ANY: (),
}
# The committed references a check may read, and what each holds (the evidence list in docs/audit.md).
REFERENCES = {
    GPU_REFERENCE: "the one-GPU check: rank 0's shard of each layer timed on one H200 at the paper's sizes (D = 256, "
    "L = 200, N = 324 and 5776, P = 2/4/8), communication modelled from a preset: half-measured",
    DEFAULT_ACCURACY_RUN: "the headline experiment (audit.accuracy_run): per-rank memory and interleaved tokens/s "
    "of every plan at D = 64, 4 blocks, N = 324, P = 1/2/4 on CPU (gloo), and accuracy over 5 partitions",
}
READS = {  # check fn -> the committed reference it reads where the run holds no copy of its own at the sizes
    "shard_compare": GPU_REFERENCE,
    "shard_value": GPU_REFERENCE,
    "probe_memory": DEFAULT_ACCURACY_RUN,
    "probe_throughput": DEFAULT_ACCURACY_RUN,
    "measured": DEFAULT_ACCURACY_RUN,
    "accuracy_verdicts": DEFAULT_ACCURACY_RUN,
}


def load_tags(path: Path = CLAIMS_FILE) -> dict[str, dict[str, Any]]:
    """claims.yaml's ``tags:``: each tag's statement and the references that bear on it (and why the others not)."""
    from hsitp.config import yaml_load

    return tags_of(yaml_load(Path(path).read_text()) or {}, path)


def tags_of(data: Mapping[str, Any], path: Path = CLAIMS_FILE) -> dict[str, dict[str, Any]]:
    """The ``tags:`` of claims.yaml's parsed ``data``."""
    tags = data.get("tags") or {}
    if not isinstance(tags, Mapping):
        raise ClaimsError(f"{path}: 'tags' must map each tag to its statement and references")
    return {str(k): dict(v or {}) for k, v in tags.items()}


def refiners(claims: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Claim id -> the findings refining it (``refines`` is one id or a list)."""
    out: dict[str, list[str]] = {}
    for c in claims:
        for target in refined_ids(c):
            out.setdefault(target, []).append(str(c["id"]))
    return out


def refined_ids(c: Mapping[str, Any]) -> list[str]:
    """The ids a finding refines (its ``refines``, one id or a list); none for a claim."""
    r = c.get("refines")
    return [str(x) for x in r] if isinstance(r, list) else [str(r)] if r else []


def references_read(claims: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Row id -> the committed references its own check and the findings refining it read."""
    own = {str(c["id"]): {READS[str(x.get("fn"))] for x in leaf_checks(c["check"]) if x.get("fn") in READS}
           for c in claims}  # fmt: skip
    found = refiners(claims)
    return {cid: refs.union(*(own[f] for f in found.get(cid, []))) for cid, refs in own.items()}


def tag_problems(claims: Sequence[Mapping[str, Any]], tags: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """claims.yaml's tags, stances and relies_on as written: known names, valid values, every tag's references
    accounted for, and every other row a reason names declared in relies_on."""
    ids = {str(c.get("id")) for c in claims}
    found = refiners(claims)
    out = []
    for name, t in tags.items():
        if not t.get("states"):
            out.append(f"tag {name}: say what it states (states: ...)")
        refs, skip = dict(t.get("references") or {}), dict(t.get("not_read") or {})
        if set(refs) & set(skip) or set(refs) | set(skip) != set(REFERENCES):
            out.append(f"tag {name}: list each of {', '.join(REFERENCES)} once, in references or not_read")
    for c in claims:
        cid = str(c.get("id"))
        if c.get("tag") is not None and c.get("tag") not in tags:
            out.append(f"{cid}: tag {c.get('tag')!r} is not under tags:")
        if c.get("stance", "affirms") not in STANCES:
            out.append(f"{cid}: stance {c.get('stance')!r} not in {', '.join(STANCES)}")
        relies = c.get("relies_on") or {}
        for other, cls in relies.items():
            if other not in ids or cls not in RELIES:
                out.append(
                    f"{cid}: relies_on {other}: {cls} (an id of claims.yaml: one of {', '.join(RELIES)})"
                )
        # a finding and the claims it refines name each other freely
        kin = set(relies) | set(found.get(cid, [])) | set(refined_ids(c))
        for other in sorted(_named(c, ids) - kin):
            out.append(
                f"{cid}: its text names {other}; declare it (relies_on: {{{other}: <verdict> or any}})"
            )
    return out


def _named(c: Mapping[str, Any], ids: set[str]) -> set[str]:
    """The other claims a row's reasons name."""
    texts = [str(c.get("reason", "")), str((c.get("reading") or {}).get("reason", ""))]
    texts += [str(x.get("reason", "")) for x in leaf_checks(c.get("check") or {})]
    words = set(re.findall(r"[a-z0-9_]+", " ".join(texts)))
    return (words & ids) - {str(c.get("id"))}


def _cls(verdict: str) -> str:
    return next((k for k, v in RELIES.items() if verdict in v), Reliance.ANY)


def _aligned(c: Mapping[str, Any], verdict: str) -> str:
    """The verdict's class as said of the tag's statement: a negating row's holds is the statement contradicted."""
    cls = _cls(verdict)
    if c.get("stance") == "negates" and cls in (Reliance.HOLDS, Reliance.CONTRADICTED):
        return Reliance.CONTRADICTED if cls == Reliance.HOLDS else Reliance.HOLDS
    return cls


def incoherences(claims: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where the table contradicts itself: two rows of one tag under the same conditions with opposite verdicts
    (stances aligned), or a row whose relies_on names a verdict the other row does not have."""
    verdict = {str(r["id"]): str(r["verdict"]) for r in rows}
    out = []
    tagged = [c for c in claims if c.get("tag") and str(c["id"]) in verdict]
    for a, b in combinations(tagged, 2):
        same = all(a.get(k) == b.get(k) for k in ("tag", "scope", "variant", "rests_on"))
        va, vb = _aligned(a, verdict[a["id"]]), _aligned(b, verdict[b["id"]])
        if same and {va, vb} == {Reliance.HOLDS, Reliance.CONTRADICTED}:
            out.append(
                f"tag {a['tag']}: {a['id']} {verdict[a['id']]} ({a.get('stance', 'affirms')}) against "
                f"{b['id']} {verdict[b['id']]} ({b.get('stance', 'affirms')}) under the same conditions"
            )
    for c in claims:
        for other, cls in (c.get("relies_on") or {}).items():
            if cls != Reliance.ANY and other in verdict and verdict[other] not in RELIES[cls]:
                out.append(f"{c['id']}: its reason takes {other} as {cls}; the table says {verdict[other]}")
    return out


def refuse_incoherent(claims: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> None:
    """:class:`ClaimsError` (one line, nothing written) when the table would contradict itself."""
    found = incoherences(claims, rows)
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        raise ClaimsError(
            f"the claims table contradicts itself, nothing written: {'; '.join(found[:3])}{more}"
        )


def uneven(claims: Sequence[Mapping[str, Any]], tags: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Rows of a tag that read other committed references than the tag names (evidence used one way only)."""
    reads = references_read(claims)
    out = []
    for c in claims:
        if c.get("tag") in tags:
            want = set(tags[c["tag"]].get("references") or {})
            if reads[str(c["id"])] != want:
                out.append(
                    f"{c['id']} (tag {c['tag']}) reads {sorted(reads[str(c['id'])])}, its tag {sorted(want)}"
                )
    return out


def evidence_markdown(claims: Sequence[Mapping[str, Any]], tags: Mapping[str, Mapping[str, Any]]) -> str:
    """The generated list of docs/audit.md: for each committed reference, the rows that read it (grouped by tag)
    and why each other tag does not."""
    reads = references_read(claims)
    lines = []
    for ref, what in REFERENCES.items():
        lines += [f"**`results/reference/{ref}/`**: {what}.", ""]
        by_tag: dict[str, list[str]] = {}
        for c in claims:
            if ref in reads[str(c["id"])] and c.get("kind") != "finding":
                by_tag.setdefault(str(c.get("tag") or ""), []).append(f"`{c['id']}`")
        for tag, ids in sorted(by_tag.items()):
            bears = (tags.get(tag, {}).get("references") or {}).get(ref, "")
            why = bears if tag else "their own checks read it"
            lines.append(f"- read by {f'tag `{tag}`' if tag else 'untagged rows'} ({why}): {', '.join(ids)}.")
        for tag, t in sorted(tags.items()):
            if ref in (t.get("not_read") or {}):
                lines.append(f"- not read by tag `{tag}`: {t['not_read'][ref]}.")
        lines += ["- no other row reads it: their checks are the paper's formulas, the registry, the config or a "
                  "reading, and no finding of theirs reads it.", ""]  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"

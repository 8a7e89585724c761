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

from hsitp.audit.claims.checks import ClaimsError, NeedsGpu, Pending, Reading
from hsitp.audit.claims.core import DEFAULT_ACCURACY_RUN, GPU_REFERENCE
from hsitp.audit.claims.entries import ClaimEntry, Tag
from hsitp.audit.claims.grounds import leaf_checks
from hsitp.audit.claims.render import Row
from hsitp.outcomes import Claim, Reliance

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


def refiners(claims: Sequence[ClaimEntry]) -> dict[str, list[str]]:
    """Claim id -> the findings refining it."""
    out: dict[str, list[str]] = {}
    for c in claims:
        for target in c.refines:
            out.setdefault(target, []).append(c.id)
    return out


def references_read(claims: Sequence[ClaimEntry]) -> dict[str, set[str]]:
    """Row id -> the committed references its own check and the findings refining it read."""
    own = {c.id: {READS[x.fn] for x in leaf_checks(c.check) if x.fn in READS} for c in claims}
    found = refiners(claims)
    return {cid: refs.union(*(own[f] for f in found.get(cid, []))) for cid, refs in own.items()}


def tag_problems(claims: Sequence[ClaimEntry], tags: Mapping[str, Tag]) -> list[str]:
    """claims.yaml's tags and relies_on as written: known names, every tag's references accounted for, and every
    other row a reason names declared in relies_on."""
    ids = {c.id for c in claims}
    found = refiners(claims)
    out = []
    for name, t in tags.items():
        if set(t.references) & set(t.not_read) or set(t.references) | set(t.not_read) != set(REFERENCES):
            out.append(f"tag {name}: list each of {', '.join(REFERENCES)} once, in references or not_read")
    for c in claims:
        if c.tag is not None and c.tag not in tags:
            out.append(f"{c.id}: tag {c.tag!r} is not under tags:")
        for other, cls in c.relies_on.items():
            if other not in ids:
                out.append(f"{c.id}: relies_on {other}: {cls} (not an id of claims.yaml)")
        kin = set(c.relies_on) | set(found.get(c.id, [])) | set(c.refines)  # name each other freely
        for other in sorted(_named(c, ids) - kin):
            out.append(
                f"{c.id}: its text names {other}; declare it (relies_on: {{{other}: <verdict> or any}})"
            )
    return out


def _named(c: ClaimEntry, ids: set[str]) -> set[str]:
    """The other claims a row's reasons name."""
    texts = [c.reason, c.reading.reason if c.reading else ""]
    texts += [x.reason for x in leaf_checks(c.check) if isinstance(x, Reading | Pending | NeedsGpu)]
    words = set(re.findall(r"[a-z0-9_]+", " ".join(texts)))
    return (words & ids) - {c.id}


def _cls(verdict: str) -> str:
    return next((k for k, v in RELIES.items() if verdict in v), Reliance.ANY)


def _aligned(c: ClaimEntry, verdict: str) -> str:
    """The verdict's class as said of the tag's statement: a negating row's holds is the statement contradicted."""
    cls = _cls(verdict)
    if c.stance == "negates" and cls in (Reliance.HOLDS, Reliance.CONTRADICTED):
        return Reliance.CONTRADICTED if cls == Reliance.HOLDS else Reliance.HOLDS
    return cls


def incoherences(claims: Sequence[ClaimEntry], verdicts: Mapping[str, str]) -> list[str]:
    """Where the table (``verdicts``: each row's by id) contradicts itself: two rows of one tag under the same
    conditions with opposite verdicts (stances aligned), or a row whose relies_on names a verdict the other row
    does not have."""
    out = []
    tagged = [c for c in claims if c.tag and c.id in verdicts]
    for a, b in combinations(tagged, 2):
        same = all(getattr(a, k) == getattr(b, k) for k in ("tag", "scope", "variant", "rests_on"))
        va, vb = _aligned(a, verdicts[a.id]), _aligned(b, verdicts[b.id])
        if same and {va, vb} == {Reliance.HOLDS, Reliance.CONTRADICTED}:
            out.append(
                f"tag {a.tag}: {a.id} {verdicts[a.id]} ({a.stance}) against {b.id} {verdicts[b.id]} ({b.stance}) "
                "under the same conditions"
            )
    for c in claims:
        for other, cls in c.relies_on.items():
            if cls != Reliance.ANY and other in verdicts and verdicts[other] not in RELIES[cls]:
                out.append(f"{c.id}: its reason takes {other} as {cls}; the table says {verdicts[other]}")
    return out


def refuse_incoherent(claims: Sequence[ClaimEntry], rows: Sequence[Row]) -> None:
    """:class:`ClaimsError` (one line, nothing written) when the table would contradict itself."""
    found = incoherences(claims, {r.id: str(r.verdict) for r in rows})
    if found:
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        raise ClaimsError(
            f"the claims table contradicts itself, nothing written: {'; '.join(found[:3])}{more}"
        )


def uneven(claims: Sequence[ClaimEntry], tags: Mapping[str, Tag]) -> list[str]:
    """Rows of a tag that read other committed references than the tag names (evidence used one way only)."""
    reads = references_read(claims)
    return [
        f"{c.id} (tag {c.tag}) reads {sorted(reads[c.id])}, its tag {sorted(tags[c.tag].references)}"
        for c in claims
        if c.tag in tags and reads[c.id] != set(tags[c.tag].references)
    ]


def evidence_markdown(claims: Sequence[ClaimEntry], tags: Mapping[str, Tag]) -> str:
    """The generated list of docs/audit.md: for each committed reference, the rows that read it (grouped by tag)
    and why each other tag does not."""
    reads = references_read(claims)
    lines = []
    for ref, what in REFERENCES.items():
        lines += [f"**`results/reference/{ref}/`**: {what}.", ""]
        by_tag: dict[str, list[str]] = {}
        for c in claims:
            if ref in reads[c.id] and c.kind != "finding":
                by_tag.setdefault(c.tag or "", []).append(f"`{c.id}`")
        for tag, ids in sorted(by_tag.items()):
            why = tags[tag].references.get(ref, "") if tag else "their own checks read it"
            lines.append(f"- read by {f'tag `{tag}`' if tag else 'untagged rows'} ({why}): {', '.join(ids)}.")
        for tag, t in sorted(tags.items()):
            if ref in t.not_read:
                lines.append(f"- not read by tag `{tag}`: {t.not_read[ref]}.")
        lines += ["- no other row reads it: their checks are the paper's formulas, the registry, the config or a "
                  "reading, and no finding of theirs reads it.", ""]  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"

"""``boundary_moves``: a factor that moves a boundary (the TP threshold, the split, max P, the layers, the decision),
judged by moving it (rule 12 of ``docs/audit.md``)."""

from __future__ import annotations

from typing import Any

from hsitp.audit.claims import checks
from hsitp.audit.claims.checks import FORMAT_BYTES, ClaimsError
from hsitp.audit.claims.core import Context, Outcome, _fmt
from hsitp.audit.claims.measured import _share
from hsitp.cost import stated
from hsitp.data import registry
from hsitp.shape import n_tokens

# on the paper's presets, only the paper's numbers move
CIRCULAR_FACTORS = frozenset({"beta", "preset", "rho"})


def _boundary_params(a: checks.BoundaryMoves, hw_name: str, P: int) -> dict[str, Any]:
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(hw_name)
    return {
        "hw": hw.name,
        "P": int(P),
        "F": float(hw.flops),
        "beta": float(hw.beta_for(int(P))),
        "bytes": FORMAT_BYTES[a.dtype],
        "dtype": a.dtype,
        "memory": hw.memory_bytes,
        "D": a.D,
        "C_scale": 1.0,
    }


def _changed(a: checks.BoundaryMoves, p: dict[str, Any], to: Any) -> tuple[dict[str, Any] | None, str]:
    """The parameters with the factor changed as the paper says, every quantity it touches at once; (None, why)
    where the change does not apply (a format the hardware lacks)."""
    from hsitp.cost.hardware import get_hardware

    factor, q = a.factor, dict(p)
    if factor == "dtype":
        rate = (a.rate or {}).get(p["hw"], {}).get(str(to))
        if rate is None:
            return None, f"{p['hw']} has no dense {to} rate (not in `rate`)"
        q.update(F=p["F"] * float(rate), bytes=FORMAT_BYTES[str(to)], dtype=str(to))
        return (
            q,
            f"{p['dtype']} → {to} (F × {_fmt(float(rate))}, bytes per element {p['bytes']} → {q['bytes']})",
        )
    if factor == "beta":
        new = get_hardware(str(to)).beta_for(p["P"]) if isinstance(to, str) else float(to)
        q["beta"] = float(new)
        return q, f"β {_fmt(p['beta'])} → {_fmt(q['beta'])} B/s ({to})"
    if factor == "preset":
        hw = get_hardware(str(to))
        q.update(hw=hw.name, F=float(hw.flops), beta=float(hw.beta_for(p["P"])), memory=hw.memory_bytes)
        return q, (
            f"{p['hw']} → {hw.name} (F {_fmt(p['F'])} → {_fmt(q['F'])}, β {_fmt(p['beta'])} → {_fmt(q['beta'])}, "
            f"memory {_fmt(p['memory'])} → {_fmt(q['memory'])} B)"
        )
    if factor == "width":
        q["D"] = int(to)
        return q, f"D {p['D']} → {q['D']}"
    q["C_scale"] = float(to)  # rho, the last of FACTORS (the check's type admits no other)
    return q, f"ρ × {_fmt(float(to))} (C {_fmt(p['D'])} → {_fmt(p['D'] * float(to))}, N fixed)"


def _boundary_value(kind: str, p: dict[str, Any], a: checks.BoundaryMoves) -> Any:
    """One boundary of the paper's decision under parameters ``p`` (the stated model, hsitp.cost.stated):
    threshold X* = P·F·b/(2β), the dimension a 1-D split must exceed to be compute-bound (§6.2's P·F/β with the
    bytes per element b and the 2 FLOPs per multiply-add its derivation cancels, §3.2); split: ρ* where
    CCR_channel = CCR_token (§3.3: the ratio of their coefficients); max_P: the largest P with CCR < 1 at dimension
    ``X`` (§11); layers: how many of a block's communicating layers (attention output projection, C_in = D; MLP
    fc2, C_in = 4D) exceed the threshold; decision: §10.1's region (data parallel / channel / token) of every
    registry scene at patch ``patch`` with C = D × the ρ factor."""
    beta_e = 2.0 * p["beta"] / p["bytes"]  # β in elements per second × 2 FLOPs per multiply-add
    X = float(stated.threshold(p["P"], p["F"], beta_e))
    if kind == "threshold":
        return X
    if kind == "split":
        return float(
            stated.ccr_channel(p["P"], p["F"], beta_e, 1) / stated.ccr_token(p["P"], p["F"], beta_e, 1)
        )
    if kind == "max_P":
        return float(a.X) * beta_e / p["F"]
    if kind == "layers":
        c_ins = (p["D"], a.mlp_ratio * p["D"])
        return sum(c > X for c in c_ins)
    C = p["D"] * p["C_scale"]  # decision, the last of BOUNDARIES (the check's type admits no other)
    out = []
    for name in registry.names():
        spec = registry.get(name)
        N = n_tokens(spec.rows, spec.cols, a.patch)
        cc, ct = X / C, X / N
        out.append("data_parallel" if min(cc, ct) >= 1 else ("channel" if cc < ct else "token"))
    return tuple(out)


def _moved(kind: str, old: Any, new: Any, direction: str, rtol: float) -> bool:
    """Whether a boundary moved as stated: a decision by any scene's region, a count of layers by one, a number by
    more than ``rtol`` of itself."""
    if kind == "decision":
        up = down = old != new
    elif kind == "layers":
        up, down = new > old, new < old
    else:
        up, down = new > old * (1 + rtol), new < old * (1 - rtol)
    return {"moves": up or down, "up": up, "down": down, "none": not (up or down)}[direction]


def _show(kind: str, v: Any) -> str:
    """A boundary's value as shown: a decision as its regions' counts over the scenes."""
    if kind == "decision":
        return "(" + ", ".join(f"{r} {v.count(r)}" for r in dict.fromkeys(v)) + ")"
    return _fmt(v)


def check_boundary_moves(ctx: Context, a: checks.BoundaryMoves) -> Outcome:
    """Rule 12: a factor the paper says moves a boundary, judged by moving it. Each point (a preset of
    ``hardware`` × ``P`` × a new value in ``to``) recomputes the ``boundary`` (one of :data:`BOUNDARIES`, or a list:
    the point counts if any of them moves as stated) with the ``factor`` changed as the paper says, every quantity
    it touches at once (a number format: the rate F at that format, from ``rate``, and the bytes per element, hence
    β in elements per second; a preset: F, β and memory), and asks whether it moved in the paper's ``direction``
    (moves / up / down / none; by more than ``rtol``, default 1 %). The outcome is the share of points."""
    kinds = a.boundary if isinstance(a.boundary, list) else [a.boundary]
    direction, rtol = a.direction, a.rtol
    pts, skipped = [], []
    for hw in a.hardware:
        for P in a.P or [8]:
            base = _boundary_params(a, hw, P)
            for to in a.to:
                new, what = _changed(a, base, to)
                if new is None:
                    skipped.append(what)
                    continue
                moved, shown = False, []
                for kind in kinds:
                    old_v, new_v = _boundary_value(kind, base, a), _boundary_value(kind, new, a)
                    moved |= _moved(kind, old_v, new_v, direction, rtol)
                    shown.append(f"{kind} {_show(kind, old_v)} → {_show(kind, new_v)}")
                pts.append((f"{hw} P={P} {what}", moved, ", ".join(shown)))
    if not pts:
        raise ClaimsError(f"boundary_moves: no point applies ({'; '.join(skipped)})")
    left = [f"not applicable: {s}" for s in dict.fromkeys(skipped)]
    return _share(
        pts,
        a,
        f"stated model (hsitp.cost.stated) recomputed with {a.factor} changed: share of {len(pts)} point(s) where "
        f"{' or '.join(kinds)} {'moves' if direction == 'moves' else direction if direction != 'none' else 'stays'}"
        f" (rtol {rtol:g})",
        "hsitp.cost.stated, hsitp.cost.hardware" + (f"; {a.source}" if a.source else ""),
        basis=None,
        left_out=left,
    )

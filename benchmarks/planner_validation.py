"""``hsitp advise plan`` checked against what we measure: prints each check's error (docs/measured.md, ## Planner
validation).

    python benchmarks/planner_validation.py memory   [--config config/config.yaml] [--only LABEL]
        fake-tensor estimates (hsitp probe estimate's points: every paper-scale and D-CHAG config in the config)
        vs the memory model's peak: |error| <= 5 % each.
    python benchmarks/planner_validation.py dchag
        D-CHAG's published rows (cost/paper.py): predicted order of tp, dchag_l, dchag_c where the reported
        gap > 5 %, and reported / predicted.
    python benchmarks/planner_validation.py time --throughput PROBE.nc --calibration CALIBRATION.nc
        predicted (refined model on this machine's calibration) vs measured step time, the probe's interleaved
        rounds (hsitp.bench.interleave), P <= cores; the predicted ranking of each pair of plans must match
        wherever the measured per-round ratio stays on one side of 1 (the gap exceeds the run-to-run spread).
        Calibrate at the probe's sizes (config/bench-planner.yaml, within the hour of the probe); a probe size
        outside the calibration's fitted range is printed as extrapolated.

Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

MEMORY_BOUND = 0.05


def check_memory(config: list[str], only: str) -> bool:
    from hsitp.config import load_config
    from hsitp.cost.memory import plan_memory
    from hsitp.probe.estimate import estimate_one, estimate_points
    from hsitp.probe.grid import DCHAG_PLANS
    from hsitp.probe.model import size_of
    from hsitp.settings import ProbeSettings

    cfg = load_config(config)
    worst, bad = 0.0, []
    for label, pt, sec in estimate_points(ProbeSettings.from_config(cfg).estimate):
        if only not in label:
            continue
        est = estimate_one(pt, sec).peak_allocated
        g = pt.g if pt.plan in DCHAG_PLANS else 1
        model = plan_memory(pt.plan, size_of(sec, pt.L, pt.N, sec.dtype), pt.P, g, pt.checkpointing)
        err = model[("step", "peak")] / est - 1.0
        worst = max(worst, abs(err))
        print(
            f"{label:44s} estimate {est / 2**30:8.3f} GiB  model {model[('step', 'peak')] / 2**30:8.3f} GiB  {err:+.2%}"
        )
        if abs(err) > MEMORY_BOUND:
            bad.append(label)
        sys.stdout.flush()
    print(
        f"max |model / estimate - 1| = {worst:.2%} (bound {MEMORY_BOUND:.0%}); over the bound: {bad or 'none'}"
    )
    return not bad


def check_dchag() -> bool:
    from hsitp.cost.planner import dchag_reference_check

    ok = True
    print(
        "rank-0 GiB: reported max_memory_reserved (MI250X) / predicted allocated peak (bf16 + fp32 master, blocks)"
    )
    for r in dchag_reference_check():
        cells = "  ".join(
            f"{p} {r['reported_gib'][p]:.1f}/{r['predicted_gib'][p]:.1f} (x{r['ratio'][p]:.2f})"
            for p in r["ratio"]
        )
        print(f"{r['name']:18s} {cells}")
        for p in r["pairs"]:
            a, b = p["pair"]
            verdict = (
                ("agrees" if p["agree"] else "DISAGREES") if p["checked"] else "not checked (gap <= 5 %)"
            )
            print(f"    {a} vs {b}: reported gap {p['reported_gap']:.1%}: predicted order {verdict}")
            ok &= p["agree"] or not p["checked"]
    return ok


def check_time(throughput: Path, calibration: Path) -> bool:
    import itertools

    import xarray as xr

    from hsitp.bench.calibrate import fit_points
    from hsitp.bench.predict import L_DEPENDENT_OPS
    from hsitp.cost.hardware import get_hardware
    from hsitp.cost.planner import Inputs, step_time
    from hsitp.sections.cost import Switches

    hw = get_hardware(f"measured:{calibration}")
    ds = xr.open_dataset(throughput)
    pc = json.loads(ds.attrs["probe"])
    fitted = [r for r in fit_points(xr.open_dataset(calibration))["ops"] if not r["held_out"]]
    dtype = str(ds.attrs.get("dtype", "float32"))
    dtype = dtype if dtype in ("float32", "bfloat16", "float16") else "float32"
    cores = os.cpu_count() or 1
    ok = True
    sample = ds["sample_time"]
    for P, L, N, ck in itertools.product(*(ds[d].values for d in ("P", "L", "N", "checkpointing"))):  # noqa: N806
        P = int(P)  # noqa: N806
        if cores < P:
            print(f"P = {P} > {cores} cores: skipped (oversubscribed)")
            continue
        x = Inputs(
            D=int(pc["dim"]), depth=int(pc["depth"]), heads=int(pc["heads"]), mlp_ratio=int(pc["mlp_ratio"]),
            L=int(L), H=0, W=0, patch=int(pc["patch"]), N=int(N), batch=int(pc["batch"]),
            classes=int(pc["classes"]), dtype=dtype, master_fp32=False, nodes=1, devices_per_node=P,
            device_memory_gb=1.0,
        )  # fmt: skip
        notes = []
        for key, value in (("L", int(L)), ("N", int(N)), ("D", int(pc["dim"]))):
            got = [r[key] for r in fitted if key != "L" or r["op"] in L_DEPENDENT_OPS]
            if not min(got) <= value <= max(got):
                notes.append(f"    note: the probe's {key} = {value} is outside the calibration's fitted {key} "
                             f"{min(got)}-{max(got)}: its compute models are extrapolated")  # fmt: skip
        rows = {}
        for plan, g in itertools.product(ds["plan"].values, ds["g"].values):
            s = sample.sel(plan=plan, P=P, g=g, L=L, N=N, checkpointing=ck).values
            if not (s == s).all() or (
                str(plan) not in ("tp", "dchag_l", "dchag_c") and int(g) != ds["g"].values[0]
            ):
                continue
            comp, comm = step_time(str(plan), x, P, int(g), str(ck), hw, Switches(), 0.0)
            name = f"{plan}" + (f" g={int(g)}" if str(plan).startswith("dchag") else "")
            rows[name] = (comp + comm, list(s))
        print(
            f"P = {P}, L = {int(L)}, N = {int(N)}, checkpointing {ck}: step time, predicted vs measured median"
        )
        for note in notes:
            print(note)
        for name, (pred, s) in rows.items():
            med = statistics.median(s)
            print(f"    {name:12s} predicted {pred * 1e3:8.2f} ms  measured {med * 1e3:8.2f} ms "
                  f"[{min(s) * 1e3:.2f}-{max(s) * 1e3:.2f}]  error {pred / med - 1:+.0%}")  # fmt: skip
        for a, b in itertools.combinations(rows, 2):
            ratios = [u / v for u, v in zip(rows[a][1], rows[b][1], strict=True)]
            lo, hi = min(ratios), max(ratios)
            if lo <= 1.0 <= hi:
                print(
                    f"    {a} / {b}: measured {statistics.median(ratios):.2f} [{lo:.2f}-{hi:.2f}] spans 1: no order"
                )
                continue
            agree = (lo > 1.0) == (rows[a][0] > rows[b][0])
            ok &= agree
            print(f"    {a} / {b}: measured {statistics.median(ratios):.2f} [{lo:.2f}-{hi:.2f}], predicted "
                  f"{rows[a][0] / rows[b][0]:.2f}: ranking {'matches' if agree else 'DOES NOT MATCH'}")  # fmt: skip
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="check", required=True)
    m = sub.add_parser("memory")
    m.add_argument("--config", nargs="+", default=["config/config.yaml"])
    m.add_argument("--only", default="", help="labels containing this (e.g. dchag/)")
    sub.add_parser("dchag")
    t = sub.add_parser("time")
    t.add_argument(
        "--throughput", type=Path, required=True, help="a probe partial (probe_P2.nc) or throughput.nc"
    )
    t.add_argument("--calibration", type=Path, required=True, help="this machine's bench calibration.nc")
    args = ap.parse_args()
    if args.check == "memory":
        ok = check_memory(args.config, args.only)
    elif args.check == "dchag":
        ok = check_dchag()
    else:
        ok = check_time(args.throughput, args.calibration)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

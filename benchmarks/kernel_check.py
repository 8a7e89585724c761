"""tp at P (the launch's ranks; 2 for docs/measured.md) under both single-query attention kernels (issue 49): per-rank peak memory of one training step and
tokens/s, the two kernels timed in alternation in one launch, at the probe's trained size (config/cpu.yaml's probe:
L = 200, N = 324, D = 64, 8 heads, depth 4, no activation checkpointing). Writes one netCDF whose table
``hsitp report measured`` puts beside the one-table answer (docs/measured.md, "The one-table answer"), so a reader
sees how much of D-CHAG's advantage over tp was the baseline's attention kernel.

    python -m hsitp.torchrun --standalone --nproc-per-node 2 benchmarks/kernel_check.py \\
        --configfile config/config.yaml config/cpu.yaml --out results/reference/kernel-check/probe/kernels.nc

Every step is the probe's (``hsitp.probe.build``: zero_grad, forward, squared error, backward, AdamW), built for each
kernel from the same seed; memory is the probe's tracker (``hsitp.probe.tracker.measure_step``) after a warm-up step, on
every rank; throughput is ``hsitp.bench.interleave`` (the slowest rank's time per sample, the order of the two
kernels alternating from round to round). Measured on this machine's CPU with gloo; nothing is modelled.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import xarray as xr

KERNELS = ("sdpa", "exact")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", nargs="+", default=["config/config.yaml", "config/cpu.yaml"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=9, help="interleaved rounds")
    ap.add_argument("--steps", type=int, default=2, help="steps per timed sample")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default=None, help="the probe's device (default: the config's probe.device)")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    from hsitp.bench.interleave import interleave
    from hsitp.bench.timing import synchronize
    from hsitp.config import load_config
    from hsitp.contracts import KERNEL_CHECK
    from hsitp.io import provenance, write_netcdf
    from hsitp.parallel.runtime import RuntimeSettings, resolve_dtype, start
    from hsitp.probe.build import build_point
    from hsitp.probe.grid import Point
    from hsitp.probe.tracker import measure_step
    from hsitp.settings import ProbeSettings

    cfg = load_config(args.configfile, {"probe": {"device": args.device}} if args.device else None)
    pc = ProbeSettings.from_config(cfg)
    rt = start(RuntimeSettings.from_config(cfg, section="probe"))  # P: the launch's ranks
    try:
        dtype = resolve_dtype(pc.dtype, rt.device, key="probe.dtype")
        pt = Point("tp", rt.world_size, 1, pc.L[0], pc.N[0], "none")
        peaks = np.zeros((len(KERNELS), rt.world_size))
        built = {}
        for i, kernel in enumerate(KERNELS):
            b = build_point(
                pt,
                pc.model_copy(update={"attention_kernel": kernel}),
                rt.world,
                dtype=dtype,
                device=rt.device,
                seed=0,
            )
            b.step()  # AdamW's state
            mem = measure_step(b.model, b.step, optimizer=b.optimizer, device=rt.device)
            local = torch.tensor([float(mem.peak_allocated)])
            every = [torch.zeros(1) for _ in range(rt.world_size)]
            if rt.group is not None:
                dist.all_gather(every, local, group=rt.group)
            else:
                every = [local]
            peaks[i] = [float(t) for t in every]
            built[kernel] = b
        sides = {k: (b.step, lambda: synchronize(rt.device)) for k, b in built.items()}
        res = interleave(
            sides,
            warmup=args.warmup,
            repeats=args.repeats,
            steps=args.steps,
            device=rt.device,
            group=rt.group,
        )
        if rt.rank != 0:
            return 0
        tokens = pc.batch * pt.N * args.steps  # tokens of one timed sample
        times = np.array([res.times[k] for k in KERNELS])  # (kernel, repeat) seconds per sample
        ds = xr.Dataset(
            {
                "peak_allocated": (
                    ("kernel", "rank"),
                    peaks,
                    {"units": "bytes", "long_name": "peak of one training step (probe tracker), per rank"},
                ),
                "sample_time": (
                    ("kernel", "repeat"),
                    times,
                    {"units": "s", "long_name": f"seconds of {args.steps} steps, slowest rank, interleaved"},
                ),
                "tokens_per_s": (
                    ("kernel", "repeat"),
                    tokens / times,
                    {"units": "1/s", "long_name": "tokens per second (B N per step), interleaved rounds"},
                ),
                "ratio_exact_vs_sdpa": (
                    ("repeat",),
                    times[0] / times[1],
                    {"units": "1", "long_name": "tokens/s of exact over sdpa, per round"},
                ),
            },
            coords={
                "kernel": list(KERNELS),
                "rank": list(range(rt.world_size)),
                "repeat": list(range(args.repeats)),
            },
            attrs={
                "plan": "tp",
                "P": rt.world_size,
                "L": pt.L,
                "N": pt.N,
                "checkpointing": "none",
                "probe": str(
                    {
                        k: getattr(pc, k)
                        for k in ("dim", "heads", "depth", "mlp_ratio", "patch", "batch", "classes")
                    }
                ),
                "device": rt.device_label,
                "backend": rt.backend,
                "measured": "yes: both kernels in one launch, memory per rank, throughput in alternating rounds",
                "orders": str(res.orders),
            },
        )
        for v in ds.coords.values():
            v.attrs.setdefault("units", "1")
            v.attrs.setdefault("long_name", v.name)
        out = write_netcdf(
            ds,
            args.out,
            kind=KERNEL_CHECK.kind,
            prov=provenance(config=cfg),
            title="tp at P = 2: exact vs sdpa kernel",
        )
        print(f"kernel_check: wrote {out}")
        for i, k in enumerate(KERNELS):
            print(
                f"  {k}: peak {peaks[i].max() / 2**20:.1f} MiB (fullest rank), "
                f"{np.median(tokens / times[i]):.0f} tokens/s median"
            )
        r = times[0] / times[1]
        print(f"  exact/sdpa tokens/s: {np.median(r):.2f} [{r.min():.2f}, {r.max():.2f}]")
        return 0
    finally:
        rt.stop()


if __name__ == "__main__":
    sys.exit(main())

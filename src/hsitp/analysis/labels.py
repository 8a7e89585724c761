"""Which hardware a number belongs to, read from a result file's attributes (light: no plotting imports).

Figures, tables and the Snakemake report's captions all name the hardware through these functions: the device a
bench file was timed on (its ``device`` attribute), the presets a cost table was modelled for (its
``hardware_presets`` attribute), or the machine that wrote a file (``provenance.device``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def attr_json(attrs: Mapping[str, Any], key: str, default: Any) -> Any:
    """A file attribute written as JSON, parsed (one already parsed as it is); ``default`` where it is absent or
    not JSON."""
    raw = attrs.get(key)
    if raw is None:
        return default
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return default


def computed_on(attrs: Mapping[str, Any]) -> str:
    """The machine that wrote the file (provenance.device): CPU model, and the GPU if there was one."""
    dev = attr_json(attrs, "provenance", {}).get("device", {})
    gpu = dev.get("gpu", "none")
    cpu = short_cpu(dev.get("cpu", "unknown CPU"))
    return cpu if gpu in ("none", "", None) else f"{gpu} ({cpu})"


_CPU_NOISE = re.compile(r"\((?:R|TM|tm)\)|\s+Processor\b")


def short_cpu(name: str) -> str:
    """A CPU's name for a figure's title: 'Intel(R) Xeon(R) Processor' -> 'Intel Xeon' (trademark signs and the
    word 'Processor' made a hardware line run to a third title line; the provenance keeps the full name)."""
    return re.sub(r"\s+", " ", _CPU_NOISE.sub("", name)).strip() or name


_ONE_PLURAL = re.compile(r"(?<![\w.,/])1 (thread|rank|core|process|GPU|node|device)(?:es|s)\b")


def singular(text: str) -> str:
    """'1 threads/rank' -> '1 thread/rank': the count 1 with its unit in the singular (the runtime writes the
    device line with a plural whatever the count)."""
    return _ONE_PLURAL.sub(r"1 \1", text)


def measured_on(attrs: Mapping[str, Any]) -> str:
    """The device a bench file was timed on, with dtype: e.g. 'CPU: AMD EPYC (1 thread/rank, gloo), float32'.

    The ``device`` attribute lists one entry per world size; repeated entries are shown once, and the P = 1
    launch (no process group: backend 'none') is dropped when a multi-rank entry names the device."""
    raw = short_cpu(singular(str(attrs.get("device", "")).strip()))
    parts = list(dict.fromkeys(p.strip() for p in raw.split(";") if p.strip()))
    parts = [p for p in parts if not p.endswith(", none)")] or parts
    text = "; ".join(parts) if parts else f"unrecorded device (file written on {computed_on(attrs)})"
    dtype = attrs.get("dtype")
    return f"{text}, {dtype}" if dtype else text


def platform(devices: Iterable[object]) -> str:
    """'CPU', 'GPU' or 'CPU and GPU': the kind of device behind device lines as the runtime writes them (a CPU
    as 'CPU: model (threads/rank, backend)', a GPU by its CUDA name); a column or sentence saying "measured on
    CPU" names it from here, so a GPU's numbers are never labelled CPU nor a CPU's GPU."""
    kinds = {"CPU" if str(d).strip().startswith("CPU") else "GPU" for d in devices if str(d).strip()}
    return " and ".join(sorted(kinds)) or "an unrecorded device"


def not_a_gpu(devices: Iterable[object]) -> str:
    """', not a GPU' where every device line is a CPU's, else nothing (a GPU run is not said to be no GPU)."""
    return ", not a GPU" if platform(devices) == "CPU" else ""


def attention_kernel(attrs: Mapping[str, Any]) -> str:
    """'exact attention kernel' / 'sdpa attention kernel': the single-query attentions' kernel a probe, bench or
    train file records (the two round differently, so a number says which ran)."""
    return f"{attrs['attention_kernel']} attention kernel"


def presets(attrs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Hardware presets a cost table was modelled for (name -> description, F, beta, source...)."""
    return attr_json(attrs, "hardware_presets", {}) or {}


def modelled_for(attrs: Mapping[str, Any], names: Iterable[str] | None = None) -> str:
    """'modelled for paper-intra, paper-inter' (the presets in the file, or the given subset)."""
    names = list(names) if names is not None else list(presets(attrs))
    return "modelled for " + (", ".join(names) if names else "no named hardware")


def _attrs(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Global attributes of a netCDF file without reading its data; None if it cannot be read (yet)."""
    try:
        import netCDF4

        with netCDF4.Dataset(path) as nc:
            return {k: nc.getncattr(k) for k in nc.ncattrs()}
    except (OSError, RuntimeError, ImportError):
        return None


BENCH_KINDS = ("model_vs_measured", "microbench", "calibration")  # the bench files that name a device


def stage_hardware(stage: str, paths: Sequence[str | os.PathLike[str]]) -> str:
    """One line for a report caption: the hardware behind a stage's page, read from its input files.

    Files that do not exist yet (a dry run before the stage ran) are skipped; the line then says so."""
    found = [a for a in (_attrs(p) for p in paths) if a is not None]
    if not found:
        return "named once the stage's files exist"
    if stage == "data":
        machines = sorted({computed_on(a) for a in found if a.get("kind") == "dataset"})
        return f"no hardware-dependent number (prepared on {', '.join(machines) or 'an unrecorded machine'})"
    if stage == "cost":
        names = list(dict.fromkeys(n for a in found for n in presets(a)))
        return f"{modelled_for({}, names)} (presets, not measurements)"
    if stage == "bench":
        return _measured(measured_on(a) for a in found if a.get("kind") in BENCH_KINDS)
    if stage == "probe":  # a probe file lists its devices (one per P) in its ``run`` attribute
        line = _measured(
            measured_on(
                {
                    "device": "; ".join(map(str, attr_json(a, "run", {}).get("device", []))),
                    "dtype": a.get("dtype"),
                }
            )
            for a in found
            if a.get("kind") in ("probe_memory", "probe_throughput")
        )
        est = any(a.get("kind") == "probe_estimate" for a in found)
        return line + ("; estimates with fake tensors (no device memory used)" if est else "")
    if stage == "train":
        return _measured(measured_on(a) for a in found if a.get("kind") == "train")
    return "no hardware recorded for this stage"


def _measured(devices: Iterable[str]) -> str:
    """'measured on A; B': each device once, in order."""
    return "measured on " + ("; ".join(dict.fromkeys(devices)) or "an unrecorded device")

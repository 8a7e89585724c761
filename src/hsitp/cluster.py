"""Does every job fit a node of its SLURM partition? Checked before the first job is submitted.

A job that asks for more CPUs, memory or GPUs per node than any node of its partition has is accepted by sbatch
and then stays PENDING forever (reason PartitionConfig), or is refused with a terse gres error; Snakemake waits
without a word. The workflow's ``onstart`` hook (workflow/rules/hooks.smk) instead compares each job's request
per node with the largest node of its partition (``sinfo``) and stops with one line per rule that can never
start, naming the config key that sets the request and the node's value.

Pure functions over plain records, so the check is tested without SLURM; :func:`read_partitions` is the one
place that runs ``sinfo``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hsitp.errors import HsitpError

# sinfo's fields: partition (default marked '*'), CPUs, memory (MB), generic resources of one group of nodes
SINFO_FORMAT = "%P|%c|%m|%G"


class ClusterFitError(HsitpError):
    """A job can never start on its partition (or the partitions cannot be read)."""


@dataclass(frozen=True)
class NodeSize:
    """One group of identical nodes of a partition, as sinfo reports it."""

    partition: str
    cpus: int
    mem_mb: int
    gpus: int
    default: bool = False


@dataclass(frozen=True)
class JobRequest:
    """What one job asks of each of its nodes, and the config keys that set each amount (for the message)."""

    rule: str
    label: str  # the job's wildcards, e.g. "P=4" ("" for none)
    partition: str | None  # None: the cluster's default partition
    cpus_per_node: int
    mem_mb_per_node: int
    gpus_per_node: int
    cpus_key: str  # e.g. "probe.threads_per_rank (1) x 4 ranks per node"
    mem_key: str
    gpus_key: str


def _leading_int(text: str) -> int:
    """sinfo's '2', '2+' (a range, at least 2) or 'N/A'; memory may carry a unit-less MB value."""
    m = re.match(r"\s*(\d+)", text)
    return int(m.group(1)) if m else 0


def parse_gres_gpus(gres: str) -> int:
    """GPUs per node in a gres string: 'gpu:4', 'gpu:a100:4(S:0-1)', 'gpu:2,shard:8', '(null)' -> 4, 4, 2, 0."""
    total = 0
    for item in gres.split(","):
        item = re.sub(r"\(.*?\)", "", item.strip())
        parts = item.split(":")
        if parts[0] == "gpu":
            total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def parse_sinfo(text: str) -> list[NodeSize]:
    """Lines of ``sinfo -h -o '%P|%c|%m|%G'`` into node groups."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 4:
            raise ClusterFitError(f"sinfo: unexpected line {line!r} (format {SINFO_FORMAT})")
        name, cpus, mem, gres = fields
        out.append(
            NodeSize(
                partition=name.strip().rstrip("*"),
                cpus=_leading_int(cpus),
                mem_mb=_leading_int(mem),
                gpus=parse_gres_gpus(gres),
                default=name.strip().endswith("*"),
            )
        )
    return out


def read_partitions(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> list[NodeSize]:
    """Every partition's node groups from ``sinfo`` (raises when sinfo is missing or fails)."""
    if run is subprocess.run and shutil.which("sinfo") is None:
        raise ClusterFitError("sinfo not found: cannot check the jobs against the cluster's nodes")
    proc = run(["sinfo", "-h", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ClusterFitError(f"sinfo failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    return parse_sinfo(proc.stdout)


def _largest(nodes: Sequence[NodeSize]) -> NodeSize:
    return NodeSize(
        partition=nodes[0].partition,
        cpus=max(n.cpus for n in nodes),
        mem_mb=max(n.mem_mb for n in nodes),
        gpus=max(n.gpus for n in nodes),
    )


def misfits(jobs: Iterable[JobRequest], nodes: Sequence[NodeSize]) -> list[str]:
    """One line per rule whose jobs can never start: the first such job's request, the config key that sets it and
    the largest node of its partition. Empty when every job fits some node."""
    by_partition: dict[str, list[NodeSize]] = {}
    for n in nodes:
        by_partition.setdefault(n.partition, []).append(n)
    default = next((n.partition for n in nodes if n.default), None)
    lines: dict[str, str] = {}
    for job in jobs:
        if job.rule in lines:
            continue
        part = job.partition or default
        where = f"{job.rule}" + (f" ({job.label})" if job.label else "")
        if part is None or part not in by_partition:
            known = ", ".join(sorted(by_partition)) or "none"
            lines[job.rule] = (
                f"{where}: partition {part or '(default)'} not found (partitions: {known}); "
                "set slurm_partition (--default-resources or --set-resources)"
            )
            continue
        group = by_partition[part]
        big = _largest(group)
        short = []
        if job.cpus_per_node > big.cpus:
            short.append(f"{job.cpus_per_node} CPUs per node ({job.cpus_key}), largest node {big.cpus}")
        if job.mem_mb_per_node > big.mem_mb:
            short.append(f"{job.mem_mb_per_node} MB per node ({job.mem_key}), largest node {big.mem_mb} MB")
        if job.gpus_per_node > big.gpus:
            short.append(f"{job.gpus_per_node} GPUs per node ({job.gpus_key}), largest node {big.gpus}")
        if not short and not any(
            n.cpus >= job.cpus_per_node and n.mem_mb >= job.mem_mb_per_node and n.gpus >= job.gpus_per_node
            for n in group
        ):
            short.append(
                f"{job.cpus_per_node} CPUs, {job.mem_mb_per_node} MB and {job.gpus_per_node} GPUs together "
                f"(no single node of partition {part} has all three)"
            )
        if short:
            lines[job.rule] = f"{where} on partition {part}: needs " + "; ".join(short)
    return list(lines.values())


def fit_report(lines: Sequence[str]) -> str:
    """The message that stops the workflow: one line per rule, then what to do."""
    return (
        f"{len(lines)} rule(s) ask for more than any node of their SLURM partition has, so their jobs would "
        "stay PENDING forever:\n"
        + "\n".join(f"  {line}" for line in lines)
        + "\nLower the named config keys (or set resources.<rule>.ranks_per_node to spread ranks over nodes), "
        "or pick a partition with larger nodes."
    )


def request_from_resources(
    rule: str,
    label: str,
    resources: Mapping[str, object],
    threads: int,
    keys: Mapping[str, str],
) -> JobRequest:
    """A job's per-node request from the resources Snakemake evaluated for it (the SLURM plugin's reading:
    --cpus-per-task from cpus_per_task or threads, --mem per node, --gpus per job or --gres per node)."""

    def num(key: str) -> int:
        value = resources.get(key)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    nodes = max(1, num("nodes"))
    gres = resources.get("gres")
    gpus = parse_gres_gpus(str(gres)) if gres else -(-num("gpu") // nodes)
    partition = resources.get("slurm_partition")
    return JobRequest(
        rule=rule,
        label=label,
        partition=str(partition) if partition else None,
        cpus_per_node=num("cpus_per_task") or threads,
        mem_mb_per_node=num("mem_mb"),
        gpus_per_node=gpus,
        cpus_key=keys["cpus"],
        mem_key=keys["mem"],
        gpus_key=keys["gpus"],
    )

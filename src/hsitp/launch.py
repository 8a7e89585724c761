"""How a multi-rank rule starts its P ranks, on one machine or across nodes of a SLURM allocation.

One module decides both what a job asks the executor for (:func:`rank_layout` -> :meth:`RankLayout.resources`)
and the command that starts its ranks (:func:`launch_prefix`), so a rule cannot ask for one shape and launch
another. The bench, probe and train rules use it.

Three patterns, chosen by P and ``resources.<rule>.ranks_per_node`` (null: every rank on one node):

* **One rank** (P = 1): ``hsitp ARGS``, no launcher.
* **One node** (P <= ranks_per_node): ``torchrun --standalone --nnodes 1 --nproc-per-node P -m hsitp ARGS``. It
  runs the same with ``snakemake --cores all`` on a laptop and inside a SLURM job, where the executor wraps the
  job in ``srun -n1`` on one node holding P x threads_per_rank CPUs (one task, so torchrun's ranks share them).
* **Several nodes** (P = N x R): one torchrun per node, not one task per rank, so every rank starts the same way
  (torchrun's variables, which ``hsitp.parallel.runtime.start`` checks) and torchrun still tears a node's ranks
  down when one fails. The rule line is ``hsitp launch --nodes N --ranks-per-node R ... -- ARGS``; inside the
  allocation that becomes ``srun --nodes N --ntasks N --ntasks-per-node 1 --cpus-per-task C --kill-on-bad-exit=1
  hsitp launch --node ...``, and on each node ``torchrun --nnodes N --node-rank $SLURM_NODEID --nproc-per-node R
  --master-addr HEAD --master-port PORT -m hsitp ARGS`` with HEAD the allocation's first node and PORT derived
  from the job id. The job carries the executor's ``mpi`` resource so the SLURM job step runs this line itself
  instead of wrapping it in a one-node ``srun -n1``.

The backend (NCCL on GPUs, gloo on CPUs) is chosen by the ranks themselves (``parallel.backend: auto``).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsitp.errors import HsitpError

# Ports a multi-node job's rendezvous may use: below Linux's ephemeral range (32768-60999), so no outgoing
# connection holds it; derived from the SLURM job id so two jobs sharing a node pick different ports.
PORT_BASE = 20000
PORT_SPAN = 10000


# The resources every rank job carries (RankLayout.resources), the same for every P.
RESOURCE_KEYS = ("mem_mb", "nodes", "tasks", "cpus_per_task", "gpu", "gres", "tasks_per_gpu", "mpi")


class LaunchError(HsitpError):
    """The ranks cannot be laid out or launched as asked; the message names the config key or variable."""


@dataclass(frozen=True)
class RankLayout:
    """P ranks over ``nodes`` nodes, ``ranks_per_node`` on each, and what each rank needs."""

    ranks: int
    nodes: int
    ranks_per_node: int
    threads_per_rank: int
    mem_mb_per_rank: int
    gpus_per_rank: int

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def cpus_per_node(self) -> int:
        return self.ranks_per_node * self.threads_per_rank

    @property
    def gpus_per_node(self) -> int:
        return self.ranks_per_node * self.gpus_per_rank

    @property
    def threads(self) -> int:
        """Snakemake's ``threads``: every rank's threads (P x threads_per_rank)."""
        return self.ranks * self.threads_per_rank

    def resources(self) -> dict[str, Any]:
        """What the job asks the executor for; the same keys for every P (None = not asked, Snakemake drops it).

        Cluster-neutral names (``mem_mb``, ``nodes``, ``tasks``, ``cpus_per_task``, ``gpu``) serve any executor;
        the SLURM plugin reads them as --mem (per node), --nodes, --ntasks, --cpus-per-task and --gpus (per job).
        One node: one task with every rank's CPUs and memory. Several nodes: one task per node (torchrun), GPUs
        per node as ``gres`` (``--gres`` counts per node, ``--gpus`` per job and could split unevenly), and
        ``mpi`` so the job step does not wrap the launch in a one-node ``srun -n1``. ``tasks_per_gpu = 0`` stops
        the plugin from turning ``tasks`` into ``--ntasks-per-gpu`` on GPU jobs.
        """
        multi = self.multi_node
        return {
            "mem_mb": self.ranks_per_node * self.mem_mb_per_rank,
            "nodes": self.nodes,
            "tasks": self.nodes,
            "cpus_per_task": self.cpus_per_node,
            "gpu": None if multi else self.ranks * self.gpus_per_rank,
            "gres": f"gpu:{self.gpus_per_node}" if multi and self.gpus_per_rank else None,
            "tasks_per_gpu": 0,
            "mpi": "srun" if multi else None,
        }


def rank_layout(
    ranks: int,
    *,
    ranks_per_node: int | None,
    threads_per_rank: int,
    mem_mb_per_rank: int,
    gpus_per_rank: int,
    key: str = "ranks_per_node",
) -> RankLayout:
    """Lay P ranks out on nodes: all on one node unless ``ranks_per_node`` (config key ``key``) is smaller than P.

    P must then be a multiple of it: every node runs the same number of ranks (torchrun's --nproc-per-node).
    """
    for name, value, low in (
        ("ranks (P)", ranks, 1),
        ("threads_per_rank", threads_per_rank, 1),
        ("mem_mb_per_rank", mem_mb_per_rank, 1),
        ("gpus_per_rank", gpus_per_rank, 0),
    ):
        if not _is_int(value) or value < low:
            raise LaunchError(f"{name} must be an integer >= {low}, got {value!r}")
    if ranks_per_node is not None and (not _is_int(ranks_per_node) or ranks_per_node < 1):
        raise LaunchError(f"{key} must be an integer >= 1 or null, got {ranks_per_node!r}")
    if ranks_per_node is None or ranks_per_node >= ranks:
        return RankLayout(ranks, 1, ranks, threads_per_rank, mem_mb_per_rank, gpus_per_rank)
    if ranks % ranks_per_node:
        raise LaunchError(
            f"{key} = {ranks_per_node} does not divide P = {ranks}: every node must run the same number of "
            f"ranks; choose a divisor of every world size, or null to keep each launch on one node"
        )
    return RankLayout(
        ranks, ranks // ranks_per_node, ranks_per_node, threads_per_rank, mem_mb_per_rank, gpus_per_rank
    )


# torchrun through hsitp.torchrun: the same launcher, but a cancelled job (SIGINT/SIGTERM) exits 130/143 quietly
# while the ranks stop at their next safe point (hsitp.signals).
TORCHRUN = ("python", "-m", "hsitp.torchrun")


def torchrun_argv(
    nproc_per_node: int,
    *,
    nnodes: int = 1,
    node_rank: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> list[str]:
    """The torchrun line that starts one node's ranks of ``python -m hsitp``; arguments follow it.

    One node: ``--standalone`` (a local rendezvous on a free port). Several: the static rendezvous
    (node rank, master address and port), the same on every node but for ``--node-rank``.
    """
    ranks = ["--nproc-per-node", str(nproc_per_node)]
    if nnodes == 1:
        return [*TORCHRUN, "--standalone", "--nnodes", "1", *ranks, "-m", "hsitp"]
    if node_rank is None or master_addr is None or master_port is None:
        raise LaunchError("a multi-node torchrun needs node_rank, master_addr and master_port")
    nodes = ["--nnodes", str(nnodes), "--node-rank", str(node_rank)]
    rendezvous = ["--master-addr", master_addr, "--master-port", str(master_port)]
    return [*TORCHRUN, *nodes, *ranks, *rendezvous, "-m", "hsitp"]


def launch_prefix(layout: RankLayout) -> str:
    """The start of a rule's shell line; the ``hsitp`` subcommand and its arguments follow it.

    One rank: ``hsitp``. One node: the torchrun line itself (shown as is by ``snakemake -n -p``). Several nodes:
    ``hsitp launch``, which needs the allocation's node names and job id, known only when the job runs.
    """
    if layout.ranks == 1:
        # One rank needs no launcher: torchrun's agent would be a second Python importing torch (about 2 s of CPU)
        # for nothing. The rank reads WORLD_SIZE unset as P = 1 (parallel.runtime.start) and stops on a signal
        # itself (hsitp.signals), exiting 130/143 as it would under torchrun.
        return "hsitp"
    if not layout.multi_node:
        return shlex.join(torchrun_argv(layout.ranks))
    return shlex.join(
        _hsitp_launch_argv(layout.nodes, layout.ranks_per_node, layout.cpus_per_node, layout.gpus_per_node)
    )


def _hsitp_launch_argv(
    nodes: int, ranks_per_node: int, cpus_per_node: int, gpus_per_node: int, *, node: bool = False
) -> list[str]:
    """``hsitp launch`` with a job's shape (``--node``: one node's srun task), up to the ``--`` before the
    subcommand."""
    return [
        "hsitp",
        "launch",
        *(["--node"] if node else []),
        "--nodes",
        str(nodes),
        "--ranks-per-node",
        str(ranks_per_node),
        "--cpus-per-node",
        str(cpus_per_node),
        "--gpus-per-node",
        str(gpus_per_node),
        "--",
    ]


def srun_argv(
    nodes: int, ranks_per_node: int, cpus_per_node: int, gpus_per_node: int, args: Sequence[str]
) -> list[str]:
    """One task per node of the allocation, each running ``hsitp launch --node`` (which starts torchrun).

    Options are explicit: the SLURM job step removes the allocation's SLURM_* defaults (CPUs per task, tasks)
    before running the job's command, and a step otherwise gets one CPU per task.
    """
    gres = [f"--gres=gpu:{gpus_per_node}"] if gpus_per_node else []
    return [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus_per_node}",
        *gres,
        "--kill-on-bad-exit=1",
        *_hsitp_launch_argv(nodes, ranks_per_node, cpus_per_node, gpus_per_node, node=True),
        *args,
    ]


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list (``gpu[003-005,010],cpu01`` -> ``gpu003``), without scontrol.

    SLURM numbers the nodes of a step in this order, so the first host is the one with SLURM_NODEID 0.
    """
    text = nodelist.strip()
    if not text:
        raise LaunchError("empty SLURM node list")
    depth, end = 0, len(text)
    for i, ch in enumerate(text):  # the first top-level item ends at a comma outside brackets
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            end = i
            break
    item = text[:end]

    def first_of_range(match: re.Match[str]) -> str:
        return re.split(r"[,-]", match.group(1))[0]

    host = re.sub(r"\[([^\]]*)\]", first_of_range, item)
    if not host or "[" in host or "]" in host:
        raise LaunchError(f"cannot read the SLURM node list {nodelist!r}")
    return host


def rendezvous_port(job_id: str) -> int:
    """The master port of a multi-node job, from its SLURM job id (array tasks: ``<id>_<task>``)."""
    digits = re.sub(r"\D", "", job_id)
    if not digits:
        raise LaunchError(f"SLURM_JOB_ID={job_id!r} is not a job id")
    return PORT_BASE + int(digits) % PORT_SPAN


def node_torchrun_argv(nodes: int, ranks_per_node: int, env: Mapping[str, str]) -> list[str]:
    """The torchrun line of this node of a multi-node step, from the variables srun gives each task."""

    def need(*names: str) -> str:
        for name in names:
            if env.get(name):
                return env[name]
        raise LaunchError(f"{' or '.join(names)} unset: `hsitp launch --node` runs as a task of an srun step")

    step_nodes = int(need("SLURM_STEP_NUM_NODES", "SLURM_NNODES"))
    if step_nodes != nodes:
        raise LaunchError(
            f"this srun step spans {step_nodes} nodes but the launch expects {nodes}; the job must ask for "
            f"--nodes={nodes} with one task per node"
        )
    node_rank = int(need("SLURM_NODEID"))
    head = first_host(need("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))
    port = rendezvous_port(need("SLURM_JOB_ID", "SLURM_JOBID"))
    return torchrun_argv(
        ranks_per_node, nnodes=nodes, node_rank=node_rank, master_addr=head, master_port=port
    )


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _exec(argv: list[str]) -> None:
    print(f"hsitp launch on {socket.gethostname()}: {shlex.join(argv)}", file=sys.stderr, flush=True)
    os.execvp(argv[0], argv)


def _launch(args: argparse.Namespace) -> int:
    rest = list(args.args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if not rest:
        raise LaunchError(
            "hsitp launch: give the hsitp subcommand to run after `--`, e.g. `-- bench run ...`"
        )
    for name in ("nodes", "ranks_per_node", "cpus_per_node"):
        if getattr(args, name) < 1:
            raise LaunchError(f"hsitp launch: --{name.replace('_', '-')} must be >= 1")
    if args.gpus_per_node < 0:
        raise LaunchError("hsitp launch: --gpus-per-node must be >= 0")
    if args.nodes == 1:
        _exec([*torchrun_argv(args.ranks_per_node), *rest])
    if args.node:
        env = os.environ
        argv = node_torchrun_argv(args.nodes, args.ranks_per_node, env)
        print(
            f"hsitp launch: node {env.get('SLURM_NODEID')} of {args.nodes} ({socket.gethostname()}, "
            f"SLURM node {env.get('SLURMD_NODENAME', '?')}), rendezvous {argv[argv.index('--master-addr') + 1]}:"
            f"{argv[argv.index('--master-port') + 1]}",
            file=sys.stderr,
            flush=True,
        )
        _exec([*argv, *rest])
    if not os.environ.get("SLURM_JOB_ID") or shutil.which("srun") is None:
        raise LaunchError(
            f"{args.nodes} nodes x {args.ranks_per_node} ranks need a SLURM allocation of {args.nodes} nodes "
            "(SLURM_JOB_ID unset or no srun here): run the workflow with `--profile slurm`, or set the rule's "
            "resources.<rule>.ranks_per_node to null to start every rank on this machine"
        )
    _exec(srun_argv(args.nodes, args.ranks_per_node, args.cpus_per_node, args.gpus_per_node, rest))
    return 0  # not reached: exec replaced this process


def register(sub: Any) -> None:
    """``hsitp launch``: start an hsitp subcommand on P ranks over one or several nodes (see the module doc)."""
    p = sub.add_parser(
        "launch",
        help="start an hsitp subcommand on ranks over several nodes of a SLURM allocation (torchrun per node)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--nodes", type=int, required=True, help="nodes of the allocation (1: torchrun --standalone)"
    )
    p.add_argument("--ranks-per-node", type=int, required=True, help="torchrun --nproc-per-node on each node")
    p.add_argument(
        "--cpus-per-node", type=int, default=1, help="CPUs of each node's task (srun --cpus-per-task)"
    )
    p.add_argument(
        "--gpus-per-node", type=int, default=0, help="GPUs of each node's task (srun --gres=gpu:N)"
    )
    p.add_argument(
        "--node", action="store_true", help="internal: this is one node's srun task; start torchrun"
    )
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- then the hsitp subcommand and its arguments")
    p.set_defaults(func=_launch)

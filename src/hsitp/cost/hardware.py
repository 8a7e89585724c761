"""Hardware presets for the cost model: peak compute and link bandwidths with their sources, plus ``measured:PATH``.

Every preset stores *peak* numbers (as the vendor or the paper gives them) and separate, labelled efficiency
factors; the model uses ``peak × efficiency``. The paper's own presets already give "effective" numbers, so their
efficiencies are 1. Vendor presets' efficiencies and latencies (α) are assumptions, said so in ``assumptions``:
replace them with ``measured:results/<run>/bench/calibration.nc`` (written by the microbenchmark stage) for numbers that
are measured.

Bandwidths are per device and per direction. A collective inside one node runs at ``beta_intra``; one that spans
nodes is bounded by ``beta_inter`` (each device's share of the node's network injection bandwidth).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from hsitp.cost.paper import PAPER_BETA_INTER, PAPER_BETA_INTRA, PAPER_F
from hsitp.errors import HsitpError
from hsitp.names import COLLECTIVES

MEASURED_PREFIX = "measured:"  # a hardware name "measured:PATH" names a calibration file


class UnknownHardwareError(HsitpError, KeyError):
    """A hardware name that is neither a preset nor ``measured:PATH``; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class Hardware:
    """One device type and its interconnect, as the cost model sees it."""

    name: str
    description: str
    peak_flops: float  # [FLOP/s] dense, at the training dtype
    compute_efficiency: float  # achieved / peak for GEMMs (labelled assumption unless measured)
    beta_intra: float  # [B/s] per device, per direction, inside a node
    beta_inter: float  # [B/s] per device, per direction, across nodes
    comm_efficiency: float  # achieved / peak link bandwidth (labelled assumption unless measured)
    alpha_intra: float  # [s] fixed cost per collective inside a node
    alpha_inter: float  # [s] fixed cost per collective across nodes
    devices_per_node: int
    memory_bytes: float | None  # device memory as the datasheet's GB (1e9 B); None when the source gives none
    source: str
    assumptions: str = ""
    measured: bool = False
    op_flops: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    collective_alpha: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    collective_beta: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # Measured only: per op, t = overhead + FLOPs / op_compute_rate + traffic bytes / op_mem_bandwidth (an op
    # without it runs at flops_for(op)); an op's collectives, issued back to back, take op_sequence_factor times
    # their ring-model time fitted on collectives timed alone (ops without one: the median factor).
    op_compute_rate: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    op_mem_bandwidth: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    op_compute_overhead: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    op_sequence_factor: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    world_sizes: tuple[int, ...] = ()  # measured only: the P values the calibration was fitted on

    @property
    def flops(self) -> float:
        """Nominal effective compute rate [FLOP/s] (the stated model's F)."""
        if self.op_flops:
            return float(statistics.median(self.op_flops.values()))
        return self.peak_flops * self.compute_efficiency

    def flops_for(self, op: str) -> float:
        """Effective compute rate for one op: its measured rate, else the median over measured ops, else F."""
        return float(self.op_flops.get(op, self.flops))

    def compute_time(self, op: str, flops: float, traffic_bytes: float) -> float:
        """Compute time of ``op`` [s]: the calibration's per-op model (per-call overhead + FLOPs at its compute
        rate + traffic at its memory bandwidth) where it fitted one, else FLOPs / F."""
        if op in self.op_compute_rate:
            inf = float("inf")
            rate, bw = self.op_compute_rate[op], self.op_mem_bandwidth.get(op, inf)
            return (
                self.op_compute_overhead.get(op, 0.0)
                + (flops / rate if rate < inf else 0.0)
                + (traffic_bytes / bw if bw < inf else 0.0)
            )
        return flops / self.flops_for(op)

    def sequence_factor_for(self, op: str) -> float:
        """Multiple of the ring-model time an op's collectives take back to back: 1 for presets."""
        if not self.op_sequence_factor:
            return 1.0
        return float(self.op_sequence_factor.get(op, statistics.median(self.op_sequence_factor.values())))

    def link(self, collective: str, level: str) -> tuple[float, float]:
        """(α [s], effective β [B/s]) for one collective at 'intra' or 'inter' node level."""
        if collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {collective!r}; expected one of {COLLECTIVES}")
        if self.collective_beta:
            return float(self.collective_alpha.get(collective, 0.0)), float(self.collective_beta[collective])
        if level == "intra":
            return self.alpha_intra, self.beta_intra * self.comm_efficiency
        if level == "inter":
            return self.alpha_inter, self.beta_inter * self.comm_efficiency
        raise ValueError(f"level must be 'intra' or 'inter', got {level!r}")

    def beta_for(self, P: int, collective: str = "all_gather") -> float:
        """The stated model's β for a group of P devices: intra-node if they fit one node, else inter-node."""
        return self.link(collective, "intra" if self.devices_per_node >= P else "inter")[1]

    def with_devices_per_node(self, g: int) -> Hardware:
        return dataclasses.replace(self, devices_per_node=int(g))


_NO_ASSUMPTIONS = "none: the paper's F and β are already effective values; α = 0 as in its formulas"
_VENDOR_ASSUMPTIONS = (
    "compute_efficiency 0.6 (dense-GEMM fraction of peak typical of large transformer layers), "
    "comm_efficiency 0.8 (collective bus bandwidth vs link peak), alpha_intra 1e-5 s, alpha_inter 2e-5 s "
    "(order of magnitude of NCCL/RCCL small-message latency): assumptions, not measurements"
)


def _paper(name: str, devices_per_node: int, description: str) -> Hardware:
    return Hardware(
        name=name,
        description=description,
        peak_flops=PAPER_F,
        compute_efficiency=1.0,
        beta_intra=PAPER_BETA_INTRA,
        beta_inter=PAPER_BETA_INTER,
        comm_efficiency=1.0,
        alpha_intra=0.0,
        alpha_inter=0.0,
        devices_per_node=devices_per_node,
        memory_bytes=None,
        source="the seed paper §6.1 and §8.1: F = 3e14 FLOP/s (FP16 effective), β = 3e11 B/s inside a node, "
        "2.5e10 B/s between nodes (its 'order-of-magnitude approximations of public specs')",
        assumptions=_NO_ASSUMPTIONS,
    )


PAPER_INTRA = _paper(
    "paper-intra",
    8,
    "the paper's parameters, 8 devices per node: a TP group of ≤ 8 stays on the 3e11 B/s link",
)
PAPER_INTER = _paper(
    "paper-inter",
    1,
    "the paper's parameters with one device per node: every collective crosses the 2.5e10 B/s inter-node link",
)

A100 = Hardware(
    name="a100-nvlink-ib",
    description="NVIDIA A100 SXM4 80 GB, NVLink 3 + NVSwitch in an 8-GPU node, one HDR 200 Gb/s InfiniBand port per GPU",
    peak_flops=312e12,
    compute_efficiency=0.6,
    beta_intra=300e9,
    beta_inter=25e9,
    comm_efficiency=0.8,
    alpha_intra=1e-5,
    alpha_inter=2e-5,
    devices_per_node=8,
    memory_bytes=80e9,
    source="NVIDIA A100 Tensor Core GPU datasheet: BF16 dense 312 TFLOPS, NVLink 600 GB/s bidirectional "
    "(300 GB/s per direction), 80 GB HBM2e; NVIDIA DGX A100 user guide: 8 × ConnectX-6 HDR 200 Gb/s (25 GB/s) "
    "compute ports, one per GPU",
    assumptions=_VENDOR_ASSUMPTIONS,
)
# The A100 preset's efficiencies, latencies, 8-GPU node and 80 GB: only compute, links and source differ.
H100 = dataclasses.replace(
    A100,
    name="h100-nvlink-ib",
    description="NVIDIA H100 SXM5 80 GB, NVLink 4 + NVSwitch in an 8-GPU node, one NDR 400 Gb/s InfiniBand port per GPU",
    peak_flops=989e12,
    beta_intra=450e9,
    beta_inter=50e9,
    source="NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 1,979 TFLOPS with sparsity = 989 dense, NVLink "
    "900 GB/s bidirectional (450 per direction), 80 GB HBM3; NVIDIA DGX H100 user guide: 8 × ConnectX-7 "
    "NDR 400 Gb/s (50 GB/s) compute ports, one per GPU",
)
# Same GH100 compute, NVLink 4 and NDR ports as the H100: only the memory and its source differ.
H200 = dataclasses.replace(
    H100,
    name="h200-nvlink-ib",
    description="NVIDIA H200 SXM 141 GB, NVLink 4 + NVSwitch in an 8-GPU node, one NDR 400 Gb/s InfiniBand port per GPU",
    memory_bytes=141e9,
    source="NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1,979 TFLOPS with sparsity = 989 dense (same GH100 "
    "compute as H100), NVLink 900 GB/s bidirectional (450 per direction), 141 GB HBM3e; DGX H200: 8 × "
    "ConnectX-7 NDR 400 Gb/s ports, one per GPU",
)
# The A100 preset's assumed efficiencies and latencies and its 8 devices per node (8 GCDs on Frontier).
MI250X = dataclasses.replace(
    A100,
    name="mi250x-frontier",
    description="one GCD of an AMD MI250X on OLCF Frontier: 8 GCDs per node, Infinity Fabric inside the node, "
    "4 × Slingshot-11 NICs per node",
    peak_flops=191.5e12,
    beta_intra=50e9,
    beta_inter=12.5e9,
    memory_bytes=64e9,
    source="AMD Instinct MI250X datasheet: 383 TFLOPS peak FP16/BF16 matrix per OAM (2 GCDs) = 191.5 per GCD; "
    "OLCF Frontier user guide: 64 GB HBM2E per GCD, 8 GCDs per node, GCD pairs on one MI250X linked at 200 GB/s, "
    "GCDs on different MI250X at 50-100 GB/s (β_intra = 50 GB/s, the slowest hop of an 8-GCD ring), four "
    "HPE Slingshot 200 Gb/s (25 GB/s) NICs per node = 12.5 GB/s per GCD",
)

PRESETS: dict[str, Hardware] = {hw.name: hw for hw in (PAPER_INTRA, PAPER_INTER, A100, H100, H200, MI250X)}


def preset_names() -> list[str]:
    return list(PRESETS)


def get_hardware(name: str | Hardware) -> Hardware:
    """A preset by name, or ``measured:PATH`` (a calibration netCDF, :data:`hsitp.contracts.CALIBRATION`)."""
    if isinstance(name, Hardware):
        return name
    if name.startswith(MEASURED_PREFIX):
        return hardware_from_calibration(Path(name[len(MEASURED_PREFIX) :]))
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownHardwareError(
            f"unknown hardware {name!r}; valid presets: {', '.join(PRESETS)}, or measured:PATH "
            "(a calibration file such as results/paper/bench/calibration.nc)"
        ) from None


def hardware_from_calibration(path: str | Path) -> Hardware:
    """``measured:PATH`` hardware: α, β per collective and F per op from the file; one bandwidth level.

    The fit covers only the world sizes it was measured on (all inside one machine), so the same α, β serve
    inside and across nodes, and ``devices_per_node`` is the largest measured world size.
    """
    from hsitp.contracts import CALIBRATION, COMPUTE_MODEL_VARS

    ds = CALIBRATION.read(path)  # one line naming the file (and `hsitp bench calibrate`) when it cannot serve
    colls = [str(c) for c in ds["collective"].values]
    alpha = {c: float(ds["alpha"].sel(collective=c)) for c in colls}
    beta = {c: float(ds["beta"].sel(collective=c)) for c in colls}
    # Collectives absent from the file borrow the fitted all_gather, else the first one fitted.
    fallback = "all_gather" if "all_gather" in beta else colls[0]
    for c in COLLECTIVES:
        alpha.setdefault(c, alpha[fallback])
        beta.setdefault(c, beta[fallback])
    op_flops = {str(o): float(ds["achieved_flops"].sel(op=o)) for o in ds["op"].values}
    model = {
        v: MappingProxyType({str(o): float(ds[v].sel(op=o)) for o in ds["op"].values}) if v in ds else None
        for v in COMPUTE_MODEL_VARS
    }
    empty = MappingProxyType({})
    sizes = json.loads(ds.attrs["world_sizes"])
    median_f = float(np.median(list(op_flops.values())))
    return Hardware(
        name=f"{MEASURED_PREFIX}{path}",
        description=f"measured: {ds.attrs['device']} ({ds.attrs['backend']}, {ds.attrs['dtype']})",
        peak_flops=median_f,
        compute_efficiency=1.0,
        beta_intra=beta[fallback],
        beta_inter=beta[fallback],
        comm_efficiency=1.0,
        alpha_intra=alpha[fallback],
        alpha_inter=alpha[fallback],
        devices_per_node=max(sizes),
        memory_bytes=None,
        source=f"calibration file {path} (world sizes {sizes})",
        assumptions="one bandwidth level: the fit covers world sizes " + str(sizes),
        measured=True,
        op_flops=MappingProxyType(op_flops),
        collective_alpha=MappingProxyType(alpha),
        collective_beta=MappingProxyType(beta),
        op_compute_rate=model["compute_rate"] or empty,
        op_mem_bandwidth=model["mem_bandwidth"] or empty,
        op_compute_overhead=model["compute_overhead"] or empty,
        op_sequence_factor=model["sequence_factor"] or empty,
        world_sizes=tuple(int(p) for p in sizes),
    )

"""The alpha-beta model of data parallel's communication, framework-free: fit it
to all-reduces measured on a link, and predict a data-parallel step's time and weak-scaling
efficiency at N devices on a stated interconnect. A model, stated as one: its inputs that do
not come from a measurement of this run are assumptions (INTERCONNECT, and the workload's
batch and utilisation), marked as such wherever they are shown.

All-reduce of S bytes over N devices with a per-message latency alpha (s) and a per-byte
time beta = 1 / bandwidth (the Hockney model; Thakur, Rabenseifner & Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 2005):

    ring   2(N-1) alpha + 2(N-1)/N S beta       reduce-scatter then all-gather around a ring
                                                 (the bandwidth-optimal algorithm; Horovod,
                                                 Sergeev & Del Balso 2018; NCCL's default for
                                                 large messages)
    tree   2 ceil(log2 N) alpha + 2 S beta       a pipelined reduce up and broadcast down a
                                                 (double) binary tree: latency in log N, the
                                                 ring's bandwidth term at large N (Sanders,
                                                 Speck & Traeff, Parallel Computing 2009; NCCL
                                                 2.4's double binary trees)

A data-parallel train step on N devices (weak scaling: each device keeps its batch):

    t(N) = t_compute + max(0, c t_latency + t_bandwidth - o t_backward)

with t_compute the step's FLOPs at the device's peak times an assumed utilisation (MFU),
t_backward = 2/3 of it (the backward pass is two of the three matmul passes), c the
all-reduces per step (their latency terms add; their bytes add up to the gradients' S), and
o in [0, 1] the share of the backward that communication can hide under (0: the all-reduce
starts after the gradients are complete; 1: it runs entirely under the backward, as DDP's
bucketed all-reduce can). The efficiency is t(1) / t(N) = t_compute / t(N). Up to one node
(GPUS_PER_NODE devices) the ring runs over NVLink; beyond it every ring and tree crosses the
nodes' network, which bounds it (a flat algorithm over the slowest link; NCCL's hierarchical
forms are not modelled).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from workloads.base import FwbenchError


@dataclass(frozen=True)
class Link:
    """A link's latency per message (s) and bandwidth per direction (bytes/s), with where each
    figure comes from."""
    alpha_s: float
    bandwidth: float
    alpha_source: str
    bandwidth_source: str

    @property
    def beta(self) -> float:
        return 1.0 / self.bandwidth


@dataclass(frozen=True)
class Interconnect:
    """A named GPU and its links: what the model's predictions assume."""
    name: str
    gpu: str
    peak_flops: float                # dense bf16 FLOP/s per GPU
    peak_source: str
    mfu: float                       # model FLOPs utilisation assumed for the step's compute
    mfu_source: str
    gpus_per_node: int
    intra: Link                      # within a node
    inter: Link                      # between nodes: one NIC per GPU

    def link(self, n: int) -> Link:
        return self.intra if n <= self.gpus_per_node else self.inter


# Vendor figures are cited; the latencies and the utilisation are assumptions (no vendor
# publishes an all-reduce latency per step), stated as such wherever the model is shown.
INTERCONNECT = Interconnect(
    name="DGX H100: 8 H100 SXM5 per node, NVLink 4 inside a node, one 400 Gb/s InfiniBand NDR port per GPU "
         "between nodes",
    gpu="NVIDIA H100 SXM5 80 GB",
    peak_flops=989e12, peak_source="NVIDIA H100 datasheet: 989 TFLOP/s dense BF16 Tensor Core (1,979 with sparsity)",
    mfu=0.40, mfu_source="assumption: 40% model FLOPs utilisation (Megatron-LM reports 47% to 42% MFU from 96 to "
                         "4,608 H100 for GPT models: the scale-out section's cited anchors)",
    gpus_per_node=8,
    intra=Link(alpha_s=3e-6, bandwidth=450e9,
               alpha_source="assumption: 3 us per message (the order of NCCL's small-message latency on NVLink; no "
                            "vendor figure)",
               bandwidth_source="NVIDIA: NVLink 4 gives an H100 SXM5 900 GB/s, bidirectional: 450 GB/s per direction"),
    inter=Link(alpha_s=8e-6, bandwidth=50e9,
               alpha_source="assumption: 8 us per message between nodes (the order of NCCL's small-message latency "
                            "over InfiniBand; no vendor figure)",
               bandwidth_source="NVIDIA DGX H100: 8 ConnectX-7 ports of 400 Gb/s InfiniBand NDR, one per GPU: 50 GB/s "
                                "per direction"))

# What the predicted GPT step does per device (assumptions, stated with the predictions).
SEQUENCES, TOKENS = 8, 1024          # sequences of TOKENS tokens per device and step
GRAD_BYTES = 4                       # bytes per gradient element all-reduced: fp32, as fwbench's models reduce them
WORKLOAD_NOTE = (f"{SEQUENCES} sequences of {TOKENS} tokens per device and step (weak scaling), fp32 gradients "
                 f"all-reduced ({GRAD_BYTES} bytes per parameter), compute at the GPU's dense bf16 peak times the MFU")
DEVICES = tuple(2 ** k for k in range(3, 13))          # 8 ... 4096


def gpt_sizes() -> dict[str, object]:
    """The GPT-2 sizes the model predicts for: GPT-2 124M (its GPTConfig defaults) and GPT-2
    1.5B (48 layers of 1,600, 25 heads), as workloads.gpt configurations."""
    from workloads.gpt import GPTConfig
    return {"GPT-2 124M": GPTConfig(), "GPT-2 1.5B": GPTConfig(n_layer=48, n_head=25, n_embd=1600)}


def gpt_step(config: object) -> tuple[int, float]:
    """(parameters, training FLOPs per device and step) of a GPT configuration at the
    model's batch (SEQUENCES x TOKENS), from workloads.gpt (its parameter shapes and its
    PaLM/nanoGPT FLOP formula)."""
    from workloads import gpt
    params = sum(int(np.prod(s)) for s in gpt.param_shapes(config).values())
    return params, gpt.flops_per_token(config, TOKENS, training=True) * SEQUENCES * TOKENS


def ring_s(nbytes: float, n: int, link: Link) -> float:
    """A ring all-reduce's seconds: 2(n-1) alpha + 2(n-1)/n S beta (0 on one device)."""
    return 0.0 if n <= 1 else 2 * (n - 1) * link.alpha_s + 2 * (n - 1) / n * nbytes * link.beta


def tree_s(nbytes: float, n: int, link: Link) -> float:
    """A pipelined (double) binary tree all-reduce's seconds: 2 ceil(log2 n) alpha + 2 S beta."""
    return 0.0 if n <= 1 else 2 * math.ceil(math.log2(n)) * link.alpha_s + 2 * nbytes * link.beta


ALGORITHMS = {"ring": ring_s, "tree": tree_s}


def allreduce_parts(nbytes: float, n: int, link: Link, algorithm: str) -> tuple[float, float]:
    """(latency term, bandwidth term) of one all-reduce, seconds."""
    fn = ALGORITHMS[algorithm]
    whole = fn(nbytes, n, link)
    latency = fn(0.0, n, link)
    return latency, whole - latency


@dataclass(frozen=True)
class Prediction:
    n: int
    compute_s: float
    comm_s: float          # the all-reduces of one step, none hidden
    step_s: float
    efficiency: float


def predict_step(params: int, flops: float, n: int, algorithm: str, collectives: int = 1, overlap: float = 0.0,
                 net: Interconnect = INTERCONNECT, nbytes: float | None = None) -> Prediction:
    """The model's step on n devices (the module's docstring): compute, its all-reduces
    (`collectives` per step sharing `nbytes`, by default the gradients' params x
    GRAD_BYTES), what of them the backward hides (`overlap`), the step and its weak-scaling
    efficiency."""
    if not 0.0 <= overlap <= 1.0 or collectives < 1 or n < 1:
        raise FwbenchError(f"the model needs n >= 1, collectives >= 1 and overlap in [0, 1], got n={n}, "
                           f"collectives={collectives}, overlap={overlap}")
    compute = flops / (net.peak_flops * net.mfu)
    latency, bandwidth = allreduce_parts(params * GRAD_BYTES if nbytes is None else nbytes, n, net.link(n), algorithm)
    comm = collectives * latency + bandwidth
    step = compute + max(0.0, comm - overlap * compute * 2 / 3)
    return Prediction(n, compute, comm, step, compute / step)


@dataclass(frozen=True)
class Fit:
    """alpha and beta fitted to all-reduces measured over n devices (ring form)."""
    alpha_s: float
    beta: float                 # seconds per byte
    n: int
    points: int
    max_rel_residual: float     # the worst |model - measured| / measured over the points

    @property
    def bandwidth(self) -> float:
        return math.inf if self.beta == 0 else 1.0 / self.beta


def fit(points: Iterable[tuple[float, float]], n: int) -> Fit:
    """alpha and beta of the ring form t = 2(n-1) alpha + 2(n-1)/n S beta from measured
    (bytes, seconds) all-reduces over n >= 2 devices: the line t = a + b S by least squares
    on relative error (each point weighted 1/t: the sizes span orders of magnitude), a and b
    kept non-negative (one set to 0 and the other refitted where the line would need a
    negative one), then alpha = a / (2(n-1)), beta = b n / (2(n-1))."""
    pts = [(float(s), float(t)) for s, t in points if t > 0]
    if n < 2 or len(pts) < 2 or len({s for s, _ in pts}) < 2:
        raise FwbenchError(f"an alpha-beta fit needs all-reduces over 2 devices or more at 2 sizes or more, got "
                           f"{len(pts)} point(s) over {n} device(s)")
    S = np.array([s for s, _ in pts])
    T = np.array([t for _, t in pts])
    w = 1.0 / T
    a, b = np.linalg.lstsq(np.stack([w, S * w], axis=1), np.ones_like(T), rcond=None)[0]
    if a < 0:
        a, b = 0.0, float(np.sum(S * w) / np.sum((S * w) ** 2))      # min sum((b S - t) / t)^2
    if b < 0:
        a, b = float(np.sum(w) / np.sum(w * w)), 0.0
    model = a + b * S
    k = 2 * (n - 1)
    return Fit(alpha_s=float(a) / k, beta=float(b) * n / k, n=n, points=len(pts),
               max_rel_residual=float(np.max(np.abs(model - T) / T)))


def curve(params: int, flops: float, algorithm: str, collectives: int = 1, overlap: float = 0.0,
          devices: Sequence[int] = DEVICES, net: Interconnect = INTERCONNECT,
          nbytes: float | None = None) -> list[Prediction]:
    return [predict_step(params, flops, n, algorithm, collectives, overlap, net, nbytes) for n in devices]


# DDP's buckets (torch.nn.parallel.DistributedDataParallel: bucket_cap_mb=25, and a first
# bucket of 1 MiB, its documented defaults): the all-reduces of one step for a model of G bytes.
DDP_BUCKET, DDP_FIRST_BUCKET = 25 * 2 ** 20, 2 ** 20


def ddp_buckets(nbytes: float) -> int:
    return 1 + max(0, math.ceil((nbytes - DDP_FIRST_BUCKET) / DDP_BUCKET))

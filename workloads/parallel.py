"""Data-parallel placements, framework-free: which tasks run over N devices, how
a global batch is split, what the gradient all-reduce must move, and the check that a
data-parallel step equals the one-device step before its numbers count.

Weak scaling: a case on N devices keeps the preset's batch per device, so its global batch is
N x the preset's (records: n_devices, global_batch, device_batch). Every framework's
frameworks/<fw>/parallel.py wraps a model its `build` made into a model whose train_step runs
on the placement's devices and that adds:

    place_inputs(*arrays) -> arrays   the global batch as the step takes it (sharded or split
                                      across the devices), outside any timed region
    collectives(*inputs) -> dict      what the framework says one step communicates:
                                      {op: {"count": n, "bytes": b}}, plus "source", or
                                      {"source": None, "reason": why not observable}
    pinning: str                      how the devices' threads are placed on CPUs
    grads(*inputs) -> dict            device 0's gradients of the placed global batch after the
                                      step's reduction, before clipping (the check compares them
                                      with one device's)
    device_state() -> (bytes, how)    parameters and optimizer state device 0 holds between steps
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import numpy as np

from workloads.base import FwbenchError, Unsupported

# Tasks that have a data-parallel form: one optimizer step over a batch split across devices.
PARALLEL_TASKS = ("train_step",)
# Strategies a data-parallel train step has beyond the default (parameters replicated on every
# device, gradients all-reduced). Each framework's parallel.py builds them or raises
# Unsupported with the reason.
SHARDED = "sharded"
NO_SYNC = "no-sync"
PARALLEL_STRATEGIES = {
    SHARDED: "parameters, gradients and optimizer state sharded over the devices and gathered where used "
             "(ZeRO-3 / FSDP: torch FSDP2 fully_shard; JAX parameters placed on the mesh's data axis); "
             "communication: all-gather of the parameters in the forward and again in the backward, "
             "reduce-scatter of the gradients",
    NO_SYNC: "the data-parallel step with its gradient synchronisation left out (torch DDP no_sync; JAX the "
             "per-device step under shard_map without the reduction; TensorFlow the step without its "
             "all-reduce, what Keras's skip_gradients_aggregation does for a Keras optimizer): not a training "
             "step, timed only for the exposed-communication share 1 - t(no-sync) / t(data parallel) of the "
             "same process",
}


def parallel_strategies(framework: str, mode: str, task: str) -> tuple[str, ...]:
    """The data-parallel strategies declared on N > 1 devices after the workload's own, with
    --variants default too: they are the scale-out axis itself (the sharded form beside data
    parallel, and the no-sync probe that measures the default step's communication), not
    recipe variants of one framework."""
    return (SHARDED, NO_SYNC) if task in PARALLEL_TASKS else ()


def one_device_strategy(strategy: str | None) -> str | None:
    """The strategy of a data-parallel case's one-device twin: the default for the
    data-parallel strategies (a one-device model has nothing to shard or synchronise)."""
    return None if strategy in PARALLEL_STRATEGIES else strategy


# AdamW steps compared against the one-device run before a data-parallel case's numbers count.
CHECK_STEPS = 3
# Largest |difference| between the data-parallel and the one-device parameters after
# CHECK_STEPS steps, relative to the largest |parameter|, per workload: about 10x the worst
# error measured at N = 2 and 4 over every framework and mode (docs/measurements/
# dp-equivalence.txt: gpt 3.6e-6, diffusion 3.7e-5, both torch's). The DDPM's is ten times
# the GPT's: its first gradients outside the zero-initialised output layer are rounding
# noise, which AdamW scales up to a full step whatever its sign.
CHECK_RTOL = {"gpt": 4e-5, "diffusion": 4e-4}

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_BYTES = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2, "s64": 8, "u64": 8, "s32": 4, "u32": 4,
          "s16": 2, "u16": 2, "s8": 1, "u8": 1, "pred": 1}
_OP = re.compile(r"=\s*(\([^=]*?\)|[a-z0-9]+\[[0-9,]*\](?:\{[^}]*\})?)\s+(" + "|".join(COLLECTIVES)
                 + r")(-start)?\(")
_SHAPE = re.compile(r"\b(" + "|".join(_BYTES) + r")\[([0-9,]*)\]")


def device_counts(text: str | int) -> tuple[int, ...]:
    """--devices "1,2" -> (1, 2); FwbenchError saying what is valid otherwise."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        counts = tuple(dict.fromkeys(int(p) for p in parts))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise FwbenchError(f"--devices takes a comma list of device counts of at least 1 (e.g. 1,2), got {text!r}")
    return counts


def take_devices(who: str, devices: list[Any], placement: Any) -> list[Any]:
    """The first placement.devices of the devices a framework lists, or Unsupported saying
    how many it sees (and, on a CPU, how to get simulated ones)."""
    n = placement.devices
    if len(devices) < n:
        how = (" (simulated CPU devices are made before the framework starts: run the process with "
               "--devices N --simulated-devices)" if placement.kind == "cpu" else "")
        raise Unsupported(f"{who} sees {len(devices)} {placement.kind} device(s); this placement needs {n}{how}")
    return devices[:n]


# Mutations of the data-parallel step (tests/test_scaleout.py: the check must fail with each),
# named by FWBENCH_DP_MUTATION in the process that builds the model (and inherited by its
# workers): never set by the harness.
MUTATIONS = {"sum": "the gradients summed over the devices instead of averaged (torch: a DDP communication hook "
                    "without the division, FSDP2's reduce-scatter input times N; TensorFlow: "
                    "ReplicaContext.all_reduce(SUM); JAX: the gradients' psum under shard_map)",
             "shard": "every device given device 0's rows of the global batch (workloads.parallel.shard)",
             "skip": "the last device joins the gradient all-reduce but keeps its own rows' gradients (a rank that "
                     "skips the reduction: device 0's gradients stay right, so only a check of every device sees "
                     "it; torch: its DDP hook returns the bucket as it was; TensorFlow and JAX: the reduced value "
                     "replaced on the last replica)"}


def mutation() -> str | None:
    """The mutation FWBENCH_DP_MUTATION names (MUTATIONS), None when unset."""
    m = os.environ.get("FWBENCH_DP_MUTATION") or None
    if m is not None and m not in MUTATIONS:
        raise FwbenchError(f"FWBENCH_DP_MUTATION must be one of {', '.join(MUTATIONS)}, got {m!r}")
    return m


def shard(array: np.ndarray, n: int, i: int) -> np.ndarray:
    """Device i's rows of a global batch split in n equal parts on its first axis (device 0's
    under the "shard" mutation)."""
    rows = array.shape[0]
    if rows % n:
        raise ValueError(f"a global batch of {rows} rows does not split into {n} equal parts")
    k = rows // n
    i = 0 if mutation() == "shard" else i
    return array[i * k:(i + 1) * k]


def placed_rows(array: np.ndarray, n: int) -> np.ndarray:
    """The global batch as the devices' shards make it up, in device order: the batch itself,
    or device 0's rows n times under the "shard" mutation (for a framework that places a
    global array on its mesh itself)."""
    return np.concatenate([shard(np.asarray(array), n, i) for i in range(n)]) if mutation() else array


def gradient_bytes(params: Mapping[str, np.ndarray]) -> int:
    """What one data-parallel step's gradient all-reduce must move per device: every
    parameter's gradient once, in the parameters' dtype (fp32 in both precisions here)."""
    return int(sum(np.asarray(p).nbytes for p in params.values()))


# Bytes each device sends (and receives) for a collective over n devices, per byte of the
# collective's full tensor, on a ring (the bandwidth-optimal algorithm NCCL and gloo use for
# large buffers): an all-reduce is a reduce-scatter then an all-gather.
RING_FACTOR = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-gather": lambda n: (n - 1) / n,
               "reduce-scatter": lambda n: (n - 1) / n}


def wire_bytes(ops: Mapping[str, Mapping[str, int]], n: int) -> float | None:
    """What one step's collectives move per device on a ring, from their full-tensor bytes
    ({op: {"count", "bytes"}}, as parallel.py's collectives() give them: an all-gather's
    output, a reduce-scatter's input); None when an op has no ring model here."""
    if not ops or any(op not in RING_FACTOR for op in ops):
        return None
    return sum(RING_FACTOR[op](n) * v["bytes"] for op, v in ops.items())


def analytic_wire_bytes(params: Mapping[str, np.ndarray], n: int, strategy: str | None) -> float | None:
    """What a strategy must move per device and step on a ring: data parallel all-reduces
    every gradient once, 2(n-1)/n x G; the sharded form all-gathers the parameters in the
    forward and again in the backward and reduce-scatters the gradients, 3(n-1)/n x G, 1.5x
    data parallel; the no-sync probe moves nothing by design (None)."""
    g = gradient_bytes(params)
    if strategy == NO_SYNC:
        return None
    if strategy == SHARDED:
        return 2 * RING_FACTOR["all-gather"](n) * g + RING_FACTOR["reduce-scatter"](n) * g
    return RING_FACTOR["all-reduce"](n) * g


def hlo_collective_ops(text: str) -> list[tuple[str, list[int]]]:
    """Every collective op of a compiled XLA program's HLO text, in program order (an async
    pair once, at its -start): (op, the bytes of each of its results: a variadic all-reduce
    has one per operand)."""
    text = re.sub(r"/\*.*?\*/", "", text)          # /*index=5*/ markers inside long tuples
    return [(m.group(2), [_BYTES[d] * math.prod(int(x) for x in dims.split(",") if x)
                          for d, dims in _SHAPE.findall(m.group(1))]) for m in _OP.finditer(text)]


def hlo_collectives(text: str) -> dict[str, dict[str, int]]:
    """{op: {"count", "bytes"}} of the collectives in a compiled XLA program's HLO text (an
    async pair counts once, at its -start); bytes are the op's result shapes."""
    out: dict[str, dict[str, int]] = {}
    for op, sizes in hlo_collective_ops(text):
        entry = out.setdefault(op, {"count": 0, "bytes": 0})
        entry["count"] += 1
        entry["bytes"] += sum(sizes)
    return out


def max_rel_diff(reference: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> float:
    """max |got - reference| over every parameter, over max |reference|. Not the equivalence
    tests' per-tensor update error: the DDPM's zero-initialised output convolution leaves
    the other layers' first gradients at rounding noise, whose sign AdamW turns into a full
    step either way (measured: per-tensor update errors of 2 on the same data), so only a
    scale of the whole model is meaningful for parameters after AdamW steps."""
    scale = max(float(np.max(np.abs(r))) for r in reference.values()) or 1.0
    return max(float(np.max(np.abs(np.asarray(got[k], np.float64) - np.asarray(r, np.float64))))
               for k, r in reference.items()) / scale


# Largest |difference| between the data-parallel step's reduced gradients (before clipping)
# on the first global batch and the one-device gradients on it, relative to the largest
# |one-device gradient|, per workload: about 10x the worst error measured at N = 2 and 4 over
# every framework and strategy (docs/measurements/dp-equivalence.txt: gpt 5.7e-7, torch
# compiled; diffusion 8.3e-7, torch eager). A sum instead of a mean
# over N devices is off by N - 1 (1.0 at N = 2), a wrong shard by O(1): the parameters after
# CHECK_STEPS steps miss the first (clipping to 1.0 and Adam remove a gradient's scale).
GRAD_RTOL = {"gpt": 1e-5, "diffusion": 1e-5}


def host(tree: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A dict of any framework's arrays as numpy (torch tensors detached to the CPU)."""
    from workloads.base import host_values
    return {k: host_values(v) for k, v in tree.items()}


class Equivalence(NamedTuple):
    grad_rel: float      # max_rel_diff of the first step's reduced gradients against one device's
    rel: float           # max_rel_diff of the parameters after `steps` steps


def check(single: Any, parallel: Any, batches: Iterable[tuple[Any, ...]],
          place: Callable[..., tuple[Any, ...]], steps: int = CHECK_STEPS) -> Equivalence:
    """Compare a one-device model and its data-parallel form (both made from the same
    parameters) on the same global batches (the parallel model's through `place`): the
    data-parallel step's reduced gradients (parallel.grads, before clipping) on the first
    batch against the one-device gradients (single.grads), then the parameters after `steps`
    train steps of both. Callers compare them with GRAD_RTOL and CHECK_RTOL[workload]
    (failure)."""
    batches = list(batches)
    placed = [place(*b) for b in batches]
    grad_rel = max_rel_diff(host(single.grads(*batches[0])), host(parallel.grads(*placed[0])))
    for i in range(steps):
        single.train_step(*batches[i % len(batches)])
        parallel.train_step(*placed[i % len(placed)])
    return Equivalence(grad_rel, max_rel_diff(single.export_params(), parallel.export_params()))


def failure(workload: str, n: int, eq: Equivalence) -> str | None:
    """Why a data-parallel step is not the one-device step (None when it is): its reduced
    gradients past GRAD_RTOL, or its parameters after CHECK_STEPS steps past CHECK_RTOL."""
    if not eq.grad_rel <= GRAD_RTOL[workload]:
        return (f"data parallel on {n} devices reduces the gradients wrong: the first step's gradients differ from "
                f"one device's by max |diff| / max |grad| {eq.grad_rel:.2g} > {GRAD_RTOL[workload]:g}")
    if not eq.rel <= CHECK_RTOL[workload]:
        return (f"data parallel on {n} devices differs from one device after {CHECK_STEPS} AdamW steps: "
                f"max |diff| / max |param| {eq.rel:.2g} > {CHECK_RTOL[workload]:g}")
    return None

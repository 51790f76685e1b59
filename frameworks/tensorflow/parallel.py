"""TensorFlow data parallel: tf.distribute.MirroredStrategy over the
placement's devices, in the custom-training-loop form of TensorFlow's "Custom training with
tf.distribute.Strategy" guide, with the update path Keras's optimizer.apply_gradients takes
under MirroredStrategy.

The model is the framework's own one-device build, made inside the strategy's scope, so its
tf.Variables (parameters and AdamW moments and step) are MirroredVariables, one copy per
device, with their default aggregation (none). Each replica computes the gradients of its
rows; ReplicaContext.all_reduce(MEAN) averages them across replicas, one batched call
(MirroredStrategy's cross-device ops pack the list into one all-reduce); then
strategy.extended.update runs the workload's AdamW (frameworks/tensorflow/optim.py) once
per device on that device's copies (its update context: every read and assignment is the
local copy; no variable write is aggregated or broadcast across devices), as Keras's
optimizer does per variable. With ONLY_FIRST_REPLICA variables (an earlier setting) each of
the ~100 assignments of an AdamW step was a cross-replica sync plus a copy of replica 0's
value to the other devices, none of it counted.

Simulated CPU devices are logical devices made before TensorFlow's runtime starts
(frameworks.base.prepare_placement; the adapter applies them); on CPUs MirroredStrategy
picks CollectiveAllReduce (NCCL needs GPUs), and the logical devices share the process's
intra-op thread pool (not pinned per device). collectives() counts the collective ops in the
traced step's graph (what TensorFlow runs, not what the code asks for).

Strategies (workloads.parallel.PARALLEL_DISTRIBUTIONS): "no-sync" is the same step without the
ReplicaContext.all_reduce (each replica's AdamW gets its own rows' gradients and updates its
own copies). The step's optimizer is fwbench's AdamWUpdate, not a Keras optimizer, so
Keras's skip_gradients_aggregation does not apply: leaving out the step's own all_reduce is
the same thing. "sharded" is Unsupported (SHARDED_REFUSED).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from workloads.base import Model, Unsupported, is_accelerator
from workloads.case import Case, Placement
from workloads.parallel import NO_SYNC, SHARDED, mutation, one_device_strategy, shard, take_devices

# Both forms of XLA under MirroredStrategy were tried on simulated CPU devices (TF 2.21): a
# jit_compile=True function around strategy.run, and jit_compile=True on each replica's step.
XLA_REFUSED = ("XLA under MirroredStrategy: tf.function(jit_compile=True), around strategy.run or around each "
               "replica's step, places replica 1's program on CPU:0 and then cannot reach its variables "
               "(InvalidArgumentError: Trying to access resource .../replica_1 located in device CPU:1 from "
               "CPU:0; tensorflow.org/xla/known_issues); graph mode is TensorFlow's data-parallel path here")


SHARDED_REFUSED = ("TensorFlow's parameter sharding is DTensor (tf.experimental.dtensor: layouts sharding "
                   "variables over a mesh), which fwbench does not build; MirroredStrategy, its data-parallel "
                   "path here, replicates every variable on every device")


def distribution_devices(case: Case) -> list[str]:
    kind = "GPU" if is_accelerator(case.placement.kind) else "CPU"
    return take_devices("TensorFlow", [d.name for d in tf.config.list_logical_devices(kind)], case.placement)


_DISTRIBUTIONS: dict[tuple[str, ...], Any] = {}


def distribution(case: Case) -> Any:
    """The process's tf.distribute.MirroredStrategy over the case's devices (named a
    distribution here: a case's `strategy` is fwbench's, workloads.parallel), made once: a second one in the
    same process reuses the first one's collective instance keys and its all-reduce aborts
    ("Shape mismatch in the collective instance 100"); a placement is fixed per process anyway."""
    devs = tuple(distribution_devices(case))
    if devs not in _DISTRIBUTIONS:
        _DISTRIBUTIONS[devs] = tf.distribute.MirroredStrategy(devices=list(devs))
    return _DISTRIBUTIONS[devs]


class DataParallel(Model):
    """A TensorFlow model (frameworks/tensorflow/<workload>.py) whose train_step runs under
    MirroredStrategy on the case's devices."""

    pinning = "one process; the logical devices share its intra-op thread pool (not pinned per device)"

    def __init__(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case,
                 strategy: Any = None) -> None:
        if case.mode == "compiled":
            raise Unsupported(XLA_REFUSED)
        if case.strategy == SHARDED:
            raise Unsupported(SHARDED_REFUSED)
        self.sync = case.strategy != NO_SYNC
        # `strategy`: a tf.distribute strategy made by the caller (frameworks/tensorflow/distributed.py:
        # MultiWorkerMirroredStrategy, one device per process); by default this process's MirroredStrategy
        self.distribution = strategy if strategy is not None else distribution(case)
        self.n = self.distribution.num_replicas_in_sync
        self.local_replicas = len(self.distribution.extended.worker_devices)
        with self.distribution.scope():
            self.model = build(adapter, config, params, case.but(placement=Placement(case.placement.kind),
                                                                 strategy=one_device_strategy(case.strategy)))
        self.config, self.mode, self.device = config, case.mode, self.model.device
        ops = getattr(self.distribution.extended, "_cross_device_ops", None)   # what MirroredStrategy chose
        self.reduction = type(ops).__name__ if ops is not None else "its default cross-device ops"
        self._reduce_op = tf.distribute.ReduceOp.SUM if mutation() == "sum" else tf.distribute.ReduceOp.MEAN
        self._skips = mutation() == "skip"
        wrap = (lambda f: f) if case.mode == "eager" else adapter.function
        self._step, self._grads = wrap(self._step_fn), wrap(self._grads_step)
        self._counted: dict[str, Any] | None = None

    def _reduced_grads(self, *inputs: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """This replica's loss and gradients, averaged over the replicas (one batched
        all-reduce; the no-sync probe leaves each replica its own)."""
        loss, grads = self.model._grads_fn(*inputs)
        grads = [tf.convert_to_tensor(g) for g in grads]
        if self.sync:
            ctx = tf.distribute.get_replica_context()
            reduced = ctx.all_reduce(self._reduce_op, grads)
            if self._skips:    # the mutation: the last replica joins the all-reduce, keeps its own gradients
                last = tf.equal(ctx.replica_id_in_sync_group, self.n - 1)
                reduced = [tf.where(last, g, r) for g, r in zip(grads, reduced)]
            grads = reduced
        return loss, grads

    def _replica_step(self, *inputs: tf.Tensor) -> tf.Tensor:
        m = self.model
        loss, grads = self._reduced_grads(*inputs)
        # AdamW on every device's own copies: extended.update (one merge_call) runs the update
        # in each device's update context, anchored on the optimizer's step variable.
        self.distribution.extended.update(m.optimizer.step, lambda _, *g: m.optimizer(m._vars, list(g)),
                                          args=tuple(grads), group=False)
        return loss

    def _step_fn(self, *inputs: Any) -> tf.Tensor:
        per_replica = self.distribution.run(self._replica_step, args=inputs)
        return self.distribution.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    def _grads_step(self, *inputs: Any) -> list[tf.Tensor]:
        per_replica = self.distribution.run(lambda *a: self._reduced_grads(*a)[1], args=inputs)
        return [self.distribution.experimental_local_results(g)[0] for g in per_replica]

    def place_inputs(self, *arrays: Any) -> tuple[Any, ...]:
        host = [np.asarray(a) for a in arrays]

        def rows(a: np.ndarray) -> Any:
            return self.distribution.experimental_distribute_values_from_function(
                lambda ctx: tf.constant(shard(a, self.n, ctx.replica_id_in_sync_group)))
        return tuple(rows(a) for a in host)

    def train_step(self, *inputs: Any) -> tf.Tensor:
        return self._step(*inputs)

    def grads(self, *inputs: Any) -> dict[str, tf.Tensor]:
        """Device 0's gradients after the step's reduction (before clipping), keyed like the
        workload's parameters."""
        return dict(zip(self.model.net.named, self._grads(*inputs)))

    def export_params(self) -> dict[str, np.ndarray]:
        return self.model.export_params()

    def device_state(self) -> tuple[int, str]:
        """(bytes, how counted) of the parameters and AdamW state on device 0: every
        MirroredVariable keeps a whole copy there."""
        opt = self.model.optimizer
        n = sum(int(np.prod(v.shape)) * v.dtype.size for v in [*self.model._vars, *opt.m, *opt.v, opt.step])
        return n, ("the parameters' and AdamW state's MirroredVariables, each a whole copy on every device, summed "
                   "from their shapes: the state a device holds between steps, not an allocator peak (the logical "
                   "CPU devices share one process's allocator)")

    def collectives(self, *inputs: Any) -> dict[str, Any]:
        if self._counted is None:   # graph mode: the timed step's own trace; eager: the same step traced
            traced = self._step if hasattr(self._step, "get_concrete_function") else tf.function(self._step_fn)
            graph = traced.get_concrete_function(*inputs).graph
            self._counted = graph_collectives(graph, self.local_replicas)
            # the bytes of every tensor the step all-reduces, per device (each op's input)
            ops = [b for kind, b in graph_collective_ops(graph) if kind == "all-reduce"]
            self.allreduce_sizes = ops[::self.local_replicas]
        source = (f"the collective ops in the traced step's graph (tf.function(step).get_concrete_function(): "
                  f"{self.reduction}'s ops, one per device, counted once; bytes of their input tensors)")
        if self.mode == "eager":
            source += "; eager mode runs the same cross-device ops op by op"
        if not self.sync:
            source += "; the no-sync step hands nothing to ReplicaContext.all_reduce"
        return {"source": source, **self._counted}


# TensorFlow's collective op types, by the name fwbench's collectives table uses.
_COLLECTIVE_OPS = {"CollectiveReduce": "all-reduce", "CollectiveReduceV2": "all-reduce",
                   "CollectiveReduceV3": "all-reduce", "NcclAllReduce": "all-reduce",
                   "CollectiveGather": "all-gather", "CollectiveGatherV2": "all-gather",
                   "CollectiveAllToAllV2": "all-to-all", "CollectiveAllToAllV3": "all-to-all",
                   "CollectiveBcastSend": "broadcast", "CollectiveBcastSendV2": "broadcast",
                   "NcclBroadcast": "broadcast", "NcclReduce": "reduce"}


def graph_collective_ops(graph: Any) -> list[tuple[str, int]]:
    """Every op of a _COLLECTIVE_OPS type in a traced graph and the functions it calls, as
    (fwbench's op name, its first input's bytes); a collective is one op per participating
    device of this process."""
    out: list[tuple[str, int]] = []
    graphs, seen = [graph], set()
    while graphs:
        g = graphs.pop()
        for op in g.get_operations():
            for f in op.node_def.attr["f"].func.name, *(a.func.name for a in op.node_def.attr.values()
                                                        if a.HasField("func")):
                if f and f not in seen and hasattr(g, "_functions") and f in g._functions:
                    seen.add(f)
                    graphs.append(g._functions[f].graph)
            kind = _COLLECTIVE_OPS.get(op.type)
            if kind is None:
                continue
            t = op.inputs[0]
            out.append((kind, int(np.prod(t.shape.as_list())) * t.dtype.size if t.shape.is_fully_defined() else 0))
    return out


def graph_collectives(graph: Any, n: int) -> dict[str, dict[str, int]]:
    """{op: {"count", "bytes"}} per device of the collective ops in a traced graph and the
    functions it calls (graph_collective_ops), divided by the n devices of this process that
    each issue it in this graph (a collective runs as one op per participant; a worker of a
    multi-worker strategy traces its own devices' ops)."""
    out: dict[str, dict[str, int]] = {}
    for kind, size in graph_collective_ops(graph):
        e = out.setdefault(kind, {"count": 0, "bytes": 0})
        e["count"] += 1
        e["bytes"] += size
    return {k: {"count": v["count"] // n, "bytes": v["bytes"] // n} for k, v in out.items()}


def data_parallel(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case,
                  strategy: Any = None) -> DataParallel:
    return DataParallel(adapter, build, config, params, case, strategy)

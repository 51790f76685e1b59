"""TensorFlow data parallel (issue 21): tf.distribute.MirroredStrategy over the placement's
devices, the custom-training-loop form (TensorFlow's "Custom training with
tf.distribute.Strategy" guide).

The model is the framework's own one-device build, made inside the strategy's scope, so its
tf.Variables (parameters and AdamW moments) are MirroredVariables, one copy per device.
Each replica computes the gradients of its rows, ReplicaContext.all_reduce(MEAN) sums
them across replicas (one batched call), and every replica applies the same AdamW update:
the variables are created with ONLY_FIRST_REPLICA aggregation, so an assignment in replica
context writes the first replica's value to every copy (they are equal after the
all-reduce). Simulated CPU devices are logical devices made before TensorFlow's runtime
starts (frameworks.base.prepare_placement; the adapter applies them); on CPUs
MirroredStrategy picks CollectiveAllReduce (NCCL needs GPUs), and the logical devices share
the process's intra-op thread pool (not pinned per device).

Strategies (workloads.parallel.PARALLEL_STRATEGIES): "no-sync" is the same step without the
ReplicaContext.all_reduce (each replica's AdamW gets its own rows' gradients; the
ONLY_FIRST_REPLICA assignments still copy replica 0's result to every copy, as in the
default step). The step's optimizer is fwbench's AdamWUpdate (frameworks/tensorflow/optim.py),
not a Keras optimizer, so Keras's skip_gradients_aggregation does not apply: leaving out the
step's own all_reduce is the same thing. "sharded" is Unsupported (SHARDED_REFUSED).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from workloads.base import Unsupported
from workloads.case import Case, Placement
from workloads.parallel import NO_SYNC, SHARDED, one_device_strategy, shard, take_devices

# Both forms of XLA under MirroredStrategy were tried on simulated CPU devices (TF 2.21): a
# jit_compile=True function around strategy.run, and jit_compile=True on each replica's step.
XLA_REFUSED = ("XLA under MirroredStrategy: tf.function(jit_compile=True), around strategy.run or around each "
               "replica's step, places replica 1's program on CPU:0 and then cannot reach its variables "
               "(InvalidArgumentError: Trying to access resource .../replica_1 located in device CPU:1 from "
               "CPU:0; tensorflow.org/xla/known_issues); graph mode is TensorFlow's data-parallel path here")


SHARDED_REFUSED = ("TensorFlow's parameter sharding is DTensor (tf.experimental.dtensor: layouts sharding "
                   "variables over a mesh), which fwbench does not build; MirroredStrategy, its data-parallel "
                   "path here, replicates every variable on every device")


def _first_replica(next_creator: Any, **kwargs: Any) -> Any:
    kwargs["aggregation"] = tf.VariableAggregation.ONLY_FIRST_REPLICA
    return next_creator(**kwargs)


def strategy_devices(case: Case) -> list[str]:
    kind = "GPU" if case.placement.kind in ("cuda", "gpu") else "CPU"
    return take_devices("TensorFlow", [d.name for d in tf.config.list_logical_devices(kind)], case.placement)


_STRATEGIES: dict[tuple[str, ...], Any] = {}


def strategy(case: Case) -> Any:
    """The process's MirroredStrategy over the case's devices, made once: a second one in the
    same process reuses the first one's collective instance keys and its all-reduce aborts
    ("Shape mismatch in the collective instance 100"); a placement is fixed per process anyway."""
    devs = tuple(strategy_devices(case))
    if devs not in _STRATEGIES:
        _STRATEGIES[devs] = tf.distribute.MirroredStrategy(devices=list(devs))
    return _STRATEGIES[devs]


class DataParallel:
    """A TensorFlow model (frameworks/tensorflow/<workload>.py) whose train_step runs under
    MirroredStrategy on the case's devices."""

    pinning = "one process; the logical devices share its intra-op thread pool (not pinned per device)"

    def __init__(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> None:
        if case.mode == "compiled":
            raise Unsupported(XLA_REFUSED)
        if case.strategy == SHARDED:
            raise Unsupported(SHARDED_REFUSED)
        self.sync = case.strategy != NO_SYNC
        self.n = case.placement.devices
        self.strategy = strategy(case)
        with self.strategy.scope(), tf.variable_creator_scope(_first_replica):
            self.model = build(adapter, config, params, case.but(placement=Placement(case.placement.kind),
                                                                 strategy=one_device_strategy(case.strategy)))
        self.config, self.mode, self.device = config, case.mode, self.model.device
        ops = getattr(self.strategy.extended, "_cross_device_ops", None)   # what MirroredStrategy chose
        self.reduction = type(ops).__name__ if ops is not None else "its default cross-device ops"
        self._bytes = 0
        self._step = self._step_fn if case.mode == "eager" else adapter.function(self._step_fn)

    def _replica_step(self, *inputs: tf.Tensor) -> tf.Tensor:
        m = self.model
        loss, grads = m._grads_fn(*inputs)
        grads = [tf.convert_to_tensor(g) for g in grads]
        self._bytes = sum(int(np.prod(g.shape)) * g.dtype.size for g in grads)
        if self.sync:   # the no-sync probe leaves each replica its own gradients
            grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, grads)
        m.optimizer(m._vars, grads)
        return loss

    def _step_fn(self, *inputs: Any) -> tf.Tensor:
        per_replica = self.strategy.run(self._replica_step, args=inputs)
        return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    def place_inputs(self, *arrays: Any) -> tuple[Any, ...]:
        host = [np.asarray(a) for a in arrays]

        def rows(a: np.ndarray) -> Any:
            return self.strategy.experimental_distribute_values_from_function(
                lambda ctx: tf.constant(shard(a, self.n, ctx.replica_id_in_sync_group)))
        return tuple(rows(a) for a in host)

    def train_step(self, *inputs: Any) -> tf.Tensor:
        return self._step(*inputs)

    def export_params(self) -> dict[str, np.ndarray]:
        return self.model.export_params()

    def collectives(self, *inputs: Any) -> dict[str, Any]:
        self.train_step(*inputs)
        if not self.sync:
            return {"source": "the step's code: the no-sync step hands nothing to ReplicaContext.all_reduce (each "
                              "replica applies its own gradients; the loss is averaged by strategy.reduce outside "
                              "the replicas, and replica 0's updated variables are copied to the others, as in "
                              "the default step)"}
        return {"source": f"the gradients the step hands to ReplicaContext.all_reduce, one batched call "
                          f"(TensorFlow counts no collective bytes; {self.reduction} performs it)",
                "all-reduce": {"count": 1, "bytes": int(self._bytes)}}


def data_parallel(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> DataParallel:
    return DataParallel(adapter, build, config, params, case)

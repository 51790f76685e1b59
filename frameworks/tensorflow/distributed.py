"""TensorFlow data parallel across processes: tf.distribute.MultiWorkerMirroredStrategy,
one worker process per device (TensorFlow's "Multi-worker training with a custom training
loop" guide). Its cluster comes from Slurm's environment under srun
(tf.distribute.cluster_resolver.SlurmClusterResolver, worker ports from the launcher's base
port) and from TF_CONFIG otherwise (fwbench's local launcher: every worker's host:port and
this task's index). The strategy is made before any other TensorFlow op, as the guide asks;
its collectives run TensorFlow's ring implementation with a timeout, so a peer that is gone
fails the step instead of hanging it. The step is frameworks/tensorflow/parallel.py's
custom training loop, unchanged: the model built in the strategy's scope, one batched
ReplicaContext.all_reduce(MEAN) of the gradients, the workload's AdamW on every replica.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np
import tensorflow as tf

from frameworks.tensorflow import parallel
from workloads.case import Case
from workloads.distributed import World, peer_timeout_s

# The mode its multi-process step runs in by default: tf.function graphs; XLA under a mirrored
# strategy is refused (frameworks/tensorflow/parallel.py: XLA_REFUSED).
MODE = "graph"

class Runtime:
    """MultiWorkerMirroredStrategy over the world's processes."""

    def __init__(self, world: World, kind: str = "cpu") -> None:
        self.world = world
        if world.launcher == "srun":
            # The resolver hands out GPUs as it hands out ports (a zip over both): on CPUs it needs one
            # nominal "GPU" per task of a node, and must not set CUDA_VISIBLE_DEVICES from them.
            per_node = max(world.hosts.count(h) for h in world.hosts)
            resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
                port_base=world.port, gpus_per_node=per_node if kind == "cpu" else None,
                gpus_per_task=1 if kind == "cpu" else None, auto_set_gpu=kind != "cpu")
            how = "SlurmClusterResolver (SLURM_PROCID, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE)"
        else:
            os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [world.worker(r) for r in range(world.size)]},
                                                  "task": {"type": "worker", "index": world.rank}})
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            how = "TF_CONFIG"
        comm = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=peer_timeout_s())
        self.strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                                  communication_options=comm)
        self.joined = f"tf.distribute.MultiWorkerMirroredStrategy from {how}, RING collectives"
        self._sum: dict[int, Any] = {}

    def data_parallel(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray],
                      case: Case) -> Any:
        return parallel.data_parallel(adapter, build, config, params, case, self.strategy)

    def barrier(self) -> None:
        self.allreduce_s([4])

    def allreduce_s(self, sizes: list[int]) -> float:
        """Seconds to all-reduce (mean) float32 tensors of these byte sizes, one
        ReplicaContext.all_reduce each inside strategy.run (the step's ops: its packed
        gradients, then the loss), in a tf.function traced (and run once) before it is timed."""
        key = tuple(max(1, b // 4) for b in sizes)
        if key not in self._sum:
            xs = [tf.ones([k]) for k in key]

            @tf.function
            def reduce() -> Any:
                ctx = tf.distribute.get_replica_context
                return self.strategy.run(lambda: [ctx().all_reduce(tf.distribute.ReduceOp.MEAN, x) for x in xs])
            reduce()
            self._sum[key] = reduce
        fn = self._sum[key]
        t0 = time.perf_counter()
        out = fn()
        for t in tf.nest.flatten(self.strategy.experimental_local_results(out)):
            t.numpy()
        return time.perf_counter() - t0

    def wait(self, model: Any, out: Any) -> None:
        """Until a step's output is computed (its value read on the host)."""
        for t in tf.nest.flatten(out):
            if hasattr(t, "numpy"):
                t.numpy()


def start(world: World, kind: str = "cpu") -> Runtime:
    return Runtime(world, kind)

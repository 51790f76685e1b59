"""JAX data parallel across processes: multi-controller JAX, one process per
device. Every process runs the same program; jax.distributed.initialize joins them through
the coordination service at rank 0's host, after which jax.devices() lists every process's
devices and a Mesh over them is global. On CPUs the cross-process collectives go through
gloo, chosen before the backend starts (jax_cpu_collectives_implementation = "gloo"; JAX's
"Multi-process" guide). The data-parallel step is frameworks/jax/parallel.py's, unchanged:
the model's own jitted step over the global mesh, parameters replicated, the batch sharded,
GSPMD's all-reduce; each process builds its one-device model on its own device and places
its part of every global array (parallel.put: jax.make_array_from_callback).
"""
from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from frameworks.jax import parallel
from workloads.case import Case
from workloads.distributed import World, peer_timeout_s

# The mode its multi-process step runs in by default: JAX's data parallel is a compiled program
# over a mesh (frameworks/jax/parallel.py: EAGER).
MODE = "compiled"

class Runtime:
    """jax.distributed over the world's processes, gloo collectives on CPUs."""

    def __init__(self, world: World, kind: str = "cpu") -> None:
        self.world = world
        if kind == "cpu":
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"{world.coordinator}:{world.port}",
                                   num_processes=world.size, process_id=world.rank,
                                   initialization_timeout=max(1, round(peer_timeout_s())))
        self.joined = ("jax.distributed.initialize(coordinator_address, num_processes, process_id) with "
                       "jax_cpu_collectives_implementation='gloo'")
        self.mesh = Mesh(np.array(jax.devices()), ("data",))
        self._sum: dict[int, Any] = {}

    def data_parallel(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray],
                      case: Case) -> Any:
        return parallel.data_parallel(adapter, build, config, params, case)

    def barrier(self) -> None:
        multihost_utils.sync_global_devices("fwbench")

    def allreduce_s(self, sizes: list[int]) -> float:
        """Seconds to all-reduce (mean) float32 arrays of these byte sizes in one jitted
        program (pmean under shard_map over the global mesh: one variadic all-reduce, as
        the step's HLO has it), compiled before it is timed."""
        key = tuple(max(1, b // 4) for b in sizes)
        if key not in self._sum:
            spec = PartitionSpec("data")
            fn = jax.jit(jax.shard_map(lambda *xs: jax.lax.pmean(xs, "data"), mesh=self.mesh,
                                       in_specs=(spec,) * len(key), out_specs=(spec,) * len(key)))
            xs = tuple(parallel.put(np.ones((self.world.size, k), np.float32), NamedSharding(self.mesh, spec))
                       for k in key)
            jax.block_until_ready(fn(*xs))
            self._sum[key] = (fn, xs)
        fn, xs = self._sum[key]
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*xs))
        return time.perf_counter() - t0

    def wait(self, model: Any, out: Any) -> None:
        """Until a step's output and the model's new state are computed (JAX dispatches
        asynchronously)."""
        jax.block_until_ready((out, model.state()))


def start(world: World, kind: str = "cpu") -> Runtime:
    return Runtime(world, kind)

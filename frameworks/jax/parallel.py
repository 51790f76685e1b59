"""JAX data parallel (issue 21): the model's own jitted train step over a 1-D device mesh.

The parameters and optimizer state are replicated (NamedSharding(mesh, P())), the global
batch is split on its first axis (P("data")); jit's sharding propagation (GSPMD) partitions
the step and inserts the gradient all-reduce itself. This is JAX's idiomatic data parallel
(the JAX "distributed arrays and automatic parallelization" guide); no line of the model
changes. Simulated CPU devices come from XLA's --xla_force_host_platform_device_count, set
before JAX starts (frameworks.base.prepare_placement); they share the process's CPU thread
pool (PJRT_NPROC = threads x devices), so they are not pinned one per core.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from workloads.base import Unsupported
from workloads.case import Case, Placement
from workloads.parallel import hlo_collectives, take_devices

EAGER = ("JAX's data parallel is a compiled program over a device mesh (jit with shardings, or shard_map); "
         "op-by-op eager dispatch over sharded arrays is not its data-parallel path (and refuses the DDPM's "
         "schedule constants, committed to one device)")


def mesh_devices(case: Case) -> list[Any]:
    """The placement's devices, or Unsupported saying how many JAX sees."""
    return take_devices("JAX", jax.devices("gpu" if case.placement.kind in ("cuda", "gpu") else "cpu"), case.placement)


class DataParallel:
    """A JAX model (frameworks/jax/<workload>.py) whose train_step runs on the case's devices."""

    pinning = "one process; the devices share its XLA CPU thread pool (not pinned per device)"

    def __init__(self, model: Any, case: Case) -> None:
        if case.mode != "compiled":
            raise Unsupported(EAGER)
        mesh = Mesh(np.array(mesh_devices(case)), ("data",))
        self.model, self.config, self.mode, self.device = model, model.config, model.mode, model.device
        self._replicated = NamedSharding(mesh, PartitionSpec())
        self._batch = NamedSharding(mesh, PartitionSpec("data"))
        model.params = jax.device_put(model.params, self._replicated)
        model.opt_state = jax.device_put(model.opt_state, self._replicated)

    def place_inputs(self, *arrays: Any) -> tuple[Any, ...]:
        return tuple(jax.device_put(a, self._batch) for a in arrays)

    def train_step(self, *inputs: Any) -> Any:
        return self.model.train_step(*inputs)

    def state(self) -> Any:
        return self.model.state()

    def export_params(self) -> dict[str, np.ndarray]:
        return self.model.export_params()

    def collectives(self, *inputs: Any) -> dict[str, Any]:
        m = self.model
        text = m._train_step.lower(m.params, m.opt_state, *inputs).compile().as_text()
        return {"source": "the compiled step's HLO (jax.jit(...).lower(...).compile().as_text())",
                **hlo_collectives(text)}


def data_parallel(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> DataParallel:
    """The one-device build, its arrays then placed on the case's mesh."""
    return DataParallel(build(adapter, config, params, case.but(placement=Placement(case.placement.kind))), case)

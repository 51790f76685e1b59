"""JAX data parallel: the model's own jitted train step over a 1-D device mesh.

The parameters and optimizer state are replicated (NamedSharding(mesh, P())), the global
batch is split on its first axis (P("data")); jit's sharding propagation (GSPMD) partitions
the step and inserts the gradient all-reduce itself. This is JAX's idiomatic data parallel
(the JAX "distributed arrays and automatic parallelization" guide); no line of the model
changes. Simulated CPU devices come from XLA's --xla_force_host_platform_device_count, set
before JAX starts (frameworks.base.prepare_placement); they share the process's CPU thread
pool (PJRT_NPROC = threads x devices), so they are not pinned one per core.

Strategies (workloads.parallel.PARALLEL_STRATEGIES):
- "sharded" (ZeRO-3 / FSDP style): every parameter and optimizer-state tensor is placed with
  NamedSharding(mesh, P(..., "data", ...)) on its first axis divisible by N (replicated, P(),
  where no axis divides), the batch split as above, and the model's own step jitted with
  those shardings in and out; GSPMD inserts the gathers of the parameters and the reduction
  of the gradients onto their shards.
- "no-sync": the model's own step (loss, gradients, clipping, AdamW) run per device under
  jax.shard_map over the mesh axis "data": each device updates its replica of the parameters
  from the gradients of its own rows, and nothing is reduced across devices (check_vma off:
  the replicas diverge, which out_specs P() does not claim to check). A timing probe only.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from workloads.base import Model, Unsupported, is_accelerator
from workloads.case import Case, Placement
from workloads.parallel import (
    NO_SYNC,
    SHARDED,
    hlo_collective_ops,
    hlo_collectives,
    mutation,
    one_device_strategy,
    placed_rows,
    take_devices,
)

EAGER = ("JAX's data parallel is a compiled program over a device mesh (jit with shardings, or shard_map); "
         "op-by-op eager dispatch over sharded arrays is not its data-parallel path (and refuses the DDPM's "
         "schedule constants, committed to one device)")


def mesh_devices(case: Case) -> list[Any]:
    """The placement's devices, or Unsupported saying how many JAX sees."""
    return take_devices("JAX", jax.devices("gpu" if is_accelerator(case.placement.kind) else "cpu"), case.placement)


def shard_spec(shape: tuple[int, ...], n: int) -> PartitionSpec:
    """P("data") on the first axis of `shape` that n divides (None before it); P() (replicated)
    for a scalar or a shape with no such axis."""
    for i, d in enumerate(shape):
        if d % n == 0 and d >= n:
            return PartitionSpec(*([None] * i), "data")
    return PartitionSpec()


def fsdp_step(loss: Any, tx: Any, sharded: Any, replicated: NamedSharding) -> Any:
    """The model's train step (its `train_loss`: params, *batch -> the loss its gradients are
    of, and its optimizer `tx`, as the model declares them) as FSDP runs it: the sharded
    parameters gathered whole where the loss uses them (with_sharding_constraint to
    replicated: an all-gather), the loss and its gradients on the device's rows, the
    gradients constrained back onto the parameters' shards (a reduction that leaves each
    device its shard: reduce-scatter, or all-reduce then slice where XLA does it so), and
    clipping + AdamW on the shards. The constraints are needed: with the shardings on the
    step's arguments alone (GSPMD left to propagate them) XLA computes the matmuls on
    parameter shards and reshuffles the activations instead (measured on the tiny GPT at
    N = 2: 17 all-to-alls of activations and 29 all-reduces of partial activations and
    gradients beside 42 all-gathers). The constrained program gathers each parameter once:
    XLA keeps the gathered copy for the backward (FSDP2 gathers again there)."""
    import optax

    def grads(p: Any, *batch: Any) -> Any:
        full = jax.lax.with_sharding_constraint(p, jax.tree.map(lambda _: replicated, p))
        loss_value, g = jax.value_and_grad(loss)(full, *batch)
        return loss_value, jax.lax.with_sharding_constraint(g, sharded)

    def run(p: Any, opt_state: Any, *batch: Any) -> Any:
        loss_value, g = grads(p, *batch)
        updates, opt_state = tx.update(g, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss_value
    run.grads = grads    # the step's reduced gradients, before clipping (DataParallel.grads)
    return run


def put(tree: Any, sharding: Any) -> Any:
    """jax.device_put of a pytree onto a sharding (or a pytree of them, one per leaf). In a
    multi-controller run (frameworks/jax/distributed.py: a process per device) every process
    holds the same host values and places its own devices' parts of each global array
    (jax.make_array_from_callback): device_put cannot move a committed array onto another
    process's devices."""
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    if isinstance(sharding, jax.sharding.Sharding):
        sharding = jax.tree.map(lambda _: sharding, tree)
    return jax.tree.map(lambda a, s: jax.make_array_from_callback(np.shape(a), s, lambda i, h=np.asarray(a): h[i]),
                        tree, sharding)


def whole(tree: Any) -> Any:
    """Each array of a pytree readable on this process: as it is in one process; in a
    multi-controller run an array sharded over other processes' devices is gathered whole
    (multihost_utils.process_allgather: a collective every process calls in the same order),
    and a replicated one is left as it is (reading it reads this process's copy: the "skip"
    mutation's last rank reads its own gradients)."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    def one(a: Any) -> Any:
        if isinstance(a, jax.Array) and not a.is_fully_addressable and not a.is_fully_replicated:
            return np.asarray(multihost_utils.process_allgather(a, tiled=True))
        return a
    return jax.tree.map(one, tree)


class DataParallel(Model):
    """A JAX model (frameworks/jax/<workload>.py) whose train_step runs on the case's devices."""

    pinning = "one process; the devices share its XLA CPU thread pool (not pinned per device)"

    def __init__(self, model: Any, case: Case) -> None:
        if case.mode != "compiled":
            raise Unsupported(EAGER)
        devices = mesh_devices(case)
        self.n, self.strategy = len(devices), case.strategy
        mesh = Mesh(np.array(devices), ("data",))
        self.model, self.config, self.mode, self.device = model, model.config, model.mode, model.device
        self._replicated = NamedSharding(mesh, PartitionSpec())
        self._batch = NamedSharding(mesh, PartitionSpec("data"))
        step = model.pure_step          # params, opt_state, *batch -> params, opt_state, loss
        if case.strategy == SHARDED:
            def placed(tree: Any) -> Any:
                return jax.tree.map(lambda a: NamedSharding(mesh, shard_spec(np.shape(a), self.n)), tree)
            ps, ss = placed(model.params), placed(model.opt_state)
            model.params = put(model.params, ps)
            model.opt_state = put(model.opt_state, ss)
            # In: the arguments' own shardings (committed arrays); out: the same placements, so
            # every step keeps them sharded.
            run = fsdp_step(model.train_loss, model.tx, ps, self._replicated)
            model._train_step = jax.jit(run, out_shardings=(ps, ss, self._replicated), donate_argnums=(0, 1))
            self._grads = jax.jit(lambda p, *b: run.grads(p, *b)[1], out_shardings=ps)
            if mutation() == "sum":
                self._grads = self._summed_grads(model, mesh)
            return
        model.params = put(model.params, self._replicated)
        model.opt_state = put(model.opt_state, self._replicated)
        # the model's gradient program over the placed arrays: GSPMD all-reduces as in the step
        self._grads = self._summed_grads(model, mesh) if mutation() in ("sum", "skip") else model._grads
        if case.strategy == NO_SYNC:
            def per_device(p: Any, s: Any, *batch: Any) -> Any:
                return step(p, s, *batch)

            def local(p: Any, s: Any, *batch: Any) -> Any:
                sm = jax.shard_map(per_device, mesh=mesh, in_specs=(PartitionSpec(), PartitionSpec())
                                   + (PartitionSpec("data"),) * len(batch),
                                   out_specs=(PartitionSpec(), PartitionSpec(), PartitionSpec()), check_vma=False)
                return sm(p, s, *batch)
            model._train_step = jax.jit(local, donate_argnums=(0, 1))

    @staticmethod
    def _summed_grads(model: Any, mesh: Mesh) -> Any:
        """The "sum" and "skip" mutations (workloads.parallel.MUTATIONS): each device's gradient
        of its rows' mean loss, psum'd over the mesh under shard_map, where GSPMD's program
        means them ("sum"); or pmean'd, then the last device keeps its own ("skip")."""
        loss = model.train_loss
        skip, last = mutation() == "skip", mesh.devices.size - 1

        def per_device(p: Any, *batch: Any) -> Any:
            g = jax.grad(loss)(p, *batch)
            if skip:
                own = jax.lax.axis_index("data") == last
                return jax.tree.map(lambda a, m: jnp.where(own, a, m), g, jax.lax.pmean(g, "data"))
            return jax.lax.psum(g, "data")

        def summed(p: Any, *batch: Any) -> Any:
            return jax.shard_map(per_device, mesh=mesh, in_specs=(PartitionSpec(),) + (PartitionSpec("data"),)
                                 * len(batch), out_specs=PartitionSpec(), check_vma=False)(p, *batch)
        return jax.jit(summed)

    def place_inputs(self, *arrays: Any) -> tuple[Any, ...]:
        return tuple(put(placed_rows(a, self.n), self._batch) for a in arrays)

    def grads(self, *inputs: Any) -> dict[str, Any]:
        """The step's gradients of the global batch after GSPMD's reduction, before clipping
        (whole: a sharded gradient spanning other processes is gathered, `whole`)."""
        return whole(self._grads(self.model.params, *inputs))

    def train_step(self, *inputs: Any) -> Any:
        return self.model.train_step(*inputs)

    def state(self) -> Any:
        return self.model.state()

    def device_state(self) -> tuple[int, str]:
        """(bytes, how counted) of the parameters and optimizer state on the mesh's first device."""
        dev = next(d for d in self._batch.mesh.devices.flat if d.process_index == jax.process_index())
        n = sum(s.data.nbytes for leaf in jax.tree.leaves((self.model.params, self.model.opt_state))
                if hasattr(leaf, "addressable_shards") for s in leaf.addressable_shards if s.device == dev)
        return n, ("the parameters' and optax state's shards on device 0 (jax.Array.addressable_shards), summed: "
                   "the state a device holds between steps, not an allocator peak (XLA's CPU client keeps none per "
                   "simulated device)")

    def export_params(self) -> dict[str, np.ndarray]:
        if jax.process_count() == 1:
            return self.model.export_params()   # np.array of a sharded jax.Array gathers it whole
        own = self.model.params
        self.model.params = whole(own)          # across processes: gathered first
        try:
            return self.model.export_params()
        finally:
            self.model.params = own

    def collectives(self, *inputs: Any) -> dict[str, Any]:
        m = self.model
        text = m._train_step.lower(m.params, m.opt_state, *inputs).compile().as_text()
        ops = hlo_collectives(text)
        # the bytes of every tensor the step all-reduces (a variadic all-reduce: one per operand)
        self.allreduce_sizes = [b for op, sizes in hlo_collective_ops(text) if op == "all-reduce" for b in sizes]
        source = "the compiled step's HLO (jax.jit(...).lower(...).compile().as_text())"
        if self.strategy == SHARDED and "reduce-scatter" in ops:
            # hlo_collectives counts result bytes; a reduce-scatter's result is one shard:
            # x N gives its full (input) tensor, the convention of workloads.parallel.wire_bytes.
            ops["reduce-scatter"]["bytes"] *= self.n
            source += "; reduce-scatter bytes are its result (a shard) x N: the full input tensor"
        if self.strategy == NO_SYNC:
            source += "; the per-device step under shard_map, no cross-device reduction"
        return {"source": source, **ops}


def data_parallel(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> DataParallel:
    """The one-device build (its default strategy), its arrays then placed on the case's mesh."""
    return DataParallel(build(adapter, config, params, case.but(placement=Placement(case.placement.kind),
                                                               strategy=one_device_strategy(case.strategy))), case)

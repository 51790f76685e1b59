"""PyTorch data parallel: DistributedDataParallel, one process per device.

DDP needs a process per device (torchrun's model). A case's process is rank 0; on its first
data-parallel build it starts the other ranks as `spawn`ed worker processes (the placement
is fixed per process, so the group lives as long as the process) and joins them in a
process group: gloo on CPUs, NCCL on CUDA. Every rank builds the same model with the
framework's own `build` and wraps its module in DDP (buffers are not synchronised per
forward: the models' buffers are constants); DDP averages the gradients during backward, bucket by bucket.

Rank 0 drives the workers through pipes: it hands each its rows of every batch once
(place_inputs, outside the timed region: a data loader's job), then per step sends "step",
runs its own step and waits until every rank has finished its step, so a timed step is the
slowest rank's. A worker is pinned to its own CPUs (threads x rank ...), so simulated
devices do not share cores while there are enough of them.

Collectives are counted by a DDP communication hook (register_comm_hook) that wraps the
default all-reduce hook: every bucket DDP all-reduces, its count and bytes.

Strategies (workloads.parallel.PARALLEL_STRATEGIES): "no-sync" runs every rank's DDP step
inside DDP.no_sync() (eager and compiled: the compiled loss runs through the DDP module), so
the reducer all-reduces no bucket; "sharded" replaces DDP by FSDP2 (fully_shard per block,
then the root, on a 1-D DeviceMesh over the same group; _shard), in both modes, its
collectives counted by wrappers around the torch.distributed calls FSDP2 makes (_comm_count)
and its parameters exported whole (DTensor.full_tensor on every rank, then the model's own
export).
"""
from __future__ import annotations

import atexit
import datetime
import importlib
import inspect
import os
import socket
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from workloads.base import FwbenchError, Model, Unsupported, is_accelerator
from workloads.case import Case, Placement
from workloads.parallel import NO_SYNC, SHARDED, mutation, one_device_strategy, shard

TIMEOUT = datetime.timedelta(seconds=180)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pin(rank: int, threads: int) -> None:
    """Pin this process to CPUs [rank*threads, (rank+1)*threads) of those the machine has
    (wrapping around when devices outnumber them), with that many threads."""
    n = os.cpu_count() or 1
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, [(rank * threads + i) % n for i in range(threads)])
    torch.set_num_threads(threads)


def _init(rank: int, n: int, port: int, kind: str) -> None:
    backend = "nccl" if is_accelerator(kind) else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=TIMEOUT)


class _Count:
    """What the communication hook saw: all-reduce calls and bytes; `summed` under the "sum"
    mutation (workloads.parallel.MUTATIONS)."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0
        self.sizes: list[int] = []      # each bucket's bytes, in the order DDP reduced them
        self.summed = mutation() == "sum"
        self.skips = mutation() == "skip" and dist.get_rank() == dist.get_world_size() - 1


def _counting_allreduce(state, bucket):   # no annotations: DDP checks them against its own types
    buf = bucket.buffer()
    state.calls += 1
    state.bytes += buf.numel() * buf.element_size()
    state.sizes.append(buf.numel() * buf.element_size())
    if state.summed:    # the mutation: all-reduce without default_hooks' division by the world size
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])
    if state.skips:     # the mutation: this rank joins the all-reduce, then keeps its own gradients
        own = buf.clone()
        return default_hooks.allreduce_hook(None, bucket).then(lambda f: own)
    return default_hooks.allreduce_hook(None, bucket)   # None: the default group; averages


def _local(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> "_Local":
    """This rank's model: the framework's one-device build (the default strategy: the model
    builders know no data-parallel strategy), its module then in DDP, or sharded by FSDP2
    (case.strategy "sharded")."""
    model = build(adapter, config, params, case.but(placement=Placement(case.placement.kind),
                                                    strategy=one_device_strategy(case.strategy)))
    if case.strategy == SHARDED:
        return _Local(model, _shard(model, case), sharded=True)
    net = model.net
    ddp = DistributedDataParallel(net, forward_sync_buffers=False,
                                  device_ids=[torch.cuda.current_device()] if net_is_cuda(net) else None)
    count = _Count()
    ddp.register_comm_hook(count, _counting_allreduce)
    model.net = ddp          # the loss functions call self.net: their forward now goes through DDP
    return _Local(model, count, no_sync=ddp.no_sync if case.strategy == NO_SYNC else None)


class _Local:
    """A rank's model and how it steps: under DDP's no_sync() for the no-sync probe (DDP's
    reducer then skips its all-reduce: the gradients stay each rank's own)."""

    def __init__(self, model: Any, count: Any, no_sync: Any = None, sharded: bool = False) -> None:
        self.model, self.count, self.no_sync, self.sharded = model, count, no_sync, sharded

    def step(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self.no_sync is None:
            return self.model.train_step(*inputs)
        with self.no_sync():
            return self.model.train_step(*inputs)

    def grads(self, *inputs: torch.Tensor) -> dict[str, np.ndarray]:
        """The model's gradients after the reduction (DDP's all-reduce in the backward; FSDP2's
        reduce-scatter, each sharded gradient then all-gathered whole on every rank, in the
        same order), before clipping, as numpy in the workload's layout."""
        g = self.model.grads(*inputs)
        return {k: (v.full_tensor() if self.sharded else v).detach().cpu().numpy() for k, v in g.items()}

    def full_params(self) -> dict[str, np.ndarray]:
        """The model's export (the workload's names and layout) of its full parameters: every
        rank all-gathers each sharded parameter (DTensor.full_tensor, a collective, so every
        rank calls it in the same order); DDP's are already whole."""
        m = self.model
        if not self.sharded:
            return m.export_params()
        own = m._params
        m._params = {k: p.detach().full_tensor() for k, p in own.items()}
        try:
            return m.export_params()
        finally:
            m._params = own


# -- sharded: FSDP2 --------------------------------------------------------------------------

# The modules fully_shard wraps one by one before the root, per workload class: the units
# whose forward the model calls (a GPT's transformer blocks; the UNet's resnet and attention
# blocks, not its Level containers, whose forward is never called).
SHARD_UNITS = ("Block", "ResnetBlock", "AttnBlock")


class _CommCount:
    """FSDP2's collectives as rank 0 issues them: torch.distributed.all_gather_single and
    reduce_scatter_single (FSDP2's default AllGather / ReduceScatter call them through the
    torch.distributed module) and the functional all_reduce DTensor issues when a Partial
    value becomes replicated (clip_grad_norm_'s total norm), wrapped to count calls and
    full-tensor bytes (an all-gather's output, a reduce-scatter's input, an all-reduce's
    tensor); torch.distributed.all_reduce too, in case anything else communicates."""

    def __init__(self) -> None:
        self.ops: dict[str, dict[str, int]] = {}

    def add(self, op: str, t: torch.Tensor) -> None:
        e = self.ops.setdefault(op, {"count": 0, "bytes": 0})
        e["count"] += 1
        e["bytes"] += t.numel() * t.element_size()


_COMM: _CommCount | None = None


def _comm_count() -> _CommCount:
    """The process's counters, the wrappers installed on first use."""
    global _COMM
    if _COMM is None:
        import torch.distributed._functional_collectives as funcol
        count = _COMM = _CommCount()
        ag, rs, ar, far = dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce, funcol.all_reduce

        def all_gather_single(output_tensor, input_tensor, *a, **k):   # noqa: ANN001, ANN202
            count.add("all-gather", output_tensor)
            return ag(output_tensor, input_tensor, *a, **k)

        def reduce_scatter_single(*a, **k):   # noqa: ANN002, ANN003, ANN202
            grads = k["input"] if "input" in k else a[1]
            count.add("reduce-scatter", grads)
            if mutation() == "sum":   # the mutation: x N undoes FSDP2's division by the world size (gloo has
                grads.mul_(dist.get_world_size())   # no PREMUL_SUM for set_gradient_divide_factor(1))
            return rs(*a, **k)

        def all_reduce(tensor, *a, **k):   # noqa: ANN001, ANN202
            count.add("all-reduce", tensor)
            return ar(tensor, *a, **k)

        def functional_all_reduce(self, *a, **k):   # noqa: ANN001, ANN202
            count.add("all-reduce", self)
            return far(self, *a, **k)

        dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce = (
            all_gather_single, reduce_scatter_single, all_reduce)
        funcol.all_reduce = functional_all_reduce
    return _COMM


def _shard(model: Any, case: Case) -> _CommCount:
    """FSDP2 in place of DDP: fully_shard on a 1-D DeviceMesh over the process group, per
    unit (SHARD_UNITS) then the root, reshard_after_forward=True: every unit's parameters,
    the root's too, are all-gathered in the forward and again in the backward (measured on
    the tiny GPT: 6 all-gathers for its 2 blocks and root, 3 reduce-scatters). The parameters become
    DTensors sharded on dim 0, so the model's AdamW is rebuilt over them (same groups and
    hyperparameters) and its clipping list is renewed; torch.optim.AdamW and clip_grad_norm_
    run on DTensors as they are. Parameters stored non-contiguous (the DDPM's channels_last
    conv weights) are made contiguous first: FSDP2 refuses others ("FSDP does not support
    non-contiguous parameters yet"); the activations keep their memory format."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    count = _comm_count()
    net = model.net
    mesh = init_device_mesh("cuda" if net_is_cuda(net) else "cpu", (case.placement.devices,),
                            mesh_dim_names=("data",))
    old = dict(net.named_parameters())
    with torch.no_grad():
        for p in old.values():
            if not p.is_contiguous():     # FSDP2 shards contiguous parameters only (the DDPM's conv
                p.data = p.data.contiguous()   # weights are channels_last): same values, NCHW strides
    for m in list(net.modules()):
        if m is not net and type(m).__name__ in SHARD_UNITS:
            fully_shard(m, mesh=mesh, reshard_after_forward=True)
    fully_shard(net, mesh=mesh, reshard_after_forward=True)
    new = dict(net.named_parameters())
    assert list(new) == list(old), "fully_shard renamed parameters"
    swap = {id(old[k]): new[k] for k in old}
    tr = model.trainer
    opt = tr.optimizer
    takes = inspect.signature(type(opt)).parameters
    tr.optimizer = type(opt)([{**g, "params": [swap[id(p)] for p in g["params"]]} for g in opt.param_groups],
                             **{k: v for k, v in opt.defaults.items() if k in takes})
    tr._params = [swap[id(p)] for p in tr._params]
    model.optimizer = tr.optimizer
    model._params = {k: swap[id(p)] for k, p in model._params.items()}
    return count


def net_is_cuda(net: torch.nn.Module) -> bool:
    return next(net.parameters()).is_cuda


def _worker(rank: int, n: int, port: int, threads: int, kind: str, conn: Any) -> None:
    """A rank > 0: build what rank 0 builds, hold its rows of each batch, step when told."""
    os.environ["FWBENCH_THREADS"] = str(threads)     # configure() takes it and pins nothing
    import frameworks
    adapter = frameworks.load("torch")
    adapter.configure(threads)
    _pin(rank, threads)
    _init(rank, n, port, kind)
    local, batches = None, {}
    while True:
        msg = conn.recv()
        try:
            if msg[0] == "stop":
                break
            if msg[0] == "build":
                _, module, config, params, case = msg
                local = None                        # the previous case's model goes first
                local = _local(adapter, importlib.import_module(module).build, config, params, case)
                reply: Any = None
            elif msg[0] == "inputs":
                batches[msg[1]] = tuple(torch.from_numpy(a).to(local.model.device if local else "cpu")
                                        for a in msg[2])
                reply = None
            elif msg[0] == "step":
                local.step(*batches[msg[1]])
                reply = None
            elif msg[0] == "grads":
                local.grads(*batches[msg[1]])
                reply = None
            elif msg[0] == "export":
                local.full_params()
                reply = None
            else:
                reply = ("error", f"unknown command {msg[0]!r}")
        except Exception as e:  # said to rank 0, which raises it; the worker stays for the next case
            reply = ("error", f"rank {rank}: {type(e).__name__}: {e}")
        conn.send(reply)
    dist.destroy_process_group()


class Group:
    """The worker processes of this process's placement (ranks 1..n-1); rank 0 is us."""

    def __init__(self, placement: Placement, threads: int) -> None:
        self.n, self.threads, self.kind = placement.devices, threads, placement.kind
        if is_accelerator(self.kind) and torch.cuda.device_count() < self.n:
            raise Unsupported(f"torch sees {torch.cuda.device_count()} CUDA device(s); this placement needs {self.n}")
        port = _free_port()
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for r in range(1, self.n):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(r, self.n, port, threads, self.kind, theirs), daemon=True)
            p.start()
            self.conns.append(mine)
            self.procs.append(p)
        _init(0, self.n, port, self.kind)
        atexit.register(self.close)

    def send(self, *msg: Any) -> None:
        for c in self.conns:
            c.send(msg)

    def wait(self) -> None:
        """Every worker's reply to the last message; FwbenchError with the first error."""
        errors = [r[1] for r in (c.recv() for c in self.conns) if isinstance(r, tuple) and r[:1] == ("error",)]
        if errors:
            raise FwbenchError("; ".join(errors))

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(("stop",))
            except OSError:
                pass
        for p in self.procs:
            p.join(timeout=10)
        if dist.is_initialized():
            dist.destroy_process_group()
        self.conns, self.procs = [], []


_GROUP: Group | None = None


def group(placement: Placement, threads: int) -> Group:
    global _GROUP
    if _GROUP is None:
        _GROUP = Group(placement, threads)
    elif (_GROUP.n, _GROUP.kind) != (placement.devices, placement.kind):
        raise Unsupported(f"this process's torch worker group is {_GROUP.n} x {_GROUP.kind}; a placement is "
                          f"fixed per process (fwbench run starts one process per --devices count)")
    return _GROUP


class DataParallel(Model):
    """A torch model (frameworks/torch/<workload>.py) whose train_step is DDP's over the
    placement's ranks."""

    def __init__(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> None:
        threads = max(1, (adapter.threads or 1) // case.placement.devices)   # the process's, shared out
        torch.set_num_threads(threads)          # rank 0 too: every rank gets one device's share
        self.group = group(case.placement, threads)
        self.group.send("build", build.__module__, config, params, case)
        self.local = _local(adapter, build, config, params, case)
        self.group.wait()
        self.model, self._count, self.strategy = self.local.model, self.local.count, case.strategy
        self.config, self.mode, self.device = config, self.model.mode, self.model.device
        self.pinning = (f"one process per device, each with {threads} thread(s); ranks 1..{self.group.n - 1} "
                        f"pinned to CPUs of their own, rank 0 (the timing process) on the process's CPUs")
        self._keys: dict[int, int] = {}

    def place_inputs(self, *arrays: torch.Tensor) -> tuple[torch.Tensor, ...]:
        key = len(self._keys)
        for r, c in enumerate(self.group.conns, start=1):
            c.send(("inputs", key, [shard(a.cpu().numpy(), self.group.n, r) for a in arrays]))
        self.group.wait()
        mine = tuple(shard(a, self.group.n, 0).contiguous() for a in arrays)
        self._keys[mine[0].data_ptr()] = key
        return mine

    def train_step(self, *inputs: torch.Tensor) -> torch.Tensor:
        self.group.send("step", self._keys[inputs[0].data_ptr()])
        loss = self.local.step(*inputs)
        self.group.wait()
        return loss

    def grads(self, *inputs: torch.Tensor) -> dict[str, np.ndarray]:
        """Rank 0's reduced gradients of the global batch (every rank computes its own)."""
        self.group.send("grads", self._keys[inputs[0].data_ptr()])
        out = self.local.grads(*inputs)
        self.group.wait()
        return out

    def device_state(self) -> tuple[int, str]:
        """(bytes, how counted) of the parameters and optimizer state rank 0 holds between steps."""
        def local(t: torch.Tensor) -> int:
            t = t.to_local() if hasattr(t, "to_local") else t
            return t.numel() * t.element_size()
        opt = self.model.trainer.optimizer
        n = sum(local(p) for p in self.model._params.values()) + sum(
            local(v) for st in opt.state.values() for v in st.values() if torch.is_tensor(v))
        return n, ("rank 0's parameters and torch.optim state (a DTensor's local shard when sharded), summed from "
                   "its tensors: the state each device's own process holds between steps, not an allocator peak")

    def export_params(self) -> dict[str, np.ndarray]:
        if not self.local.sharded:
            return self.model.export_params()
        self.group.send("export")
        out = self.local.full_params()
        self.group.wait()
        return out

    def collectives(self, *inputs: torch.Tensor) -> dict[str, Any]:
        return counted(self.local, self.strategy, lambda: self.train_step(*inputs))


def counted(local: _Local, strategy: str | None, step: Any) -> dict[str, Any]:
    """What one more step (`step()`) communicates, by the counters of this rank's model:
    FSDP2's wrapped torch.distributed calls when sharded, else the DDP communication hook's
    buckets ({op: {"count", "bytes"}} and "source")."""
    if local.sharded:
        before = {k: dict(v) for k, v in local.count.ops.items()}
        step()
        ops = {k: {"count": v["count"] - before.get(k, {}).get("count", 0),
                   "bytes": v["bytes"] - before.get(k, {}).get("bytes", 0)} for k, v in local.count.ops.items()}
        return {"source": "torch.distributed.all_gather_single / reduce_scatter_single (FSDP2's default "
                          "collectives) and all_reduce, and DTensor's functional all_reduce (the clipping "
                          "norm), wrapped with counters on this rank; bytes of the full tensors: an all-gather's "
                          "output, a reduce-scatter's input, an all-reduce's tensor",
                **{k: v for k, v in ops.items() if v["count"]}}
    c0, b0 = local.count.calls, local.count.bytes
    step()
    source = "a DDP communication hook (register_comm_hook) around the default all-reduce"
    if strategy == NO_SYNC:
        source += "; the step runs under DDP.no_sync(), so the hook sees no bucket"
    out: dict[str, Any] = {"source": source}
    if local.count.calls > c0:
        out["all-reduce"] = {"count": local.count.calls - c0, "bytes": local.count.bytes - b0}
    return out


def data_parallel(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> DataParallel:
    return DataParallel(adapter, build, config, params, case)

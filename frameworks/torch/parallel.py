"""PyTorch data parallel (issue 21): DistributedDataParallel, one process per device.

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
"""
from __future__ import annotations

import atexit
import datetime
import importlib
import os
import socket
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from workloads.base import FwbenchError, Unsupported
from workloads.case import Case, Placement
from workloads.parallel import shard

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
    backend = "nccl" if kind in ("cuda", "gpu") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=TIMEOUT)


class _Count:
    """What the communication hook saw: all-reduce calls and bytes."""

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0


def _counting_allreduce(state, bucket):   # no annotations: DDP checks them against its own types
    buf = bucket.buffer()
    state.calls += 1
    state.bytes += buf.numel() * buf.element_size()
    return default_hooks.allreduce_hook(None, bucket)   # None: the default group; averages


def _local(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> tuple[Any, _Count]:
    """This rank's model: the framework's one-device build with its module in DDP."""
    model = build(adapter, config, params, case.but(placement=Placement(case.placement.kind)))
    net = model.net
    ddp = DistributedDataParallel(net, forward_sync_buffers=False,
                                  device_ids=[torch.cuda.current_device()] if net_is_cuda(net) else None)
    count = _Count()
    ddp.register_comm_hook(count, _counting_allreduce)
    model.net = ddp          # the loss functions call self.net: their forward now goes through DDP
    return model, count


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
    model, batches = None, {}
    while True:
        msg = conn.recv()
        try:
            if msg[0] == "stop":
                break
            if msg[0] == "build":
                _, module, config, params, case = msg
                model = None                        # the previous case's model goes first
                model, _ = _local(adapter, importlib.import_module(module).build, config, params, case)
                reply: Any = None
            elif msg[0] == "inputs":
                batches[msg[1]] = tuple(torch.from_numpy(a).to(model.device if model else "cpu") for a in msg[2])
                reply = None
            elif msg[0] == "step":
                model.train_step(*batches[msg[1]])
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
        if self.kind in ("cuda", "gpu") and torch.cuda.device_count() < self.n:
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


class DataParallel:
    """A torch model (frameworks/torch/<workload>.py) whose train_step is DDP's over the
    placement's ranks."""

    def __init__(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> None:
        threads = max(1, (adapter.threads or 1) // case.placement.devices)   # the process's, shared out
        torch.set_num_threads(threads)          # rank 0 too: every rank gets one device's share
        self.group = group(case.placement, threads)
        self.group.send("build", build.__module__, config, params, case)
        self.model, self._count = _local(adapter, build, config, params, case)
        self.group.wait()
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
        loss = self.model.train_step(*inputs)
        self.group.wait()
        return loss

    def export_params(self) -> dict[str, np.ndarray]:
        return self.model.export_params()

    def collectives(self, *inputs: torch.Tensor) -> dict[str, Any]:
        c0, b0 = self._count.calls, self._count.bytes
        self.train_step(*inputs)
        return {"source": "a DDP communication hook (register_comm_hook) around the default all-reduce",
                "all-reduce": {"count": self._count.calls - c0, "bytes": self._count.bytes - b0}}


def data_parallel(adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray], case: Case) -> DataParallel:
    return DataParallel(adapter, build, config, params, case)

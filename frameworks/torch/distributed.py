"""PyTorch data parallel across processes: one process per device, started by the
launcher (srun, or fwbench's local launcher), joined by torch.distributed from the
environment (init_method "env://": MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, set here from
workloads.distributed.World), gloo on CPUs, NCCL on CUDA. Each rank builds the workload's
one-device model and wraps its module as frameworks/torch/parallel.py does for its spawned
ranks (_local: DistributedDataParallel with the counting communication hook, or FSDP2's
fully_shard for "sharded", DDP.no_sync() for "no-sync"); here every rank is a peer that runs
the same program, with no rank driving the others.
"""
from __future__ import annotations

import datetime
import os
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from frameworks.torch.parallel import _local, counted
from workloads.base import Model, is_accelerator
from workloads.case import Case
from workloads.distributed import World, peer_timeout_s
from workloads.parallel import shard

# The mode its multi-process step runs in by default: DDP's step as torch users write it (its
# compiled form is a fallback: frameworks/torch/parallel.py).
MODE = "eager"

class Runtime:
    """torch.distributed's default process group over the world's processes."""

    def __init__(self, world: World, kind: str = "cpu") -> None:
        self.world = world
        os.environ.update(MASTER_ADDR=world.coordinator, MASTER_PORT=str(world.port), RANK=str(world.rank),
                          WORLD_SIZE=str(world.size), LOCAL_RANK=str(world.local_rank))
        self.backend = "nccl" if is_accelerator(kind) else "gloo"
        if self.backend == "nccl":
            torch.cuda.set_device(world.local_rank)
        dist.init_process_group(self.backend, init_method="env://",
                                timeout=datetime.timedelta(seconds=peer_timeout_s()))
        self.joined = (f"torch.distributed.init_process_group({self.backend!r}, init_method='env://') from "
                       f"MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE")

    def data_parallel(self, adapter: Any, build: Any, config: Any, params: dict[str, np.ndarray],
                      case: Case) -> "Ranked":
        return Ranked(_local(adapter, build, config, params, case), case, self.world)

    def barrier(self) -> None:
        dist.barrier()

    def allreduce_s(self, sizes: list[int]) -> float:
        """Seconds to all-reduce (mean) float32 tensors of these byte sizes, one dist.all_reduce
        each, one after another (as DDP's hook reduces its buckets)."""
        ts = [torch.ones(max(1, b // 4)) for b in sizes]
        t0 = time.perf_counter()
        for t in ts:
            dist.all_reduce(t)
            t.div_(self.world.size)
        return time.perf_counter() - t0

    def wait(self, model: Any, out: Any) -> None:
        """Until a step is done: DDP's reducer has waited for its all-reduces before the
        optimizer ran, and CPU kernels are synchronous; CUDA's are not."""
        if self.backend == "nccl":
            torch.cuda.synchronize()


class Ranked(Model):
    """This rank's data-parallel model: its rows of every global batch, the framework's step."""

    def __init__(self, local: Any, case: Case, world: World) -> None:
        self.local, self.strategy, self.world = local, case.strategy, world
        self.model, self.config, self.mode = local.model, local.model.config, local.model.mode

    def place_inputs(self, *arrays: Any) -> tuple[torch.Tensor, ...]:
        """This rank's rows of the global batch (every rank holds the same global batch)."""
        return tuple(torch.from_numpy(np.ascontiguousarray(shard(np.asarray(a.cpu() if torch.is_tensor(a) else a),
                                                                 self.world.size, self.world.rank)))
                     .to(self.model.device) for a in arrays)

    def train_step(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.local.step(*inputs)

    def grads(self, *inputs: torch.Tensor) -> dict[str, np.ndarray]:
        return self.local.grads(*inputs)

    def export_params(self) -> dict[str, np.ndarray]:
        return self.local.full_params()

    def collectives(self, *inputs: torch.Tensor) -> dict[str, Any]:
        """What one more step communicates (frameworks.torch.parallel.counted); the bytes of
        each bucket it all-reduced are then allreduce_sizes."""
        k = len(getattr(self.local.count, "sizes", []))
        out = counted(self.local, self.strategy, lambda: self.train_step(*inputs))
        self.allreduce_sizes = list(getattr(self.local.count, "sizes", [])[k:])
        return out


def start(world: World, kind: str = "cpu") -> Runtime:
    return Runtime(world, kind)

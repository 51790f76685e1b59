"""The PyTorch adapter: devices, numpy in/out, synchronisation, torch.compile's counters,
threads, float32 matmul precision, CUDA memory and Inductor's persistent cache.

This package is named like the framework; `import torch` below is an absolute import and
gets PyTorch itself (never use relative imports here, they could shadow it).
"""
from __future__ import annotations

import os

from frameworks import base

# Inductor reads its cache location from the environment when it first compiles, so set it
# before torch starts: compiled kernels and FX graphs then persist across runs in fwbench's
# cache directory. A location the user chose is kept.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(base.default_cache_dir(), "torchinductor"))

from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch._dynamo.utils  # noqa: E402  (Dynamo's counters: compilations and graph breaks)
import torch._inductor.config  # noqa: E402


class Adapter(base.Adapter):
    name = "torch"
    modes = ("eager", "compiled")
    compile_counter = ("torch._dynamo.utils.counters['stats']['unique_graphs'] (graphs Dynamo handed "
                       "to Inductor; a backward compiles with its forward's graph)")
    cpu_memory_note = None

    def __init__(self) -> None:
        super().__init__()
        # Graph-break reasons in the order they were first seen, one entry per fallbacks()
        # call in which their count grew, so slicing at an earlier length gives what is new.
        self._breaks: list[str] = []
        self._break_counts: dict[str, int] = {}

    # -- runtime ---------------------------------------------------------------------
    def version(self) -> str:
        return torch.__version__

    def devices(self) -> list[str]:
        # One code path for both: models are built on `device` and inputs moved there.
        return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    def device_name(self, device: str) -> str:
        return torch.cuda.get_device_name(torch.device(device)) if device == "cuda" else "cpu"

    def _apply_threads(self, n: int) -> None:
        torch.set_num_threads(n)
        # The inter-op pool runs only independent ops in parallel (torch.jit.fork); no GPT op
        # uses it. One thread, as TensorFlow gets from set_threads. PyTorch allows setting it
        # only before the pool has started, so a second configure() leaves it as it is.
        if torch.get_num_interop_threads() != 1:
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass

    def _apply_matmul_precision(self, precision: str) -> None:
        tf32 = precision == "tf32"
        # IEEE float32 everywhere first (cuBLAS, cuDNN, and oneDNN on the CPU), then TF32 on
        # the GPU only when asked: the CPU keeps full float32 either way, as JAX and
        # TensorFlow do there.
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32

    def asarray(self, x: np.ndarray, device: str) -> torch.Tensor:
        # A copy with the same dtype (int32 tokens stay int32), not a view of the numpy array.
        return torch.tensor(np.asarray(x), device=device)

    def to_numpy(self, x: Any) -> Any:
        if isinstance(x, dict):
            return {k: self.to_numpy(v) for k, v in x.items()}
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().numpy()
        return np.asarray(x)

    def sync(self, x: Any) -> Any:
        # CUDA kernels run asynchronously: wait for all of them. On the CPU every torch op
        # (eager or Inductor-compiled) has finished when it returns, so there is nothing to wait for.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return x

    def matmul_fn(self) -> Any:
        # Eager matmul already is one cuBLAS / MKL call; compiling it adds nothing.
        return torch.matmul

    # -- compilation -----------------------------------------------------------------
    def compilations(self) -> int:
        return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])

    def fallbacks(self) -> list[str]:
        for reason, n in list(torch._dynamo.utils.counters["graph_break"].items()):
            if n > self._break_counts.get(reason, 0):
                self._breaks.append(" ".join(reason.split()))  # Dynamo's message, on one line
                self._break_counts[reason] = n
        return list(self._breaks)

    def compile_cache(self) -> str:
        if not torch._inductor.config.fx_graph_cache:
            return "off"
        root = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        for sub in ("fxgraph", "aotautograd"):  # where Inductor keeps its cached graphs
            for _, _, files in os.walk(os.path.join(root, sub)):
                if files:
                    return "warm"
        return "empty"

    # -- memory ----------------------------------------------------------------------
    def reset_peak_memory(self, device: str) -> None:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def peak_memory(self, device: str) -> int | None:
        # The caching allocator's high-water mark of tensor memory; PyTorch keeps no such
        # statistic for the CPU.
        return int(torch.cuda.max_memory_allocated(device)) if device == "cuda" else None


def adamw(named: dict[str, "torch.nn.Parameter"], opt: Any, decayed: Any) -> tuple["torch.optim.AdamW", str]:
    """torch.optim.AdamW as nanoGPT's configure_optimizers builds it: weight decay on the
    parameters `decayed(name, shape)` selects, none on the others; hyperparameters from
    the workload's AdamW. The fused kernel (one pass over all tensors) where this build has
    one for the device (CPU since PyTorch 2.4, CUDA), else foreach. Returns it and its kind."""
    decay = [p for k, p in named.items() if decayed(k, tuple(p.shape))]
    no_decay = [p for k, p in named.items() if not decayed(k, tuple(p.shape))]
    groups = [{"params": decay, "weight_decay": opt.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    hyper = dict(lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=opt.eps)
    try:
        return torch.optim.AdamW(groups, fused=True, **hyper), "fused"
    except RuntimeError:
        return torch.optim.AdamW(groups, foreach=True, **hyper), "foreach"

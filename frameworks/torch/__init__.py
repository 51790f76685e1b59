"""The PyTorch adapter: devices, numpy in/out, synchronisation, torch.compile's counters,
threads, float32 matmul precision, CUDA memory and Inductor's persistent cache.

This package is named like the framework; `import torch` below is an absolute import and
gets PyTorch itself (never use relative imports here, they could shadow it).
"""
from __future__ import annotations

import os

from frameworks import base
from workloads.base import CUDA_GRAPHS, Unsupported, merge_tree

# Inductor reads its cache location from the environment, and torch._dynamo sets a default
# there when it loads: point it at fwbench's folder before torch starts (configure_caches runs
# once per process, normally much earlier, from set_threads).
base.configure_caches()

import contextlib  # noqa: E402
import logging  # noqa: E402
import tempfile  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch._dynamo.utils  # noqa: E402  (Dynamo's counters: compilations and graph breaks)
import torch._inductor.config  # noqa: E402


class _LimitHits(logging.Handler):
    """Counts Dynamo's warning "torch._dynamo hit config.recompile_limit (N)": the only sign
    that a function reached its recompile limit and runs eagerly from then on (a warning, no
    counter; torch._dynamo/convert_frame.py)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("torch._dynamo hit config."):
            self.count += 1


_LIMIT_HITS = _LimitHits()
# Where Inductor and Triton keep compiled code on disk (case_caches sets both per case).
_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
logging.getLogger("torch._dynamo.convert_frame").addHandler(_LIMIT_HITS)


# torch's per-backend float32 precision settings (torch >= 2.9), the generic one first; () where absent.
_FP32_PRECISION = tuple(obj for obj in (
    torch.backends, torch.backends.cuda.matmul, torch.backends.cudnn, getattr(torch.backends.cudnn, "conv", None),
    getattr(torch.backends.cudnn, "rnn", None), torch.backends.mkldnn, getattr(torch.backends.mkldnn, "matmul", None),
    getattr(torch.backends.mkldnn, "conv", None), getattr(torch.backends.mkldnn, "rnn", None))
    if hasattr(obj, "fp32_precision"))


def _legacy() -> tuple[str, bool, bool] | None:
    """torch's legacy float32 flags (matmul precision, cuBLAS TF32, cuDNN TF32); None where torch
    refuses to read them (its new per-backend settings were written and disagree)."""
    try:
        return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
                torch.backends.cudnn.allow_tf32)
    except RuntimeError:
        return None


def _set_legacy(state: tuple[str, bool, bool]) -> None:
    """Write the legacy flags that differ from state, in the order in which one sets the next
    (the precision sets cuBLAS TF32): writing a flag to the value it has already can leave torch
    with the two APIs in disagreement, after which it refuses to read them."""
    precision, matmul_tf32, cudnn_tf32 = state
    if _legacy() is None or torch.get_float32_matmul_precision() != precision:
        torch.set_float32_matmul_precision(precision)
    for obj, value in ((torch.backends.cuda.matmul, matmul_tf32), (torch.backends.cudnn, cudnn_tf32)):
        try:
            same = obj.allow_tf32 == value
        except RuntimeError:
            same = False
        if not same:
            obj.allow_tf32 = value


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
        _set_legacy(("highest", tf32, tf32))

    def global_precision(self) -> tuple[Any, ...]:
        # torch >= 2.9 keeps the state in its fp32_precision attributes as well as in the legacy
        # flags; the legacy getters refuse to read once the two disagree (and torch.export reads
        # them), so both are kept and the legacy ones put back first, through the legacy setters.
        return _legacy(), tuple(getattr(obj, "fp32_precision") for obj in _FP32_PRECISION)

    def set_global_precision(self, state: tuple[Any, ...]) -> None:
        legacy, new = state
        if legacy is not None:
            _set_legacy(legacy)
        for obj, value in zip(_FP32_PRECISION, new):
            if getattr(obj, "fp32_precision") != value:     # untouched: a write mixes the two APIs
                obj.fp32_precision = value

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

    def cast(self, x: torch.Tensor, precision: str) -> torch.Tensor:
        from frameworks.torch.precision import COMPUTE
        return x.to(COMPUTE[precision])

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

    def model_fallbacks(self) -> list[str]:
        _settle_counted()
        return list(_MODEL_BREAKS)

    def recompile_limit_hits(self) -> int | None:
        return _LIMIT_HITS.count

    compile_timer = ("torch._dynamo.utils.compilation_time_metrics: '_compile.compile_inner' (Dynamo "
                     "tracing + AOTAutograd + Inductor for each graph) plus the lazily compiled backward "
                     "graphs ('compile_fx.<locals>.bw_compiler')")

    def compile_seconds(self) -> float | None:
        m = torch._dynamo.utils.compilation_time_metrics
        return float(sum(m.get("_compile.compile_inner", ())) + sum(m.get("compile_fx.<locals>.bw_compiler", ())))

    def cache_hits(self) -> int | None:
        c = torch._dynamo.utils.counters
        return int(c["inductor"]["fxgraph_cache_hit"] + c["aot_autograd"]["autograd_cache_hit"])

    def startup_program(self, mode: str, device: str) -> Any:
        if mode != "compiled":
            return None

        def throwaway(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:   # no case's function or shapes
            return torch.nn.functional.gelu(x @ w).square().sum()

        fn = torch.compile(throwaway)     # Dynamo, AOTAutograd (forward and backward), Inductor's C++ codegen
        x = torch.randn(3, 5, device=device)
        w = torch.randn(5, 7, device=device, requires_grad=True)

        def run() -> torch.Tensor:
            fn(x, w).backward()
            return w.grad
        return run

    @contextlib.contextmanager
    def case_caches(self, role: str) -> Any:
        """Every case from Dynamo's fresh-process state: torch._dynamo.reset() (every compiled
        frame, guard and graph of earlier cases forgotten: measured at tiny, the default
        compiled GPT train_step after its `compiled-adamw` variant in one process compiled 0
        graphs in a 0.61 s first call without it, 1 graph in 6.5 s with it) and Inductor's
        in-memory caches cleared, on entry and exit (what fresh_cache does; fresh_cache itself
        is not used, since it logs a warning that it keeps its folder whenever a case raises,
        an `unsupported` one too). On disk, by role: cold, the case gets its own empty
        TORCHINDUCTOR_CACHE_DIR (FX graphs,
        AOTAutograd entries and C++ kernels all miss), whose entries are merged into the
        process's folder afterwards (content-addressed), so later warm processes find them;
        warm, the process's folder (the run's filled cache); off, an empty folder of its own,
        not kept (the FX graph and AOTAutograd caches are off, but Inductor still writes and
        reuses compiled kernels on disk)."""
        from torch._inductor.utils import clear_caches
        torch._dynamo.reset()
        clear_caches()
        saved = {v: os.environ.get(v) for v in _CACHE_VARS}
        with contextlib.ExitStack() as stack:
            folder = base.cache_dir("torch") if role == "warm" else stack.enter_context(
                tempfile.TemporaryDirectory(prefix="fwbench-case-", ignore_cleanup_errors=True))
            # Triton's folder inside Inductor's, as fresh_cache sets it, so that merged
            # entries lie where a warm process looks (Inductor fixes TRITON_CACHE_DIR once)
            os.environ.update(TORCHINDUCTOR_CACHE_DIR=folder, TRITON_CACHE_DIR=os.path.join(folder, "triton"))
            try:
                yield base.CASE_CACHES[role]
            finally:
                for v, value in saved.items():
                    if value is None:
                        os.environ.pop(v, None)
                    else:
                        os.environ[v] = value
                clear_caches()
                if role == "cold":
                    merge_tree(folder, base.cache_dir("torch"))

    @contextlib.contextmanager
    def fresh_caches(self) -> Any:
        """Inductor's own fresh_cache: its in-memory caches cleared and a new, empty
        TORCHINDUCTOR_CACHE_DIR for the block (FX graphs, AOTAutograd entries and the compiled
        C++ kernels all start empty), deleted after it, a failed compile too (fresh_cache
        keeps its folder on an error: it is made inside one of ours); Dynamo's caches are
        already fresh (case_caches resets them)."""
        from torch._inductor.utils import fresh_cache
        with tempfile.TemporaryDirectory(prefix="fwbench-cold-", ignore_cleanup_errors=True) as tmp, \
                fresh_cache(dir=tmp):
            yield "empty"

    def cache_dir_in_use(self) -> str | None:
        if not torch._inductor.config.fx_graph_cache:
            return None
        from torch._inductor.runtime.cache_dir_utils import cache_dir
        return cache_dir()

    def settings(self) -> dict[str, str]:
        from frameworks.torch.optim import DEFAULT_RECIPE, TRAIN_RECIPES
        return {"interop threads": str(torch.get_num_interop_threads()),
                "float32 matmul precision": torch.get_float32_matmul_precision(),
                "train step (compiled)": f"{TRAIN_RECIPES[DEFAULT_RECIPE]} (strategy {DEFAULT_RECIPE!r} by default)",
                "generate": "Python loop over a compiled one-token decode step (static KV cache)"}

    # -- memory ----------------------------------------------------------------------
    def reset_peak_memory(self, device: str) -> None:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def peak_memory(self, device: str) -> int | None:
        # The caching allocator's high-water mark of tensor memory; PyTorch keeps no such
        # statistic for the CPU.
        return int(torch.cuda.max_memory_allocated(device)) if device == "cuda" else None


# The model's own graphs are compiled with fullgraph=True first; a break there (not in
# torch.optim, whose breaks are deliberate) is what makes a case a `fallback`.
_MODEL_BREAKS: list[str] = []


def compile_model(fn: Any, dynamic: bool | None = None, mode: str | None = None) -> Any:
    """torch.compile(fn, fullgraph=True): the model's forward/loss must be one graph. If
    Dynamo cannot make one graph, the break is recorded (Adapter.model_fallbacks) and fn is
    compiled again without fullgraph, as torch.compile's default would have done silently.
    `dynamic` is torch.compile's (None: specialise, then recompile with dynamic shapes when a
    second shape arrives; False: a graph per shape); `mode` is torch.compile's too
    ("reduce-overhead": CUDA graphs, compile_for)."""
    full = torch.compile(fn, fullgraph=True, dynamic=dynamic, mode=mode)
    state: dict[str, Any] = {"fn": full}

    def call(*args: Any, **kwargs: Any) -> Any:
        if state["fn"] is full:
            try:
                return full(*args, **kwargs)
            except torch._dynamo.exc.Unsupported as e:
                _MODEL_BREAKS.append(" ".join(str(e).split())[:300])
                state["fn"] = torch.compile(fn, dynamic=dynamic, mode=mode)
        return state["fn"](*args, **kwargs)
    return call


def compile_for(mode: str, strategy: str | None, device: str) -> Any:
    """How a model's entry points are wrapped in `mode`: compile_model when compiled, with
    torch.compile's mode="reduce-overhead" (CUDA graphs) for the cudagraphs strategy, which
    only a CUDA device has; the function itself when eager."""
    if mode != "compiled":
        return lambda f: f
    if strategy == CUDA_GRAPHS:
        if not str(device).startswith("cuda"):
            raise Unsupported(f"the {CUDA_GRAPHS} strategy replays CUDA graphs; device {device!r} has none")
        return lambda f: compile_model(f, mode="reduce-overhead")
    return compile_model


def _break_counts() -> dict[str, int]:
    """Dynamo's break counters by message: a break at a call it cannot trace is counted under
    'graph_break', one at data-dependent control flow stays under 'unimplemented' (torch
    2.13, symbolic_convert.py)."""
    c = torch._dynamo.utils.counters
    return {**c["unimplemented"], **c["graph_break"]}


# Dynamo's break counts when the first compile_counted function not yet settled was made.
_COUNTED: list[dict[str, int]] = []


def _settle_counted() -> None:
    """Record as the model's the breaks Dynamo counted since compile_counted's snapshot."""
    if _COUNTED:
        before = _COUNTED.pop()
        grew = (" ".join(m.split())[:300] for m, n in _break_counts().items() if n > before.get(m, 0))
        _MODEL_BREAKS.extend(dict.fromkeys(grew))


def compile_counted(fn: Any) -> Any:
    """torch.compile(fn) with its defaults, as a user calls it, returned as it is: no wrapper
    of fwbench's around it, whose Python frame every call would pay. Its graph breaks are
    read from Dynamo's break counters instead of by fullgraph=True: the breaks counted from
    the moment it is made until the adapter's model_fallbacks() is next read are recorded as
    the model's (a case's own compiles are the only ones in that window; the harness reads it
    after the case), so a break makes the case a `fallback` as in compile_model.

    Why not fullgraph=True: it costs per call, in torch.compile's wrapper, and so does a
    default compile that finds a graph a fullgraph=True compile made (a backend check):
    measured on the compiled 100x100 Jacobian (torch 2.13, 1 thread, interleaved), 114 us
    with the defaults, 127 us with fullgraph=True, 117 us through the default wrapper after a
    fullgraph first call; a wrapper of fwbench's that checked the counters on the first call
    still cost 1-2 us a call (per-sample gradients of the small MLP: 67 against 70 us)."""
    if not _COUNTED:
        _COUNTED.append(_break_counts())
    return torch.compile(fn)

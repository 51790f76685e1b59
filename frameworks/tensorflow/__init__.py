"""The TensorFlow adapter: devices, numpy in/out, sync, threads, matmul precision, memory,
the compilation counter and XLA's persistent compile cache, for TensorFlow 2.

Modes:
    eager     plain TF 2 eager execution, op by op
    graph     tf.function without XLA: a traced graph run by TF's executor after Grappler's
              rewrites (constant folding, arithmetic simplification, op fusion such as
              MatMul + BiasAdd)
    compiled  tf.function(jit_compile=True): the whole function compiled by XLA

What TF reads once, when it loads or when its runtime starts, is set here before
`import tensorflow`, each only where the environment does not already say otherwise.

This package is named like the framework. `import tensorflow` below is absolute, so it
gets the real TensorFlow; nothing in this package may import relatively.
"""
from __future__ import annotations

import os
import sys

import frameworks.base
from workloads.framework_facts import facts

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # C++ INFO/WARNING lines off

# TF's best-fit-with-coalescing allocator for CPU tensors instead of plain malloc. A compiled
# train step allocates ~100 MB of XLA buffers per call; from malloc those are fresh mmap'd
# pages every step, and the page faults cost about a quarter of the small preset's compiled
# step on CPU. The BFC pool reuses them, and keeps allocator statistics, so peak_memory
# works on the CPU too. TF_CPU_ALLOCATOR_USE_BFC=false restores TF's default.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
_CPU_BFC = os.environ["TF_CPU_ALLOCATOR_USE_BFC"].strip().lower() in ("1", "true")


def _xla_cache_dir() -> str | None:
    """XLA's persistent compile cache (TF_XLA_FLAGS --tf_xla_persistent_cache_directory):
    executables compiled for tf.function(jit_compile=True) are written there and loaded,
    after TF checks they match, by later processes. The directory the user's TF_XLA_FLAGS
    names, else fwbench's cache dir; None (off) when TF was loaded before this module."""
    var, name = facts("tensorflow").cache_flag
    flags = os.environ.get(var, "")
    for flag in flags.split():
        if flag.startswith(name + "="):
            return flag.split("=", 1)[1] or None
    if not frameworks.base.caches_enabled():
        return None
    path = frameworks.base.cache_dir("tensorflow")
    if "tensorflow" in sys.modules or " " in path:  # too late to set it / a flag cannot hold it
        return None
    os.makedirs(path, exist_ok=True)
    os.environ[var] = f"{flags} {name}={path}".strip()
    return path


_XLA_CACHE = _xla_cache_dir()
_XLA_ENTRY = "xla_compile_cache__"   # how XLA names an entry of that folder (one per compiled program)

import contextlib  # noqa: E402
import logging  # noqa: E402
import weakref  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from workloads.base import FwbenchError  # noqa: E402

tf.get_logger().setLevel("ERROR")  # tf.function retracing warnings and the like

# pfor (tf.vectorized_map, GradientTape.jacobian) converts each op of the loop body to a
# vectorised one; an op it cannot convert runs in a tf.while_loop instead, said only in a log
# line ("Using a while_loop for converting <op> cause <why>", at DEBUG level, or WARNING for
# vectorized_map's own warning). The messages of such fallbacks, one per op converted so.
PFOR_FALLBACKS: list[str] = []
_PFOR_PREFIX = "Using a while_loop for converting"


class _PforFallbacks(logging.Filter):
    """Keeps pfor's fallback messages and lets through only what the logger's usual level
    (ERROR) would, while `pfor_fallbacks()` lowers the level to see them."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if msg.startswith(_PFOR_PREFIX):
            PFOR_FALLBACKS.append(" ".join(msg.split())[:300])
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def pfor_fallbacks() -> Any:
    """Record pfor's while-loop fallbacks into PFOR_FALLBACKS while the block runs (the
    vectorisation happens when a function is traced, i.e. on its first call)."""
    logger, keep = tf.get_logger(), _PforFallbacks()
    level = logger.level
    logger.addFilter(keep)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.setLevel(level)
        logger.removeFilter(keep)

# TensorFlow's own timer of tf.function tracing (microseconds, cumulative). Internal, so read
# defensively: an install without it reports no compile time rather than failing.
try:
    from tensorflow.python.eager.polymorphic_function import tracing_compilation as _tc
    _GRAPH_BUILDING_US = _tc._graph_building_time_counter.get_cell()
except (ImportError, AttributeError):  # pragma: no cover - other TF versions
    _GRAPH_BUILDING_US = None


def _set_threads_before_start(n: int) -> None:
    """Intra-op (one op's parallel loops) and inter-op (independent ops of a graph) pools
    are created when TF's runtime initialises (the first op), and are fixed after that."""
    tf.config.threading.set_intra_op_parallelism_threads(n)
    tf.config.threading.set_inter_op_parallelism_threads(
        int(os.environ.get("TF_NUM_INTEROP_THREADS", 0)) or n)


# frameworks.base.set_threads runs before any framework is imported (the pytest plugin, the
# command line): take its count now, while the runtime is certainly not started yet.
if os.environ.get("FWBENCH_THREADS"):
    _set_threads_before_start(int(os.environ["FWBENCH_THREADS"]))


def _simulate_devices(n: int) -> None:
    """Split the CPU into n logical devices (frameworks.base.prepare_placement asks for them);
    possible only before TensorFlow's runtime starts."""
    if n <= 1:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError as e:   # the runtime already started (listing logical devices starts it)
        if len(tf.config.list_logical_devices("CPU")) == n:
            return
        raise FwbenchError(f"TensorFlow's runtime already started; {n} simulated CPU devices must be made "
                           f"before it does ({e})") from None


class Adapter(frameworks.base.Adapter):
    name = "tensorflow"
    modes = ("eager", "graph", "compiled")
    compile_counter = (
        "sum of tf.function(...).experimental_get_tracing_count() over the tf.functions fwbench's "
        "TensorFlow models create (one trace = one graph built; in compiled mode each trace is "
        "XLA-compiled on its first call per input shape). XLA's own compiles are counted apart, "
        "in xla_compilations (entries written to the persistent XLA cache)")
    cpu_memory_note = ("peak bytes held by TensorFlow's CPU BFC allocator: every tensor and XLA buffer "
                       "TF allocates, not numpy or Python objects") if _CPU_BFC else None
    # oneDNN's CPU allocator pools large tensors even with BFC off (measured: a 64 MiB product
    # grows RSS by 0 unless both are off), so both go for the memory-only process
    cpu_unpooled_env = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPU_ALLOCATOR_USE_BFC": "false"}

    def __init__(self) -> None:
        super().__init__()
        # every tf.function the models made, with its tracing count when last read: a
        # model's functions may be freed while the process goes on, and the total must
        # not go down when they are
        self._functions: list[list[Any]] = []   # [weakref to tf.function, last count]
        self._has_gpu = bool(tf.config.list_physical_devices("GPU"))
        _simulate_devices(int(os.environ.get("FWBENCH_SIMULATED_DEVICES") or 1))

    # -- devices -------------------------------------------------------------------
    def version(self) -> str:
        return tf.__version__

    def devices(self) -> list[str]:
        return ["cpu"] + (["gpu"] if self._has_gpu else [])

    def check_device(self, device: str) -> str:
        if device == "cuda" and self._has_gpu:  # 'cuda' and 'gpu' name the same accelerator
            return "gpu"
        return super().check_device(device)

    def tf_device(self, device: str) -> str:
        """fwbench device name -> TensorFlow device string for tf.device."""
        return "/GPU:0" if self.check_device(device) == "gpu" else "/CPU:0"

    def placement(self, device: str) -> Any:
        """The block a model's call runs in to place its work on `device`: tf.device's where the
        device is not where TensorFlow places work anyway, else a block that does nothing (a
        tf.device block costs about 3 us a call: a model's calls do no more than a user's)."""
        default = (self.check_device(device) == "gpu") == self._has_gpu
        return contextlib.nullcontext() if default else Placed(self.tf_device(device))

    def device_name(self, device: str) -> str:
        if self.check_device(device) == "cpu":
            return "cpu"
        details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
        return details.get("device_name", "GPU")

    # -- runtime settings ----------------------------------------------------------
    def _apply_threads(self, n: int) -> None:
        if tf.config.threading.get_intra_op_parallelism_threads() == n:
            return
        try:
            _set_threads_before_start(n)
        except RuntimeError:  # "cannot be modified after initialization"
            current = tf.config.threading.get_intra_op_parallelism_threads() or "its default"
            raise FwbenchError(
                f"TensorFlow's runtime already started with {current} intra-op threads and cannot "
                f"change to {n}: set the thread count (frameworks.set_threads / --threads) before "
                f"any TensorFlow op runs") from None

    def _apply_matmul_precision(self, precision: str) -> None:
        # TF enables TF32 on Ampere+ GPUs by default; 'highest' turns it off
        tf.config.experimental.enable_tensor_float_32_execution(precision == "tf32")

    def global_precision(self) -> tuple[Any, ...]:
        return (tf.config.experimental.tensor_float_32_execution_enabled(),)

    def set_global_precision(self, state: tuple[Any, ...]) -> None:
        tf.config.experimental.enable_tensor_float_32_execution(state[0])

    # -- arrays --------------------------------------------------------------------
    def asarray(self, x: np.ndarray, device: str) -> tf.Tensor:
        with tf.device(self.tf_device(device)):
            return tf.constant(x)  # an eager constant is created on the device in scope

    def to_numpy(self, x: Any) -> Any:
        if isinstance(x, dict):
            return {k: self.to_numpy(v) for k, v in x.items()}
        if isinstance(x, (tuple, list)):
            return type(x)(self.to_numpy(v) for v in x)
        return x.numpy() if hasattr(x, "numpy") else np.asarray(x)

    def sync(self, x: Any) -> Any:
        """TF executes eagerly in synchronous mode by default (we never switch it off): an
        op or tf.function call on the CPU returns only once its kernels have run, so its
        tensors are finished. GPU kernels are queued on CUDA streams and return early;
        there tf.test.experimental.sync_devices() blocks until every queued op is done."""
        if self._has_gpu:
            tf.test.experimental.sync_devices()
        return x

    def cast(self, x: tf.Tensor, precision: str) -> tf.Tensor:
        from frameworks.tensorflow.precision import COMPUTE
        return tf.cast(x, COMPUTE[precision])

    def matmul_fn(self) -> Callable[[Any, Any], Any]:
        return self.function(tf.matmul, jit_compile=True)

    # -- compilation ---------------------------------------------------------------
    def function(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """tf.function(fn, **kwargs), registered so `compilations` counts its traces.
        The models make every tf.function through here."""
        f = tf.function(fn, **kwargs)
        self._functions.append([weakref.ref(f), 0])
        return f

    def compilations(self) -> int:
        for entry in self._functions:
            f = entry[0]()
            if f is not None:
                entry[1] = f.experimental_get_tracing_count()
        return sum(count for _, count in self._functions)

    def fallbacks(self) -> list[str]:
        return list(PFOR_FALLBACKS)

    def model_fallbacks(self) -> list[str]:
        # a vectorised transform that runs (part of) its body as a while loop: the case is
        # `fallback`, with pfor's reason
        return list(PFOR_FALLBACKS)

    def cache_dir_in_use(self) -> str | None:
        return _XLA_CACHE

    def counters(self) -> dict[str, int]:
        """xla_compilations: XLA compiles under tf.function(jit_compile=True), read from the
        only place TF shows them to Python, its persistent cache folder: XLA writes one entry
        (xla_compile_cache__<signature>__<fingerprint>__<device>.pb) per program it compiles,
        a new concrete shape under one input_signature trace included; a program loaded from
        the folder writes none. TF counts them in the C++ metric /tensorflow/core/xla_compilations
        (and xla_compilation_time_usecs), but a Python monitoring.Counter of that name is a
        new metric of its own (reads 0), and no Python API reads the C++ registry, so XLA's
        compile time stays unknown. Absent when the cache is off."""
        if _XLA_CACHE is None:
            return {}
        try:
            return {"xla_compilations": sum(n.startswith(_XLA_ENTRY) for n in os.listdir(_XLA_CACHE))}
        except OSError:
            return {}

    def startup_program(self, mode: str, device: str) -> Any:
        """graph: a tf.function's tracing, AutoGraph and Grappler; compiled: XLA's too. The
        XLA entry it writes in a persistent cache folder is keyed by its own tf.function's
        process-unique name and its program's fingerprint, which no case's program has."""
        if mode == "eager":
            return None

        def throwaway(x: Any, w: Any) -> Any:     # no case's function or shapes
            with tf.GradientTape() as tape:
                tape.watch(w)
                y = tf.reduce_sum(tf.tanh(tf.matmul(x, w)))
            return y, tape.gradient(y, w)

        fn = self.function(throwaway, jit_compile=mode == "compiled")
        with tf.device(self.tf_device(device)):
            x, w = tf.ones((3, 5)), tf.ones((5, 7))

        def run() -> Any:
            with tf.device(self.tf_device(device)):
                return fn(x, w)
        return run

    @contextlib.contextmanager
    def case_caches(self, role: str) -> Any:
        """Nothing to do per case: each case builds a new model, hence new tf.functions, which
        trace and (compiled mode) XLA-compile on their first call whatever ran before. XLA's
        persistent-cache entries are keyed by the tf.function's process-unique name (measured:
        a new tf.function of the same Python function and shapes writes a new entry), so a
        case hits an entry only in a later process that created its functions in the same
        order; and TF reads its cache folder once per process (TF_XLA_FLAGS), so no case can
        have a folder of its own."""
        yield ("none (persistent cache off); new tf.functions" if _XLA_CACHE is None
               else "process cache folder; XLA entries keyed by this process's tf.function names")

    @contextlib.contextmanager
    def fresh_caches(self) -> Any:
        """tf.functions are new per case (in memory, nothing is shared), but TF reads its
        persistent XLA cache folder once per process (TF_XLA_FLAGS), so it cannot be left
        out of a block: "empty" only when it is off, else "persistent cache on" (an entry an
        earlier case or process wrote is loaded; xla_compilations_cold then stays below the
        distinct shapes)."""
        yield "empty" if _XLA_CACHE is None else "persistent cache on"

    compile_timer = ("tf.function graph building (/tensorflow/core/tf_function/graph_building_time_usecs); "
                     "XLA's own compile time is not exposed to Python, so compiled mode's compile_s "
                     "leaves it out (XLA's compiles are counted: xla_compilations)")

    def compile_seconds(self) -> float | None:
        return None if _GRAPH_BUILDING_US is None else _GRAPH_BUILDING_US.value() / 1e6

    def settings(self) -> dict[str, str]:
        return {"TF_CPU_ALLOCATOR_USE_BFC": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", ""),
                "inter-op threads": str(tf.config.threading.get_inter_op_parallelism_threads()),
                "TF_XLA_FLAGS": os.environ.get("TF_XLA_FLAGS", "") or "none",
                "gpt layout": "residual stream as flat (B*T, C) rows",
                "AdamW": "hand-written with torch.optim.AdamW's semantics (Keras 3's differs)",
                "generate / sample loops": "tf.while_loop inside one tf.function (graph, compiled); "
                                           "Python loop (eager)"}

    # -- memory ----------------------------------------------------------------------
    def _memory_device(self, device: str) -> str | None:
        """TF's name of the device whose allocator keeps statistics, None if it keeps none."""
        if self.check_device(device) == "gpu":
            return "GPU:0"
        return "CPU:0" if _CPU_BFC else None

    def reset_peak_memory(self, device: str) -> None:
        if self._memory_device(device) and self.peak_memory(device) is not None:
            tf.config.experimental.reset_memory_stats(self._memory_device(device))

    def peak_memory(self, device: str) -> int | None:
        if self._memory_device(device) is None:
            return None
        try:
            return int(tf.config.experimental.get_memory_info(self._memory_device(device))["peak"])
        except ValueError:  # TF's runtime started before this module set the BFC allocator
            return None


class Placed:
    """A reusable block for tf.device(name) (tf.device's own object is made per block)."""

    def __init__(self, name: str) -> None:
        self.name, self._open = name, []

    def __enter__(self) -> None:
        block = tf.device(self.name)
        block.__enter__()
        self._open.append(block)

    def __exit__(self, *exc: Any) -> None:
        self._open.pop().__exit__(*exc)

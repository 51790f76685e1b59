"""The JAX adapter: devices, numpy in/out, synchronisation, JAX's compile events, threads,
float32 matmul precision, device memory and the persistent compilation cache.

This package is named like the framework; `import jax` below is an absolute import and
gets JAX itself (never use relative imports here, they could shadow it).
"""
from __future__ import annotations

import os

# Threads. XLA's CPU client sizes its intra-op (Eigen) thread pool when it is created, on
# the first use of the CPU backend, from the PJRT_NPROC environment variable
# (xla/pjrt/utils.cc, DefaultThreadPoolSize(): PJRT_NPROC, else NPROC, else the CPUs this
# process may run on). There is no XLA flag or JAX option for the count in jaxlib 0.10.2
# (--xla_cpu_multi_thread_eigen is only on/off), and nothing resizes the pool afterwards.
# So apply fwbench's thread count now, before anything can start the backend.
if os.environ.get("FWBENCH_THREADS"):
    os.environ["PJRT_NPROC"] = os.environ["FWBENCH_THREADS"]

import contextlib  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax._src import xla_bridge  # noqa: E402  (the only place that says whether the backend started)

from frameworks import base  # noqa: E402
from workloads.base import merge_tree  # noqa: E402

# jax.monitoring events, names as this version's jax/_src/dispatch.py and compiler.py record them.
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# Tracing to a jaxpr, lowering it to MLIR, and XLA's compile: together, compile time.
COMPILE_TIME_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                       "/jax/core/compile/jaxpr_to_mlir_module_duration", BACKEND_COMPILE_EVENT)
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"

# Counted by listeners registered once per process, however many adapters are made.
_COUNTS: dict[str, float] = {"compilations": 0, "cache_hits": 0, "compile_s": 0.0}
_LISTENING = False


def _on_duration(event: str, duration: float, **kwargs: Any) -> None:
    if event == BACKEND_COMPILE_EVENT:
        _COUNTS["compilations"] += 1
    if event in COMPILE_TIME_EVENTS:
        _COUNTS["compile_s"] += duration


def _on_event(event: str, **kwargs: Any) -> None:
    if event == CACHE_HIT_EVENT:
        _COUNTS["cache_hits"] += 1


def _listen() -> None:
    global _LISTENING
    if not _LISTENING:
        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        jax.monitoring.register_event_listener(_on_event)
        _LISTENING = True


class Adapter(base.Adapter):
    name = "jax"
    modes = ("eager", "compiled")
    compile_counter = ("jax.monitoring events '/jax/core/compile/backend_compile_duration': XLA "
                       "executables built, by jit or by eager ops on new shapes, including those "
                       "loaded from the persistent cache ('/jax/compilation_cache/cache_hits')")
    cpu_memory_note = None

    def __init__(self) -> None:
        super().__init__()
        _listen()
        # The persistent compilation cache, in fwbench's cache folder (set by
        # base.configure_caches through JAX_COMPILATION_CACHE_DIR before jax loaded; set here
        # too in case jax was imported first). JAX's defaults write only programs that took
        # over a second to compile; fwbench's programs are small, so every program is cached,
        # whatever its compile time or size. JAX also points XLA's own GPU caches into that
        # folder by default (jax_persistent_cache_enable_xla_caches: the per-fusion autotune
        # cache), and that path is part of every program's cache key: a program compiled in a
        # cold case's or cold process's own folder would never be found once merged into the
        # run's shared one (measured: a folder copied elsewhere, 0 hits; with them off, every
        # program hit). They are off: a program loaded from the cache is not autotuned again.
        if base.caches_enabled():
            jax.config.update("jax_compilation_cache_dir", base.cache_dir("jax"))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
            jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
        self._peak_at_reset: dict[str, int | None] = {}

    # -- runtime ---------------------------------------------------------------------
    def version(self) -> str:
        return jax.__version__

    def devices(self) -> list[str]:
        try:
            has_gpu = bool(jax.devices("gpu"))
        except RuntimeError:  # no GPU backend in this jaxlib, or no GPU
            has_gpu = False
        return ["cpu"] + (["gpu"] if has_gpu else [])

    def jax_device(self, device: str) -> jax.Device:
        """This process's first jax.Device of a kind ('cuda' is the same accelerator as 'gpu'):
        in a multi-controller run (frameworks/jax/distributed.py) jax.devices() lists every
        process's devices, and a process builds its model on one of its own."""
        return jax.local_devices(backend="gpu" if device == "cuda" else device)[0]

    def device_name(self, device: str) -> str:
        return "cpu" if device == "cpu" else self.jax_device(device).device_kind

    def _apply_threads(self, n: int) -> None:
        if not xla_bridge.backends_are_initialized():
            os.environ["PJRT_NPROC"] = str(n)  # read when the CPU client is created (see the top)
        elif os.environ.get("PJRT_NPROC") != str(n):
            # Too late: the CPU client exists and its pool keeps the size it was created with.
            # When n is below the CPUs available, set_threads has pinned the process to n CPUs,
            # so the pool's threads share those n CPUs; the pool size itself is unchanged.
            warnings.warn(f"JAX's CPU backend already started with its own thread pool size; "
                          f"{n} threads are enforced only through CPU affinity", stacklevel=2)

    def _apply_matmul_precision(self, precision: str) -> None:
        # JAX lets GPUs use TF32 for float32 matmuls by default: say which one we want.
        jax.config.update("jax_default_matmul_precision",
                          "tensorfloat32" if precision == "tf32" else "highest")

    def global_precision(self) -> tuple[Any, ...]:
        return (jax.config.jax_default_matmul_precision,)

    def _precision_scope(self, precision: str) -> Any:
        # JAX's own scoped setting (thread-local, part of jit's cache key): the global one is
        # never touched
        return jax.default_matmul_precision("tensorfloat32" if precision == "tf32" else "highest")

    def set_global_precision(self, state: tuple[Any, ...]) -> None:
        jax.config.update("jax_default_matmul_precision", state[0])

    def asarray(self, x: np.ndarray, device: str) -> jax.Array:
        return jax.device_put(np.asarray(x), self.jax_device(device))

    def to_numpy(self, x: Any) -> Any:
        if isinstance(x, dict):
            return {k: self.to_numpy(v) for k, v in x.items()}
        return np.asarray(x)

    def sync(self, x: Any) -> Any:
        # JAX dispatches asynchronously: wait for every array in the pytree.
        return jax.block_until_ready(x)

    def cast(self, x: jax.Array, precision: str) -> jax.Array:
        from frameworks.jax.precision import COMPUTE
        return x.astype(COMPUTE[precision])

    def matmul_fn(self) -> Any:
        return jax.jit(jnp.matmul)

    # -- compilation -----------------------------------------------------------------
    def compilations(self) -> int:
        return int(_COUNTS["compilations"])

    def cache_hits(self) -> int:
        """Of compilations(), how many were loaded from the persistent cache."""
        return int(_COUNTS["cache_hits"])

    compile_timer = ("jax.monitoring durations " + ", ".join(repr(e) for e in COMPILE_TIME_EVENTS)
                     + " (tracing, lowering, XLA compile or persistent-cache load)")

    def compile_seconds(self) -> float | None:
        return float(_COUNTS["compile_s"])

    def startup_program(self, mode: str, device: str) -> Any:
        if mode != "compiled":
            return None

        def throwaway(w: jax.Array, x: jax.Array) -> jax.Array:   # no case's function or shapes
            return jnp.tanh(x @ w).sum()

        fn = jax.jit(jax.value_and_grad(throwaway))    # tracing, lowering, XLA's compile of a forward and gradient
        dev = self.jax_device(device)
        w, x = jax.device_put(np.ones((5, 7), np.float32), dev), jax.device_put(np.ones((3, 5), np.float32), dev)
        return lambda: fn(w, x)

    @contextlib.contextmanager
    def case_caches(self, role: str) -> Any:
        """Every case from JAX's fresh-process state: jax.clear_caches() on entry (traces,
        lowerings, executables, and eager mode's op-by-op kernels: measured at tiny, an eager
        diffusion `sample` after the eager forward (124 programs) in one process compiled 7
        programs in a 0.38 s first call without it, 131 in 2.97 s with it, as alone in a fresh
        process). On disk, by role: cold, jax_compilation_cache_dir points at
        an empty folder of the case's own (compilation_cache.reset_cache(), since JAX opens its
        cache once), merged into the process's folder afterwards and the setting restored;
        warm, the process's folder (the run's filled cache: a program loaded from it counts as
        a compilation, '/jax/compilation_cache/cache_hits' says how many); off, no cache."""
        from jax._src import compilation_cache
        jax.clear_caches()
        process_dir = self.cache_dir_in_use()
        if role != "cold" or process_dir is None:
            yield base.CASE_CACHES["off" if process_dir is None else role]
            return
        with tempfile.TemporaryDirectory(prefix="fwbench-case-", ignore_cleanup_errors=True) as tmp:
            jax.config.update("jax_compilation_cache_dir", tmp)
            compilation_cache.reset_cache()
            try:
                yield base.CASE_CACHES["cold"]
            finally:
                jax.config.update("jax_compilation_cache_dir", process_dir)
                compilation_cache.reset_cache()
                merge_tree(tmp, process_dir)

    @contextlib.contextmanager
    def fresh_caches(self) -> Any:
        """jax.clear_caches() (every in-memory trace, lowering and executable cache, the
        op-by-op kernels of eager mode too) and the persistent compilation cache off for the
        block (jax_enable_compilation_cache; JAX decides once whether it uses the cache, so
        compilation_cache.reset_cache() makes it decide again on entry and exit)."""
        from jax._src import compilation_cache
        was = jax.config.jax_enable_compilation_cache
        jax.clear_caches()
        jax.config.update("jax_enable_compilation_cache", False)
        compilation_cache.reset_cache()
        try:
            yield "empty"
        finally:
            jax.config.update("jax_enable_compilation_cache", was)
            compilation_cache.reset_cache()

    def cache_dir_in_use(self) -> str | None:
        path = jax.config.jax_compilation_cache_dir
        return path if path and jax.config.jax_enable_compilation_cache else None

    def settings(self) -> dict[str, str]:
        return {"PJRT_NPROC (CPU client threads)": os.environ.get("PJRT_NPROC", "unset"),
                "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") or "none",
                "matmul precision": str(jax.config.jax_default_matmul_precision),
                "persistent cache": "every program (min compile time 0 s, any size); XLA's GPU caches in its "
                                    "folder off (their path would enter every program's key)",
                "gpt layout": "residual stream as flat (B*T, C) rows",
                "generate / sample loops": "lax.fori_loop inside one jit (compiled); Python loop (eager)"}

    # -- memory ----------------------------------------------------------------------
    def _peak(self, device: str) -> int | None:
        # XLA's device allocator statistics (GPU); the CPU client keeps none (memory_stats()
        # returns None there).
        stats = self.jax_device(device).memory_stats()
        return None if not stats else stats.get("peak_bytes_in_use")

    def reset_peak_memory(self, device: str) -> None:
        # JAX cannot reset the peak: remember it, and report it later only if it grew.
        self._peak_at_reset[device] = self._peak(device)

    def peak_memory(self, device: str) -> int | None:
        """The allocator's peak since reset_peak_memory when it rose in between (then it is
        exactly this interval's peak); None when it did not rise, since then the interval's
        peak is unknown (below an earlier one), and None on the CPU."""
        peak, before = self._peak(device), self._peak_at_reset.get(device)
        if peak is None or (before is not None and peak <= before):
            return None
        return int(peak)


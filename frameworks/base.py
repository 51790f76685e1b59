"""What every framework adapter provides, and the parts they share.

An adapter is the only place that knows a framework's runtime: devices, numpy in/out,
synchronisation, compile modes, the compilation counter, threads, matmul precision and
memory. Workload implementations (frameworks/<fw>/<workload>.py) get the adapter and use
it for anything runtime-specific, so they stay plain model code.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import platform
import threading
from typing import Any

import numpy as np

from workloads.base import FwbenchError, Unsupported, available_cpus, choose, is_accelerator, restrict_cpus  # noqa: F401  (re-exported)
from workloads.case import Case, Placement
from workloads.framework_facts import FACTS, facts


class FrameworkUnavailable(FwbenchError):
    """The framework is not installed or fails to import (one line, with the pip command)."""


# glibc's mallopt parameters (<malloc.h>) and the values fwbench sets.
_M_TRIM_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -4, -8
_RETAIN = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 2**31 - 1))
RETAIN_NOTE = "glibc malloc keeps freed memory for reuse (mallopt: arena_max 1, mmap_max 0, trim_threshold 2 GiB)"
_allocator: str | None = None


def configure_allocator() -> str:
    """Make the C heap keep freed memory for reuse, the same for every framework, and say
    what is in force (recorded as the run's `allocator`).

    XLA:CPU (JAX) takes each execution's scratch space from malloc, about 160 MB for a
    small-preset train step; glibc serves that with a fresh mmap and returns it with
    munmap, so every step page-faults it in again (about 43,000 faults and 100 ms of kernel
    time per step on the 2-core machine, a third of the step). PyTorch's CPU tensors come
    from malloc too (about 7,000 faults per step). TensorFlow's BFC allocator already keeps
    its memory. With glibc's mmap and trimming off and one arena, freed blocks stay in the
    heap and the next step reuses them: JAX's step drops to about 2,900 faults and 7 ms of
    kernel time (PyTorch's to about 70 faults). The cost is that
    the process keeps its peak heap until it exits. FWBENCH_MALLOC=default leaves malloc
    as it is; other C libraries have no mallopt and are left alone. Arena limits apply to
    threads that have not allocated yet, so this runs before any framework starts (from
    set_threads).
    """
    global _allocator
    if _allocator is not None:
        return _allocator
    setting = choose("FWBENCH_MALLOC", os.environ.get("FWBENCH_MALLOC", "retain").strip().lower() or "retain",
                     ("retain", "default"))
    if setting == "default":
        _allocator = "default (FWBENCH_MALLOC=default)"
    elif platform.libc_ver()[0] != "glibc":
        _allocator = "default (not glibc: no mallopt)"
    else:
        mallopt = ctypes.CDLL(None).mallopt
        refused = [p for p, v in _RETAIN if mallopt(p, v) != 1]
        _allocator = RETAIN_NOTE if not refused else f"default (glibc mallopt refused {refused})"
    return _allocator


# What call_peak_rss measures, in words (records' `peak_memory_source`).
RSS_SOURCE = ("process peak RSS delta of one call (VmHWM after minus VmRSS before, /proc/self; "
              "malloc_trim(0) first, so heap memory freed by earlier calls is counted again)")


def _proc_status_kb(*keys: str) -> list[int]:
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return [int(fields[k].split()[0]) for k in keys]


def call_peak_rss(call: Any, args: tuple[Any, ...]) -> int | None:
    """Bytes of resident memory one call(*args) adds at its peak: VmHWM (reset to the current
    RSS by writing "5" to /proc/self/clear_refs, Linux >= 4.0) after the call minus VmRSS
    before it. None where /proc cannot do this (not Linux).

    Why malloc_trim(0) first: configure_allocator keeps freed heap memory in the process
    (mmap and trimming off), so a call after earlier ones reuses pages that are already
    resident and the delta was about 0 (measured: a jax HVP of the small MLP, 0 bytes after
    its warm-up; a call allocating 100 MB after an earlier 100 MB one: 0 MB). malloc_trim(0)
    hands those free pages back (it works whatever the trim threshold), so the call faults in
    what it needs again. Memory a framework pools itself (TensorFlow's oneDNN and BFC
    allocators) is not malloc's and is not handed back: that is why TensorFlow is measured in
    a process with its pools off (frameworks.harness.memory)."""
    try:
        if platform.libc_ver()[0] == "glibc":
            ctypes.CDLL(None).malloc_trim(0)
        (rss,) = _proc_status_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    call(*args)
    hwm, = _proc_status_kb("VmHWM")
    return max(0, hwm - rss) * 1024


def set_threads(n: int | None = None) -> int:
    """Fix the intra-op thread count for every framework, before any of them starts.

    Sets the environment variables each runtime reads at start-up (OpenMP/MKL for
    PyTorch, TF_NUM_INTRAOP_THREADS for TensorFlow, the XLA CPU flags for JAX) and, when
    n is below the CPUs available, pins the process to n CPUs so that no runtime's pool
    can use more. Adapters also apply n through their own API in `configure`. Also sets
    up the C heap (configure_allocator). Returns the count in force. The CPUs available are
    those FWBENCH_CPUS names, where set (restrict_cpus).
    """
    restrict_cpus()
    cpus = available_cpus()
    n = cpus if n is None else int(n)
    if n < 1:
        raise FwbenchError(f"threads must be a positive integer, got {n}")
    n = min(n, cpus)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS"):
        os.environ[var] = str(n)
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if n < cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    os.environ["FWBENCH_THREADS"] = str(n)
    configure_allocator()
    configure_caches()
    return n


def prepare_placement(devices: int = 1, simulated: bool = False, kind: str = "cpu",
                      threads: int | None = None) -> int:
    """Set up this process's placement before any framework starts; return the threads per
    device. One device: set_threads(threads). N devices: each gets `threads` (default: the
    CPUs available shared among them, at least one), so the process's pools get N x that (JAX's
    and TensorFlow's devices share one pool; torch's ranks are processes of their own, each
    pinned by frameworks.torch.parallel). Simulated CPU devices are made at start-up: XLA's
    host-platform device count for JAX (XLA_FLAGS, read when its CPU backend starts) and
    TensorFlow's logical CPU devices (FWBENCH_SIMULATED_DEVICES, applied by its adapter
    before its runtime starts)."""
    if devices <= 1:
        return set_threads(threads)
    if kind == "cpu" and not simulated:
        raise FwbenchError(f"--devices {devices} on a CPU: a CPU is one device; add --simulated-devices to split "
                           f"it into {devices} simulated devices, or run on an accelerator")
    per = int(threads) if threads else max(1, available_cpus() // devices)
    if simulated:
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
                 if not f.startswith("--xla_force_host_platform_device_count=")]
        os.environ["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
        os.environ["FWBENCH_SIMULATED_DEVICES"] = str(devices)
    set_threads(process_threads(per, devices))
    return per


def process_threads(per_device: int | None, devices: int) -> int | None:
    """The intra-op threads of a process whose `devices` each get `per_device` (None: all)."""
    if per_device is None:
        return None
    return min(per_device * devices, available_cpus()) if devices > 1 else per_device


def default_cache_dir() -> str:
    """Where persistent compile caches live (FWBENCH_CACHE_DIR, else ~/.cache/fwbench).
    `fwbench run` gives every run a folder of its own; the test suite uses another."""
    return os.environ.get("FWBENCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fwbench")


# Each framework's persistent compile cache is a sub-folder of default_cache_dir() and the
# environment variable its runtime reads the location from (TensorFlow's is a TF_XLA_FLAGS
# flag, set by its adapter before TensorFlow loads): workloads/framework_facts.py.
# framework -> "cold" / "warm" / "off": the cache's state when this process configured it.
_cache_state: dict[str, str] = {}


def caches_enabled() -> bool:
    """FWBENCH_COMPILE_CACHE=off turns every persistent compile cache off (on by default)."""
    v = os.environ.get("FWBENCH_COMPILE_CACHE", "on").strip().lower() or "on"
    return choose("FWBENCH_COMPILE_CACHE", v, ("on", "off")) == "on"


def cache_dir(framework: str) -> str:
    """The folder of `framework`'s persistent compile cache."""
    return os.path.join(default_cache_dir(), facts(framework).cache_subdir)


def _has_files(path: str) -> bool:
    for _, _, files in os.walk(path):
        if files:
            return True
    return False


def configure_caches() -> dict[str, str]:
    """Point every framework's persistent compile cache at fwbench's folder and note whether
    each was cold (empty) or warm when this process started. It must run before any framework
    is imported: PyTorch sets TORCHINDUCTOR_CACHE_DIR itself when torch._dynamo loads, after
    which a later choice is silently ignored. Runs once per process (from set_threads); the
    framework-specific variables are overwritten, so the folder is always fwbench's and the
    cold/warm state is that of the folder really used (adapters record the folder their
    runtime reports). Returns framework -> state."""
    if _cache_state:
        return dict(_cache_state)
    on = caches_enabled()
    for fw, f in FACTS.items():
        path = cache_dir(fw)
        if f.cache_env is not None:
            if on:
                os.environ[f.cache_env] = path
            else:
                os.environ.pop(f.cache_env, None)
        _cache_state[fw] = "off" if not on else ("warm" if _has_files(path) else "cold")
    if not on:   # Inductor's FX-graph and AOTAutograd caches are on by default: turn them off
        os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
        os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    return dict(_cache_state)


# The process's role, when `fwbench run` assigned one (--cache-role): it replaces the state
# read from the folder, so a warm process stays warm even if the cold one compiled nothing.
_cache_role: str | None = None


def set_cache_role(role: str | None) -> None:
    """Make this process `cold` or `warm` by design (the pytest plugin's --cache-role, set by
    `fwbench run`); None: the role follows the folder at process start (configure_caches)."""
    global _cache_role
    _cache_role = None if role is None else choose("--cache-role", role, ("cold", "warm"))


def cache_state(framework: str) -> str:
    """cold / warm / off for `framework`'s persistent compile cache in this process: off when
    the caches are off, else the role set_cache_role gave, else the folder's state at process
    start (empty: cold)."""
    state = configure_caches()[framework]
    return state if state == "off" or _cache_role is None else _cache_role


# What a case's first call finds (records' `first_call_cache`), by the process's role.
CASE_CACHES = {"cold": "empty (this case's own cache folder); in-memory state fresh",
               "warm": "the run's filled cache; in-memory state fresh",
               "off": "none (persistent caches off); in-memory state fresh"}


class Adapter:
    """Base class of the three adapters. Subclasses fill in the framework-specific methods
    (those that raise NotImplementedError here); the rest is shared."""

    name: str = ""
    modes: tuple[str, ...] = ("eager", "compiled")
    # Which of the framework's own counters `compilations()` reads, in words.
    compile_counter: str = ""
    # What `peak_memory` measures on CPU, in words (None when it measures nothing there).
    cpu_memory_note: str | None = None
    # The environment (set before the framework starts) in which its CPU tensors come from
    # glibc malloc rather than a pool of its own: where the CPU memory instrument measures it
    # (frameworks.harness.memory). {}: it always allocates from malloc.
    cpu_unpooled_env: dict[str, str] = {}

    def __init__(self) -> None:
        self.threads: int | None = None
        self.matmul_precision: str | None = None
        # (mode, device) -> seconds of the compiler's start-up in this process (None: nothing to
        # start), measured once (frameworks.harness.run.started)
        self.startup_s: dict[tuple[str, str], float | None] = {}

    # -- framework-specific --------------------------------------------------------
    def version(self) -> str:
        raise NotImplementedError

    def devices(self) -> list[str]:
        """Usable device names, 'cpu' first; 'cuda' or 'gpu' when the framework sees one."""
        raise NotImplementedError

    def device_name(self, device: str) -> str:
        """Human-readable name of the device (GPU model; 'cpu' for the CPU)."""
        raise NotImplementedError

    def _apply_threads(self, n: int) -> None:
        raise NotImplementedError

    def _apply_matmul_precision(self, precision: str) -> None:
        """'highest': full float32 matmuls (TF32 off); 'tf32': allow TF32 on GPUs. Process-wide:
        only _precision_scope calls it, and puts the settings back after."""
        raise NotImplementedError

    def global_precision(self) -> tuple[Any, ...]:
        """The framework's process-wide float32 matmul settings as they are now (what
        _apply_matmul_precision changes), for set_global_precision to put back."""
        raise NotImplementedError

    def set_global_precision(self, state: tuple[Any, ...]) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _precision_scope(self, precision: str) -> Any:
        """A block whose float32 matmuls run at `precision`. The base class: the process-wide
        settings applied on entry and put back as they were on exit (JAX has a scoped setting
        of its own)."""
        state = self.global_precision()
        self._apply_matmul_precision(precision)
        try:
            yield
        finally:
            self.set_global_precision(state)

    def own_precision(self) -> "PrecisionScope":
        """A block that runs at fwbench's float32 matmul precision (configure()'s, 'highest' by
        default: no TF32), after which the framework's float32 settings are as before it. The
        harness enters one around each case (build, first call, timed rounds); a library user
        enters one around the calls that should run as fwbench's cases do (`with
        adapter.own_precision(): model.logits(x)`). A model's calls never enter it themselves
        (a call is what is timed), so outside such a block they run at the process's own
        settings. Nested blocks change nothing; `own_precision().__enter__()` alone sets it
        until the matching __exit__ (a PrecisionScope, not a generator closed by the collector)."""
        return PrecisionScope(self)

    def asarray(self, x: np.ndarray, device: str) -> Any:
        raise NotImplementedError

    def to_numpy(self, x: Any) -> Any:
        """Framework array -> numpy array; dicts are converted value by value."""
        raise NotImplementedError

    def sync(self, x: Any) -> Any:
        """Block until x (array, tuple or dict of arrays) has been computed; return x."""
        raise NotImplementedError

    def cast(self, x: Any, precision: str) -> Any:
        """A float32 framework array in the compute dtype of `precision` (the framework's
        precision.COMPUTE table; workloads/precision.py POLICIES): the inputs of a GEMM-rate
        measurement at the case's precision."""
        raise NotImplementedError

    def matmul_fn(self) -> Any:
        """A callable (x, y) -> x @ y on framework arrays (compiled where that is the
        framework's fast path); used to measure an accelerator's GEMM rate."""
        raise NotImplementedError

    def compilations(self) -> int:
        """Cumulative compilations/traces so far, read from the framework's own counters."""
        raise NotImplementedError

    def fallbacks(self) -> list[str]:
        """Cumulative reasons the compiler fell back to Python/eager for part of a program
        (PyTorch graph breaks, including those torch.optim inserts on purpose). Frameworks
        that refuse instead of falling back return []."""
        return []

    def model_fallbacks(self) -> list[str]:
        """Of those, the breaks in a model's own forward/backward (what makes a case a
        `fallback`): cumulative; [] where the compiler refuses instead of falling back."""
        return []

    def recompile_limit_hits(self) -> int | None:
        """Cumulative times the compiler hit its recompile limit and ran a function eagerly
        from then on (torch.compile); 0 where a framework has no such limit (it compiles every
        new shape), None where it is not observable."""
        return 0

    def reset_peak_memory(self, device: str) -> None:
        pass

    def peak_memory(self, device: str) -> int | None:
        """Peak bytes since the last reset, from the device allocator; None where the
        framework does not measure it (see cpu_memory_note)."""
        return None

    def call_peak_memory(self, call: Any, args: tuple[Any, ...], device: str) -> tuple[int | None, str]:
        """(peak bytes of one call(*args), what was measured), outside any timed round, on an
        accelerator: the device allocator's peak over the call where it keeps one, else the
        process's peak RSS delta (call_peak_rss). On the CPU the harness measures every
        framework by one instrument instead (frameworks.harness.memory.cpu_call_peak)."""
        if device != "cpu" or self.cpu_memory_note is not None:
            self.reset_peak_memory(device)
            call(*args)
            peak = self.peak_memory(device)
            if peak is not None:
                return peak, f"{self.name} allocator peak over one call"
        return call_peak_rss(call, args), RSS_SOURCE

    def compile_cache(self) -> str:
        """State of the persistent compile cache when this process started: 'cold' (empty),
        'warm' (filled by an earlier process) or 'off' (see frameworks.base.configure_caches)."""
        return "off" if self.cache_dir_in_use() is None else cache_state(self.name)

    def cache_dir_in_use(self) -> str | None:
        """The compile-cache folder the framework's runtime actually uses (None: no cache)."""
        return None

    # What compile_seconds() reads, in words, or why it returns None.
    compile_timer: str = "no compile timer"

    def compile_seconds(self) -> float | None:
        """Cumulative seconds spent compiling so far, from the framework's own timers; None
        where the framework keeps none (compile_timer says so)."""
        return None

    def cache_hits(self) -> int | None:
        """Cumulative persistent compile-cache hits so far; None where not counted."""
        return None

    def startup_program(self, mode: str, device: str) -> Any:
        """A callable that makes and runs a small throw-away program in `mode` on `device` (its
        first call compiles it; the harness syncs what it returns): the process's compiler
        start-up, timed before the first case of that mode (frameworks.harness.timing
        .compiler_startup), so that no case's first call pays the one-off cost of the compiler
        stack (its imports, its first compile, its code generator and toolchain). Its function,
        shapes and ops are its own, so no case can reuse what it compiled; a forward and a
        gradient, so the backward machinery starts too. None: the framework has nothing to
        start in that mode (eager)."""
        return None

    def counters(self) -> dict[str, int]:
        """Further cumulative counters of the framework's own, by record field (TensorFlow:
        xla_compilations); the harness records each one's growth over a case. {} where none."""
        return {}

    @contextlib.contextmanager
    def fresh_caches(self) -> Any:
        """A block that compiles from empty caches, in memory and on disk, as far as the
        framework lets a running process do so: a stream's cold pass runs in it (the policy of
        docs/ARCHITECTURE.md, "Compile caches"). Yields the record's `stream_cold_cache`: "empty"
        when every cache the block can reach starts empty, else what stays warm. The base
        class: in-memory caches are fresh per case (a new model), and a persistent cache this
        class cannot switch off is said."""
        yield "empty" if self.cache_dir_in_use() is None else "persistent cache on"

    @contextlib.contextmanager
    def case_caches(self, role: str) -> Any:
        """The block one whole case runs in (model build, first call, warm-up and timed
        rounds), so that its first call starts from a fresh in-process compile state whatever
        ran before it in the process: "cold" means the case's persistent cache was empty and
        "warm" that it held the run's programs, never that an earlier case compiled the same
        graphs (docs/ARCHITECTURE.md, "First calls by design"). `role` is the process's
        compile_cache(): cold, warm or off. Yields the record's `first_call_cache`. The base
        class: a case's model is new, the persistent cache is the process's folder as it is."""
        yield f"the process's cache folder ({role} at process start); a new model's in-memory state"

    def attention_impl(self, device: str, precision: str) -> str:
        """The attention this framework's layers run on `device` at `precision`: its precision
        module's attention_impl (frameworks/<fw>/precision.py): a function of the two, and for JAX
        on a GPU of what this process's cuDNN compiles (asked again after a case: a shape it
        refused there is named)."""
        import importlib
        return importlib.import_module(f"frameworks.{self.name}.precision").attention_impl(device, precision)

    def settings(self) -> dict[str, str]:
        """Every non-default runtime setting fwbench applies to this framework, by name, for
        the report's set-up table (the C heap policy and thread count are added by the harness)."""
        return {}

    # -- shared --------------------------------------------------------------------
    def configure(self, threads: int | None = None, matmul_precision: str = "highest") -> dict[str, Any]:
        """Apply the thread count, and choose the float32 matmul precision fwbench's calls run
        at (own_precision applies it around each of them; the process's own settings are not
        changed); call before any work."""
        choose("matmul precision", matmul_precision, ("highest", "tf32"))
        n = int(os.environ.get("FWBENCH_THREADS", 0)) or set_threads(threads)
        if threads is not None and int(threads) != n:
            n = set_threads(threads)
        self._apply_threads(n)
        self.threads, self.matmul_precision = n, matmul_precision
        return {"threads": n, "matmul_precision": matmul_precision}

    def check_mode(self, mode: str) -> str:
        return choose(f"mode for {self.name}", mode, self.modes)

    def own_device(self, device: str) -> str:
        """The framework's own name for `device`: 'cuda' and 'gpu' name one accelerator (torch
        calls it cuda, JAX gpu); any other name, or one the framework lacks, as given."""
        devs = self.devices()
        if is_accelerator(device) and device not in devs:
            return next((d for d in devs if is_accelerator(d)), device)
        return device

    def check_device(self, device: str) -> str:
        """own_device(device), or a FwbenchError naming the valid ones."""
        return choose(f"device for {self.name}", self.own_device(device), self.devices())

    def build(self, case: Case | str, config: Any, params: dict[str, np.ndarray], mode: str = "eager",
              device: str = "cpu", strategy: str | None = None) -> Any:
        """Build a case's model in this framework from numpy params: every
        frameworks/<fw>/<workload>.py has build(adapter, config, params, case). `case` is a
        workloads.case.Case, or a workload's name with the mode, device and strategy (a case
        variant the workload declares; None is the default), as a library user writes it."""
        from workloads import WORKLOADS
        if isinstance(case, str):
            self.check_mode(mode)
            case = Case(self.name, choose("workload", case, WORKLOADS), None, mode, strategy,
                        placement=Placement(device))
        choose("workload", case.workload, WORKLOADS)
        module = importlib.import_module(f"frameworks.{self.name}.{case.workload}")
        have = module.PRECISIONS          # the policies its build honours (declared by each module)
        if case.precision not in have:
            raise Unsupported(f"{self.name}'s {case.workload} has no {case.precision} policy "
                              f"(it has {', '.join(have)}; workloads/precision.py defines them)")
        self.check_mode(case.mode)
        case = case.on(self.check_device(case.device))
        if self.threads is None:
            self.configure()
        if case.placement.devices > 1:     # the data-parallel form (workloads/parallel.py)
            from workloads.parallel import PARALLEL_TASKS
            if case.task is not None and case.task not in PARALLEL_TASKS:
                raise Unsupported(f"{case.task} has no data-parallel form here (those that have: "
                                  f"{', '.join(PARALLEL_TASKS)})")
            parallel = importlib.import_module(f"frameworks.{self.name}.parallel")
            with self.own_precision():
                return parallel.data_parallel(self, module.build, config, params, case)
        with self.own_precision():
            return module.build(self, config, params, case)

    def __repr__(self) -> str:
        return f"<fwbench adapter {self.name} {self.version()}>"


class PrecisionScope:
    """Adapter.own_precision's block: entered, the adapter's _precision_scope at fwbench's
    precision (or, inside another block on this thread, nothing); exited, the settings as they
    were. The depth and the entered scope live on the adapter, per thread (the harness's case
    and a user's block may nest), so a PrecisionScope entered and dropped stays in force until
    an __exit__."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    def _state(self) -> threading.local:
        return self.adapter.__dict__.setdefault("_scope", threading.local())

    def __enter__(self) -> "PrecisionScope":
        state = self._state()
        if not getattr(state, "depth", 0):
            state.inner = self.adapter._precision_scope(self.adapter.matmul_precision or "highest")
            state.inner.__enter__()
        state.depth = getattr(state, "depth", 0) + 1
        return self

    def __exit__(self, *exc: Any) -> None:
        state = self._state()
        state.depth -= 1
        if state.depth == 0:
            inner, state.inner = state.inner, None
            inner.__exit__(*exc)

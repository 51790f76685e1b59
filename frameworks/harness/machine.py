"""Machine information (pytest-benchmark's machine_info, fwbench's part): the CPU, its
instruction-set flags, the GPU and its driver, the machine's fingerprint, the frameworks and
their settings, the run's replication keys and the GEMM rate (workloads.record.RUN_INFO
describes the keys); host_info, the same for a result file `fwbench run` rebuilds."""
from __future__ import annotations

import datetime
import os
import platform
from typing import Any

import numpy as np

import frameworks
from frameworks.base import available_cpus, configure_allocator, default_cache_dir, process_threads
from frameworks.harness.gemm import accelerator_gemm, cpu_gemm, gemm_n, measure_gemm_flops
from frameworks.harness.host import env_bytes
from frameworks.harness.options import Options, resolve_device
from workloads import precision
from workloads import record as rec_mod
from workloads.base import FwbenchError, git_commit


def cpu_name() -> str:
    """The CPU model ("model name" in /proc/cpuinfo on Linux, else platform's answer)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags(names: tuple[str, ...] | None = None) -> list[str] | None:
    """Which of `names` the CPU has (/proc/cpuinfo's flags), None where they cannot be read. By
    default the flags that decide what a reduced-precision number means on it
    (workloads.precision.cpu_flags: each policy's native instructions, from POLICIES; without
    them a bf16 matmul is emulated and can run 44-499x slower than fp32, pytorch#146508)."""
    names = names if names is not None else precision.cpu_flags()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [n for n in names if n in have]
    except OSError:
        pass
    return None


ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile",
             "avx_vnni", "avx512_fp16")


def _nvidia_smi(field: str) -> str | None:
    """The first GPU's `field` (nvidia-smi --query-gpu) where nvidia-smi answers, else None."""
    import shutil
    import subprocess
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.splitlines()
        return out[0].strip() or None if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_driver() -> str | None:
    """The NVIDIA driver version where nvidia-smi answers, else None."""
    return _nvidia_smi("driver_version")


def machine_fingerprint(accelerator: str | None) -> dict[str, Any]:
    """What makes a machine's numbers its own: CPU model and instruction-set flags,
    cores, accelerator and driver; `machine_id` is a hash of them (two identical nodes share
    it: the same machine type), `host` the name it ran on. The framework versions, also part
    of what a number depends on, are in every file's `frameworks` (each process records its
    own framework's, so they cannot key a machine). Reports never state a ratio between
    numbers of different machines (reports.measures.data.machine_groups)."""
    import socket
    # the GPU as nvidia-smi names it, the same in every framework's process (the frameworks'
    # own names differ, and one that failed to start its GPU client names none)
    gpu = _nvidia_smi("name") or accelerator
    parts = {"cpu": cpu_name(), "isa_flags": cpu_flags(ISA_FLAGS), "cores": os.cpu_count(),
             "gpu_model": gpu, "driver": gpu_driver()}
    return {"machine_id": rec_mod.machine_key(parts), "host": socket.gethostname(), "cores": parts["cores"],
            "isa_flags": parts["isa_flags"], "driver": parts["driver"], "gpu_model": gpu}


def frameworks_seen(opts: Options) -> tuple[dict[str, Any], dict[str, str], list[frameworks.Adapter], str | None]:
    """The selected frameworks as this process sees them: {name: version, devices, modes and
    compile counter, cache and timer} of those that load (configured as the cases were), the
    reason of each that does not, their adapters, and the accelerator's name (the first
    framework that sees it names it; None on the CPU)."""
    fws: dict[str, Any] = {}
    missing: dict[str, str] = {}
    accel = None
    adapters = []
    for name, a in frameworks.status(opts.frameworks).items():
        if isinstance(a, str):
            missing[name] = a
            continue
        a.configure(process_threads(opts.threads, opts.n_devices), opts.matmul_precision)
        adapters.append(a)
        fws[name] = {"version": a.version(), "devices": a.devices(), "modes": list(a.modes),
                     "compile_counter": a.compile_counter, "compile_cache": a.compile_cache(),
                     "compile_timer": a.compile_timer}
        if opts.device != "cpu" and accel is None:
            try:
                accel = a.device_name(resolve_device(a, opts.device))
            except FwbenchError:
                pass
    return fws, missing, adapters, accel


# What the harness does with Python's garbage collector around a case (frameworks.harness.timing).
GC_POLICY = ("gc.collect(), then the collector disabled from each case's sizing call through its warm-up and "
             "timed rounds, during a stream's cold pass and through its warm passes, and through each side-by-side "
             "block; what was alive after the compiler's start-up in each mode (the framework, the harness) and "
             "when a set's task was built is frozen out of the collector's reach (gc.freeze)")


def machine_info(opts: Options, gemm_samples: list[dict[str, float]] = (),
                 peaks: dict[tuple[str, str, str], tuple[float | None, str]] | None = None) -> dict[str, Any]:
    """fwbench's part of pytest-benchmark's machine_info (the JSON's `machine_info.fwbench`;
    workloads.record.RUN_INFO describes the run keys).

    On the CPU, `gemm_flops` is the best of the GEMM rates measured before the first case
    (gemm_samples) and now, after the last, by numpy and by every framework loaded: on a
    shared machine a busy neighbour can only lower a measurement, so the best is the
    machine's rate, and one unlucky moment does not inflate every utilisation of the run.
    Every sample is kept (`gemm_samples`), and each source's best (`gemm_rates`). On an
    accelerator it is the best fp32-kind peak the cases measured (`peaks`, Session.peaks; the
    same instrument, gemm.measure_peak), or one measured now."""
    fws, missing, adapters, accel = frameworks_seen(opts)
    threads = int(os.environ.get("FWBENCH_THREADS", 0)) or available_cpus()
    info = {
        "schema": rec_mod.SCHEMA_VERSION,
        "fwbench_commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "frameworks": fws,
        "missing": missing,
        "threads": threads,
        "cpus_available": available_cpus(),
        "allocator": configure_allocator(),
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "device": opts.device,
        "accelerator": accel,
        "matmul_precision": opts.matmul_precision,
        "preset": ",".join(f"{w}={p}" for w, p in opts.presets.items()),
        "workloads": list(opts.workloads),
        "compile_cache_dir": default_cache_dir(),
        "compile_cache": _one_state({n: a.compile_cache() for n, a in zip(fws, adapters)}),
        "compile_cache_dirs": {n: a.cache_dir_in_use() for n, a in zip(fws, adapters)},
        "run_id": opts.run_id,
        "repeat": opts.repeat,
        "repeats": opts.repeats,
        "cold": opts.cold,
        "warm": opts.warm,
        "cache_role": opts.cache_role,
        "case_order": (f"seeded shuffle (seed {opts.case_order_seed})" if opts.case_order_seed is not None
                       else "collection order"),
        "gc": GC_POLICY,
        "env_pad_bytes": len(os.environ.get("FWBENCH_ENV_PAD", "")),
        "env_bytes": env_bytes(),
        "settings": {n: {"threads": str(threads), "C heap (malloc)": configure_allocator(), **_settings(a)}
                     for n, a in zip(fws, adapters)},
        "numpy": np.__version__,
        "gemm_flops": None,
        "gemm_note": None,
        "gemm_samples": None,
        "gemm_rates": None,
        "devices": opts.n_devices,
        "simulated_devices": opts.simulated_devices and opts.n_devices > 1,
        **machine_fingerprint(accel),
    }
    if opts.device == "cpu":
        info.update(cpu_gemm(threads, adapters, gemm_samples))
    else:
        info["gemm_flops"], info["gemm_note"] = accelerator_gemm(opts, fws, peaks or {})
    return info


def _settings(a: frameworks.Adapter) -> dict[str, str]:
    """The adapter's settings as its cases run them (inside own_precision: its float32 matmul
    precision is fwbench's, which the process's global settings do not hold)."""
    with a.own_precision():
        return a.settings()


def _one_state(states: dict[str, str]) -> str | None:
    """The process's compile-cache state: the frameworks' common state, else each one's."""
    vals = set(states.values())
    if not vals:
        return None
    return vals.pop() if len(vals) == 1 else ", ".join(f"{n} {v}" for n, v in states.items())


def node_info() -> dict[str, Any]:
    """What a benchmark process says about the machine it runs on in fwbench run's event
    stream, cheaply (no GEMM): CPU, C heap policy, CPUs available, commit, fingerprint."""
    return {"cpu": cpu_name(), "allocator": configure_allocator(), "cpus_available": available_cpus(),
            "fwbench_commit": git_commit(), **machine_fingerprint(None)}


def host_info(framework: str, device: str = "cpu") -> dict[str, Any]:
    """The machine part of machine_info for a result file that `fwbench run` rebuilds after
    its benchmark process ended early (reports.commands.checkout.host_info runs this in a fresh
    process, after set_threads, at the same thread count): CPU, C heap policy, CPUs, commit, the GEMM rate
    on the CPU, and the framework's modes (so modes it lacks become `unsupported`)."""
    info: dict[str, Any] = {"cpu": cpu_name(), "allocator": configure_allocator(),
                            "cpus_available": available_cpus(), "fwbench_commit": git_commit(),
                            "gemm_flops": None, "gemm_note": None, "modes": None}
    if device == "cpu":
        info["gemm_flops"] = measure_gemm_flops()
        info["gemm_rates"] = {"numpy": info["gemm_flops"]}
        info["gemm_samples"] = [dict(info["gemm_rates"])]
        info["gemm_note"] = (f"numpy float32 {gemm_n()}x{gemm_n()} matmul, best of 5, at the thread count in force; "
                             "measured by fwbench run after the benchmark process ended early")
    accel = None
    try:
        a = frameworks.load(framework)
        info["modes"] = list(a.modes)
        accel = None if device == "cpu" else a.device_name(resolve_device(a, device))
    except FwbenchError:
        pass
    info.update(machine_fingerprint(accel))
    return info

"""Peak memory of one call on the CPU, by one instrument for every framework.

The instrument (CPU_SOURCE, the records' `peak_memory_source`): the process's peak RSS
growth over one call (frameworks.base.call_peak_rss: VmHWM after minus VmRSS before,
malloc_trim(0) first), in a process whose framework takes its CPU tensors from glibc malloc.
It counts what the call makes resident: tensors, scratch, the compiler's work where it
compiles; it is the same number for the same allocations whatever the framework (a call
that allocates 64 MiB reads 64 MiB in each: tests/test_memory.py).

PyTorch and JAX allocate from malloc, so they are measured in the timing process, one call
after the timed rounds. TensorFlow pools its CPU memory (oneDNN's allocator, and the BFC
allocator fwbench turns on: frameworks/tensorflow), and pages a pool keeps are resident
before the call, so its RSS growth reads about 0 however much the call uses (measured: 0.0
MiB for a 64 MiB product, in both the eager and the XLA call). So TensorFlow's call is
measured in a memory-only child process started with its pools off
(Adapter.cpu_unpooled_env: TF_ENABLE_ONEDNN_OPTS=0, TF_CPU_ALLOCATOR_USE_BFC=false): it
builds the case again, makes one warm-up call (the compile) and measures the next. Its
kernels there are Eigen's, not oneDNN's; the tensors are the same.

Alternatives rejected: TensorFlow's own allocator peak (tf.config.experimental.get_memory_info)
counts tensor bytes only and has no torch or JAX counterpart on the CPU (JAX's CPU client
keeps no statistics), so it would be two instruments; turning TensorFlow's pools off in the
timing process changes what is timed; soft-dirty page tracking is not available on every
kernel (this machine's reads none); sampling malloc's statistics misses short peaks. The
child starts after the case's timed rounds, so it never overlaps them, and costs 9-13 s
(a small-preset GPT case on the 2-core machine: the import, the build, the compile), so it
runs once per case and run: in the run's first process (`repeat` 0; a process outside
`fwbench run` has none) and not in the others (their records say so; a case's figure is
then its one measured process's: replicates.cases). torch and JAX are measured in every
process, one call each.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from typing import Any, Callable

import frameworks
from frameworks.base import call_peak_rss
from workloads.base import error_line

CPU_SOURCE = ("peak RSS growth of one call, every framework's tensors from glibc malloc (VmHWM after minus VmRSS "
              "before, /proc/self, malloc_trim(0) first; TensorFlow in a memory-only process with its CPU pools "
              "off: oneDNN's allocator and BFC)")
CHILD_TIMEOUT_S = 900
# the memory-only process's entry: run.py builds cases, and this module sits below it
CHILD = "from frameworks.harness.run import memory_child; memory_child()"
CHILD_ONCE = "a framework that pools is measured in the run's first process only (a memory-only process costs 9-13 s)"


def cpu_call_peak(adapter: frameworks.Adapter, call: Callable[..., Any], args: tuple[Any, ...],
                  case: Any, opts: Any) -> tuple[int | None, str]:
    """(peak bytes of one call by CPU_SOURCE's instrument, what was measured): in this
    process where the framework allocates from malloc, else in a child process with the
    framework's unpooled environment (None and why, if the child fails)."""
    env = adapter.cpu_unpooled_env
    if all(os.environ.get(k) == v for k, v in env.items()):
        return call_peak_rss(call, args), CPU_SOURCE
    if getattr(opts, "repeat", None) not in (None, 0):
        return None, f"not measured in this process ({CPU_SOURCE}): {CHILD_ONCE}"
    try:
        return child_peak(case, opts, env), CPU_SOURCE
    except Exception as e:  # noqa: BLE001  the case's timing stands; the record says why memory is missing
        return None, f"not measured ({CPU_SOURCE}): {error_line(e)}"


def child_peak(case: Any, opts: Any, env: dict[str, str]) -> int | None:
    """Run the memory-only process (frameworks.harness.run.memory_child) with `env` added and
    persistent compile caches off (its programs stay out of the run's cache): the case's call
    measured there."""
    p = subprocess.run([sys.executable, "-c", CHILD], input=pickle.dumps((case, opts)),
                       env={**os.environ, **env, "FWBENCH_COMPILE_CACHE": "off"}, capture_output=True,
                       timeout=CHILD_TIMEOUT_S)
    lines = p.stdout.decode(errors="replace").strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = (p.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"memory process exited {p.returncode}: {tail[:300]}")
    return json.loads(lines[-1])

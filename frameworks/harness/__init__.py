"""The benchmark harness: one function times one case (framework x workload x task x mode)
with pytest-benchmark and fills the record (workloads/record.py). Split as pytest-benchmark
splits its plugin; the pytest hooks themselves are frameworks/pytest_plugin.py.

    options.py   Options (made from workloads/options.py: HARNESS), presets, resolve_device
    session.py   Session: a process's records of cases not run, missing frameworks, GEMM samples
    sidebyside.py  a process's part of fwbench run's set: task turns, kept configurations, blocks
    run.py       run_case: one case from the model's build to its record (new_record, measure_case)
    timing.py    time_steady, time_stream, timed_rounds, gc_off, choose_rounds, bare_loop
    host.py      the host's state over the timed rounds (host_window, busy), env_bytes
    gemm.py      the fp32 GEMM rate (numpy's BLAS and each framework's matmul; an accelerator's)
    machine.py   machine_info (pytest-benchmark's machine_info.fwbench), machine_fingerprint,
                 host_info (for a result file `fwbench run` rebuilds)
    memory.py    a case's peak memory (one instrument per device kind)
    scaleout.py  a data-parallel case's check against one device and its collectives
    serving.py   time_serving: a serving case exported, then checked and timed in a serving
                 process of its own (frameworks/serve.py)
    distributed.py  the rank program of a multi-process data-parallel step (srun or local ranks)

Each module imports only those before it in options, session, sidebyside, host, gemm, scaleout,
timing, machine, memory, serving, run, distributed (a test reads the imports). What a benchmark module needs is here:

    from frameworks.harness import run_case
"""
from __future__ import annotations

from frameworks.harness.options import Options
from frameworks.harness.run import run_case
from frameworks.harness.session import Session

__all__ = ["Options", "Session", "run_case"]

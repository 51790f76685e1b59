"""Dynamic shapes: framework x mode x stream task x strategy (workloads.dynamic), one record
each, timed as a cold stream (every request in arrival order on a fresh model) then warm passes.

    pytest --benchmark-only tests/benchmarks/test_dynamic.py --preset tiny --framework jax
"""
from frameworks.harness import run_case

WORKLOAD = "dynamic"


def test_dynamic(benchmark, fwbench_session, case):
    run_case(benchmark, fwbench_session, case)

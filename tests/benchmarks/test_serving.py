"""Serving: framework x path (mode x strategy) x task (workloads.serving), one record each: the
model's deployable form exported, then loaded and timed in a serving process of its own that
imports no model code (frameworks/harness/serving.py).

    pytest --benchmark-only tests/benchmarks/test_serving.py --preset tiny --framework torch
"""
from frameworks.harness import run_case

WORKLOAD = "serving"


def test_serving(benchmark, fwbench_session, case):
    run_case(benchmark, fwbench_session, case)

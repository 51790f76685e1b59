"""GPT benchmarks: framework x mode x task, one pytest-benchmark case and record each.

    pytest --benchmark-only tests/benchmarks/test_gpt.py --preset small --framework torch,jax
"""
from frameworks.harness import run_case

WORKLOAD = "gpt"


def test_gpt(benchmark, fwbench_session, case):
    run_case(benchmark, fwbench_session, case)

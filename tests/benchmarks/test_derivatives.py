"""Derivatives benchmarks: framework x mode x problem x transform strategy, one record each.

    pytest --benchmark-only tests/benchmarks/test_derivatives.py --preset small --framework jax
"""
from frameworks.harness import run_case

WORKLOAD = "derivatives"


def test_derivatives(benchmark, fwbench_session, case):
    run_case(benchmark, fwbench_session, case)

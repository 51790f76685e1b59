"""DDPM benchmarks: framework x mode x task (forward, train_step, sample), one record each.

    pytest --benchmark-only tests/benchmarks/test_diffusion.py --preset small --framework jax
"""
from frameworks.harness import run_case

WORKLOAD = "diffusion"


def test_diffusion(benchmark, fwbench_session, case):
    run_case(benchmark, fwbench_session, case)

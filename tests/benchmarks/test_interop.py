"""What could not be compiled: framework x mode x program (workloads.interop), one record
each; a refused program is recorded unsupported, a wrong one failed (xfail), neither timed.

    pytest --benchmark-only tests/benchmarks/test_interop.py --preset tiny
"""
from frameworks.harness import run_case

WORKLOAD = "interop"


def test_interop(benchmark, fwbench_session, case):
    run_case(benchmark, fwbench_session, case)

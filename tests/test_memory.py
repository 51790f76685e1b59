"""Peak memory on the CPU by one instrument for every framework (issue 28;
frameworks.harness.memory): a call that makes a new 64 MiB array reads 64 MiB in torch, JAX
and TensorFlow alike, measured where the harness measures each (TensorFlow with its CPU
pools off, as in its memory-only process), and the record's source names the same
instrument for all three."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

MIB = 2 ** 20
SIZE = 64 * MIB
# the largest deviation from 64 MiB seen over these calls was 0.12 MiB; about ten times that
TOLERANCE = 1 * MIB
# the environment of TensorFlow's memory-only process (the test checks it covers the
# adapter's cpu_unpooled_env); torch and JAX ignore it
UNPOOLED = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPU_ALLOCATOR_USE_BFC": "false"}

# setup, then a call whose result is a new float32 array of SIZE bytes (the input exists before)
CALLS = {
    "torch": "import torch\nx = torch.ones(N)\nf = lambda: x * 2.0",
    "jax": "import jax, jax.numpy as jnp\ng = jax.jit(lambda x: x * 2.0)\nx = jnp.ones(N)\n"
           "f = lambda: g(x).block_until_ready()",
    "tensorflow": "import tensorflow as tf\nx = tf.ones(N)\ng = tf.function(lambda x: x * 2.0, jit_compile=True)\n"
                  "f = lambda: g(x).numpy",
}
SCRIPT = """
import json, os
from frameworks.base import set_threads
set_threads(1)
import frameworks
from frameworks.harness.memory import cpu_call_peak
adapter = frameworks.load({fw!r})
adapter.configure(1, "highest")
assert all(os.environ.get(k) == v for k, v in adapter.cpu_unpooled_env.items()), adapter.cpu_unpooled_env
N = {size} // 4
{setup}
f()                                    # compiled where the framework compiles
print(json.dumps([cpu_call_peak(adapter, f, (), None, None) for _ in range(3)]))
"""


@pytest.mark.parametrize("fw", sorted(CALLS))
def test_a_64_mib_array_reads_64_mib_in_every_framework(fw):
    if importlib.util.find_spec(fw) is None:
        pytest.skip(f"{fw} not installed")
    code = SCRIPT.format(fw=fw, size=SIZE, setup=CALLS[fw])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **UNPOOLED})
    assert p.returncode == 0, p.stderr[-3000:]
    from frameworks.harness.memory import CPU_SOURCE
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert {src for _, src in got} == {CPU_SOURCE}, got
    assert all(abs(b - SIZE) <= TOLERANCE for b, _ in got), [b / MIB for b, _ in got]


def test_the_summary_table_names_the_instrument(tmp_path):
    """The Summary table's memory column says what measured it: one instrument named once
    where every framework's records carry the same source, each framework's otherwise."""
    import reports
    from frameworks.harness.memory import CPU_SOURCE
    from reports.conclusions import replicates, summary
    from tests.support.reports_fixtures import record, result_json, times

    def instrument(tf_source: str) -> str:
        fws = ("torch", "jax", "tensorflow")
        recs = [(record(fw, "forward", "compiled", peak_memory_bytes=SIZE,
                        peak_memory_source=tf_source if fw == "tensorflow" else CPU_SOURCE), times(0.01, seed=i))
                for i, fw in enumerate(fws)]
        folder = tmp_path / tf_source[:5]
        folder.mkdir()
        (folder / "run.json").write_text(json.dumps(result_json(recs, frameworks=fws)))
        return summary.memory_instrument(replicates.cases(reports.load(folder)))

    assert instrument(CPU_SOURCE) == f"one instrument for every framework: {CPU_SOURCE}"
    assert instrument("bfc peak") == f"torch: {CPU_SOURCE}; jax: {CPU_SOURCE}; tensorflow: bfc peak"


def test_a_case_carries_the_memory_of_the_process_that_measured_it(tmp_path):
    """TensorFlow's CPU memory is measured in the run's first process only: the case's figure
    is that process's, whichever process's record comes first."""
    import reports
    from frameworks.harness.memory import CPU_SOURCE
    from reports.conclusions import replicates
    from tests.support.reports_fixtures import record, result_json, times
    for i, (peak, src) in enumerate([(None, "not measured in this process"), (SIZE, CPU_SOURCE)]):
        rec = record("tensorflow", "forward", "compiled", peak_memory_bytes=peak, peak_memory_source=src)
        (tmp_path / f"p{i}.json").write_text(json.dumps(result_json([(rec, times(0.01, seed=i))],
                                                                    frameworks=("tensorflow",))))
    (c,) = replicates.cases(reports.load(tmp_path)).to_dict("records")
    assert c["peak_memory_bytes"] == pytest.approx(SIZE) and c["peak_memory_source"] == CPU_SOURCE


def test_a_pooling_framework_is_measured_in_the_runs_first_process_only():
    """Later processes of a run record why they have no figure (a memory-only process costs
    seconds per case); a framework without pools is measured in-process, in every process."""
    from types import SimpleNamespace

    from frameworks.harness.memory import CHILD_ONCE, CPU_SOURCE, cpu_call_peak
    pooled = SimpleNamespace(cpu_unpooled_env={"FWBENCH_TEST_NOT_SET": "1"})
    peak, why = cpu_call_peak(pooled, lambda: None, (), None, SimpleNamespace(repeat=3))
    assert peak is None and why.startswith("not measured in this process") and CHILD_ONCE in why
    plain = SimpleNamespace(cpu_unpooled_env={})
    peak, src = cpu_call_peak(plain, lambda: bytearray(SIZE), (), None, SimpleNamespace(repeat=3))
    # in-process: the instrument reads this whole process, and a test worker's other threads
    # (execnet's, runtimes loaded by earlier tests) may add to it (CI once read 65.09 MiB), so
    # the 64 MiB is a floor here; its accuracy is checked in a bare process above
    assert src == CPU_SOURCE and SIZE - TOLERANCE <= peak <= 2 * SIZE, peak / MIB

"""Every case's first call from a fresh in-process compile state (Adapter.case_caches), in
any process and after any case: the adapters' per-case caches, and real processes that run
a case after one that compiled the same graphs or primitives (issue 17: torch's default
compiled train step after its `compiled-adamw` variant compiled 0 Dynamo graphs; JAX's eager
diffusion `sample` after the eager forward compiled 7 programs instead of its own)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import frameworks
from frameworks import base
from tests.support.helpers import INSTALLED


def _needs(fw):
    if fw not in INSTALLED:
        pytest.skip(f"needs {fw}")
    return frameworks.load(fw)


def test_torch_cold_case_compiles_into_an_empty_folder_merged_into_the_process_folder():
    a = _needs("torch")
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    process = base.cache_dir("torch")
    if a.cache_dir_in_use() is None:
        pytest.skip("the compile caches are off here")
    with a.case_caches("cold") as found:
        inside = cache_dir()
        assert inside != process and os.listdir(inside) == [] and found.startswith("empty")
        os.makedirs(os.path.join(inside, "fxgraph", "ab"))
        with open(os.path.join(inside, "fxgraph", "ab", "fwbench-test-entry"), "w") as f:
            f.write("a compiled graph")
    assert cache_dir() == process and not os.path.exists(inside)
    merged = os.path.join(process, "fxgraph", "ab", "fwbench-test-entry")
    try:
        assert open(merged).read() == "a compiled graph"
    finally:
        os.remove(merged)
    with a.case_caches("warm") as found:
        assert cache_dir() == process and found == base.CASE_CACHES["warm"]


def test_jax_cold_case_gets_an_empty_persistent_cache_and_a_fresh_in_memory_state():
    """A program compiled in a cold case's own folder is found by a warm case once merged into
    the process's folder (its key must not depend on the folder's path), and every case
    compiles or loads it again (in-memory caches cleared)."""
    a = _needs("jax")
    import jax
    import jax.numpy as jnp
    import numpy as np
    process = a.cache_dir_in_use()
    if process is None:
        pytest.skip("the compile caches are off here")
    c = float(np.random.default_rng().random())          # a program no cache holds yet
    f, x = jax.jit(lambda x: jnp.sin(x) * c), jnp.ones(3)
    with a.case_caches("cold") as found:
        inside = jax.config.jax_compilation_cache_dir
        assert inside != process and os.listdir(inside) == [] and found.startswith("empty")
        n0, h0 = a.compilations(), a.cache_hits()
        f(x).block_until_ready()
        assert a.compilations() == n0 + 1 and a.cache_hits() == h0
        written = set(os.listdir(inside))
        assert written                                   # the program went into the case's folder
    assert jax.config.jax_compilation_cache_dir == process and not os.path.exists(inside)
    assert written <= set(os.listdir(process))           # and was merged into the process's
    with a.case_caches("cold"):
        n0, h0 = a.compilations(), a.cache_hits()
        f(x).block_until_ready()                         # compiled again from nothing
        assert a.compilations() == n0 + 1 and a.cache_hits() == h0
    with a.case_caches("warm") as found:
        n0, h0 = a.compilations(), a.cache_hits()
        f(x).block_until_ready()                         # fresh in memory, loaded from the folder
        assert a.compilations() == n0 + 1 and a.cache_hits() == h0 + 1
        assert found == base.CASE_CACHES["warm"]


def test_tensorflow_says_what_a_case_finds():
    a = _needs("tensorflow")
    with a.case_caches("cold") as found:
        assert "tf.function" in found


# ----------------------------------------------------------------------------- real processes

def _run_in_one_process(tmp_path, node_ids, *args, cache=None):
    """pytest --benchmark-only on these benchmark cases, in this order, in one process (with
    FWBENCH_CACHE_DIR `cache`, else the test suite's); the records of the timed cases in that
    order."""
    out = tmp_path / f"run-{len(list(tmp_path.glob('run-*.json')))}.json"
    cmd = [sys.executable, "-m", "pytest", "--benchmark-only", "--preset", "tiny", "--rounds", "1",
           "--warmup-rounds", "0", "-q", "-p", "no:cacheprovider", f"--benchmark-json={out}", *args, *node_ids]
    env = dict(os.environ, **({"FWBENCH_CACHE_DIR": str(cache)} if cache else {}))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = sorted((b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]), key=lambda r: r["order"])
    assert len(recs) == len(node_ids)
    assert {r["busy_retries"] for r in recs} == {0}    # measured once: tests/conftest.py's PYTEST_ADDOPTS
    return recs


@pytest.mark.slow
def test_torch_default_train_step_compiles_after_its_variant_in_the_same_process(tmp_path):
    """Measured before case_caches: the default recipe after `compiled-adamw` compiled 0
    Dynamo graphs, its 'cold' first call 0.61 s at tiny (the variant's: 3 graphs, 24.9 s)."""
    _needs("torch")
    case = "tests/benchmarks/test_gpt.py::test_gpt[torch-compiled-train_step{}]"
    variant, default = _run_in_one_process(tmp_path, [case.format("-compiled-adamw"), case.format("")],
                                           "--framework", "torch")
    assert variant["strategy"] == "compiled-adamw" and default["strategy"] is None
    for rec in (variant, default):
        assert rec["first_call_compilations"] > 0 and rec["first_call_valid"] is True
    assert default["first_call_cache"] == base.CASE_CACHES[default["compile_cache"]]
    assert default["compile_s"] > 0 and default["first_call_s"] >= default["compile_s"]


@pytest.mark.slow
def test_jax_eager_case_compiles_its_primitives_again_after_another_eager_case(tmp_path):
    """An eager `sample` after the eager forward, in one process, compiles as many programs as
    it does alone in a fresh process (both cold: empty caches of their own). Measured before
    case_caches: 7 programs after the forward (which compiled 124), its first call 0.38 s."""
    _needs("jax")
    case = "tests/benchmarks/test_diffusion.py::test_diffusion[jax-eager-{}]"
    forward, after = _run_in_one_process(tmp_path, [case.format("forward"), case.format("sample")],
                                         "--framework", "jax", "--cache-role", "cold", cache=tmp_path / "a")
    [alone] = _run_in_one_process(tmp_path, [case.format("sample")], "--framework", "jax", "--cache-role", "cold",
                                  cache=tmp_path / "b")
    assert forward["first_call_compilations"] > 0 and after["first_call_valid"] is None      # eager: no latency
    assert after["compile_cache"] == alone["compile_cache"] == "cold"
    assert after["first_call_compilations"] == alone["first_call_compilations"] > 7


@pytest.mark.slow
def test_a_benchmark_process_records_its_compiler_startup_apart(tmp_path):
    """A real cold process of one compiled JAX case: machine_info holds the compiler's start-up
    (issue 30), measured before the case, and the case's first call still compiled its own
    programs from an empty cache (the start-up left nothing it could find)."""
    _needs("jax")
    [rec] = _run_in_one_process(tmp_path, ["tests/benchmarks/test_gpt.py::test_gpt[jax-compiled-forward]"],
                                "--framework", "jax", "--cache-role", "cold", cache=tmp_path / "cache")
    info = json.loads((tmp_path / "run-0.json").read_text())["machine_info"]["fwbench"]
    assert list(info["compiler_startup"]) == ["jax/compiled"] and info["compiler_startup"]["jax/compiled"] > 0
    assert rec["compile_cache"] == "cold" and rec["first_call_valid"] is True
    assert rec["first_call_compilations"] > 0 and rec["cache_hits"] == 0

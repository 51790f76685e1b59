"""TensorFlow on the new axes (issue 19): decoding that compiles once per bucket, not per
prompt length. Tiny presets."""
from __future__ import annotations

import pytest

from frameworks import bench
from tests.helpers import INSTALLED
from workloads import dynamic as DY
from workloads import record as record_mod

pytestmark = pytest.mark.skipif("tensorflow" not in INSTALLED, reason="needs tensorflow")
TINY_DYNAMIC = DY.preset("tiny").config


# ----------------------------------------------------------------------------- decoding

@pytest.mark.slow
def test_compiled_bucketed_generate_compiles_once_per_bucket(benchmark):
    """XLA compiles of the compiled bucketed `generate` stream (tiny: 12 requests, 9 prompt
    lengths in 2 buckets). What is counted: entries XLA writes to TF's persistent cache folder
    over the whole case (the adapter's xla_compilations), one per program compiled. Each
    bucket's request is one tf.function(jit_compile=True) call holding the prefill and the
    decode steps' tf.while_loop, so one XLA program per bucket and nothing else: no fixed
    programs (the decode loop is inside each bucket's program). With self.wpe[t] (a strided
    slice of a variable at a tensor position, whose begin XLA must know at compile time) TF
    compiled once per prompt length: 9 programs. The tokens equal the float64 greedy
    reference (the harness checks every request before timing: status ok)."""
    s = bench.Session(bench.Options(frameworks=("tensorflow",), workloads=("dynamic",), preset="tiny", rounds=1),
                      gemm_samples=[{"numpy": 1e9}])
    rec = bench.run_case(benchmark, s, "tensorflow", "dynamic", "generate", "compiled", "bucketed")
    assert record_mod.problems(rec) == [] and rec["status"] == "ok", rec["reason"]
    lengths = DY.generate_lengths(TINY_DYNAMIC)
    buckets = {DY.bucket_of(TINY_DYNAMIC, T) for T in lengths}
    assert rec["distinct_shapes"] == len(buckets) < len(set(lengths))        # the stream would tell them apart
    if "xla_compilations" not in rec:
        pytest.skip("TensorFlow's XLA cache is off here: xla_compilations is not observable")
    # at most: a program an earlier process left in the cache folder is loaded, not compiled
    assert rec["xla_compilations"] <= len(buckets), rec["xla_compilations"]
    assert rec["xla_compilations_cold"] == rec["xla_compilations"]          # none in the warm passes

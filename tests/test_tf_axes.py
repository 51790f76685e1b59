"""TensorFlow on the new axes (issue 19): decoding that compiles once per bucket, not per
prompt length; the LayerNorm's second derivative (TF's idiomatic ones, tf.nn.moments and
Keras 3's LayerNormalization, are exact at first order only); the vectorised ensemble through
a functional call of the GPT module, and the loop as one tf.function. Tiny presets."""
from __future__ import annotations

import numpy as np
import pytest

import frameworks
from frameworks import harness
from tests.support.helpers import INSTALLED
from workloads import derivatives as D
from workloads import dynamic as DY
from workloads import gpt
from workloads import record as record_mod
from workloads.base import rel_err
from workloads.case import Case

pytestmark = pytest.mark.skipif("tensorflow" not in INSTALLED, reason="needs tensorflow")
TINY_DYNAMIC = DY.preset("tiny").config
TINY = D.preset("tiny").config
PARAMS = D.init_params(TINY)


# ----------------------------------------------------------------------------- decoding

@pytest.mark.slow
@pytest.mark.alone      # counts the entries written to the XLA folder the test workers share
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
    # XLA's cache entries are keyed by the tf.function's name, "__inference_<fn>_<ops.uid()>": a
    # random step of TF's uid counter gives this case's functions names no earlier run of the
    # test left programs under, so every program is compiled here, not loaded (and counted)
    from tensorflow.python.framework import ops
    for _ in range(int(np.random.default_rng().integers(1, 1 << 20))):
        ops.uid()
    s = harness.Session(harness.Options(frameworks=("tensorflow",), workloads=("dynamic",), preset="tiny", rounds=1),
                      gemm_samples=[{"numpy": 1e9}])
    rec = harness.run_case(benchmark, s, Case("tensorflow", "dynamic", "generate", "compiled", "bucketed"))
    assert record_mod.problems(rec) == [] and rec["status"] == "ok", rec["reason"]
    lengths = DY.generate_lengths(TINY_DYNAMIC)
    buckets = {DY.bucket_of(TINY_DYNAMIC, T) for T in lengths}
    assert rec["distinct_shapes"] == len(buckets) < len(set(lengths))        # the stream would tell them apart
    if "xla_compilations" not in rec:
        pytest.skip("TensorFlow's XLA cache is off here: xla_compilations is not observable")
    assert rec["xla_compilations"] == len(buckets), rec["xla_compilations"]
    assert rec["xla_compilations_cold"] == rec["xla_compilations"]          # none in the warm passes


# ----------------------------------------------------------------------------- LayerNorm at second order

def _second_order(norm, x, w, b):
    """(gradient, H u) of sum(sin(norm(x))) with respect to x, u fixed: nested tapes."""
    import tensorflow as tf
    u = tf.constant(np.random.default_rng(2).standard_normal(x.shape), tf.float64)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            f = tf.reduce_sum(tf.sin(norm(x, w, b)))
        g = inner.gradient(f, x)
        gu = tf.reduce_sum(g * u)
    return g.numpy(), outer.gradient(gu, x).numpy()


def test_keras_layer_normalization_on_tf_has_the_moments_second_derivative():
    """Keras 3's LayerNormalization on the TF backend computes its moments with tf.nn.moments
    (keras.ops.layer_normalization -> ops.moments): its first derivative is the exact one, its
    second equals tf.nn.moments' and differs from the exact one (gpt.layer_norm), in float64."""
    import tensorflow as tf
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip(f"Keras runs on {keras.backend.backend()} here")
    from frameworks.tensorflow import gpt as tgpt
    rng = np.random.default_rng(1)
    x = tf.constant(rng.standard_normal((3, 16)), tf.float64)
    w, b = (tf.constant(rng.normal(m, 0.1, 16), tf.float64) for m in (1.0, 0.0))
    layer = keras.layers.LayerNormalization(epsilon=gpt.LN_EPS, dtype="float64")
    layer.build(x.shape)
    layer.gamma.assign(w)
    layer.beta.assign(b)
    exact_g, exact_h = _second_order(tgpt.layer_norm, x, w, b)
    moments_g, moments_h = _second_order(tgpt.moments_layer_norm, x, w, b)
    keras_g, keras_h = _second_order(lambda x, w, b: layer(x), x, w, b)
    for g in (moments_g, keras_g):
        assert rel_err(g, exact_g) < 1e-12                                   # first order: exact
    assert rel_err(keras_h, moments_h) < 1e-12                               # second order: as moments,
    assert rel_err(moments_h, exact_h) > 1e-2                                # which is wrong


# ----------------------------------------------------------------------------- the ensemble

def test_functional_call_reads_the_given_tensors_and_puts_the_variables_back():
    import tensorflow as tf

    from frameworks.tensorflow import gpt as tgpt
    cfg = gpt.preset("tiny").config
    p0, p1 = (D.gpt_params(PARAMS, k) for k in (0, 1))
    model = tgpt.GPT(cfg, p0)
    tokens = gpt.make_batch(cfg, 2, seed=1, seq_len=8)[0]
    out = tgpt.functional_call(model, {k: tf.constant(v) for k, v in p1.items()}, "logits", tf.constant(tokens))
    assert rel_err(out.numpy(), gpt.reference_logits(cfg, p1, tokens)) < 1e-6
    with pytest.raises(Exception):      # a wrong shape fails inside the call: the variables go back all the same
        tgpt.functional_call(model, {"h.0.ln_1.weight": tf.zeros(3)}, "logits", tf.constant(tokens))
    assert all(getattr(owner, attr) is model.named[name] or isinstance(getattr(owner, attr), tf.Variable)
               for (owner, attr), name in zip(tgpt._variable_slots(model), model.named))
    assert rel_err(model.logits(tf.constant(tokens)).numpy(), gpt.reference_logits(cfg, p0, tokens)) < 1e-6


def derivatives_case(mode: str, task: str, strategy: str):
    """(spec, model, the first call's output as numpy) of a derivatives case at tiny."""
    adapter = frameworks.load("tensorflow")
    spec = D.task_spec(TINY, 1, task, strategy=strategy)
    model = adapter.build("derivatives", TINY, PARAMS, mode, "cpu", strategy=strategy)
    fn = getattr(model, spec.method)
    args = [adapter.asarray(a, "cpu") for a in spec.inputs[0]]
    return spec, (lambda: adapter.to_numpy(fn(*args, **spec.kwargs)))


@pytest.mark.parametrize("mode", ["eager", "graph", pytest.param("compiled", marks=pytest.mark.slow)])
def test_vectorised_ensemble_is_right_and_fully_vectorised(mode):
    """tf.vectorized_map over the K stacked parameter sets of a functional call of the GPT: the
    logits of each model against its float64 forward, and pfor converted every op (its
    embeddings are gathered from tensors, not from a variable: no ResourceGather fallback)."""
    from frameworks import tensorflow as tf_adapter
    n0 = len(tf_adapter.PFOR_FALLBACKS)
    spec, call = derivatives_case(mode, "ensemble_gpt_k2", "vectorized_map")
    assert spec.check(call()) is None
    assert tf_adapter.PFOR_FALLBACKS[n0:] == []


def test_ensemble_loop_is_one_tf_function_over_the_k_models():
    """The loop strategy traces one tf.function that calls each model (what a TF user writes),
    not K functions called and stacked eagerly."""
    adapter = frameworks.load("tensorflow")
    c0 = adapter.compilations()
    spec, call = derivatives_case("graph", "ensemble_gpt_k2", "loop")
    assert spec.check(call()) is None and adapter.compilations() - c0 == 1
    call()
    assert adapter.compilations() - c0 == 1


# ----------------------------------------------------------------------------- the cookbook

def tolerance(task: str) -> float:
    problem = D.problem_of(task)[0]
    return D.TOL.get(f"{problem}_gpt", D.TOL[problem]) if "gpt" in task else D.TOL[problem]


def cookbook_error(mode: str, task: str, strategy: str) -> float:
    """The relative error of the cookbook's output (tests/cookbook/tensorflow.py) against
    fwbench's, same inputs (the worst over a dict's arrays)."""
    from tests.cookbook import tensorflow as cookbook
    adapter = frameworks.load("tensorflow")
    spec, call = derivatives_case(mode, task, strategy)
    ours = call()
    inputs = tuple(adapter.asarray(a, "cpu") for a in spec.inputs[0])
    theirs = adapter.to_numpy(cookbook.make(task, strategy, mode, TINY, inputs, dict(spec.kwargs), PARAMS)(
        *inputs, **spec.kwargs))
    if isinstance(ours, dict):
        assert set(theirs) == set(ours)
        return max(rel_err(np.asarray(theirs[k]), np.asarray(ours[k], np.float64)) for k in ours)
    assert np.shape(theirs) == np.shape(ours)
    return rel_err(np.asarray(theirs), np.asarray(ours, np.float64))


@pytest.mark.parametrize("mode,task,strategy", [
    ("eager", "per_sample_grad_mlp_b4", "vectorized_map"), ("graph", "hessian_p30", "pfor"),
    ("eager", "jacobian_n12_m3", "jacfwd"), ("eager", "nth_derivative_4", "tapes"),
    ("eager", "per_sample_grad_gpt_b3", "jacobian"), ("graph", "hvp_gpt", "fwd_rev"), ("eager", "hvp_gpt", "moments"),
    ("eager", "ensemble_gpt_k2", "vectorized_map"), ("graph", "ensemble_gpt_k2", "loop")])
def test_the_cookbook_computes_what_fwbench_computes(mode, task, strategy):
    """What tests/measure/measure_cookbook.py times against fwbench's case must be the same work: equal
    outputs (measured at tiny: bit-identical in every TF case and mode)."""
    assert cookbook_error(mode, task, strategy) <= tolerance(task)


def test_the_cookbook_has_no_form_where_fwbench_builds_its_own():
    from tests.cookbook import tensorflow as cookbook
    for task, strategy in (("per_sample_grad_mlp_b4", "batch_jacobian"), ("hvp_mlp", "moments")):
        spec = D.task_spec(TINY, 1, task, strategy=strategy)
        assert cookbook.make(task, strategy, "eager", TINY, spec.inputs[0], dict(spec.kwargs), PARAMS) is None

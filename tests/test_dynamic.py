"""Dynamic shapes (workloads.dynamic): the seeded streams, the harness's stream timing on a
stand-in model, and each framework's counters against what must happen (tiny preset)."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import frameworks
from frameworks import harness
from frameworks.base import Unsupported
from tests.support.helpers import INSTALLED
from tests.test_harness import FakeAdapter
from workloads import dynamic as D
from workloads import gpt
from workloads import record as record_mod
from workloads.base import FwbenchError, Model, rel_err
from workloads.case import Case

TINY = D.preset("tiny").config
pytestmark = [pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
              pytest.mark.usefixtures("frozen_heap")]     # cases run in the worker (conftest)


# ----------------------------------------------------------------------------- framework-free

def test_prompt_lengths_are_seeded_skewed_and_mostly_distinct():
    full, small = D.preset("full").config, D.preset("small").config
    lengths = D.prompt_lengths(full)
    assert lengths == D.prompt_lengths(full) and lengths != D.prompt_lengths(full, seed=1)
    assert len(lengths) == 64 and min(lengths) >= 8 and max(lengths) <= 128
    assert len(set(lengths)) >= 30 and np.median(lengths) < (8 + 128) / 2      # skewed to short prompts
    assert D.prompt_lengths(small) == lengths[:32] and len(set(lengths[:32])) >= 20     # a prefix: the same draws
    assert small.buckets() == (8, 16, 32, 64, 128) and TINY.buckets() == (8, 16, 32)


def test_prefill_int_serves_enough_distinct_lengths_to_pass_the_recompile_limit():
    small = D.preset("small").config
    spec = D.task_spec(small, 1, "prefill_int")
    assert len(spec.inputs) == small.int_requests and len(set(spec.stream.keys)) > 8   # Dynamo's default limit
    with pytest.raises(FwbenchError, match="int_requests 13 must be at most requests 12"):
        D.DynamicConfig(gpt_preset="tiny", requests=12, int_requests=13)


@pytest.mark.parametrize("strategy", [None, "bucketed"])
def test_stream_spec(strategy):
    spec = D.task_spec(TINY, 1, "prefill", strategy=strategy)
    lengths = D.prompt_lengths(TINY)
    keys = spec.stream.keys
    assert len(spec.inputs) == len(keys) == TINY.requests and spec.items == sum(lengths)
    for (tokens, last), T, key in zip(spec.inputs, lengths, keys):
        assert tokens.dtype == np.int32 and last.tolist() == [T - 1] and key == f"T={tokens.shape[1]}"
        assert tokens.shape[1] == (D.bucket_of(TINY, T) if strategy else T)
        assert not tokens[:, T:].any()                                  # right padding only
    waste = spec.stream.record["padding_waste"]
    assert waste == 0 if strategy is None else 0 < waste < 1
    if strategy:
        assert set(keys) <= {f"T={b}" for b in TINY.buckets()}
    ref = spec.stream.expected(0)
    assert ref.shape == (1, TINY.gpt.vocab_size)
    full = gpt.reference_logits(TINY.gpt, gpt.init_params(TINY.gpt), spec.inputs[0][0][:, :lengths[0]])
    assert np.array_equal(ref, full[:, -1])


def test_every_mode_declares_default_and_bucketed():
    assert D.strategies("torch", "eager", "prefill") == (None, "bucketed")
    assert set(D.strategies("jax", "compiled", "prefill")) >= {None, "static", "export", "input_signature", "bucketed"}
    assert D.lacks("jax", "compiled", "static", (None, "export"), "why") .startswith("jax has no dynamic-shape")
    assert D.lacks("jax", "eager", "bucketed", (), "why") is None


# ----------------------------------------------------------------------------- harness, stand-in

NEW_SHAPE_S, SEEN_SHAPE_S = 0.02, 0.002


class StreamModel(Model):
    """A stand-in that 'compiles' (counter + 20 ms) the first time it sees a shape and answers
    with the float64 reference of the real positions (or a wrong answer when asked)."""

    def __init__(self, adapter, wrong_at=None):
        self.adapter, self.seen, self.calls, self.wrong_at = adapter, set(), 0, wrong_at
        self.params = gpt.init_params(TINY.gpt)

    def prefill(self, tokens, last):
        T = tokens.shape[1]
        if T not in self.seen:
            self.seen.add(T)
            self.adapter.counter += 1
            time.sleep(NEW_SHAPE_S)
        time.sleep(SEEN_SHAPE_S)
        self.calls += 1
        out = gpt.reference_logits(TINY.gpt, self.params, tokens[:, :int(last[0]) + 1])[:, -1]
        return out + 1.0 if self.calls == self.wrong_at else out


def stream_case(benchmark, monkeypatch, strategy=None, task="prefill", fake=None, model=StreamModel, rounds=3,
                **kw):
    """A dynamic case of `task` run by the harness on a stand-in adapter (`fake`) and model."""
    fake = fake or FakeAdapter()
    monkeypatch.setattr(fake, "build", lambda *a, **k: model(fake, **kw))
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    # busy_retries=0: the stand-in sleeps through rounds long enough to be judged, the other test
    # worker keeps the machine busy, and the case waited for quiet and ran again (35 s in the suite)
    s = harness.Session(harness.Options(frameworks=("torch",), workloads=("dynamic",), preset="tiny", rounds=rounds,
                                        busy_retries=0),
                      gemm_samples=[{"numpy": 1e9}])     # no GEMM measurement: not what is tested
    return s, harness.run_case(benchmark, s, Case("torch", "dynamic", task, "compiled", strategy))


@pytest.mark.parametrize("strategy", [None, "bucketed"])
def test_a_stream_is_timed_request_by_request_then_warm(benchmark, monkeypatch, strategy):
    _, rec = stream_case(benchmark, monkeypatch, strategy)
    keys = D.task_spec(TINY, 1, "prefill", strategy=strategy).stream.keys
    distinct = len(set(keys))
    assert record_mod.problems(rec) == [] and rec["status"] == "ok"
    assert rec["distinct_shapes"] == distinct == rec["compilations"] == rec["compilations_cold"]
    assert rec["compilations_timed"] == 0 and rec["recompiled_during_timing"] is False
    times = [float(t) for t in rec["stream_cold_request_s"].split(",")]
    counts = [int(c) for c in rec["stream_cold_compilations"].split(",")]
    assert len(times) == len(counts) == TINY.requests and counts[-1] == distinct
    for i, k in enumerate(keys):                                      # a compile with each new shape only
        assert counts[i] - (counts[i - 1] if i else 0) == (k not in keys[:i])
    assert rec["new_shape_latency_s"] >= NEW_SHAPE_S > rec["seen_shape_latency_s"] >= SEEN_SHAPE_S
    assert rec["first_call_s"] == pytest.approx(times[0], rel=1e-3)
    assert rec["stream_cold_s"] == pytest.approx(sum(times), rel=1e-3)
    assert SEEN_SHAPE_S * TINY.requests <= rec["stream_warm_s"] < rec["stream_cold_s"]
    assert benchmark.stats.stats.rounds == 3 and rec["recompile_limit_hit"] is False
    assert (rec["padding_waste"] == 0) is (strategy is None)


def test_a_wrong_output_is_recorded_failed_and_not_timed(benchmark, monkeypatch):
    with pytest.raises(pytest.xfail.Exception, match="request 4 .* differs from the unpadded eager reference"):
        stream_case(benchmark, monkeypatch, wrong_at=5)


# ----------------------------------------------------------------------------- real counters

def real_case(benchmark, framework, mode, strategy, task="prefill"):
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    s = harness.Session(harness.Options(frameworks=(framework,), workloads=("dynamic",), preset="tiny", rounds=1),
                      gemm_samples=[{"numpy": 1e9}])
    rec = harness.run_case(benchmark, s, Case(framework, "dynamic", task, mode, strategy))
    assert record_mod.problems(rec) == [] and rec["status"] == "ok", rec["reason"]
    return rec


@pytest.mark.slow
def test_jax_jit_compiles_once_per_distinct_shape(benchmark):
    rec = real_case(benchmark, "jax", "compiled", None)
    assert rec["distinct_shapes"] >= 5 and rec["compilations"] == rec["distinct_shapes"]
    assert rec["compilations_timed"] == 0


@pytest.mark.slow
def test_bucketed_compiles_at_most_once_per_bucket(benchmark):
    rec = real_case(benchmark, "jax", "compiled", "bucketed")
    assert rec["compilations"] == rec["distinct_shapes"] <= len(TINY.buckets()) and rec["padding_waste"] > 0


@pytest.mark.slow
def test_tf_input_signature_traces_once(benchmark):
    rec = real_case(benchmark, "tensorflow", "graph", "input_signature")
    assert rec["compilations"] == 1 and rec["distinct_shapes"] >= 5


@pytest.mark.slow
def test_torch_static_recompiles_up_to_the_limit_and_records_the_hit(benchmark):
    pytest.importorskip("torch")
    import torch._dynamo
    with torch._dynamo.config.patch(recompile_limit=2):   # torch's own patch (monkeypatch's undo breaks it)
        rec = real_case(benchmark, "torch", "compiled", "static")
    assert rec["distinct_shapes"] > 2 and rec["compilations"] == 2 and rec["recompile_limit_hit"] is True


# ----------------------------------------------------------------------------- ddpm stream

def test_ddpm_stream_is_seeded_has_batch_one_and_valid_sizes():
    small = D.preset("small").config
    shapes = D.image_shapes(small)
    assert shapes == D.image_shapes(small) and shapes != D.image_shapes(small, seed=1)
    assert len(shapes) == small.image_requests and set(shapes) == {(B, S) for B in small.image_batches
                                                                   for S in small.resolutions}
    assert 1 in {B for B, _ in shapes} and len(set(shapes)) < len(shapes)       # batch 1, shapes repeat
    down = 2 ** (len(small.unet.ch_mult) - 1)
    for S in small.resolutions:
        cfg = small.unet_at(S)
        assert S % down == 0 and cfg.image_size == S
        # attention at the same UNet levels at every size, so one parameter set serves all
        assert [r in cfg.attn_resolutions for r in cfg.resolutions] == \
               [r in small.unet.attn_resolutions for r in small.unet.resolutions]
    with pytest.raises(FwbenchError, match="resolution 20"):
        D.DynamicConfig(resolutions=(16, 20), diffusion_preset="small")   # 20 is not a multiple of 8


@pytest.mark.parametrize("strategy", [None, "bucketed"])
def test_ddpm_spec_pads_only_the_batch_when_bucketed(strategy):
    spec = D.task_spec(TINY, 1, "ddpm", strategy=strategy)
    shapes = D.image_shapes(TINY)
    for i, ((x, t), (B, S), key) in enumerate(zip(spec.inputs, shapes, spec.stream.keys)):
        P = x.shape[0]
        assert x.shape[1:] == (S, S, TINY.unet.in_channels) and t.shape == (P,) and key == f"B={P},S={S}"
        assert P == (min(b for b in TINY.batch_buckets() if b >= B) if strategy else B)
        assert not x[B:].any() and spec.stream.expected(i).shape == (B, S, S, TINY.unet.in_channels)
    assert spec.stream.rows == (tuple(B for B, _ in shapes) if strategy else None)
    waste = spec.stream.record["padding_waste"]
    assert waste == 0 if strategy is None else 0 < waste < 1


def test_ddpm_bucketed_batch_padding_is_exact_and_pixel_padding_is_not():
    """Why only the batch is bucketed: extra zero images change no real image's output
    (every layer acts per image), extra zero pixels change them all."""
    from workloads import diffusion
    cfg, params = TINY.unet_at(8), diffusion.init_params(TINY.unet)
    x, t = D.image_request(TINY, 0, D.image_shapes(TINY).index((1, 8)))
    ref = diffusion.reference_eps(cfg, params, x, t)
    batch = diffusion.reference_eps(cfg, params, np.pad(x, ((0, 1), (0, 0), (0, 0), (0, 0))), np.pad(t, (0, 1)))
    assert rel_err(batch[:1], ref) < 1e-14      # float64 rounding (measured 1.0e-15: BLAS blocks by batch)
    pixels = diffusion.reference_eps(TINY.unet_at(12), params, np.pad(x, ((0, 0), (0, 4), (0, 4), (0, 0))), t)
    assert rel_err(pixels[:, :8, :8], ref) > 0.1   # measured 0.94


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_ddpm_stream_matches_the_reference_in_eager_mode(framework):
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    a = frameworks.load(framework)
    spec = D.task_spec(TINY, 1, "ddpm", strategy="bucketed")
    model = a.build("dynamic", TINY, D.init_params(TINY), "eager", "cpu", strategy="bucketed")
    for i, (x, t) in enumerate(spec.inputs):
        out = a.to_numpy(model.eps(a.asarray(x, "cpu"), a.asarray(t, "cpu")))[:spec.stream.rows[i]]
        assert rel_err(out, spec.stream.expected(i)) <= D.DDPM_TOLERANCE


@pytest.mark.slow
def test_jax_jit_compiles_the_ddpm_stream_once_per_batch_and_resolution(benchmark):
    rec = real_case(benchmark, "jax", "compiled", None, task="ddpm")
    assert rec["distinct_shapes"] == len(set(D.image_shapes(TINY))) == rec["compilations"] == rec["compilations_cold"]
    assert rec["stream_cold_cache"] == "empty" and rec["cache_hits"] == 0


@pytest.mark.slow
def test_ddpm_bucketed_compiles_at_most_once_per_bucket_and_resolution(benchmark):
    rec = real_case(benchmark, "jax", "compiled", "bucketed", task="ddpm")
    buckets = {(min(b for b in TINY.batch_buckets() if b >= B), S) for B, S in D.image_shapes(TINY)}
    assert rec["compilations"] == rec["distinct_shapes"] == len(buckets) and rec["padding_waste"] > 0


# ----------------------------------------------------------------------------- prefill_int

def test_prefill_int_spec_passes_the_length_as_a_python_int():
    spec = D.task_spec(TINY, 1, "prefill_int")
    lengths = D.prompt_lengths(TINY)
    for (tokens, length), T, key in zip(spec.inputs, lengths, spec.stream.keys):
        assert type(length) is int and length == T and key == f"length={T}"
        assert tokens.shape == (1, TINY.gpt.block_size) and not tokens[:, T:].any()
    assert D.strategies("torch", "compiled", "prefill_int") == (None, *D.INT_STRATEGIES)
    assert D.strategies("torch", "eager", "prefill_int") == (None,)


def test_the_harness_passes_python_ints_unconverted(benchmark, monkeypatch):
    seen = []

    class IntModel(StreamModel):
        def prefill_int(self, tokens, length):
            seen.append(type(length))
            return self.prefill(tokens[:, :length], np.array([length - 1]))

    _, rec = stream_case(benchmark, monkeypatch, task="prefill_int", model=IntModel, rounds=1)
    assert rec["status"] == "ok" and set(seen) == {int}


def test_jax_jit_without_static_args_refuses_the_int_with_its_own_error():
    if "jax" not in INSTALLED:
        pytest.skip("needs jax")
    a = frameworks.load("jax")
    (tokens, length), *_ = D.task_spec(TINY, 1, "prefill_int").inputs
    model = a.build("dynamic", TINY, D.init_params(TINY), "compiled", "cpu")
    with pytest.raises(Unsupported, match="static_argnums.*(Slice entries must be static|Concretization)"):
        model.prefill_int(a.asarray(tokens, "cpu"), length)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["static", None])
def test_torch_int_length_recompiles_to_the_limit_and_records_the_hit(benchmark, strategy):
    """dynamic=False specialises every int value; the default specialises the first, then
    makes the int symbolic: it hits a limit of 2 only when static."""
    pytest.importorskip("torch")
    import torch._dynamo
    with torch._dynamo.config.patch(recompile_limit=2):
        rec = real_case(benchmark, "torch", "compiled", strategy, task="prefill_int")
    assert rec["distinct_shapes"] > 2
    if strategy == "static":
        assert rec["compilations"] == 2 and rec["recompile_limit_hit"] is True
    else:
        assert rec["compilations"] <= 2 and rec["recompile_limit_hit"] is False


# ----------------------------------------------------------------------------- cold-cache policy

def test_a_stream_cold_pass_runs_inside_the_adapters_fresh_caches(benchmark, monkeypatch):
    import contextlib
    inside = []

    class Fresh(FakeAdapter):
        active = False

        @contextlib.contextmanager
        def fresh_caches(self):
            Fresh.active = True
            try:
                yield "empty"
            finally:
                Fresh.active = False

    class Recording(StreamModel):
        def prefill(self, tokens, last):
            inside.append(Fresh.active)
            return super().prefill(tokens, last)

    _, rec = stream_case(benchmark, monkeypatch, fake=Fresh(), model=Recording, rounds=1)
    n = TINY.requests
    assert inside[:n] == [True] * n and not any(inside[n:]) and len(inside) > n     # cold inside, warm not
    assert rec["stream_cold_cache"] == "empty"


def test_jax_fresh_caches_turns_the_persistent_cache_off_and_back():
    if "jax" not in INSTALLED:
        pytest.skip("needs jax")
    import jax
    a = frameworks.load("jax")
    was = jax.config.jax_enable_compilation_cache
    with a.fresh_caches() as state:
        assert state == "empty" and a.cache_dir_in_use() is None
    assert jax.config.jax_enable_compilation_cache == was


def test_torch_fresh_caches_gives_inductor_an_empty_cache_dir():
    if "torch" not in INSTALLED:
        pytest.skip("needs torch")
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    a = frameworks.load("torch")
    before = cache_dir()
    with a.fresh_caches() as state:
        inside = cache_dir()
        assert state == "empty" and inside != before and os.listdir(inside) == []
    assert cache_dir() == before and not os.path.exists(inside)


# ----------------------------------------------------------------------------- XLA under TensorFlow

@pytest.mark.alone      # counts the entries written to the XLA folder the test workers share
def test_tf_counts_xla_compiles_per_shape_under_one_input_signature_trace():
    if "tensorflow" not in INSTALLED:
        pytest.skip("needs tensorflow")
    import tensorflow as tf
    a = frameworks.load("tensorflow")
    if a.cache_dir_in_use() is None:
        pytest.skip("TensorFlow's XLA cache is off here: xla_compilations is not observable")
    c = float(np.random.default_rng().random())   # a Python float is a constant of the graph: a program
                                                  # no cache holds yet (a tensor would be a captured input)
    f = a.function(lambda x: tf.reduce_sum(x * c), jit_compile=True,
                   input_signature=(tf.TensorSpec((None,), tf.float32),))
    counts = [a.counters()["xla_compilations"]]
    for n in (3, 4, 3):
        f(tf.ones(n))
        counts.append(a.counters()["xla_compilations"])
    assert f.experimental_get_tracing_count() == 1
    assert np.diff(counts).tolist() == [1, 1, 0]       # a compile per new shape, none for a seen one


# ----------------------------------------------------------------------------- generate, train

@pytest.mark.parametrize("task", ["generate", "train"])
@pytest.mark.parametrize("strategy", [None, "bucketed"])
def test_generate_and_train_streams_are_seeded_and_right_padded(task, strategy):
    spec = D.task_spec(TINY, 1, task, strategy=strategy)
    again = D.task_spec(TINY, 1, task, strategy=strategy)
    lengths = D.generate_lengths(TINY) if task == "generate" else D.train_lengths(TINY)
    assert len(spec.inputs) == len(lengths) == (TINY.generate_requests if task == "generate" else TINY.train_requests)
    assert len(set(lengths)) >= len(lengths) // 2 and min(lengths) >= TINY.min_len
    assert spec.stream.record["stream"] == f"gpt-{task}" and spec.method == task
    for inp, inp2, T, key in zip(spec.inputs, again.inputs, lengths, spec.stream.keys):
        assert all(np.array_equal(a, b) for a, b in zip(inp, inp2))                     # seeded
        P = inp[0].shape[1]
        assert key == f"T={P}" and P == (D.bucket_of(TINY, T) if strategy else T)
        assert not inp[0][:, T:].any()                                                   # right padding
        if task == "generate":
            assert T + TINY.new_tokens <= TINY.gpt.block_size and inp[1].tolist() == [T - 1] * TINY.batch
        else:
            tokens, targets, weights = inp
            assert tokens.shape == targets.shape == weights.shape == (TINY.train_batch, P)
            assert weights.dtype == np.float32 and weights[:, :T].all() and not weights[:, T:].any()
    padded = [x[0].shape[1] for x in spec.inputs]
    assert spec.stream.record["padding_waste"] == pytest.approx(1 - sum(lengths) / sum(padded))
    assert (spec.stream.record["padding_waste"] > 0) is (strategy == "bucketed")


def test_a_config_whose_generate_stream_cannot_exist_is_refused():
    with pytest.raises(FwbenchError, match="min_len 8 \\+ new_tokens 25 exceeds the block size 32"):
        D.DynamicConfig(gpt_preset="tiny", new_tokens=25)
    with pytest.raises(FwbenchError, match="generate_requests 13 must be at most requests 12"):
        D.DynamicConfig(gpt_preset="tiny", requests=12, generate_requests=13)


def test_generate_references_are_greedy_and_clear_of_float32_rounding():
    spec = D.task_spec(TINY, 1, "generate")
    params = gpt.init_params(TINY.gpt)
    for i, (tokens, _) in enumerate(spec.inputs):
        new, margin = D.greedy_reference(TINY.gpt, params, tokens, TINY.new_tokens)
        assert margin >= D.GREEDY_MARGIN and np.array_equal(D.generate_request(TINY, 0, i)[1], new)
        full = gpt.reference_generate(TINY.gpt, params, tokens, TINY.new_tokens)     # workloads.gpt's own
        assert np.array_equal(full[:, tokens.shape[1]:], new)
        assert spec.stream.check(i, new) is None
        wrong = new.copy()
        wrong[0, -1] = (wrong[0, -1] + 1) % TINY.gpt.vocab_size
        assert "differ from the float64 greedy reference" in spec.stream.check(i, wrong)


def test_padding_weights_and_the_causal_mask_leave_the_real_loss_unchanged():
    """In float64: the bucket-padded batch's weighted loss is the unpadded loss (the padded
    positions are causally after every real one, and their weight is 0)."""
    spec = D.task_spec(TINY, 1, "train", strategy="bucketed")
    params = gpt.init_params(TINY.gpt)
    padded = [i for i, T in enumerate(D.train_lengths(TINY)) if spec.inputs[i][0].shape[1] > T][:3]
    assert padded
    for i in padded:
        tokens, targets, weights = spec.inputs[i]
        logits = gpt.reference_logits(TINY.gpt, params, tokens)
        z = logits - logits.max(-1, keepdims=True)
        ce = -np.take_along_axis(z - np.log(np.exp(z).sum(-1, keepdims=True)), targets[..., None], -1)[..., 0]
        assert (ce * weights).sum() / weights.sum() == pytest.approx(D.train_reference(TINY, 0, i)[0], rel=1e-12)


def test_train_check_catches_a_wrong_loss_or_gradient():
    spec = D.task_spec(TINY, 1, "train")
    tokens, targets, _ = spec.inputs[0]
    # The float64 gradients by central differences per element would be slow; exact ones from
    # the reference's own directional derivative are enough to build a passing output: a
    # gradient equal to fd * d (d a unit direction) has <g, d> = fd.
    loss, fd = D.train_reference(TINY, 0, 0)
    d = D.direction(TINY.gpt, 0)
    good = {"loss": np.float32(loss), **{k: fd * v for k, v in d.items()}}
    assert spec.stream.check(0, good) is None
    assert "loss differs" in spec.stream.check(0, {**good, "loss": np.float32(loss * (1 + 1e-5))})
    bad = {k: v * (1 + 1e-3) if k != "loss" else v for k, v in good.items()}
    assert "directional derivative differs" in spec.stream.check(0, bad)


def stream_outputs(framework, mode, strategy, task, requests, junk=False):
    """The outputs of a few requests of a stream, on a model built as the harness builds it;
    with junk, the bucket's padding holds random tokens and targets instead of zeros."""
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    adapter = frameworks.load(framework)
    spec = D.task_spec(TINY, 1, task, strategy=strategy)
    model = adapter.build("dynamic", TINY, D.init_params(TINY), mode, "cpu", strategy=strategy)
    fn = getattr(model, task)
    lengths = D.generate_lengths(TINY) if task == "generate" else D.train_lengths(TINY)
    rng = np.random.default_rng(5)

    def inputs(i):
        if not junk:
            return spec.inputs[i]
        ints = [a.copy() for a in spec.inputs[i][:2 if task == "train" else 1]]
        for a in ints:
            a[:, lengths[i]:] = rng.integers(0, TINY.gpt.vocab_size, a[:, lengths[i]:].shape)
        return (*ints, *spec.inputs[i][len(ints):])

    return spec, {i: adapter.to_numpy(fn(*(adapter.asarray(a, "cpu") for a in inputs(i)))) for i in requests}


@pytest.mark.parametrize("task", ["generate", "train"])
@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_what_the_padding_holds_has_exactly_no_effect(framework, task):
    """Random tokens and targets in a bucket's padding instead of zeros change no bit of the
    real results: causal attention, the decode steps' mask and the zero weights keep them
    out exactly (the same shapes, so the same kernels and summation orders)."""
    lengths = D.generate_lengths(TINY) if task == "generate" else D.train_lengths(TINY)
    i = next(i for i, T in enumerate(lengths) if D.bucket_of(TINY, T) - T >= 4)
    _, zeros = stream_outputs(framework, "eager", "bucketed", task, [i])
    _, junk = stream_outputs(framework, "eager", "bucketed", task, [i], junk=True)
    a, b = (zeros[i], junk[i]) if task == "train" else ({"tokens": zeros[i]}, {"tokens": junk[i]})
    assert all(np.array_equal(a[k], b[k]) for k in a), [k for k in a if not np.array_equal(a[k], b[k])]


SLOW = pytest.mark.slow


@pytest.mark.parametrize("framework,mode,task", [
    *((fw, "eager", task) for fw in ("torch", "jax", "tensorflow") for task in ("generate", "train")),
    # one compiled mode each: torch's train (its generate's prefill and decode step compile
    # as two more graphs, 15 s more); JAX's compiled cases are the counter test below
    pytest.param("torch", "compiled", "train", marks=SLOW),
    pytest.param("tensorflow", "compiled", "generate", marks=SLOW),
    pytest.param("tensorflow", "compiled", "train", marks=SLOW)])
def test_bucketed_generate_and_train_equal_unpadded(framework, mode, task):
    """A request padded to the next bucket: the real positions' results equal the unpadded
    eager ones (tokens exactly; loss and gradients within float32 rounding) and the float64
    references. One request: every new shape costs JAX's op-by-op mode a compile per op."""
    lengths = D.generate_lengths(TINY) if task == "generate" else D.train_lengths(TINY)
    picks = [next(i for i, T in enumerate(lengths) if D.bucket_of(TINY, T) == 16 and T < 16)]
    spec, padded = stream_outputs(framework, mode, "bucketed", task, picks)
    _, plain = stream_outputs(framework, "eager", None, task, picks)
    for i in picks:
        assert spec.inputs[i][0].shape[1] > lengths[i]                                # really padded
        assert spec.stream.check(i, padded[i]) is None
        if task == "generate":
            assert np.array_equal(padded[i], plain[i])
        else:
            assert abs(padded[i]["loss"] - plain[i]["loss"]) <= D.LOSS_TOLERANCE * abs(plain[i]["loss"])
            worst = max(rel_err(padded[i][k], plain[i][k]) for k in plain[i] if k != "loss")
            assert worst <= 1e-4, worst


@SLOW
@pytest.mark.parametrize("task", ["generate", "train"])
def test_jax_bucketed_generate_and_train_compile_at_most_once_per_bucket(benchmark, task):
    if "jax" not in INSTALLED:
        pytest.skip("needs jax")
    s = harness.Session(harness.Options(frameworks=("jax",), workloads=("dynamic",), preset="tiny", rounds=1),
                      gemm_samples=[{"numpy": 1e9}])
    rec = harness.run_case(benchmark, s, Case("jax", "dynamic", task, "compiled", "bucketed"))
    assert record_mod.problems(rec) == [] and rec["status"] == "ok", rec["reason"]
    assert rec["stream"] == f"gpt-{task}" and rec["padding_waste"] > 0
    assert 2 <= rec["distinct_shapes"] <= len(TINY.buckets()) and rec["compilations"] == rec["distinct_shapes"]
    assert rec["compilations_timed"] == 0

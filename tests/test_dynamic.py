"""Dynamic shapes (workloads.dynamic): the seeded streams, the harness's stream timing on a
stand-in model, and each framework's counters against what must happen (tiny preset)."""
from __future__ import annotations

import time

import numpy as np
import pytest

import frameworks
from frameworks import bench
from tests.helpers import INSTALLED
from tests.test_harness import FakeAdapter
from workloads import dynamic as D
from workloads import gpt
from workloads import record as record_mod

TINY = D.preset("tiny").config
pytestmark = pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")


# ----------------------------------------------------------------------------- framework-free

def test_prompt_lengths_are_seeded_skewed_and_mostly_distinct():
    small = D.preset("small").config
    lengths = D.prompt_lengths(small)
    assert lengths == D.prompt_lengths(small) and lengths != D.prompt_lengths(small, seed=1)
    assert len(lengths) == 64 and min(lengths) >= 8 and max(lengths) <= 128
    assert len(set(lengths)) >= 30 and np.median(lengths) < (8 + 128) / 2      # skewed to short prompts
    assert small.buckets() == (8, 16, 32, 64, 128) and TINY.buckets() == (8, 16, 32)


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


class StreamModel:
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


def stream_case(benchmark, monkeypatch, strategy=None, **kw):
    fake = FakeAdapter()
    monkeypatch.setattr(fake, "build", lambda *a, **k: StreamModel(fake, **kw))
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    s = bench.Session(bench.Options(frameworks=("torch",), workloads=("dynamic",), preset="tiny", rounds=3),
                      gemm_samples=[{"numpy": 1e9}])     # no GEMM measurement: not what is tested
    return s, bench.run_case(benchmark, s, "torch", "dynamic", "prefill", "compiled", strategy)


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

def real_case(benchmark, framework, mode, strategy):
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    s = bench.Session(bench.Options(frameworks=(framework,), workloads=("dynamic",), preset="tiny", rounds=1),
                      gemm_samples=[{"numpy": 1e9}])
    rec = bench.run_case(benchmark, s, framework, "dynamic", "prefill", mode, strategy)
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

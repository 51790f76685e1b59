"""The benchmark harness, driven by a stand-in framework (numpy + sleeps) so its logic is
tested without compiling anything: records, skips, failures, fallbacks, and that the time
pytest-benchmark reports equals a bare loop over the same callable."""
from __future__ import annotations

import time

import numpy as np
import pytest

import frameworks
from frameworks import bench
from frameworks.base import Adapter, FrameworkUnavailable, Unsupported
from workloads import record as record_mod

STEP_S = 0.004
# cases that skip or fail before timing leave pytest-benchmark's fixture unused, by design
pytestmark = pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")


class FakeModel:
    def __init__(self, adapter):
        self.adapter = adapter

    def _work(self, *arrays):
        assert all(isinstance(a, np.ndarray) and a.any() for a in arrays)
        time.sleep(STEP_S)
        self.adapter.counter += 0  # steady state: no compilation
        return arrays[0]

    logits = train_step = generate = _work


class FakeAdapter(Adapter):
    name = "torch"
    compile_counter = "fake counter"

    def __init__(self, fail=None, breaks=()):
        super().__init__()
        self.counter, self.fail, self.breaks = 0, fail, list(breaks)

    def version(self): return "0.0-fake"
    def devices(self): return ["cpu"]
    def device_name(self, device): return "cpu"
    def _apply_threads(self, n): pass
    def _apply_matmul_precision(self, p): pass
    def asarray(self, x, device): return np.asarray(x)
    def to_numpy(self, x): return x
    def sync(self, x): return x
    def compilations(self): return self.counter
    def fallbacks(self): return self.breaks

    def build(self, workload, config, params, mode, device):
        if self.fail:
            raise self.fail
        self.counter += 2          # "compiles" twice while building/first call
        return FakeModel(self)


def session(**kw):
    opts = bench.Options(frameworks=("torch",), workloads=("gpt",), preset="tiny", rounds=15, **kw)
    return bench.Session(opts)


def test_ok_case_fills_every_record_field(benchmark, monkeypatch):
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    s = session()
    rec = bench.run_case(benchmark, s, "torch", "gpt", "train_step", "eager")
    assert record_mod.problems(rec) == []
    assert set(record_mod.FIELDS) <= set(benchmark.extra_info)
    assert rec["status"] == "ok" and rec["reason"] is None
    assert rec["framework_version"] == "0.0-fake" and rec["threads"] >= 1
    assert rec["items"] == 2 * 32 and rec["unit"] == "tokens" and rec["flops"] > 0
    assert rec["first_call_s"] >= STEP_S
    assert rec["compilations"] == 0           # counted over the timed case, after build
    assert benchmark.stats.stats.rounds == 15
    assert s.records == []


def test_unsupported_mode_is_recorded_and_skipped(benchmark, monkeypatch):
    monkeypatch.setattr(frameworks, "load", lambda name: FakeAdapter())
    s = session()
    with pytest.raises(pytest.skip.Exception, match="torch has no 'graph' mode"):
        bench.run_case(benchmark, s, "torch", "gpt", "forward", "graph")
    (rec,) = s.records
    assert rec["status"] == "unsupported" and rec["mode"] == "graph" and record_mod.problems(rec) == []


def test_unsupported_raised_by_framework(benchmark, monkeypatch):
    monkeypatch.setattr(frameworks, "load", lambda name: FakeAdapter(fail=Unsupported("no KV cache under XLA")))
    s = session()
    with pytest.raises(pytest.skip.Exception):
        bench.run_case(benchmark, s, "torch", "gpt", "generate", "compiled")
    assert s.records[0]["reason"] == "no KV cache under XLA"


def test_failure_is_recorded_then_raised(benchmark, monkeypatch):
    monkeypatch.setattr(frameworks, "load", lambda name: FakeAdapter(fail=RuntimeError("XLA crashed\nstack")))
    s = session()
    with pytest.raises(RuntimeError):
        bench.run_case(benchmark, s, "torch", "gpt", "forward", "compiled")
    assert s.records[0]["status"] == "failed" and s.records[0]["reason"] == "RuntimeError: XLA crashed"


def test_missing_framework_is_skipped_with_reason(benchmark, monkeypatch):
    def load(name):
        raise FrameworkUnavailable("torch is not installed: pip install 'fwbench[torch]'")
    monkeypatch.setattr(frameworks, "load", load)
    s = session()
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        bench.run_case(benchmark, s, "torch", "gpt", "forward", "eager")
    assert s.missing == {"torch": "torch is not installed: pip install 'fwbench[torch]'"}


def test_graph_breaks_make_a_fallback_record(benchmark, monkeypatch):
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    model_first_call = FakeModel.logits

    def breaking(self, *a):
        fake.breaks.append("data-dependent branch")
        return model_first_call(self, *a)
    monkeypatch.setattr(FakeModel, "logits", breaking)
    rec = bench.run_case(benchmark, session(), "torch", "gpt", "forward", "compiled")
    assert rec["status"] == "fallback" and rec["reason"] == "data-dependent branch"


def test_reported_time_matches_a_bare_loop(benchmark, monkeypatch):
    """pytest-benchmark's median for a case is within 3% of a bare loop over the same callable."""
    monkeypatch.setattr(frameworks, "load", lambda name: FakeAdapter())
    rec = bench.run_case(benchmark, session(bare_loop=True), "torch", "gpt", "forward", "eager")
    reported = benchmark.stats.stats.median
    assert reported == pytest.approx(rec["bare_loop_median_s"], rel=0.03)
    assert reported >= STEP_S


def test_rounds_follow_the_time_budget():
    opts = bench.Options(frameworks=("torch",), workloads=("gpt",), budget_s=3.0)
    assert bench.choose_rounds(0.5, opts) == 7          # at least min_rounds
    assert bench.choose_rounds(0.01, opts) == 100       # at most max_rounds
    assert bench.choose_rounds(0.1, opts) == 30
    opts.rounds = 5
    assert bench.choose_rounds(0.1, opts) == 5

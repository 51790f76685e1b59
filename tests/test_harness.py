"""The benchmark harness, driven by a stand-in framework (numpy + sleeps) so its logic is
tested without compiling anything: records, skips, failures, fallbacks, and that the time
pytest-benchmark reports equals a bare loop over the same callable."""
from __future__ import annotations

import gc
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
        self.calls, self.gc_during_calls = 0, []
        self.params = object()      # what train_step replaces, like a JAX model's params

    def _work(self, *arrays):
        assert all(isinstance(a, np.ndarray) and a.any() for a in arrays)
        time.sleep(STEP_S)
        self.calls += 1
        self.gc_during_calls.append(gc.isenabled())
        if self.calls == self.adapter.recompile_at:
            self.adapter.counter += 1   # a recompilation on this call
        return arrays[0]

    logits = train_step = generate = _work

    def state(self):
        return self.params


class FakeAdapter(Adapter):
    name = "torch"
    compile_counter = "fake counter"

    def __init__(self, fail=None, breaks=(), recompile_at=None):
        super().__init__()
        self.counter, self.fail, self.breaks = 0, fail, list(breaks)
        self.model_breaks, self.recompile_at, self.synced, self.model = [], recompile_at, [], None

    def version(self): return "0.0-fake"
    def devices(self): return ["cpu"]
    def device_name(self, device): return "cpu"
    def _apply_threads(self, n): pass
    def _apply_matmul_precision(self, p): pass
    def asarray(self, x, device): return np.asarray(x)
    def to_numpy(self, x): return x
    def compilations(self): return self.counter
    def fallbacks(self): return self.breaks
    def model_fallbacks(self): return self.model_breaks

    def sync(self, x):
        self.synced.append(x)
        return x

    def build(self, workload, config, params, mode, device, strategy=None):
        if self.fail:
            raise self.fail
        self.counter += 2          # "compiles" twice while building/first call
        self.model = FakeModel(self)
        return self.model


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
    assert rec["compile_cache"] in ("cold", "warm", "off") and rec["repeat"] is None


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


BRANCH = "data-dependent branch"
OPTIM = "Call to `torch._dynamo.graph_break()` Explanation: User-inserted graph break."


@pytest.mark.parametrize("in_model,status,reason,recorded", [
    (True, "fallback", BRANCH, BRANCH),                             # the model's own graph broke
    (False, "ok", None, "Call to `torch._dynamo.graph_break()`"),   # torch.optim's deliberate break
], ids=["model-break", "optimizer-break"])
def test_only_a_break_in_the_model_makes_a_fallback(benchmark, monkeypatch, in_model, status, reason, recorded):
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    step = FakeModel.train_step

    def breaking(self, *a):
        fake.breaks.append(BRANCH if in_model else OPTIM)
        if in_model:
            fake.model_breaks.append(BRANCH)
        return step(self, *a)
    monkeypatch.setattr(FakeModel, "train_step", breaking)
    rec = bench.run_case(benchmark, session(), "torch", "gpt", "train_step", "compiled")
    assert rec["status"] == status and rec["reason"] == reason and rec["graph_breaks"] == recorded


@pytest.mark.parametrize("call,timed", [(8, 1), (3, 0)], ids=["in-timed-rounds", "in-warm-up"])
def test_a_recompilation_during_the_timed_rounds_is_flagged(benchmark, monkeypatch, call, timed):
    # calls: first (1), sizing (2), 2 warm-up (3, 4), then the timed rounds (5 ...)
    fake = FakeAdapter(recompile_at=call)
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    rec = bench.run_case(benchmark, session(), "torch", "gpt", "forward", "compiled")
    assert rec["compilations"] == 1 and rec["compilations_timed"] == timed
    assert rec["recompiled_during_timing"] is bool(timed)


def test_a_train_step_waits_for_the_updated_state(benchmark, monkeypatch):
    """An asynchronous runtime (JAX) returns the loss before the update is done: every timed
    call must wait for the model's state() too, not only for the returned value."""
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    bench.run_case(benchmark, session(), "torch", "gpt", "train_step", "eager")
    assert fake.synced and all(isinstance(x, tuple) and x[1] is fake.model.params for x in fake.synced)



def test_a_forward_waits_for_its_output_only(benchmark, monkeypatch):
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    bench.run_case(benchmark, session(), "torch", "gpt", "forward", "eager")
    assert fake.synced and all(isinstance(x, np.ndarray) for x in fake.synced)


def test_the_garbage_collector_is_off_in_timed_rounds_only(benchmark, monkeypatch):
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    rec = bench.run_case(benchmark, session(), "torch", "gpt", "forward", "eager")
    on = fake.model.gc_during_calls
    assert on[:4] == [True] * 4 and not any(on[4:]) and len(on) == 4 + 15
    assert rec["gc_disabled"] is True and gc.isenabled()


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


def test_jax_train_step_state_is_ready_when_the_timed_call_returns():
    """The real asynchronous runtime: after the harness's sync of (loss, state()), every
    updated parameter and optimizer moment is computed. Without state() the sync would wait
    for the loss only. (gpt only: the diffusion model's state() is the same two lines.)"""
    pytest.importorskip("jax")
    import jax
    import workloads
    from frameworks.jax import diffusion as jax_diffusion
    assert callable(getattr(jax_diffusion.JaxDiffusion, "state", None))
    workload = "gpt"
    adapter = frameworks.load("jax")
    W = workloads.get(workload)
    p = W.preset("tiny")
    spec = W.task_spec(p.config, 1, "train_step")
    assert spec.mutates
    model = adapter.build(workload, p.config, W.init_params(p.config, seed=0), "eager", "cpu")
    inputs = [adapter.asarray(a, "cpu") for a in spec.inputs[0]]
    adapter.sync((model.train_step(*inputs), model.state()))
    leaves = jax.tree_util.tree_leaves(model.state())
    assert len(leaves) > 2 * len(W.param_shapes(p.config)) and all(x.is_ready() for x in leaves)


@pytest.mark.parametrize("differs", ["forward: relative error 0.1 exceeds the tolerance 1e-05", None],
                         ids=["wrong", "right"])
def test_a_result_that_fails_its_check_is_failed_and_not_timed(benchmark, monkeypatch, differs):
    """TaskSpec.check sees the first call's output as numpy; a difference fails the case with
    the check's message (recorded `failed`, the pytest case xfails: the record is the
    finding), before any timing; a match times it as usual."""
    import dataclasses
    from workloads import gpt
    fake = FakeAdapter()
    monkeypatch.setattr(frameworks, "load", lambda name: fake)
    seen = []

    def check(out):
        seen.append(out)
        return differs
    spec = gpt.task_spec
    monkeypatch.setattr(gpt, "task_spec", lambda *a, **k: dataclasses.replace(spec(*a, **k), check=check,
                                                                              sizes={"batch": 2}))
    s = session()
    if differs:
        with pytest.raises(pytest.xfail.Exception, match="relative error 0.1"):
            bench.run_case(benchmark, s, "torch", "gpt", "forward", "compiled")
        (rec,) = s.records
        assert rec["status"] == "failed" and rec["reason"] == differs and rec["batch"] == 2
        assert fake.model.calls == 1 and benchmark.stats is None          # the first call only
    else:
        rec = bench.run_case(benchmark, s, "torch", "gpt", "forward", "compiled")
        assert rec["status"] == "ok" and rec["batch"] == 2 and benchmark.extra_info["batch"] == 2
    assert len(seen) == 1 and isinstance(seen[0], np.ndarray)

"""What a library user gets from Adapter.build (issue 38): the workload's own model object (no
wrapper: isinstance works, and it conforms to the workload's Protocol), whose calls add nothing
to the framework's own call that a user of that framework would not write: no input check (the
rules run where inputs are made: each workload's check_inputs), no precision scope (entered once,
by the harness or the user's `with adapter.own_precision()`), no process-wide reset of a
compiler's caches when it is built.

The overhead is measured with the framework's call replaced by a stub that returns at once, so
what is timed is the method's own Python: the built model's method against the same call written
directly (the median over many calls, interleaved), at most 1 us apart."""
from __future__ import annotations

import importlib
import time

import numpy as np
import pytest

import frameworks
from tests.support.helpers import INSTALLED
from workloads import diffusion as D
from workloads import gpt as G

GCFG, DCFG = G.preset("tiny").config, D.preset("tiny").config
PROTOCOL = {"gpt": G.MODEL, "diffusion": D.MODEL}      # each workload's declared interface
MODES = ("eager", "compiled")
OVERHEAD_BUDGET_S = 1e-6


def built(framework: str, workload: str, mode: str):
    adapter = frameworks.load(framework)
    cfg = GCFG if workload == "gpt" else DCFG
    params = (G if workload == "gpt" else D).init_params(cfg, seed=0)
    return adapter, adapter.build(workload, cfg, params, mode=mode, device="cpu")


@pytest.mark.parametrize("workload", ["gpt", "diffusion"])
@pytest.mark.parametrize("framework", INSTALLED)
def test_build_returns_the_workloads_own_model(framework, workload):
    _, model = built(framework, workload, "eager")
    module = importlib.import_module(f"frameworks.{framework}.{workload}")
    assert type(model).__module__ == module.__name__, type(model)
    assert isinstance(model, PROTOCOL[workload])
    assert not hasattr(model, "_fwbench_model")


def per_call_s(fn, x, n: int = 20000, repeats: int = 7) -> float:
    """Median over `repeats` of the mean time of n calls fn(x)."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(x)
        out.append((time.perf_counter() - t0) / n)
    return float(np.median(out))


def stubbed(framework: str, model, attr: str):
    """The built model with its framework call `attr` (the compiled or module function the
    method runs) replaced by a stub, and that call as a user of the framework writes it."""
    stub = lambda *a: None        # noqa: E731
    setattr(model, attr, stub)
    if framework == "torch":
        import torch

        def direct(x):
            with torch.no_grad():          # what a torch user writes around an inference call
                return stub(x)
        return direct
    if framework == "jax":
        return lambda x: stub(model.params, x)
    return stub


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("framework", INSTALLED)
@pytest.mark.alone           # a timing
def test_a_call_costs_no_more_than_the_frameworks_own(framework, mode):
    adapter, model = built(framework, "gpt", mode if mode in frameworks.load(framework).modes else "eager")
    x = adapter.asarray(G.make_batch(GCFG, 1, seed=0)[0], "cpu")
    direct = stubbed(framework, model, "_logits")
    overhead = []
    for _ in range(3):        # interleaved: the machine's drift falls on both
        overhead.append(per_call_s(model.logits, x) - per_call_s(direct, x))
    assert np.median(overhead) <= OVERHEAD_BUDGET_S, f"{framework}: {np.median(overhead) * 1e6:.2f} us more per call"


@pytest.mark.parametrize("framework", INSTALLED)
def test_a_call_runs_no_input_rule(framework, monkeypatch):
    """A bad input reaches the framework: the model's methods check no array (the harness, or
    the user, runs the workload's check_inputs where the inputs are made)."""
    adapter, model = built(framework, "gpt", "eager")
    calls = []
    for rule in ("check_tokens", "check_batch"):
        monkeypatch.setattr(G.GPTConfig, rule, lambda *a, r=rule, **k: calls.append(r))
    tokens, targets = G.make_batch(GCFG, 1, seed=0)
    x, y = adapter.asarray(tokens, "cpu"), adapter.asarray(targets, "cpu")
    for method, args in (("logits", (x,)), ("loss", (x, y)), ("train_step", (x, y))):
        adapter.sync(getattr(model, method)(*args))
    assert calls == []
    G.check_inputs(GCFG, "train_step", tokens, targets)
    assert calls == ["check_batch"]


def test_building_a_compiled_torch_model_keeps_the_users_compiled_functions():
    """No torch._dynamo.reset() from build: a user's own compiled function keeps its graph."""
    if "torch" not in INSTALLED:
        pytest.skip("needs torch")
    import torch
    counts = []

    def backend(gm, example_inputs):
        counts.append(1)
        return gm.forward

    @torch.compile(backend=backend)
    def users(x):
        return x * 2 + 1

    x = torch.ones(3)
    users(x)
    from workloads import derivatives as DV
    cfg = DV.preset("tiny").config
    adapter = frameworks.load("torch")
    for workload, c, params in (("derivatives", cfg, DV.init_params(cfg)), ("gpt", GCFG, G.init_params(GCFG))):
        adapter.build(workload, c, params, mode="compiled", device="cpu")
    users(x)
    assert len(counts) == 1, "building a model made the user's function compile again"

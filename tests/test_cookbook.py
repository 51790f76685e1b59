"""The cookbook versions (tests/cookbook/<fw>.py) compute what fwbench's derivatives models
compute: at the tiny preset, for a few cases per framework and mode, the cookbook's output
equals fwbench's within the problem's tolerance (workloads.derivatives.TOL), so the
side-by-side benchmark (tests/measure/measure_cookbook.py) compares equal work, and a cookbook that
computes something else fails here. Timing is the benchmark's, not a test's."""
from __future__ import annotations

import numpy as np
import pytest

import frameworks
from tests.measure import measure_cookbook as M
from tests.support.helpers import INSTALLED
from workloads import derivatives as D

TINY = D.preset("tiny").config
PARAMS = D.init_params(TINY)

# (framework, mode, task, strategy): every problem in eager mode, a few compiled (a cold
# torch.compile costs seconds per case, so those are `slow`).
CASES = [
    *(("torch", "eager", t, s) for t, s in (
        ("per_sample_grad_mlp_b4", "vmap"), ("per_sample_grad_mlp_b4", "loop"), ("hvp_mlp", "rev_rev"),
        ("hessian_p30", "hessian"), ("jacobian_n12_m3", "jacfwd"), ("nth_derivative_4", "vmap"),
        ("nth_derivative_4", "autograd"), ("per_sample_grad_gpt_b3", "vmap"), ("hvp_gpt", "fwd_rev"),
        ("ensemble_gpt_k2", "vmap"), ("ensemble_gpt_k2", "loop"))),
    *(("jax", "eager", t, s) for t, s in (
        ("per_sample_grad_mlp_b4", "vmap"), ("hvp_mlp", "rev_rev"), ("hessian_p30", "jacrev_jacrev"),
        ("jacobian_n3_m12", "jacrev"), ("nth_derivative_4", "jet"), ("per_sample_grad_gpt_b3", "loop"),
        ("hvp_gpt", "fwd_rev"), ("ensemble_gpt_k2", "vmap"))),
    *(("tensorflow", "eager", t, s) for t, s in (
        ("per_sample_grad_mlp_b4", "vectorized_map"), ("hvp_mlp", "fwd_rev"), ("hessian_p30", "pfor"),
        ("jacobian_n12_m3", "jacrev"), ("nth_derivative_4", "tapes"), ("ensemble_gpt_k2", "loop"))),
    ("tensorflow", "graph", "per_sample_grad_mlp_b4", "jacobian"),
]
SLOW = [("torch", "compiled", "jacobian_n12_m3", "jacrev"), ("torch", "compiled", "hvp_mlp", "fwd_rev"),
        ("jax", "compiled", "hessian_p30", "jacfwd_jacrev"), ("jax", "compiled", "per_sample_grad_gpt_b3", "vmap")]


def params() -> list:
    out = []
    for case in CASES + SLOW:
        fw = case[0]
        marks = [pytest.mark.slow] if case in SLOW else []
        if fw not in INSTALLED:
            marks.append(pytest.mark.skip(reason=f"{fw} is not installed"))
        elif M.cookbook(fw) is None:
            marks.append(pytest.mark.skip(reason=f"no tests/cookbook/{fw}.py"))
        out.append(pytest.param(*case, id="-".join(case), marks=marks))
    return out


@pytest.mark.parametrize("framework,mode,task,strategy", params())
def test_the_cookbook_computes_what_fwbench_computes(framework, mode, task, strategy):
    if strategy not in D.strategies(framework, mode, task):
        pytest.skip(f"{framework} has no {strategy!r} strategy for {task} here")
    adapter = frameworks.load(framework)
    p = M.pair(adapter, framework, mode, TINY, PARAMS, task, strategy)
    if isinstance(p, str):
        pytest.skip(p)
    err, ours, theirs = M.agreement(adapter, p)
    assert isinstance(err, float) and err <= p.tol, (err, p.tol)
    spec = D.task_spec(TINY, 1, task)
    assert spec.check(adapter.to_numpy(theirs)) is None, spec.check(adapter.to_numpy(theirs))


def test_a_cookbook_that_computes_something_else_fails_the_comparison():
    """agreement() compares the whole output: a cookbook off in one array, or with another
    structure, is caught (and the benchmark then times nothing)."""
    fw = next((f for f in ("jax", "torch", "tensorflow") if f in INSTALLED and M.cookbook(f) is not None), None)
    if fw is None:
        pytest.skip("no framework with a cookbook installed")
    adapter = frameworks.load(fw)
    p = M.pair(adapter, fw, "eager", TINY, PARAMS, "per_sample_grad_mlp_b4", D.strategies(fw, "eager",
                                                                                             "per_sample_grad_mlp_b4")[0])
    good = p.cookbook
    for bad, what in ((lambda *a: {k: v * (1.01 if k == "b2" else 1) for k, v in good(*a).items()}, float),
                      (lambda *a: {k: v for k, v in good(*a).items() if k != "b2"}, str)):
        p.cookbook = bad
        err, _, _ = M.agreement(adapter, p)
        assert isinstance(err, what) and (what is str or err > p.tol), err


def test_the_ratio_interval_is_the_geometric_mean_with_a_t_interval():
    a, b = [2.0, 2.2, 1.8, 2.0], [1.0, 1.0, 1.0, 1.0]
    ratio, lo, hi = M.ratio_interval(a, b)
    assert ratio == pytest.approx(float(np.exp(np.mean(np.log(a)))))
    assert lo < ratio < hi and M.ratio_interval([1.0] * 5, [1.0] * 5) == (1.0, 1.0, 1.0)

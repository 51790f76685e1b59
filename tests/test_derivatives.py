"""The derivatives workload (issue 12): its float64 references are right, its checks catch
wrong results, and every framework x mode x strategy passes them at the tiny preset.

The references are checked against what they do not use: the analytic per-sample gradients
against central differences of the per-example loss, the analytic n-th derivatives against
differences of the (n-1)-th, the analytic Jacobian against differences of f, the analytic
Hessian against differences of the analytic gradient along each unit vector and against
the HVP reference (differences along v).
"""
from __future__ import annotations

import numpy as np
import pytest

import frameworks
from tests.support.helpers import impls
from workloads import derivatives as D
from workloads.base import FwbenchError, rel_err

TINY = D.preset("tiny").config
PARAMS = D.init_params(TINY)
RNG_SEED = 7


def _direction(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    v = rng.standard_normal(shape)
    return v / np.linalg.norm(v)


# ----------------------------------------------------------------------------- references

def test_per_sample_gradients_match_differences_of_each_examples_loss():
    rng = np.random.default_rng(RNG_SEED)
    mlp = D.MLP(5, 7, 3)
    params, (x, y) = mlp.init(rng), mlp.data(rng, 4)
    grads = D.reference_per_sample_grads(params, x, y)
    theta = D.flatten(params).astype(np.float64)
    v = _direction(rng, theta.shape)
    for i in range(len(y)):
        loss_i = lambda t: D.reference_losses(D.unflatten(t, mlp), x[i:i + 1], y[i:i + 1])[0]  # noqa: E731
        fd = D.directional(loss_i, theta, v)
        analytic = float(D.flatten({k: grads[k][i] for k in D.MLP_KEYS}) @ v)
        assert abs(fd - analytic) <= 1e-9 * max(1.0, abs(analytic)), (i, fd, analytic)


def test_hvp_and_hessian_references_agree_with_differences_of_the_gradient():
    rng = np.random.default_rng(RNG_SEED)
    mlp = D.hessian_mlp(TINY, 30)
    params, (x, y) = mlp.init(rng), mlp.data(rng, 6)
    v = {k: rng.standard_normal(s) for k, s in mlp.shapes().items()}
    H = D.reference_hessian(mlp, D.flatten(params), x, y)
    assert H.shape == (mlp.n_params, mlp.n_params)
    assert rel_err(H, H.T) < 1e-9                                        # symmetric
    grad = lambda t: D.flatten(D.reference_grad(D.unflatten(t, mlp), x, y))  # noqa: E731
    theta = D.flatten(params).astype(np.float64)
    fd = np.stack([D.directional(grad, theta, e) for e in np.eye(theta.size)], axis=1)
    assert rel_err(H, fd) < 1e-9                                         # analytic = differences
    hv = D.flatten(D.reference_hvp(mlp, params, v, x, y))
    assert rel_err(H @ D.flatten(v), hv) < 1e-9


def test_jacobian_reference_matches_differences():
    rng = np.random.default_rng(RNG_SEED)
    a, b, x = rng.standard_normal((6, 5)) / 2, rng.standard_normal((3, 6)) / 2, rng.standard_normal(5)
    J = D.reference_jacobian(a, b, x)
    f = lambda z: b @ np.tanh(a @ z)  # noqa: E731
    fd = np.stack([D.directional(f, x, e) for e in np.eye(5)], axis=1)
    assert J.shape == (3, 5) and rel_err(J, fd) < 1e-9


@pytest.mark.parametrize("order", range(1, 7))
def test_nth_derivative_reference_is_the_derivative_of_the_previous_order(order):
    x = np.linspace(-3, 3, 11)
    prev = (lambda z: D.nth_function(z)) if order == 1 else (lambda z: D.reference_nth_derivative(z, order - 1))
    fd = np.array([D.directional(prev, xi, 1.0) for xi in x])
    assert rel_err(D.reference_nth_derivative(x, order), fd) < 1e-9


# ----------------------------------------------------------------------------- tasks and checks

def test_tasks_parse_back_to_their_problems_and_sizes():
    names = D.tasks(D.preset("small").config)
    assert names == D.TASKS and len(set(names)) == len(names)
    assert D.problem_of("hessian_p1000") == ("hessian", (1000,))
    assert D.problem_of("jacobian_n10_m1000") == ("jacobian", (10, 1000))
    assert D.problem_of("per_sample_grad_gpt_b8") == ("per_sample_grad", (8,))
    assert D.problem_of("ensemble_gpt_k4") == ("ensemble", (4,))
    for bad in ("hessian", "hessian_p0", "jacobian_n3", "per_sample_grad_rnn_b8", "ensemble_gpt", "hvp_gpt2"):
        with pytest.raises(FwbenchError, match="unknown derivatives task"):
            D.problem_of(bad)


def test_specs_carry_sizes_that_are_not_record_fields():
    from workloads.record import FIELDS
    for task in D.tasks(TINY):
        spec = D.task_spec(TINY, 1, task)
        assert spec.sizes and not set(spec.sizes) & set(FIELDS), task
        assert spec.check is not None and len(spec.inputs) == D.POOL
    spec = D.task_spec(TINY, 1, "hessian_p30")
    assert spec.sizes["params"] == len(spec.inputs[0][0]) == D.hessian_mlp(TINY, 30).n_params


def test_the_check_accepts_the_reference_and_names_what_differs():
    spec = D.task_spec(TINY, 1, "per_sample_grad_mlp_b4")
    ref = {k: v.astype(np.float32) for k, v in spec.check.reference().items()}
    assert spec.check(ref) is None
    wrong = dict(ref, b2=ref["b2"] * 1.01)
    assert "relative error" in spec.check(wrong) and "(in b2)" in spec.check(wrong)
    assert "structure" in spec.check(dict(ref, w1=ref["w1"][:1]))
    assert "structure" in spec.check({k: ref[k] for k in ("w1", "b1")})
    jac = D.task_spec(TINY, 1, "jacobian_n12_m3")
    assert "structure" in jac.check(jac.check.reference().T)            # (n, m) instead of (m, n)
    assert "relative error nan" in jac.check(np.full((3, 12), np.nan))


# ----------------------------------------------------------------------------- every framework

# torch.compile of a transform costs 1-11 s here, so its compiled cases in this file are
# each problem's default strategy on its first tiny task, and autograd (which graph-breaks);
# the benchmark's check covers the others (and every case at the small preset) before timing.
TORCH_COMPILED = {(problem, strategies["torch"][0]) for problem, strategies in D.STRATEGIES.items()} | {
    ("nth_derivative", "autograd"), ("nth_derivative", "autograd_traced")}


# The GPT problems: every strategy in eager mode, and one compiled mode per framework (jax.jit:
# every strategy, 1-2 s each; TF graph and torch.compile: what GPT_COMPILED lists, since
# torch.compile of the GPT's per-sample gradients costs about 50 s cold, of its HVP 10-90 s,
# and TF's XLA 5-13 s). TensorFlow's `moments` HVP is wrong by construction (a test below).
GPT_COMPILED = {("jax", "compiled"): None, ("tensorflow", "graph"): {"vectorized_map", "loop", "fwd_rev"},
                ("torch", "compiled"): {"loop"}}
KNOWN_WRONG = {("tensorflow", "hvp_gpt", "moments")}
NOT_APPLICABLE = {("tensorflow", "per_sample_grad", "batch_jacobian"), ("tensorflow", "hvp", "moments")}


def gpt_case(fw: str, mode: str, task: str, strategy: str) -> bool:
    """Whether the GPT case is in `cases` (those that cannot pass have tests of their own)."""
    if (fw, task, strategy) in KNOWN_WRONG or (fw, D.problem_of(task)[0], strategy) in NOT_APPLICABLE:
        return False
    if mode == "eager":
        return True
    if (fw, mode) not in GPT_COMPILED:
        return False
    chosen = GPT_COMPILED[(fw, mode)]
    return chosen is None or (strategy in chosen and not (fw == "torch" and "ensemble" not in task))


def cases() -> list:
    """(framework, mode, task, strategy) for every installed framework and mode, every tiny
    task and every strategy the workload declares (torch compiled: TORCH_COMPILED, once;
    the GPT problems: gpt_case)."""
    out, seen = [], set()
    for impl in impls():
        fw, mode = impl.values
        for task in D.tasks(TINY):
            problem = D.problem_of(task)[0]
            for strategy in D.strategies(fw, mode, task):
                if "gpt" in task:
                    if gpt_case(fw, mode, task, strategy):
                        out.append(pytest.param(fw, mode, task, strategy, id=f"{fw}-{mode}-{task}-{strategy}",
                                                marks=impl.marks))
                    continue
                if (fw, problem, strategy) in NOT_APPLICABLE:
                    continue
                if fw == "torch" and mode == "compiled":
                    if (problem, strategy) in seen or (problem, strategy) not in TORCH_COMPILED:
                        continue
                    seen.add((problem, strategy))
                out.append(pytest.param(fw, mode, task, strategy, id=f"{fw}-{mode}-{task}-{strategy}",
                                        marks=impl.marks))
    return out


def run(framework: str, mode: str, task: str, strategy: str) -> tuple[D.TaskSpec, object]:
    """The task's first output, the case built and called as the harness does: inside the
    adapter's case_caches (a fresh in-process compile state: torch's Dynamo reset there, since
    building resets nothing, and many compiled cases in one process would reach its recompile
    limit)."""
    adapter = frameworks.load(framework)
    spec = D.task_spec(TINY, 1, task)
    with adapter.case_caches(adapter.compile_cache()):
        model = adapter.build("derivatives", TINY, PARAMS, mode, "cpu", strategy=strategy)
        inputs = [adapter.asarray(a, "cpu") for a in spec.inputs[0]]
        return spec, adapter.to_numpy(getattr(model, spec.method)(*inputs, **spec.kwargs))


@pytest.mark.parametrize("framework,mode,task,strategy", cases())
def test_every_strategy_matches_the_float64_reference(framework, mode, task, strategy):
    spec, out = run(framework, mode, task, strategy)
    assert spec.check(out) is None, spec.check(out)


def test_a_strategy_of_another_problem_is_unsupported():
    pytest.importorskip("jax")
    from frameworks.base import Unsupported
    with pytest.raises(Unsupported, match="jax has no 'fwd_rev' strategy for jacobian"):
        run("jax", "eager", "jacobian_n12_m3", "fwd_rev")


def test_torch_compile_refuses_a_double_backward_as_unsupported_and_traces_it_when_told():
    """torch.compile of torch.autograd.grad twice: refused by AOTAutograd (unsupported, with
    its message); under trace_autograd_ops (autograd_traced) the same order compiles."""
    pytest.importorskip("torch")
    from frameworks.base import Unsupported
    with pytest.raises(Unsupported, match="torch.compile refused: .*does not currently support double backward"):
        run("torch", "compiled", "nth_derivative_4", "autograd")
    spec, out = run("torch", "compiled", "nth_derivative_4", "autograd_traced")
    assert spec.check(out) is None, spec.check(out)
    with pytest.raises(Unsupported, match="no 'autograd_traced' strategy for nth_derivative in eager mode"):
        run("torch", "eager", "nth_derivative_4", "autograd_traced")


@pytest.mark.slow
def test_torch_compiled_transforms_record_breaks_from_dynamos_counters():
    """frameworks.torch.compile_counted (the derivatives' torch.compile, with its defaults):
    torch.autograd.grad at order 1 breaks the graph and the break is recorded with Dynamo's
    reason (the case is `fallback`); the Jacobian compiles one graph on its first call,
    records no break, and its later calls compile nothing."""
    pytest.importorskip("torch")
    adapter = frameworks.load("torch")
    import torch
    n0 = len(adapter.model_fallbacks())
    spec, out = run("torch", "compiled", "nth_derivative_1", "autograd")
    assert spec.check(out) is None
    assert any("torch.autograd.grad" in r for r in adapter.model_fallbacks()[n0:]), adapter.model_fallbacks()[n0:]
    n1, graphs = len(adapter.model_fallbacks()), lambda: torch._dynamo.utils.counters["stats"]["unique_graphs"]
    spec = D.task_spec(TINY, 1, "jacobian_n12_m3")
    torch._dynamo.reset()        # the harness's step before a case (case_caches): build resets nothing
    model = adapter.build("derivatives", TINY, PARAMS, "compiled", "cpu", strategy="jacrev")
    g0 = graphs()
    for inputs in (*spec.inputs, *spec.inputs):
        out = model.jacobian(*(adapter.asarray(a, "cpu") for a in inputs))
    assert graphs() - g0 == 1 and adapter.model_fallbacks()[n1:] == []
    assert spec.check(adapter.to_numpy(model.jacobian(*(adapter.asarray(a, "cpu") for a in spec.inputs[0])))) is None


@pytest.mark.parametrize("variants", ["all", "default"])
def test_benchmark_cases_are_the_presets_tasks_times_the_strategies(variants):
    """Ids read framework-mode-task-strategy; the preset's tasks (sizes in the names) are the
    cases; the transforms and their loops are what the workload compares, so --variants default
    (fwbench run's with sets) keeps them all (workloads.derivatives.OPTIONAL_VARIANTS)."""
    expected = ["jax-compiled-hessian_p30-jacfwd_jacrev", "jax-compiled-hessian_p30-jacrev_jacrev",
                "jax-eager-nth_derivative_4-jet", "tensorflow-graph-per_sample_grad_mlp_b4-vectorized_map",
                "tensorflow-graph-per_sample_grad_mlp_b4-loop"]
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "pytest", "tests/benchmarks/test_derivatives.py", "--benchmark-only",
                          "--collect-only", "-q", "--preset", "tiny", "--framework", "jax,tensorflow",
                          "--variants", variants], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for case in expected:
        assert f"test_derivatives[{case}]" in out.stdout, case


def test_pfor_fallbacks_to_a_while_loop_are_recorded_during_the_block_only():
    """pfor says only in a DEBUG log line that it ran an op in a while loop: pfor_fallbacks()
    keeps those lines (the TF model watches each function's first call, which traces it)."""
    pytest.importorskip("tensorflow")
    frameworks.load("tensorflow")
    import tensorflow as tf

    from frameworks import tensorflow as tf_adapter
    logger, n0 = tf.get_logger(), len(tf_adapter.PFOR_FALLBACKS)
    level = logger.level
    with tf_adapter.pfor_fallbacks():
        logger.debug("Using a while_loop for converting Foo cause there is no registered converter for this op.")
        logger.debug("an unrelated debug line")
    logger.warning("Using a while_loop for converting Bar cause outside the block")
    assert tf_adapter.PFOR_FALLBACKS[n0:] == [
        "Using a while_loop for converting Foo cause there is no registered converter for this op."]
    assert logger.level == level
    assert frameworks.load("tensorflow").model_fallbacks()[n0:] == tf_adapter.PFOR_FALLBACKS[n0:]


# ----------------------------------------------------------------------------- peak memory of one call

def test_one_calls_peak_rss_counts_what_it_allocates_even_after_the_heap_kept_it():
    """A call that allocates 100 MB shows >= 90 MB, also right after an identical call whose
    memory the retained heap (configure_allocator) still holds; a call that allocates
    nothing shows far less."""
    from frameworks import base
    base.configure_allocator()

    def alloc() -> float:
        return float(np.ones(100_000_000 // 8).sum())
    alloc()
    peaks = [base.call_peak_rss(alloc, ()) for _ in range(2)]
    assert all(p is not None and p >= 90e6 for p in peaks), peaks
    assert base.call_peak_rss(lambda: None, ()) < 10e6


def test_hvp_records_carry_one_calls_peak_memory_by_one_instrument_for_every_framework(tmp_path):
    """Through the harness, every framework present: each hvp record has its call's peak
    memory (a number) and the same source, frameworks.harness.memory's CPU instrument (TensorFlow's
    measured in its memory-only process)."""
    import json
    import subprocess
    import sys

    from frameworks.harness.memory import CPU_SOURCE
    fws = sorted({i.values[0] for i in impls()})
    if not fws:
        pytest.skip("no framework installed")
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests/benchmarks/test_derivatives.py", "--benchmark-only",
                           "--preset", "tiny", "--framework", ",".join(fws), "--rounds", "3", "-k",
                           "eager and hvp_mlp", "-q", "-p", "no:cacheprovider", f"--benchmark-json={out}"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]]
    for fw in fws:
        ran = {r["strategy"] for r in records if r["framework"] == fw}
        assert ran and ran <= set(D.STRATEGIES["hvp"][fw]), (fw, ran)
    got = {(r["framework"], r["strategy"]): (r["peak_memory_bytes"], r["peak_memory_source"]) for r in records}
    assert {src for _, src in got.values()} == {CPU_SOURCE}, got
    assert all(b is not None and b >= 0 for b, _ in got.values()), got   # tiny: 0 to 100 KiB (a 64 MiB array:
    # tests/test_memory.py)


# ----------------------------------------------------------------------------- the GPT problems

def test_the_gpt_checks_catch_a_wrong_gradient_and_a_wrong_shape():
    spec = D.task_spec(TINY, 1, "per_sample_grad_gpt_b3")
    pytest.importorskip("jax")
    jax_ok = run("jax", "eager", "per_sample_grad_gpt_b3", "vmap")[1]
    assert spec.check(jax_ok) is None
    scaled = dict(jax_ok, **{"ln_f.bias": jax_ok["ln_f.bias"] * 1.1})   # one parameter's gradient off
    assert "relative error" in spec.check(scaled)
    assert "structure" in spec.check(dict(jax_ok, **{"wte.weight": jax_ok["wte.weight"][:1]}))
    ens = D.task_spec(TINY, 1, "ensemble_gpt_k2")
    assert "structure" in ens.check(ens.check.reference()[:1])          # one model's logits only


def test_tensorflow_moments_hvp_fails_with_its_cause_and_the_default_layer_norm_passes():
    """tf.nn.moments takes the variance around stop_gradient(mean): exact for first derivatives
    (that gradient is zero), not for second ones. The GPT's own LayerNorm keeps the mean
    differentiable, so its HVP passes; the `moments` strategy (the idiomatic form) fails the
    check, and the line the harness records says why, then the error (2.2e-2 at tiny)."""
    pytest.importorskip("tensorflow")
    spec, out = run("tensorflow", "eager", "hvp_gpt", "fwd_rev")
    assert spec.check(out) is None, spec.check(out)
    spec = D.task_spec(TINY, 1, "hvp_gpt", strategy="moments")
    _, out = run("tensorflow", "eager", "hvp_gpt", "moments")
    line = spec.check(out)
    assert line.startswith("tf.nn.moments stops the gradient through the mean: exact at first order only; "
                           "relative error ") and "against the float64 second difference" in line, line
    assert 5e-3 < spec.check.error(out)[0] < 0.1


def test_strategies_that_do_not_apply_are_unsupported_with_the_reason():
    pytest.importorskip("tensorflow")
    from frameworks.base import Unsupported
    with pytest.raises(Unsupported, match="batch_jacobian does not apply to the GPT"):
        run("tensorflow", "eager", "per_sample_grad_gpt_b3", "batch_jacobian")
    with pytest.raises(Unsupported, match="the MLP has no LayerNorm"):
        run("tensorflow", "eager", "hvp_mlp", "moments")


def test_tensorflow_vectorized_map_over_the_gpt_falls_back_to_a_while_loop_and_says_so():
    """pfor has no converter for ResourceGather (the GPT's embedding lookup in a variable):
    the case runs (and is right) but is recorded `fallback` with pfor's message."""
    pytest.importorskip("tensorflow")
    from frameworks import tensorflow as tf_adapter
    n0 = len(tf_adapter.PFOR_FALLBACKS)
    spec, out = run("tensorflow", "eager", "per_sample_grad_gpt_b3", "vectorized_map")
    assert spec.check(out) is None
    assert any("while_loop for converting ResourceGather" in m for m in tf_adapter.PFOR_FALLBACKS[n0:])

"""What could not be compiled (workloads.interop): the classifier on stand-in numpy "modes",
then every framework and mode on the eight programs, against what each compiler must do,
and the records the harness writes for each outcome."""
from __future__ import annotations

import importlib
import types

import numpy as np
import pytest

import frameworks
from frameworks import harness
from tests.support.helpers import INSTALLED, impls
from workloads import interop as I
from workloads import record as record_mod
from workloads.base import FwbenchError, Unsupported
from workloads.case import Case

CFG = I.preset("tiny").config
pytestmark = [pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
              pytest.mark.usefixtures("frozen_heap")]     # cases run in the worker (conftest)


# ----------------------------------------------------------------------------- framework-free

def test_inputs_take_both_branches_and_different_loop_counts():
    xs = [x.astype(np.float64) for x in I.make_inputs(CFG)]
    assert [x.sum() > 0 for x in xs] == [True, False, True, False]
    halvings = [int(np.ceil(np.log2(max(1.0, np.linalg.norm(x))))) for x in xs]
    assert len(set(halvings)) == len(xs) and halvings[0] == 0
    assert all(x.dtype == np.float32 for x in I.make_inputs(CFG))


def test_each_program_has_a_task_spec_and_reference():
    assert I.TASKS == tuple(I.PROGRAMS) and len(I.TASKS) == 8
    for t in I.TASKS:
        spec = I.task_spec(CFG, 1, t)
        assert spec.method == t and len(spec.inputs) == I.POOL and spec.unit == "calls"
    with pytest.raises(FwbenchError, match="unknown interop program"):
        I.task_spec(CFG, 1, "nope")


def numpy_programs():
    """The programs on numpy arrays (an ndarray has .sum() and .item() too)."""
    progs = dict(I.ARRAY_METHOD_PROGRAMS)
    progs["numpy_call"] = lambda x: np.tanh(x * 2) + 1
    progs["scipy_call"] = lambda x: x * (1 / (1 + np.exp(-x)))

    def while_loop(x):
        while np.linalg.norm(x) > 1:
            x = x / 2
        return x
    progs["while_loop"] = while_loop
    return progs


def frozen(fn):
    """A 'compiler' that runs Python once and replays its first result (trace-time only)."""
    cache = {}

    def run(x):
        if "y" not in cache:
            cache["y"] = fn(x)
        return cache["y"]
    return run


def refusing(fn):
    def run(x):
        raise TypeError("cannot trace this\nsecond line")
    return run


# numpy as the framework: arrays as they are, nothing to wait for
NUMPY = types.SimpleNamespace(to_numpy=np.asarray, asarray=lambda x, device: np.asarray(x), sync=None)


def programs(make, mode="compiled", pieces=None):
    return I.Programs(numpy_programs(), make, NUMPY, CFG, Case("numpy", "interop", None, mode), pieces)


@pytest.mark.parametrize("name", I.TASKS)
def test_eager_numpy_matches_every_reference(name):
    v = programs(lambda f: f, mode="eager").verdict(name)
    assert v.outcome == "eager" and v.calls_matching == v.calls == 2 * I.POOL, v.reason
    assert v.effects_seen == v.effects_expected


def counting(*totals):
    """Stand-in counters: the cumulative (graphs, breaks) read before and after the probe's calls."""
    it = iter(totals)
    return lambda: next(it)


def test_a_python_run_that_compiles_is_compiled_and_a_break_is_reported():
    assert programs(lambda f: f).verdict("print").outcome == "compiled"
    one = I.Pieces(fullgraph=lambda f: f, counters=counting((5, 0), (6, 0)))
    v = programs(lambda f: f, pieces=one).verdict("print")
    assert (v.outcome, v.status, v.reason, v.graphs, v.graph_breaks) == ("compiled", "ok", None, 1, 0)

    def no_print(f):      # a one-graph compiler that refuses, in several lines with hints
        def run(x):
            raise RuntimeError("builtin print\n  Explanation: cannot trace it\n  Hint: remove it")
        return run
    v = programs(lambda f: f, pieces=I.Pieces(no_print, counting((0, 0), (2, 1)))).verdict("print")
    assert (v.outcome, v.status, v.reason, v.graphs, v.graph_breaks) == (
        "graph_breaks", "fallback", "RuntimeError: builtin print Explanation: cannot trace it", 2, 1)
    # one graph when asked, but the compiler counted a break over the probe's calls: a break too
    v = programs(lambda f: f, pieces=I.Pieces(lambda f: f, counting((0, 0), (2, 1)))).verdict("print")
    assert (v.outcome, v.reason) == ("graph_breaks", "1 graph breaks counted")


@pytest.mark.parametrize("name,what", [
    ("print", "side effects ran 1 times in 8 calls, eagerly 8 (at trace time only)"),
    ("list_append", "side effects ran 1 times in 8 calls, eagerly 8 (at trace time only)"),
    ("value_branch", "frozen at trace time"), ("python_random", "frozen at trace time")])
def test_trace_time_effects_and_frozen_values_are_wrong(name, what):
    v = programs(frozen).verdict(name)
    assert v.outcome == "wrong" and v.status == "failed" and what in v.reason
    with pytest.raises(FwbenchError, match="trace time") as e:
        getattr(programs(frozen), name)
    assert e.value.record_extra["interop_outcome"] == "wrong"


def test_a_refusal_keeps_the_frameworks_own_first_line():
    v = programs(refusing).verdict("value_branch")
    assert (v.outcome, v.status, v.reason, v.calls) == ("refused", "unsupported", "TypeError: cannot trace this", 0)
    with pytest.raises(Unsupported, match="cannot trace this") as e:
        programs(refusing).value_branch
    assert e.value.record_extra["status"] == "unsupported"


def test_timed_callable_is_made_fresh_and_carries_the_verdict():
    made = []
    p = programs(lambda f: made.append(f) or f)
    call = p.python_random
    assert len(made) == 2 and p.record_extra("python_random")["interop_outcome"] == "compiled"
    assert p.record_extra("print") == {}        # a program not looked up adds nothing
    x = I.make_inputs(CFG)[0]
    assert np.allclose(call(x), I.PROGRAMS["python_random"].reference(x.astype(np.float64), 0))


# ----------------------------------------------------------------------------- real frameworks
# Every cell of the matrix, as the framework behaves: (outcome, graphs), graphs being the
# compiler's own count over the probe's 8 calls (torch: Dynamo's unique graphs; JAX: jit's
# compiled entries; TensorFlow: the tf.function's traces; None where it refuses at once).
# observe() below finds them by running each program itself, not through the probe.
TORCH_COMPILED = {"print": ("graph_breaks", 2), "value_branch": ("graph_breaks", 3),
                  "item_branch": ("graph_breaks", 4), "numpy_call": ("compiled", 1),
                  "scipy_call": ("graph_breaks", 2), "list_append": ("compiled", 1),
                  "while_loop": ("graph_breaks", 2), "python_random": ("graph_breaks", 2)}
JAX_TRACED = {"print": ("wrong", 1), "value_branch": ("refused", None), "item_branch": ("refused", None),
              "numpy_call": ("refused", None), "scipy_call": ("refused", None), "list_append": ("wrong", 1),
              "while_loop": ("refused", None), "python_random": ("wrong", 1)}
TF_TRACED = {"print": ("wrong", 1), "value_branch": ("compiled", 1), "item_branch": ("refused", None),
             "numpy_call": ("refused", None), "scipy_call": ("refused", None), "list_append": ("wrong", 1),
             "while_loop": ("compiled", 1), "python_random": ("wrong", 1)}
EXPECTED = {("torch", "compiled"): TORCH_COMPILED, ("jax", "compiled"): JAX_TRACED,
            ("tensorflow", "graph"): TF_TRACED, ("tensorflow", "compiled"): TF_TRACED}
# The framework's own error for each refusal (first words of the reason).
ERRORS = {("jax", "value_branch"): "TracerBoolConversionError", ("jax", "while_loop"): "TracerBoolConversionError",
          ("jax", "item_branch"): "ConcretizationTypeError", ("jax", "numpy_call"): "TracerArrayConversionError",
          ("jax", "scipy_call"): "TracerArrayConversionError",
          ("tensorflow", "item_branch"): "AttributeError", ("tensorflow", "numpy_call"): "NotImplementedError",
          ("tensorflow", "scipy_call"): "NotImplementedError"}
# Why torch.compile(fullgraph=True) refuses each program that breaks (Dynamo's words).
TORCH_BREAKS = {"print": "builtin operator `print`", "value_branch": "Data-dependent branching",
                "item_branch": "data-dependent expression", "scipy_call": "`__call__` of class `ufunc`",
                "while_loop": "Data-dependent branching", "python_random": "Random.random"}


def observe(framework: str, mode: str, name: str) -> dict:
    """What `framework` does with program `name` in `mode`, seen here rather than through
    workloads.interop.probe: the 8 calls of the protocol (workloads.interop.Call) on a
    freshly compiled program, how many outputs match the float64 reference, how many side
    effects ran, the compiler's own count of graphs or traces, and for torch.compile whether
    fullgraph=True compiles it on every input (Dynamo's error where not)."""
    adapter = frameworks.load(framework)
    fn = importlib.import_module(f"frameworks.{framework}.interop").PROGRAMS[name]
    xs = I.make_inputs(CFG)
    inputs = [adapter.asarray(x, "cpu") for x in xs]
    graphs, one_graph = (lambda: None), None
    if mode == "eager":
        made = fn
    elif framework == "torch":
        import torch
        torch._dynamo.reset()
        made = torch.compile(fn)
        g0 = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        graphs = lambda: torch._dynamo.utils.counters["stats"]["unique_graphs"] - g0  # noqa: E731
    elif framework == "jax":
        import jax
        made = jax.jit(fn)
        graphs = made._cache_size
    else:
        import tensorflow as tf
        made = tf.function(fn, jit_compile=mode == "compiled")
        graphs = made.experimental_get_tracing_count
    call, program = I.Call(made), I.PROGRAMS[name]
    out = {"raised": None, "matching": 0, "effects": 0}
    try:
        for k in range(I.PROBE_PASSES * len(xs)):
            y = np.asarray(adapter.to_numpy(call(inputs[k % len(xs)])), np.float64)
            out["effects"] += call.printed + len(call.appended)
            out["matching"] += (y.shape == xs[0].shape and I.rel_err(y, program.reference(
                xs[k % len(xs)].astype(np.float64), k)) <= I.TOL)
    except Exception as e:  # noqa: BLE001  the framework's refusal
        out["raised"] = f"{type(e).__name__}: {e}"
    out["graphs"] = None if out["raised"] else graphs()
    I.LOG.clear()
    if framework == "torch" and mode == "compiled" and not out["raised"]:
        import torch
        torch._dynamo.reset()
        full = torch.compile(fn, fullgraph=True)
        try:
            for x in inputs:
                I.Call(full)(x)
        except Exception as e:  # noqa: BLE001  Dynamo's refusal to make one graph
            one_graph = " ".join(str(e).split())
        else:
            one_graph = True
        I.LOG.clear()
    out["one_graph"] = one_graph
    return out


def outcome_of(mode: str, name: str, seen: dict) -> str:
    """The outcome the observation implies, by the rule of docs/ARCHITECTURE.md's table."""
    program, n = I.PROGRAMS[name], I.PROBE_PASSES * I.POOL
    if seen["raised"]:
        return "refused"
    if seen["matching"] < n or seen["effects"] != n * (program.printed + program.appended):
        return "wrong"
    if mode == "eager":
        return "eager"
    return "compiled" if seen["one_graph"] in (None, True) else "graph_breaks"


@pytest.mark.parametrize("framework,mode", impls())
def test_every_cell_is_what_the_framework_does(framework, mode):
    """Each program under each mode: the observed outputs, side effects and graph counts
    give the cell (EXPECTED, else eager), and the probe records the same outcome and, for
    torch.compile, the same number of graphs."""
    adapter = frameworks.load(framework)
    model = adapter.build("interop", CFG, {}, mode, "cpu")
    want = EXPECTED.get((framework, mode), {t: ("eager", None) for t in I.TASKS})
    for t in I.TASKS:
        seen = observe(framework, mode, t)
        outcome, graphs = want[t]
        assert (outcome_of(mode, t, seen), seen["graphs"]) == (outcome, graphs), (t, seen)
        if outcome == "graph_breaks":
            assert TORCH_BREAKS[t] in seen["one_graph"], (t, seen["one_graph"])
        if outcome == "refused":
            assert seen["raised"].startswith(ERRORS[(framework, t)]), (t, seen["raised"])
        v = model.verdict(t)
        assert v.outcome == outcome, (t, v.reason)
        if outcome == "refused":
            assert v.reason.startswith(ERRORS[(framework, t)]), (t, v.reason)
        else:
            assert v.calls == 2 * I.POOL and v.effects_seen == seen["effects"], (t, v)
        if framework == "torch" and mode == "compiled":
            assert v.graphs == graphs, (t, v)
            assert (v.graph_breaks > 0) == (outcome == "graph_breaks"), (t, v)
        if outcome == "graph_breaks":
            assert TORCH_BREAKS[t] in v.reason, (t, v.reason)


@pytest.mark.parametrize("task,mode,status,outcome", [
    ("print", "eager", "ok", "eager"), ("value_branch", "compiled", "unsupported", "refused"),
    ("print", "compiled", "failed", "wrong")])
def test_the_harness_records_each_outcome(benchmark, task, mode, status, outcome):
    """Through run_case with JAX: a refused program is skipped as unsupported, a wrong one
    xfails as failed (neither timed), an eager one is timed; every record carries the verdict."""
    if "jax" not in INSTALLED:
        pytest.skip("needs jax")
    s = harness.Session(harness.Options(frameworks=("jax",), workloads=("interop",), preset="tiny", rounds=3),
                      gemm_samples=[{"numpy": 1e9}])     # no GEMM measurement: not what is tested
    if status == "ok":
        rec = harness.run_case(benchmark, s, Case("jax", "interop", task, mode))
    else:
        kind = pytest.skip.Exception if status == "unsupported" else pytest.xfail.Exception
        with pytest.raises(kind):
            harness.run_case(benchmark, s, Case("jax", "interop", task, mode))
        (rec,) = s.records
        assert rec["first_call_s"] is None
    assert record_mod.problems(rec) == []
    assert rec["status"] == status and rec["interop_outcome"] == outcome
    assert rec["side_effects_expected"] == (2 * I.POOL if task == "print" else 0)


# ----------------------------------------------------------------------------- idiomatic rewrites

def test_lines_changed_counts_the_longer_side_and_every_helper_line():
    def helper(x):
        return x
    rw = I.Rewrite(lambda x: x, "nothing")
    assert I._code_lines(I.value_branch, True) == ["if x.sum() > 0:", "return x * 2", "return x - 1"]

    def one_line(x):
        """A docstring is not code."""
        return x * 2 if x.sum() > 0 else x - 1   # replaces three lines
    assert I.lines_changed(I.value_branch, I.Rewrite(one_line, "a conditional expression")) == 3

    def documented(x):
        """A docstring
        over lines."""
        return x * 2 if x.sum() > 0 else x - 1
    assert I.lines_changed(I.value_branch, I.Rewrite(documented, "the same, documented")) == 3
    assert I.lines_changed(I.print_, I.Rewrite(I.print_, "as written", setup=("config.flag = True",))) == 1
    assert I.lines_changed(I.print_, I.Rewrite(I.print_, "as written", helpers=(helper,))) == 2
    assert rw.native_print is False


def test_a_native_print_is_captured_from_the_file_descriptor():
    import os

    def native(x):
        os.write(1, b"from native code\n")
        return x
    call = I.Call(native, native_print=True)
    call(np.zeros(2))
    assert call.printed == 1
    plain = I.Call(native)
    plain(np.zeros(2))       # what a redirect of sys.stdout misses
    assert plain.printed == 0


@pytest.mark.parametrize("framework", ["jax", "tensorflow", "torch"])
def test_each_framework_rewrites_exactly_the_programs_it_declares(framework):
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    mod = importlib.import_module(f"frameworks.{framework}.interop")
    assert set(mod.REWRITES) == set(I.REWRITTEN[framework])
    for name, rw in mod.REWRITES.items():
        assert 1 <= I.lines_changed(mod.PROGRAMS[name], rw) <= 8, name
    assert I.strategies(framework, "eager", "print") == (None,)


# Each rewrite under each accelerated mode, as the framework behaves (observed by the probe
# and, for torch.compile, one graph with no break over the probe's calls): XLA compiles
# neither TensorFlow's PrintV2 nor its PyFunc (tf.numpy_function), so those are refused there.
REWRITE_EXPECTED = {
    ("jax", "compiled"): {t: "compiled" for t in I.REWRITTEN["jax"]},
    ("tensorflow", "graph"): {t: "compiled" for t in I.REWRITTEN["tensorflow"]},
    ("tensorflow", "compiled"): {"print": "refused", "item_branch": "compiled", "numpy_call": "refused",
                                 "scipy_call": "refused", "list_append": "refused", "python_random": "refused"},
    ("torch", "compiled"): {t: "compiled" for t in I.REWRITTEN["torch"]},
}
XLA_REFUSES = {"print": "PrintV2", "numpy_call": "PyFunc", "scipy_call": "PyFunc", "list_append": "PyFunc",
               "python_random": "PyFunc"}


@pytest.mark.parametrize("framework,mode", sorted(REWRITE_EXPECTED))
def test_every_rewrite_cell_is_what_the_framework_does(framework, mode):
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    model = frameworks.load(framework).build("interop", CFG, {}, mode, "cpu", strategy=I.IDIOMATIC)
    for t, want in REWRITE_EXPECTED[(framework, mode)].items():
        v = model.verdict(t)
        assert v.outcome == want, (t, v.reason)
        if want == "compiled":
            assert v.calls_matching == v.calls == 2 * I.POOL and v.effects_seen == v.effects_expected, (t, v)
        else:
            assert XLA_REFUSES[t] in v.reason and "_XlaMustCompile" not in v.reason, (t, v.reason)
        if framework == "torch":
            assert (v.graphs, v.graph_breaks) == (1, 0), (t, v)
    first = next(iter(REWRITE_EXPECTED[(framework, mode)]))
    if mode != "compiled" or framework != "tensorflow":
        model.timed(first)
        extra = model.record_extra(first)
        assert extra["rewrite_lines"] >= 1 and extra["rewrite_uses"]
    with pytest.raises(Exception, match="no idiomatic rewrite"):
        missing = next((t for t in I.TASKS if t not in I.REWRITTEN[framework]), None)
        if missing is None:
            raise RuntimeError("no idiomatic rewrite: every program has one")
        model.verdict(missing)

"""What could not be compiled (workloads.interop): the classifier on stand-in numpy "modes",
then every framework and mode on the eight programs, against what each compiler must do,
and the records the harness writes for each outcome."""
from __future__ import annotations

import numpy as np
import pytest

import frameworks
from frameworks import bench
from tests.helpers import INSTALLED, impls
from workloads import interop as I
from workloads import record as record_mod
from workloads.base import FwbenchError

CFG = I.preset("tiny").config
pytestmark = pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")


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


def programs(make, mode="compiled", breaks=None):
    return I.Programs(numpy_programs(), make, np.asarray, np.asarray, CFG, mode, RuntimeError, breaks)


@pytest.mark.parametrize("name", I.TASKS)
def test_eager_numpy_matches_every_reference(name):
    v = programs(lambda f: f, mode="eager").verdict(name)
    assert v.outcome == "eager" and v.calls_matching == v.calls == 2 * I.POOL, v.reason
    assert v.effects_seen == v.effects_expected


def test_a_python_run_that_compiles_is_compiled_and_a_break_is_reported():
    assert programs(lambda f: f).verdict("print").outcome == "compiled"
    v = programs(lambda f: f, breaks=lambda f: lambda x: (2, 1, ["builtin print"])).verdict("print")
    assert (v.outcome, v.status, v.reason, v.graphs, v.graph_breaks) == ("graph_breaks", "fallback",
                                                                        "builtin print", 2, 1)


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
    with pytest.raises(RuntimeError, match="cannot trace this") as e:
        programs(refusing).value_branch
    assert e.value.record_extra["status"] == "unsupported"


def test_timed_callable_is_made_fresh_and_carries_the_verdict():
    made = []
    p = programs(lambda f: made.append(f) or f)
    call = p.python_random
    assert len(made) == 2 and call.record_extra["interop_outcome"] == "compiled"
    x = I.make_inputs(CFG)[0]
    assert np.allclose(call(x), I.PROGRAMS["python_random"].reference(x.astype(np.float64), 0))


# ----------------------------------------------------------------------------- real frameworks

JAX_TRACED = {"print": "wrong", "value_branch": "refused", "item_branch": "refused", "numpy_call": "refused",
              "scipy_call": "refused", "list_append": "wrong", "while_loop": "refused", "python_random": "wrong"}
TF_TRACED = {"print": "wrong", "value_branch": "compiled", "item_branch": "refused", "numpy_call": "refused",
             "scipy_call": "refused", "list_append": "wrong", "while_loop": "compiled", "python_random": "wrong"}
TORCH_COMPILED = {"print": "graph_breaks", "value_branch": "graph_breaks", "item_branch": "graph_breaks",
                  "numpy_call": "compiled", "scipy_call": "graph_breaks", "list_append": "compiled",
                  "while_loop": "graph_breaks", "python_random": "compiled"}
EXPECTED = {("torch", "compiled"): TORCH_COMPILED, ("jax", "compiled"): JAX_TRACED,
            ("tensorflow", "graph"): TF_TRACED, ("tensorflow", "compiled"): TF_TRACED}
# The framework's own error for each refusal (first words of the reason).
ERRORS = {("jax", "value_branch"): "TracerBoolConversionError", ("jax", "while_loop"): "TracerBoolConversionError",
          ("jax", "item_branch"): "ConcretizationTypeError", ("jax", "numpy_call"): "TracerArrayConversionError",
          ("jax", "scipy_call"): "TracerArrayConversionError",
          ("tensorflow", "item_branch"): "AttributeError", ("tensorflow", "numpy_call"): "NotImplementedError",
          ("tensorflow", "scipy_call"): "NotImplementedError"}


@pytest.mark.parametrize("framework,mode", impls())
def test_each_program_is_classified_as_the_compiler_must(framework, mode):
    adapter = frameworks.load(framework)
    model = adapter.build("interop", CFG, {}, mode, "cpu")
    got = {t: model.verdict(t) for t in I.TASKS}
    want = EXPECTED.get((framework, mode), dict.fromkeys(I.TASKS, "eager"))
    assert {t: v.outcome for t, v in got.items()} == want, {t: v.reason for t, v in got.items()}
    for t, v in got.items():
        if v.outcome == "refused":
            assert v.reason.startswith(ERRORS[(framework, t)]), (t, v.reason)
        if v.outcome == "graph_breaks":
            assert v.graphs >= 1 and v.graph_breaks >= 1 and v.reason, (t, v)
        if v.outcome != "refused":
            assert v.calls == 2 * I.POOL


@pytest.mark.parametrize("task,mode,status,outcome", [
    ("print", "eager", "ok", "eager"), ("value_branch", "compiled", "unsupported", "refused"),
    ("print", "compiled", "failed", "wrong")])
def test_the_harness_records_each_outcome(benchmark, task, mode, status, outcome):
    """Through run_case with JAX: a refused program is skipped as unsupported, a wrong one
    xfails as failed (neither timed), an eager one is timed; every record carries the verdict."""
    if "jax" not in INSTALLED:
        pytest.skip("needs jax")
    s = bench.Session(bench.Options(frameworks=("jax",), workloads=("interop",), preset="tiny", rounds=3),
                      gemm_samples=[{"numpy": 1e9}])     # no GEMM measurement: not what is tested
    if status == "ok":
        rec = bench.run_case(benchmark, s, "jax", "interop", task, mode)
    else:
        kind = pytest.skip.Exception if status == "unsupported" else pytest.xfail.Exception
        with pytest.raises(kind):
            bench.run_case(benchmark, s, "jax", "interop", task, mode)
        (rec,) = s.records
        assert rec["first_call_s"] is None
    assert record_mod.problems(rec) == []
    assert rec["status"] == status and rec["interop_outcome"] == outcome
    assert rec["side_effects_expected"] == (2 * I.POOL if task == "print" else 0)

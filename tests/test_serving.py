"""Serving (workloads/serving.py, frameworks/serve.py, frameworks/harness/serving.py) at the tiny
preset: the requests, the check, every artefact re-loaded in a fresh process that imports no
model code and matching the eager model, the eager servables against the numpy float64
references, export refusals recorded in the exporter's words, a corrupted artefact one line
and no record marked ok, and the serving measurement through the harness."""
from __future__ import annotations

import importlib
import importlib.util
import os
import shutil

import numpy as np
import pytest

import frameworks
from frameworks import harness
from frameworks.harness import serving as HS
from frameworks.harness.host import host_window
from frameworks.servables import exporter_message, refused
from frameworks.serve import MODEL_CODE, answers
from tests.support.helpers import INSTALLED
from workloads import diffusion, gpt
from workloads import record as record_mod
from workloads import serving as W
from workloads.base import Unsupported, rel_err
from workloads.case import Case

TINY = W.preset("tiny").config
pytestmark = [pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"),
              pytest.mark.usefixtures("frozen_heap")]     # cases run in the worker (conftest)

# The exporters' refusals at the pinned versions (what the export matrix shows), by path and
# task: a converter that starts to work (or stops) changes this table on purpose.
REFUSED = {
    ("jax", "compiled", "onnx", "generate"): "tf2onnx of jax2tf's function: ValueError: Could not infer the attribute",
    ("jax", "compiled", "onnx", "sample"): "tf2onnx of jax2tf's function: ValueError: Could not infer the attribute",
    ("tensorflow", "graph", "onnx", "sample"): "tf2onnx: the ONNX graph takes 5 inputs (x, t, a, b, ",
}
ARTEFACTS = [(p.framework, p.mode, p.strategy, t) for p in W.PATHS if p.strategy for t in W.TASKS]


def needs(framework: str, path: W.ServingPath | None = None) -> None:
    if framework not in INSTALLED:
        pytest.skip(f"needs {framework}")
    if path is not None and W.missing(path):
        pytest.skip(W.missing(path))


# ----------------------------------------------------------------------------- framework-free

def test_the_requests_are_seeded_and_exercise_the_dynamic_dimensions():
    spec = W.task_spec(TINY, 1, "generate")
    s = spec.serve
    lengths = W.prompt_lengths(TINY)
    assert lengths == W.prompt_lengths(TINY) and lengths != W.prompt_lengths(TINY, seed=1)
    assert len(lengths) == TINY.requests and min(lengths) >= TINY.min_prompt and max(lengths) <= TINY.longest
    assert [r[0].shape for r in s.stream] == [(1, T) for T in lengths] and s.keys == tuple(f"T={T}" for T in lengths)
    assert [r[0].shape for r in s.check] == [(1, lengths[0]), (2, TINY.longest)]     # batch and length both vary
    assert [b for b, _ in s.batches] == list(TINY.batches) and all(r[0].shape[0] == b for b, r in s.batches)
    assert s.items(s.batches[-1][1]) == TINY.batches[-1] * TINY.n_new and spec.items == TINY.n_new
    assert spec.flops == pytest.approx(np.mean([gpt.generate_flops(TINY.gpt, 1, T, TINY.n_new) for T in lengths]))
    assert s.min_requests == 0 and W.task_spec(W.preset("small").config, 1, "generate").serve.min_requests == 100
    d = W.task_spec(TINY, 1, "sample").serve
    assert [r[0].shape[0] for r in d.check] == [1, 2] and d.settings["t"].dtype == np.int32
    c = diffusion.sampler_coefficients(TINY.diffusion.schedule, "ddim", TINY.steps)
    assert np.array_equal(d.settings["t"], c["t"]) and np.allclose(d.settings["a"], c["a"], rtol=1e-7)


def test_every_framework_declares_its_development_path_first_and_its_artefacts():
    assert W.strategies("torch", "compiled", "generate") == (None, "aoti", "onnx")
    assert W.strategies("torch", "graph", "sample") == (None,)
    assert W.strategies("jax", "compiled", "sample") == (None, "jax-export", "jax2tf", "onnx")
    assert W.strategies("tensorflow", "graph", "generate") == (None, "saved-model", "onnx")
    assert W.strategies("tensorflow", "compiled", "generate") == (None, "saved-model")
    kinds = {(p.framework, p.strategy): p.kind for p in W.PATHS}
    assert {k for (f, s), k in kinds.items() if s is None} == {W.DEVELOPMENT}
    assert {f for (f, s), k in kinds.items() if k == W.OTHER_ENGINE} == {"torch", "jax", "tensorflow"}


def test_a_missing_extra_reads_one_line_naming_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    path = W.path_of("torch", "compiled", "onnx")
    assert W.missing(path) == ("torch.onnx.export(dynamo=True) needs onnxruntime, which is not installed: "
                               "pip install 'fwbench[serving]'")
    assert W.missing(W.path_of("torch", "compiled", "aoti")) is None
    if "torch" in INSTALLED:
        with pytest.raises(Unsupported, match=r"^torch.onnx.export\(dynamo=True\) needs onnxruntime, which is not "):
            frameworks.load("torch").build(Case("torch", "serving", "generate", "compiled", "onnx"), TINY,
                                           W.init_params(TINY))


def test_the_check_names_what_differs():
    tokens, logits = np.array([[1, 2, 3]]), np.linspace(-1, 1, 3 * 5).reshape(1, 3, 5)
    assert W.differs("generate", (tokens, logits), (tokens, logits * (1 + 1e-7)), 1e-5) is None
    assert W.differs("generate", (tokens, logits * 1.01), (tokens, logits), 1e-5).startswith(
        "logits differ from eager's (relative error 0.01 > 1e-05)")
    other = tokens.copy()
    other[0, 2] = 9
    assert W.differs("generate", (other, logits), (tokens, logits), 1e-5).startswith(
        "greedy tokens differ from eager's from new token 2 on")
    x = np.ones((1, 4, 4, 3))
    assert W.differs("sample", x, x, 1e-5) is None and "x_0 differs" in W.differs("sample", x * 1.1, x, 1e-5)


def test_an_exporters_refusal_is_unsupported_in_its_own_words_on_one_line():
    colour = "TorchExportError: Failed to export. \x1b[96mThis is step 1/3\x1b[0m\n## Exception summary\n\n" \
             "<class 'torch._dynamo.exc.UserError'>: Detected mismatch between inputs\nmore"
    assert exporter_message(RuntimeError(colour)) == "UserError: Detected mismatch between inputs"
    with pytest.raises(Unsupported, match=r"^jax.export: InconclusiveDimensionOperation: Symbolic dimension"):
        with refused("jax.export"):
            raise type("InconclusiveDimensionOperation", (Exception,), {})("Symbolic dimension comparison 't' <= "
                                                                            "'32' is inconclusive.\nsee the docs")


def test_the_host_window_counts_the_cases_own_cpu_time_where_told():
    reads = iter(["cpu  100 0 0 1000 0 0 0 0 0 0", "cpu  300 0 0 1100 0 0 0 0 0 0"])   # 2 s busy over the window
    clock = iter([0.0, 2.0])
    with host_window(lambda: next(reads), own_cpu=lambda: next(clock)) as state:
        pass
    assert state["other_cpu"] is None or state["other_cpu"] == 0.0     # its 2 s are the case's own


# ----------------------------------------------------------------------------- eager against numpy

@pytest.mark.parametrize("framework", list(frameworks.names()))
def test_the_eager_servables_match_the_float64_references(framework):
    """The servable functions (built of the model's modules) run eagerly by the serving loop:
    greedy tokens equal the numpy reference's, every step's logits and DDIM's x_0 within the
    equivalence tolerances (tests/support/equivalence.py: forward 3e-5, sample 2e-5)."""
    needs(framework)
    a = frameworks.load(framework)
    params = W.init_params(TINY)
    g = W.task_spec(TINY, 1, "generate").serve
    engine = importlib.import_module(f"frameworks.{framework}.serving").dev_engine(
        a, TINY.gpt_preset, params["gpt"], "generate", "eager")
    extra = {"position_dtype": "int64" if framework == "torch" else "int32"}
    for (tokens, logits), (prompt,) in zip(answers(engine, "generate", dict(g.settings), g.check, extra), g.check):
        ref = gpt.reference_generate(TINY.gpt, params["gpt"], prompt, TINY.n_new)
        assert np.array_equal(tokens, ref[:, prompt.shape[1]:])
        for j in range(TINY.n_new):
            want = gpt.reference_logits(TINY.gpt, params["gpt"], ref[:, :prompt.shape[1] + j])[:, -1]
            assert rel_err(logits[:, j], want) < 3e-5
    d = W.task_spec(TINY, 1, "sample").serve
    engine = importlib.import_module(f"frameworks.{framework}.serving").dev_engine(
        a, TINY.diffusion_preset, params["diffusion"], "sample", "eager")
    for x0, (x_T,) in zip(answers(engine, "sample", dict(d.settings), d.check, {}), d.check):
        ref = diffusion.reference_sample(TINY.diffusion, params["diffusion"], x_T, method="ddim", steps=TINY.steps)
        assert rel_err(x0, ref) < 2e-5


# ----------------------------------------------------------------------------- artefacts, fresh process

_EXPORTS: dict[tuple[str, str, str, str], tuple[str, object]] = {}


@pytest.fixture(scope="session")
def exports(tmp_path_factory):
    """Each artefact exported once per session: (folder, (job, record keys)) or the Unsupported."""
    def get(key):
        if key not in _EXPORTS:
            fw, mode, strategy, task = key
            folder = str(tmp_path_factory.mktemp("-".join(key)))
            model = frameworks.load(fw).build(Case(fw, "serving", task, mode, strategy), TINY, W.init_params(TINY))
            try:
                _EXPORTS[key] = (folder, model, model.export(folder))
            except Unsupported as e:
                _EXPORTS[key] = (folder, model, e)
        return _EXPORTS[key]
    return get


@pytest.mark.parametrize("key", ARTEFACTS, ids=["-".join(k) for k in ARTEFACTS])
def test_every_artefact_reloads_in_a_fresh_process_without_the_model_code_and_matches_eager(key, exports):
    fw, mode, strategy, task = key
    needs(fw, W.path_of(fw, mode, strategy))
    folder, model, made = exports(key)
    if key in REFUSED:     # the export matrix's refusals: recorded in the exporter's words, one line
        assert isinstance(made, Unsupported) and str(made).startswith(REFUSED[key]) and "\n" not in str(made)
        return
    assert not isinstance(made, Unsupported), made
    job, keys = made
    assert keys["export_s"] > 0 and keys["artefact_bytes"] > 0 and keys["exporter"] and keys["dynamic_dims"]
    serve = W.task_spec(TINY, 1, task).serve
    with HS.ServingProcess(folder, job, serve, 1) as server:
        ready = server.ready()
        err = HS.checked(task, folder, serve, model.expected(serve))
        mem = server.ask("m")
    assert err <= serve.tolerance and 0 < ready["first_s"] < ready["since_spawn_s"]
    assert not set(mem["modules"]) & set(MODEL_CODE), mem["modules"]
    assert 0 < mem["rss"] <= mem["hwm"]


def test_a_corrupted_artefact_gives_one_line_and_no_record_marked_ok(exports, benchmark, monkeypatch):
    key = ("tensorflow", "graph", "saved-model", "generate")
    needs("tensorflow")
    folder, model, (job, keys) = exports(key)
    broken = os.path.join(folder, "..", "broken")
    shutil.copytree(folder, broken, dirs_exist_ok=True)
    pb = os.path.join(broken, "saved_model", "saved_model.pb")
    with open(pb, "r+b") as f:
        f.seek(16)
        f.write(b"\x00garbage\xff" * 8)
    job = {**job, "files": {"saved_model": os.path.join(broken, "saved_model")}}
    serve = W.task_spec(TINY, 1, "generate").serve
    with pytest.raises(HS.ServingError) as e:
        with HS.ServingProcess(broken, job, serve, 1) as server:
            server.ready()
    line = str(e.value)
    assert line.startswith("the serving process failed: could not load saved_model: ") and "\n" not in line
    # through the harness: the case is failed with that line, nothing timed
    s = harness.Session(harness.Options(frameworks=("tensorflow",), workloads=("serving",), preset="tiny", rounds=1,
                                        busy_retries=0), gemm_samples=[{"numpy": 1e9}])
    from frameworks.tensorflow.serving import TFServable
    monkeypatch.setattr(TFServable, "export", lambda self, folder: (job, keys))
    with pytest.raises(HS.ServingError):
        harness.run_case(benchmark, s, Case("tensorflow", "serving", "generate", "graph", "saved-model"))
    rec = s.records[-1]
    assert rec["status"] == "failed" and "\n" not in rec["reason"] and "could not load saved_model" in rec["reason"]
    assert record_mod.problems(rec) == []


def test_a_serving_process_that_dies_or_gets_a_bad_command_is_one_line(exports):
    needs("tensorflow")
    folder, model, (job, keys) = exports(("tensorflow", "graph", "saved-model", "generate"))
    serve = W.task_spec(TINY, 1, "generate").serve
    with HS.ServingProcess(folder, job, serve, 1) as server:
        server.ready()
        with pytest.raises(HS.ServingError, match=r"^the serving process failed: unknown command 'x 1'$"):
            server.ask("x 1")
    with HS.ServingProcess(folder, job, serve, 1) as server:
        server.ready()
        server.proc.kill()
        with pytest.raises(HS.ServingError, match=r"^the serving process ended \(exit code -9\): "):
            server.ask("m")


def test_an_export_failure_is_recorded_with_the_exporters_message_not_raised(benchmark):
    """Through the harness: the case is unsupported with the exporter's own line (pytest skips it,
    as every unsupported case), nothing timed; the export matrix reads it from the record."""
    needs("jax", W.path_of("jax", "compiled", "onnx"))
    s = harness.Session(harness.Options(frameworks=("jax",), workloads=("serving",), preset="tiny", rounds=1,
                                        busy_retries=0), gemm_samples=[{"numpy": 1e9}])
    with pytest.raises(pytest.skip.Exception, match="^tf2onnx of jax2tf's function: ValueError: Could not infer"):
        harness.run_case(benchmark, s, Case("jax", "serving", "generate", "compiled", "onnx"))
    rec = s.records[-1]
    assert rec["status"] == "unsupported" and rec["reason"].startswith(REFUSED[("jax", "compiled", "onnx", "generate")])
    assert "\n" not in rec["reason"] and rec.get("latency_p50_s") is None and record_mod.problems(rec) == []


def test_a_served_output_that_differs_from_eager_is_failed_and_never_timed(benchmark, monkeypatch):
    needs("jax")
    from frameworks.jax.serving import JaxServable
    real = JaxServable.expected
    monkeypatch.setattr(JaxServable, "expected", lambda self, serve: [(t, lg * 1.001) for t, lg in real(self, serve)])
    s = harness.Session(harness.Options(frameworks=("jax",), workloads=("serving",), preset="tiny", rounds=1,
                                        busy_retries=0), gemm_samples=[{"numpy": 1e9}])
    with pytest.raises(pytest.xfail.Exception):
        harness.run_case(benchmark, s, Case("jax", "serving", "generate", "compiled", "jax-export"))
    rec = s.records[-1]
    assert rec["status"] == "failed" and rec["reason"].startswith("check request 0 (1x")
    assert "logits differ from eager's" in rec["reason"] and rec.get("latency_p50_s") is None


# ----------------------------------------------------------------------------- the harness, tiny

CASES = [("torch", "eager", None, "generate"), ("jax", "compiled", "jax-export", "sample"),
         ("tensorflow", "graph", "onnx", "generate")]


@pytest.mark.parametrize("key", CASES, ids=["-".join(map(str, k)) for k in CASES])
def test_the_serving_measurements_run_at_the_tiny_preset(key, benchmark):
    fw, mode, strategy, task = key
    needs(fw, W.path_of(fw, mode, strategy))
    s = harness.Session(harness.Options(frameworks=(fw,), workloads=("serving",), preset="tiny", rounds=2,
                                        budget_s=0.3, busy_retries=0), gemm_samples=[{"numpy": 1e9}])
    rec = harness.run_case(benchmark, s, Case(fw, "serving", task, mode, strategy))
    n = TINY.requests
    assert record_mod.problems(rec) == [] and rec["status"] == "ok"
    assert rec["serve_requests"] == 2 * n and len(benchmark.stats.stats.data) == 2 * n
    assert 0 < rec["latency_p50_s"] <= rec["latency_p90_s"] <= rec["latency_p99_s"]
    assert 0 < rec["server_p50_s"] < rec["latency_p50_s"] and rec["transport_s"] > 0
    assert rec["cold_start_s"] == rec["first_call_s"] > rec["serve_first_s"] > 0
    assert len(rec["serve_cold_request_s"].split(",")) == n and rec["serve_stream_cold_s"] > 0
    rates = dict(kv.split(":") for kv in rec["serve_throughput_by_batch"].split(","))
    assert set(map(int, rates)) == set(TINY.batches) and rec["serve_throughput_batch"] in TINY.batches
    assert rec["serve_throughput"] == pytest.approx(max(map(float, rates.values())), rel=1e-3)
    assert 0 < rec["serve_rss_bytes"] <= rec["peak_memory_bytes"]
    assert rec["model_code_imported"] is (strategy is None) and rec["check_rel_err"] <= rec["check_tolerance"]
    assert rec["serve_kind"] == W.path_of(fw, mode, strategy).kind

"""The serving section (reports.sections.serving, reports.rendering.sections.serving) and claim
6's verdict pieces (claim6) on small synthetic result files: which cases are compared, the
ratios over processes, the verdict rule, the export matrix with the exporters' words, the
serving table and the latency figure."""
from __future__ import annotations

import pytest

import reports
from reports.conclusions import findings, replicates
from reports.rendering import sections as drawings
from reports.rendering.sections import serving as draw
from reports.sections import SECTIONS
from reports.sections import serving as S
from tests.support.reports_fixtures import axis_folder

KINDS = {None: S.DEVELOPMENT, "onnx": S.OTHER_ENGINE}


def served(fw, mode, strategy, task, p50, rate, wobble=0.02):
    """A serving case whose per-process values wobble by `wobble` between processes."""
    def fields(i):
        f = 1 + wobble * i
        return {"strategy": strategy, "serve_kind": KINDS.get(strategy, S.ARTEFACT), "latency_p50_s": p50 * f,
                "latency_p90_s": 1.2 * p50 * f, "latency_p99_s": 1.5 * p50 * f, "serve_throughput": rate / f,
                "serve_throughput_batch": 4, "cold_start_s": 2.0 * f, "serve_rss_bytes": 2 ** 28,
                "peak_memory_bytes": 2 ** 29, "check_rel_err": 2e-7, "model_code_imported": strategy is None,
                "exporter": None if strategy is None else f"{strategy} exporter", "artefact_bytes": 2 ** 21,
                "dynamic_dims": None if strategy is None else "batch", "export_s": None if strategy is None else 3.0,
                "serve_engine": "engine"}
    return {"framework": fw, "mode": mode, "task": task, "workload": "serving", "preset": "tiny",
            "fields": fields}, p50


def refused(fw, mode, strategy, task, reason):
    return {"framework": fw, "mode": mode, "task": task, "workload": "serving", "preset": "tiny",
            "status": "unsupported", "reason": reason, "fields": {"strategy": strategy}}, None


def frame(tmp_path, cases, processes=3):
    c = replicates.cases(reports.load(axis_folder(tmp_path, cases, processes)))
    return c, findings.prepare(c)


def run(onnx_generate=0.5, onnx_sample=0.009, tf_onnx=0.6):
    """torch: eager and compiled development paths, AOTInductor, ONNX Runtime; TensorFlow's
    ONNX path for generate; JAX's ONNX refused (latencies in ms; throughputs in proportion)."""
    return [served("torch", "eager", None, "generate", 0.0020, 2000), served("torch", "compiled", None, "generate",
                                                                             0.0013, 3000),
            served("torch", "compiled", "aoti", "generate", 0.0007, 6000),
            served("torch", "compiled", "onnx", "generate", onnx_generate / 1000, 6000 * 0.7 / onnx_generate),
            served("tensorflow", "graph", "onnx", "generate", tf_onnx / 1000, 6500 * 0.6 / tf_onnx),
            served("torch", "compiled", None, "sample", 0.010, 100), served("torch", "compiled", "aoti", "sample",
                                                                             0.009, 110),
            served("torch", "compiled", "onnx", "sample", onnx_sample, 110 * 0.009 / onnx_sample),
            refused("jax", "compiled", "onnx", "generate", "tf2onnx of jax2tf's function: ValueError: Could not infer")]


def test_claim6_compares_the_best_artefact_with_the_best_other_engine_over_processes(tmp_path):
    c, fam = frame(tmp_path, run())
    a = S.claim6(c, fam)
    t = a.table.set_index(["framework", "task"])
    g = t.loc[("torch", "generate")]
    assert g["development latency_p50_s"] == "torch compiled" and g["artefact latency_p50_s"] == "torch compiled (aoti)"
    assert g["onnxruntime latency_p50_s"] == g["other latency_p50_s"] == "torch compiled (onnx)"
    # speeds from the per-process values: the wobble is the same in both cases, so the ratio is exact
    assert g["artefact/development latency_p50_s speed"] == pytest.approx(1.3 / 0.7, rel=1e-6)
    assert g["other/artefact latency_p50_s speed"] == pytest.approx(0.7 / 0.5, rel=1e-6)
    assert g["other/artefact serve_throughput speed"] == pytest.approx(1.4, rel=1e-6)
    assert g["other/artefact latency_p50_s verdict"] == "faster by at least the 10% margin"
    assert g["device"] == "cpu" and g["preset"] == "tiny"
    # generate: ONNX Runtime faster by the margin at both measures; sample: equal at both (the
    # same processes, the same wobble: a paired ratio of exactly 1, equivalent)
    assert a.verdict == S.INCONCLUSIVE and "in 2 of 4 comparisons, torch's artefact as fast or faster in 2, on cpu" \
        in a.what
    assert a.answer() == (a.verdict, a.what, a.caveat)
    assert [(lbl, round(x, 6), v) for lbl, x, v in a.sides] == [
        ("generate latency p50 at batch 1", 1.4, "slower_m"), ("generate best offline throughput", 1.4, "slower_m"),
        ("sample latency p50 at batch 1", 1.0, "equivalent"), ("sample best offline throughput", 1.0, "equivalent")]


@pytest.mark.parametrize("latencies, verdict, counts", [
    ((0.5, 0.006, 0.6), S.SUPPORTED, "in 4 of 4 comparisons, torch's artefact as fast or faster in 0"),
    ((0.9, 0.012, 0.9), S.NOT_SUPPORTED, "in 0 of 4 comparisons, torch's artefact as fast or faster in 4"),
    ((0.7, 0.009, 0.6), S.INCONCLUSIVE, "in 0 of 4 comparisons, torch's artefact as fast or faster in 2, 2 undecided")])
def test_the_verdict_rule_counts_the_comparisons_each_way(tmp_path, latencies, verdict, counts):
    """Another engine faster by the margin: the claim's way; the artefact as fast (equivalent)
    or faster: the other way; in between (TensorFlow's ONNX path 1.17x faster, in processes of
    its own: not surely by the margin) undecided; more than half either way decides."""
    c, fam = frame(tmp_path, run(*latencies))
    a = S.claim6(c, fam)
    assert a.verdict == verdict and counts in a.what, a.what


def test_one_process_a_side_is_indicative_and_without_torch_not_tested(tmp_path):
    c, fam = frame(tmp_path / "one", run(0.5, 0.006), processes=1)
    a = S.claim6(c, fam)
    assert a.verdict == S.SUPPORTED + S.INDICATIVE and a.caveat == "one process per case: point estimates"
    c, fam = frame(tmp_path / "tf", [served("tensorflow", "graph", "onnx", "generate", 0.0006, 6500)])
    assert S.claim6(c, fam).verdict == S.NOT_RUN


def test_the_section_draws_the_export_matrix_the_table_and_the_figure(tmp_path):
    c, fam = frame(tmp_path, run())
    assert [s.name for s in SECTIONS].index("serving") >= 0 and "serving" in drawings.DRAWINGS
    d = c[c["workload"] == "serving"]
    m = draw.exports(d, set()).set_index(["framework", "path"])
    assert m.loc[("jax", "compiled (onnx)"), "generate"].startswith("refused: tf2onnx of jax2tf's function: ValueError")
    assert m.loc[("torch", "compiled (aoti)"), "generate"] == "ok: aoti exporter [batch; 2.0 MiB; export 3 s]"
    assert m.loc[("torch", "compiled"), "sample"] == "ok: the model, built from its weights [2.0 MiB]"
    t = draw.serving(d, set())
    r = t[(t["task"] == "generate") & (t["path"] == "compiled (aoti)")].iloc[0]
    assert r["kind"] == S.ARTEFACT and r["model code"] == "none" and r["check (rel. error)"] == "2.0e-07"
    assert r["p50"].startswith("714 µs [") and r["best throughput"].endswith(" tokens/s at batch 4")
    assert not draw.claim_table(d, set()).empty
    figs = drawings.draw(c, tmp_path / "fig")
    png, caption = figs["serve_latency"]
    assert png is not None and png.read_bytes()[:4] == b"\x89PNG"
    lines = S.findings(d, fam)
    assert lines[0] == "torch: 4 of 4 artefact cases (path x task) exported, loaded without the model code and served."
    assert any(ln.startswith("jax: 0 of 1 artefact cases") and "1 refused by the exporter" in ln for ln in lines)
    assert any("torch compiled (aoti) is faster than torch compiled by at least the 10% margin" in ln for ln in lines)
    assert S.summary(d, fam)[0].startswith("Serving (claim 6, production inference best in another engine): "
                                           "inconclusive")


def test_a_report_of_the_serving_workload_alone_renders_with_its_section_and_claim(tmp_path):
    """No concern of the weighted appendix has data in such a report (serving has none): it
    renders, the section and claim 6's Summary sentence in it."""
    df = reports.load(axis_folder(tmp_path / "runs", run(), 3))
    reports.render(df, tmp_path / "out", pdf=False)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Serving: deployable artefacts against the development path (claim 6)" in md
    assert "- Serving (claim 6, production inference best in another engine): inconclusive for torch" in md
    assert "refused: tf2onnx of jax2tf's function: ValueError: Could not infer" in md


def test_a_summary_with_nothing_tested_says_so_not_that_nothing_was_timed(tmp_path):
    """Two processes a case (no comparison tested) and development paths only: the Summary says
    why it has no finding; "No timed cases" was false of such a report (a serving run whose
    artefacts were left out said it)."""
    cases = [served("torch", "eager", None, "generate", 0.0020, 2000),
             served("torch", "compiled", None, "generate", 0.0013, 3000)]
    df = reports.load(axis_folder(tmp_path / "runs", cases, 2))
    reports.render(df, tmp_path / "out", pdf=False)
    summary = (tmp_path / "out" / "report.md").read_text().split("\n## Summary\n", 1)[1].split("\n## ", 1)[0]
    assert "No timed cases" not in summary
    assert "Nothing to summarise: no finding from this run's comparisons (none could be tested: each needs 3 " \
           "steady-state processes or sets a side)." in summary


def test_a_cold_cache_process_is_not_pooled_with_warm_ones(tmp_path):
    """A run of 1 cold + 3 warm processes: the serving table's cold start, percentiles and
    throughput are over the warm processes, as the step time is; the cold-cache process's
    20 s start (torch.compile from empty caches) is not averaged into the warm ones' 2 s."""
    kw, p50 = served("torch", "compiled", None, "sample", 0.010, 100)
    warm_fields = kw["fields"]
    kw["fields"] = lambda i: {**warm_fields(i), "compile_cache": "cold" if i == 0 else "warm",
                              "cold_start_s": 20.0 if i == 0 else warm_fields(i)["cold_start_s"]}
    c, _ = frame(tmp_path, [(kw, p50)], processes=4)
    r = c.iloc[0]
    assert len(r["procs_cold_start_s"]) == len(r["procs_latency_p50_s"]) == r["n_processes"] == 3
    assert 2.0 < r["cold_start_s"] < 2.2 and max(r["procs_cold_start_s"].values()) < 3

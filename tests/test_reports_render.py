"""reports.render: figures, report.md/html, tables.tex, data.csv; findings and ranking."""
from __future__ import annotations

import numpy as np
import pytest

import reports
from reports.conclusions import findings, replicates
from reports.measures import data
from reports.rendering import choice, document, figures, formats, parts
from tests.support.reports_fixtures import plausible_run, record, result_json, simulated_processes, times, write
from workloads.base import FwbenchError

# caches off: every first call compiled from nothing, shown as cold (no warm bars)
FIGURES = ("throughput", "speedup", "first_call", "utilisation", "cold_warm")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """torch and jax ran (jax with a failed case), tensorflow is missing."""
    d = tmp_path_factory.mktemp("results")
    missing = {"tensorflow": "tensorflow is not installed: pip install x"}
    write(d / "torch.json", plausible_run("torch", missing=missing))
    jax = plausible_run("jax")
    jax["benchmarks"] = [b for b in jax["benchmarks"] if b["params"]["task"] != "generate"
                         or b["params"]["mode"] != "compiled"]
    jax["fwbench"]["records"].append(record("jax", "generate", "compiled", status="failed",
                                            reason="XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory"))
    write(d / "jax.json", jax)
    out = tmp_path_factory.mktemp("report")
    df = reports.load(d)
    paths = reports.render(df, out)
    return d, out, df, paths


def test_every_output_is_written(rendered):
    _, out, _, paths = rendered
    for name in ("report.md", "report.html", "tables.tex", "data.csv"):
        assert (out / name).stat().st_size > 0
    for f in FIGURES:
        assert (out / "figures" / f"{f}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / "figures" / f"{f}.pdf").read_bytes()[:4] == b"%PDF"


def test_markdown_sections_missing_framework_and_failure(rendered):
    _, out, _, _ = rendered
    md = (out / "report.md").read_text()
    for section in ("## Summary", "## Results", "### Workload gpt", "## Findings", "## Appendix D: capability matrix",
                    "## Missing frameworks, failed and unsupported cases", "## The choice per job", "## Method",
                    "## Appendix F: weighted concerns",
                    "## Appendix A: set-up", "## Appendix B: every case"):
        assert section in md
    assert "tensorflow missing: tensorflow is not installed" in md
    assert "RESOURCE_EXHAUSTED" in md
    assert "| gpt | generate | compiled | ok | failed | missing |" in md
    assert "| gpt | forward | graph | n/a | n/a | missing |" in md        # modes they do not have
    for section in ("## Replication and stability", "## Compilation: cold and warm first calls",
                    "ranks first under"):
        assert section in md
    assert "Indicative only: every case has a single steady-state process" in md
    assert "no comparison between processes is tested" in md
    assert "not tested (fewer than 3 processes on a side)" in md and "t distribution over processes" in md
    assert "![throughput](figures/throughput.png)" in md
    assert "torch 2.13.0" in md and "Test CPU" in md and "100.0 GFLOP/s" in md and "abc1234" in md


def test_html_is_self_contained(rendered):
    _, out, _, _ = rendered
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(list((out / "figures").glob("*.png")))
    assert 'src="figures/' not in html and "<style>" in html


def test_tex_tables_are_booktabs(rendered):
    _, out, _, _ = rendered
    tex = (out / "tables.tex").read_text()
    assert tex.count(r"\begin{longtable}") == tex.count(r"\bottomrule") >= 4
    assert r"\toprule" in tex and r"\midrule" in tex and r"\label{tab:fwbench-results-gpt}" in tex
    assert r"train\_\allowbreak{}step" in tex          # escaped for LaTeX, breakable after the _


def test_data_csv_and_text_are_reproducible(rendered, tmp_path):
    results, out, _, paths = rendered
    df = reports.load(results)                      # a second load of the same JSON
    formats.write_csv(df, tmp_path / "data.csv")
    assert (tmp_path / "data.csv").read_bytes() == (out / "data.csv").read_bytes()
    cases = replicates.cases(df)                    # as document.render builds its blocks
    figs = {k.removeprefix("fig:"): (v, figures.caption(k.removeprefix("fig:"), cases)
                                     if k.removeprefix("fig:") in figures.FIGURES else choice.caption(k[4:]))
            for k, v in paths.items() if k.startswith("fig:")}
    blocks = document.build(cases, figs, dict(findings.DEFAULT_WEIGHTS), cases.attrs["notes"], records=df)
    assert formats.markdown(blocks, out) == (out / "report.md").read_text()
    assert formats.latex_tables(blocks) == (out / "tables.tex").read_text()
    assert "times" not in (out / "data.csv").read_text().splitlines()[0].split(",")


def test_findings_name_a_winner_only_between_enough_processes(tmp_path):
    medians = {"torch": {"forward": 0.01, "train_step": 0.01}, "jax": {"forward": 0.01, "train_step": 0.02}}
    for fw, tasks in medians.items():
        simulated_processes(tmp_path / "one", fw, {("gpt", t, "compiled"): m for t, m in tasks.items()},
                            cold=1, warm=1, seed=len(fw))
        simulated_processes(tmp_path / "five", fw, {("gpt", t, "compiled"): m for t, m in tasks.items()},
                            cold=1, warm=5, seed=len(fw))
    lines = findings.findings(reports.load(tmp_path / "one"))["gpt"]
    step = [ln for ln in lines if ln.startswith("gpt train_step, compiled")]
    # one warm process per framework: the ratio carries the drift between processes, unmeasured
    assert "torch compiled against jax compiled: not tested (fewer than 3 processes), speed 2." in step[0]
    lines = findings.findings(reports.load(tmp_path / "five"))["gpt"]
    fwd = [ln for ln in lines if ln.startswith("gpt forward, compiled")]
    step = [ln for ln in lines if ln.startswith("gpt train_step, compiled")]
    assert " is faster than " not in fwd[0] and " is slower than " not in fwd[0]
    assert "torch compiled is faster than jax compiled by at least the 10% margin (speed 2.0" in step[0]


def test_ranking_follows_weights(tmp_path):
    write(tmp_path / "torch.json", plausible_run("torch"))
    write(tmp_path / "jax.json", plausible_run("jax"))
    df = reports.load(tmp_path)
    s = findings.scores(df)
    assert s["throughput"].max() == 1.0 and ((0 < s["throughput"]) & (s["throughput"] <= 1)).all()
    # compile: the first call of the configuration throughput scores (each one's fastest mode per task, eager
    # included; issue 28), relative to the lowest, geometric mean over the tasks
    c = replicates.cases(df)
    c = c[c["status"].isin(("ok", "fallback")) & c["median_s"].notna() & (c["first_call_s"] > 0)]
    pick = c.sort_values("median_s").drop_duplicates(["task", "framework"]).set_index(["task", "framework"])
    lowest = pick["first_call_s"].groupby(level="task").min()
    for f in ("torch", "jax"):
        rel = [lowest[t] / pick.at[(t, f), "first_call_s"] for t in lowest.index if (t, f) in pick.index]
        assert s.loc[f, "compile"] == pytest.approx(float(np.exp(np.mean(np.log(rel)))))
    assert s["compile"].max() <= 1.0
    assert (s["coverage"] == 1.0).all()
    only_tp, _ = findings.ranking(df, findings.parse_weights("throughput=1,compile=0,coverage=0"))
    assert only_tp["overall"].to_dict() == pytest.approx(s["throughput"].to_dict())


@pytest.mark.parametrize("text, phrase", [("speed=2", "unknown concern 'speed'"), ("throughput", "name=value"),
                                          ("compile=-1", "non-negative"), ("compile=abc", "non-negative")])
def test_bad_weights_are_one_line(text, phrase):
    with pytest.raises(FwbenchError, match=phrase) as e:
        findings.parse_weights(text)
    assert "\n" not in str(e.value)
    if "unknown" in phrase:
        assert "throughput, compile, coverage" in str(e.value)


def test_figures_come_from_record_fields_for_any_workload(tmp_path):
    """A second workload with its own tasks, unit and a strategy field: the same functions draw it."""
    gpt = [(record("torch", "forward", m, first_call_s=f), times(t, seed=i))
           for i, (m, f, t) in enumerate([("eager", 0.1, 0.01), ("compiled", 5.0, 0.005)])]
    dif = [(record("torch", "sample", m, workload="diffusion", unit="images", items=8, first_call_s=f),
            times(t, seed=9 + i))
           for i, (m, f, t) in enumerate([("eager", 0.2, 0.4), ("compiled", 9.0, 0.1)])]
    dyn = [(record("jax", "stream", "compiled", workload="dynamic", strategy=s, unit="sequences", items=4),
            times(t, seed=20 + i))
           for i, (s, t) in enumerate([("per_shape", 0.3), ("bucketed", 0.05)])]
    write(tmp_path / "torch.json", result_json(gpt + dif))
    write(tmp_path / "jax.json", result_json(dyn, frameworks=["jax"]))
    df = reports.load(tmp_path)
    fig = figures.throughput(df)
    labels = {ax.get_ylabel() for ax in fig.axes if ax.get_visible()}
    assert {"tokens/s", "images/s", "sequences/s"} <= labels
    titles = {ax.get_title() for ax in fig.axes if ax.get_visible()}
    assert any(t.startswith("diffusion sample") for t in titles)
    assert any(t.startswith("dynamic stream") for t in titles)
    cap = figures.capability_table(df, {})
    assert "strategy" in cap.columns and set(cap["workload"]) == {"gpt", "diffusion", "dynamic"}
    assert figures.speedup(df) is not None and figures.first_call(df) is not None
    assert "dynamic" in findings.scores(df).columns


def test_colours_are_fixed_and_colour_blind_safe():
    import seaborn as sns
    cb = set(sns.color_palette("colorblind").as_hex())
    c = figures.colours(["tensorflow", "jax", "torch", "mxnet"])
    assert c["torch"] == figures.colours(["torch"])["torch"]
    assert len(set(c.values())) == 4 and set(c.values()) <= cb
    import colorsys

    from matplotlib.colors import to_rgb
    hue = {f: colorsys.rgb_to_hsv(*to_rgb(c[f]))[0] for f in ("torch", "jax", "tensorflow")}
    assert abs(hue["torch"] - hue["tensorflow"]) > 0.15          # not two oranges


def test_another_frameworks_api_is_na_not_unsupported(tmp_path):
    """Issue 18: a strategy a framework does not have (another framework's API name) reads n/a
    in the capability matrix and stays out of the failed/unsupported list; a strategy of its
    own that it cannot run stays unsupported, with its reason."""
    from workloads.dynamic import lacks
    why = lacks("jax", "compiled", "input_signature", (None, "export"), "tf.function's API")
    own = "tape.batch_jacobian does not apply to the GPT's per-sample gradients"
    recs = [(record("tensorflow", "prefill", "compiled", workload="dynamic", strategy="input_signature"), times(0.01)),
            (record("jax", "prefill", "compiled", workload="dynamic", strategy="export"), times(0.01, seed=1)),
            (record("tensorflow", "prefill", "compiled", workload="dynamic", strategy="export", status="unsupported",
                    reason=own), None),
            (record("jax", "prefill", "compiled", workload="dynamic", strategy="input_signature",
                    status="unsupported", reason=why), None)]
    write(tmp_path / "r.json", result_json([r for r in recs if r[1]], frameworks=["tensorflow", "jax"],
                                           not_run=[r[0] for r in recs if r[1] is None]))
    df = reports.load(tmp_path)
    assert list(data.not_applicable(df)) == [r.get("reason") == why for _, r in df.iterrows()]
    cap = figures.capability_table(df, {}).set_index("strategy")
    assert cap.loc["input_signature", "jax"] == "n/a" and cap.loc["export", "tensorflow"] == "unsupported"
    lines, _ = parts.short_reasons(df)
    assert any(own in ln for ln in lines) and not any("input_signature" in ln and "unsupported" in ln for ln in lines)
    assert any(ln.startswith("n/a (another framework's API") and "jax: input_signature" in ln for ln in lines)


def test_the_cpus_reduced_precision_instructions_are_in_the_set_up_and_bad_ones_are_dropped(tmp_path):
    recs = [(record("torch", "forward", "eager"), times(0.01))]
    write(tmp_path / "good" / "torch.json", result_json(recs, cpu_flags=["avx512f", "amx_bf16"]))
    write(tmp_path / "bad" / "torch.json", result_json(recs, cpu_flags=["avx512f", "not a flag; rm -rf"]))
    good = document.setup_table(reports.load(tmp_path / "good")).set_index("")
    row = [k for k in good.index if k.startswith("CPU's reduced-precision instructions")]
    assert row and good.loc[row[0], "value"] == "avx512f, amx_bf16"
    bad = reports.load(tmp_path / "bad")
    assert any("cpu_flags" in p for p in bad.attrs["problems"])
    assert not any(k.startswith("CPU's reduced") for k in document.setup_table(bad).iloc[:, 0])

"""reports.sections (judging halves) and reports.rendering.sections (drawing halves): the
dynamic-shapes, interop and derivatives sections, their figures, findings and framework-choice
concerns, and the registry every section is read from, on small synthetic result files."""
from __future__ import annotations

import re

import numpy as np
import pytest

import reports
from reports.conclusions import findings, replicates, summary
from reports.rendering import method
from reports.rendering import sections as drawings
from reports.rendering.sections import derivatives as derivatives_draw
from reports.rendering.sections import dynamic as dynamic_draw
from reports.rendering.sections import interop as interop_draw
from reports.sections import common, derivatives, dynamic, interop
from tests.support.reports_fixtures import axis_folder, record, stream_fields
from workloads.base import FwbenchError

DYN = {"workload": "dynamic", "task": "prefill", "preset": "tiny"}


def _cases(tmp_path, cases, processes=4):
    return replicates.cases(reports.load(axis_folder(tmp_path, cases, processes)))


def _fam(c):
    """The report's family of comparisons for a cases frame (verdicts, levels, flags)."""
    return findings.prepare(c)


def _dyn(fw, mode, strategy, cold, new, seen, med=0.01, **kw):
    """A stream case whose per-process values wobble by 2% between processes."""
    return ({"framework": fw, "mode": mode, "strategy": strategy, **DYN,
             "fields": lambda i: stream_fields(cold * (1 + 0.02 * i), new * (1 + 0.02 * i), seen, **kw)}, med)


def test_cases_keep_every_process_value_of_a_stream(tmp_path):
    c = _cases(tmp_path, [_dyn("torch", "compiled", None, 2.0, 0.3, 0.001)], processes=3)
    r = c.iloc[0]
    assert sorted(r["procs_stream_cold_s"].values()) == pytest.approx([2.0, 2.04, 2.08])
    assert r["stream_cold_s"] == pytest.approx((2.0 * 2.04 * 2.08) ** (1 / 3))    # geometric mean over processes
    assert r["stream"] == "gpt-prefill" and r["distinct_shapes"] == 6
    assert r["stream_cold_compilations"] == "1,2,3,4,5,6,6,6"


def test_dynamic_figures_drawn_from_their_fields(tmp_path):
    c = _cases(tmp_path, [_dyn("torch", "compiled", None, 2.0, 0.3, 0.001),
                          _dyn("torch", "compiled", "bucketed", 1.0, 0.3, 0.001, waste=0.3, compilations=2),
                          _dyn("jax", "compiled", None, 4.0, 0.6, 0.001)])
    figs = drawings.draw(c, tmp_path / "fig")
    for name in ("dyn_compilations", "dyn_stream_time", "dyn_new_vs_seen"):
        png, caption = figs[name]
        assert png is not None and png.read_bytes()[:4] == b"\x89PNG", name
    assert not any(n.startswith("der_") for n in figs)            # no derivatives records: no section


def test_every_strategy_has_one_colour_and_marker_across_panels(tmp_path):
    """Issue 28: dyn_stream_time gave a strategy a colour per panel (styles per panel) and 15
    legends. A strategy's lines carry one (colour, marker) in every panel, distinct strategies
    differ, the figure has one legend, eager counts sit on panels of their own, and request
    counts tick at integers."""
    from reports.rendering.sections import dynamic as dyn_draw
    rows = [_dyn("torch", "compiled", None, 2.0, 0.3, 0.001), _dyn("torch", "compiled", "bucketed", 1.0, 0.3, 0.001),
            _dyn("torch", "eager", None, 0.5, 0.3, 0.001), _dyn("jax", "compiled", None, 4.0, 0.6, 0.001),
            _dyn("jax", "compiled", "export", 3.0, 0.6, 0.001), _dyn("jax", "eager", None, 5.0, 0.6, 0.001)]
    c = _cases(tmp_path, rows)
    for fig in (dyn_draw.fig_stream_time(c), dyn_draw.fig_compilations(c)):
        style: dict[str, set] = {}
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_label().startswith("_"):
                    style.setdefault(line.get_label(), set()).add((line.get_color(), line.get_marker()))
            assert ax.get_legend() is None
        assert len(style) == 4 and all(len(v) == 1 for v in style.values()), style
        assert len({next(iter(v)) for v in style.values()}) == len(style)
        assert len(fig.legends) == 1
    comp = dyn_draw.fig_compilations(c)
    titles = [ax.get_title() for ax in comp.axes if ax.get_visible()]
    assert any(t.endswith("(eager)") for t in titles) and any(not t.endswith("(eager)") for t in titles)
    for ax in [a for a in comp.axes if a.get_visible()]:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert all(float(t).is_integer() for t in ticks)


def test_a_figure_without_its_fields_is_a_note_not_a_crash(tmp_path):
    # dynamic records from before the per-request series existed
    c = _cases(tmp_path, [({"framework": "torch", "mode": "compiled", **DYN,
                            "fields": {"stream_cold_s": 1.0, "distinct_shapes": 4}}, 0.01)])
    figs = drawings.draw(c, tmp_path / "fig")
    png, note = figs["dyn_compilations"]
    assert png is None and note == ("The dyn_compilations figure: not drawn, the records lack "
                                    "stream_cold_compilations.")
    assert not (tmp_path / "fig" / "dyn_compilations.png").exists()
    blocks = drawings.blocks(c, c, figs, _fam(c))
    assert ("p", note) in blocks
    assert any(b[0] == "table" and b[3] == "dynamic" for b in blocks)


def test_tf_input_signature_finding_follows_the_replication_rule(tmp_path):
    slow_new = _cases(tmp_path / "a", [_dyn("tensorflow", "compiled", "input_signature", 5.0, 0.5, 0.01,
                                            compilations=1)])
    line = next(s for s in dynamic.findings(slow_new, _fam(slow_new)) if "input_signature" in s)
    assert "1 trace for 6 distinct shapes" in line and "XLA still compiles per concrete shape" in line
    assert "a request of a new shape is slower than one of a seen shape by at least the 10% margin" in line
    kw, med = _dyn("tensorflow", "compiled", "input_signature", 5.0, 0.5, 0.01, compilations=1)
    fields = kw["fields"]
    kw["fields"] = lambda i: {**fields(i), "xla_compilations_cold": 6, "stream_cold_cache": "empty"}
    xla = _cases(tmp_path / "x", [(kw, med)])
    line = next(s for s in dynamic.findings(xla, _fam(xla)) if "input_signature" in s)
    assert "1 trace and 6 XLA compiles for 6 distinct shapes" in line
    row = dynamic_draw.table(xla).iloc[0]
    assert row["compilations (cold pass)"] == "1 + 6 XLA" and row["cold-pass caches"] == "empty"
    same = _cases(tmp_path / "b", [_dyn("tensorflow", "compiled", "input_signature", 5.0, 0.0097, 0.01,
                                        compilations=1)])
    line = next(s for s in dynamic.findings(same, _fam(same)) if "input_signature" in s)
    assert re.search(r"a request of a new shape (and one of a seen shape are equivalent|against one of a seen shape "
                     r"is inconclusive)", line) and "XLA still compiles" not in line
    one = _cases(tmp_path / "c", [_dyn("tensorflow", "compiled", "input_signature", 5.0, 0.5, 0.01,
                                       compilations=1)], processes=1)
    line = next(s for s in dynamic.findings(one, _fam(one)) if "input_signature" in s)
    assert "not tested (fewer than 3 processes)" in line


def test_cold_stream_difference_stated_only_outside_the_noise(tmp_path):
    far = _cases(tmp_path / "a", [_dyn("torch", "compiled", None, 1.0, 0.1, 0.001),
                                  _dyn("jax", "compiled", None, 3.0, 0.3, 0.001)])
    line = next(s for s in dynamic.findings(far, _fam(far)) if "fastest configuration against" in s)
    assert "torch compiled default is faster than jax compiled default by at least the 10% margin (speed 3.00x" \
        in line
    near = _cases(tmp_path / "b", [_dyn("torch", "compiled", None, 1.0, 0.1, 0.001),
                                   _dyn("jax", "compiled", None, 1.05, 0.3, 0.001)])
    line = next(s for s in dynamic.findings(near, _fam(near)) if "fastest configuration against" in s)
    assert "speed 1.05x" in line and "by at least the 10% margin" not in line


def test_recompile_limit_is_stated_and_excluded_from_the_best_strategy(tmp_path):
    c = _cases(tmp_path, [_dyn("torch", "compiled", "static", 0.5, 0.1, 0.001, compilations=8, limit_hit=True),
                          _dyn("torch", "compiled", "dynamic", 2.0, 0.1, 0.001, compilations=1),
                          _dyn("jax", "compiled", None, 4.0, 0.1, 0.001)])
    lines = dynamic.findings(c, _fam(c))
    assert any("torch compiled static" in s and "hit the recompile limit" in s for s in lines)
    # the static case is fastest but hit the limit: torch's best is dynamic (2 s) against jax's 4 s
    s = dynamic.score(c, ["torch", "jax"])
    # the cost of N requests: the cold pass, then the rest at the warm rate (a warm pass of 8 requests)
    strategy = c["strategy"].fillna("default")
    jax, dyn = (c[(c["framework"] == f) & (strategy == st)].iloc[0] for f, st in (("jax", "default"),
                                                                                 ("torch", "dynamic")))
    assert dynamic.served_cost(jax, 1000) == pytest.approx(jax["stream_cold_s"] + 992 * jax["median_s"] / 8)
    assert dynamic.served_cost(jax, 4) == pytest.approx(jax["stream_cold_s"] / 2)
    ratio = [dynamic.served_cost(dyn, n) / dynamic.served_cost(jax, n) for n in dynamic.SERVED]
    assert s["torch"] == 1.0 and s["jax"] == pytest.approx(np.exp(np.mean(np.log(ratio))))


def test_interop_matrix_cells_come_from_the_records(tmp_path):
    why = "ConcretizationTypeError: Abstract tracer value encountered where concrete value is expected here"
    c = _cases(tmp_path, [
        ({"framework": "torch", "mode": "compiled", "workload": "interop", "task": "print", "status": "fallback",
          "reason": "Failed to trace builtin operator print", "fields": {"interop_outcome": "graph_breaks"}}, 0.001),
        ({"framework": "torch", "mode": "compiled", "workload": "interop", "task": "item_branch",
          "fields": {"interop_outcome": "compiled"}}, 0.001),
        ({"framework": "jax", "mode": "compiled", "workload": "interop", "task": "item_branch",
          "status": "unsupported", "reason": why}, None),
        ({"framework": "jax", "mode": "compiled", "workload": "interop", "task": "print", "status": "failed",
          "reason": "side effects ran 1 times in 8 calls", "fields": {"interop_outcome": "wrong"}}, None),
    ], processes=1)
    m = interop_draw.matrix(c, set()).set_index("program")
    assert re.fullmatch(r"graph_breaks \([\d.]+ ms\): Failed to trace builtin operator print",
                        m.at["print", "torch compiled"])
    assert re.fullmatch(r"compiled \([\d.]+ ms\)", m.at["item_branch", "torch compiled"])
    assert m.at["item_branch", "jax compiled"] == "refused: " + why[:common.SHORT].rstrip() + "..."
    assert m.at["print", "jax compiled"] == "wrong: side effects ran 1 times in 8 calls"
    # documented score: compiled whole 1, graph breaks 0.5, refused 0.5, wrong 0; mean over programs
    s = interop.score(c, ["torch", "jax"], set())
    assert s == {"torch": 0.75, "jax": 0.25}


def test_a_compile_slower_than_eager_is_no_interop_success(tmp_path):
    def case(mode, med):
        return ({"framework": "torch", "mode": mode, "workload": "interop", "task": "numpy_call",
                 "fields": {"interop_outcome": "compiled" if mode != "eager" else "eager"}}, med)
    fast = _cases(tmp_path / "fast", [case("eager", 0.002), case("compiled", 0.001)])
    slow = _cases(tmp_path / "slow", [case("eager", 0.001), case("compiled", 0.002)])
    assert interop.score(fast, ["torch"], set()) == {"torch": 1.0}
    assert interop.score(slow, ["torch"], set()) == {"torch": 0.5}


def test_idiomatic_rewrites_have_their_own_table_and_count_at_three_quarters(tmp_path):
    """A program refused as written but compiled once rewritten: the matrix keeps the program
    as written, the rewrites table shows the rewrite with what it uses and its lines, and the
    score takes 0.75 of the rewrite's where that beats the program as written."""
    def rec(task, status, strategy=None, med=None, **fields):
        return ({"framework": "jax", "mode": "compiled", "workload": "interop", "task": task, "strategy": strategy,
                 "status": status, "reason": None if status == "ok" else "TracerBoolConversionError: no",
                 "fields": fields}, med)
    c = _cases(tmp_path, [
        rec("value_branch", "unsupported", interop_outcome="refused"),
        rec("value_branch", "ok", "idiomatic", 0.001, interop_outcome="compiled", rewrite_uses="jax.lax.cond",
            rewrite_lines=3),
        rec("print", "failed", interop_outcome="wrong"),
        rec("print", "unsupported", "idiomatic", interop_outcome="refused", rewrite_uses="jax.debug.print",
            rewrite_lines=1),
    ], processes=1)
    m = interop_draw.matrix(c, set()).set_index("program")
    assert m.at["value_branch", "jax compiled"].startswith("refused")
    rw = interop_draw.rewrites(c, set()).set_index("program")
    assert re.fullmatch(r"compiled \([\d.]+ ms\) \[jax.lax.cond, 3 lines\]", rw.at["value_branch", "jax compiled"])
    assert rw.at["print", "jax compiled"].endswith("[jax.debug.print, 1 line]")
    # value_branch: max(0.5 refused, 0.75 x 1 compiled rewrite); print: max(0 wrong, 0.75 x 0.5 refused rewrite)
    assert interop.score(c, ["jax"], set()) == {"jax": pytest.approx((0.75 + 0.375) / 2)}
    (line,) = interop.findings(c, _fam(c), set())
    assert line == ("jax compiled: of 2 programs as written, 1 refused, 1 wrong; of 2 idiomatic rewrites, "
                    "1 compile whole and correct (3 lines changed).")
    # the summary's sentence: a mode JAX lacks (recorded unsupported, "jax has no 'graph' mode") is no refusal
    lack = _cases(tmp_path / "lack", [
        rec("print", "failed", interop_outcome="wrong"),
        ({"framework": "jax", "mode": "graph", "workload": "interop", "task": "print", "status": "unsupported",
          "reason": "jax has no 'graph' mode (it has eager, compiled)"}, None),
        rec("print", "ok", "idiomatic", 0.001, interop_outcome="compiled", rewrite_uses="jax.debug.print",
            rewrite_lines=1)], processes=1)
    (line,) = [x for x in summary.section_sentences(lack, _fam(lack)) if x.startswith("Python interop")]
    assert "jax 1 wrong (rewrites in the table)" in line and "refused" not in line, line
    assert line.rows == (("Python interop: rewritten", "jax", "1 more compiled once rewritten in its own idiom, "
                                                              "1 line each"),)


def _der(fw, mode, task, strategy, med, status="ok", **fields):
    return ({"framework": fw, "mode": mode, "workload": "derivatives", "task": task, "strategy": strategy,
             "status": status, "reason": None if status == "ok" else "RuntimeError: double backward",
             "fields": fields}, med if status in ("ok", "fallback") else None)


def test_der_time_draws_each_framework_and_modes_fastest_transform_over_sizes(tmp_path):
    """Issue 41: 19 transform markers x 3 line styles read as noise. der_time draws one line per
    framework and mode through its fastest transform at each size, and no problem measured at one size."""
    c = _cases(tmp_path, [
        _der("torch", "compiled", "per_sample_grad_mlp_b8", "vmap", 0.001, batch=8),
        _der("torch", "compiled", "per_sample_grad_mlp_b8", "loop", 0.008, batch=8),
        _der("torch", "compiled", "per_sample_grad_mlp_b32", "vmap", 0.009, batch=32),
        _der("torch", "compiled", "per_sample_grad_mlp_b32", "loop", 0.004, batch=32),
        _der("jax", "compiled", "per_sample_grad_mlp_b8", "vmap", 0.002, batch=8),
        _der("jax", "compiled", "per_sample_grad_mlp_b32", "vmap", 0.003, batch=32),
        _der("jax", "compiled", "hvp_mlp", "fwd_rev", 0.002, params=100),
    ])
    fig = derivatives_draw.fig_der_time(c)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["per_sample_grad_mlp"]
    lines = [ln for ln in panels[0].get_lines() if len(ln.get_xdata()) > 1]
    ys = sorted([round(float(y), 3) for y in ln.get_ydata()] for ln in lines)
    assert ys == [[0.001, 0.004], [0.002, 0.003]]        # torch: vmap at b8, the loop at b32; jax: vmap


def test_derivatives_section_vmap_speedup_and_capability(tmp_path):
    c = _cases(tmp_path, [
        _der("torch", "compiled", "per_sample_grad_mlp_b8", "vmap", 0.001, batch=8),
        _der("torch", "compiled", "per_sample_grad_mlp_b8", "loop", 0.008, batch=8),
        _der("jax", "compiled", "per_sample_grad_mlp_b8", "vmap", 0.00102, batch=8),
        _der("jax", "compiled", "per_sample_grad_mlp_b8", "loop", 0.00104, batch=8),
        _der("torch", "compiled", "hvp_mlp", "fwd_rev", 0.002, params=100, peak_memory_bytes=2 ** 22,
             peak_memory_source="peak RSS delta in a fresh process"),
        _der("torch", "compiled", "hvp_mlp", "rev_rev", 0.002, params=100, peak_memory_bytes=2 ** 24,
             peak_memory_source="peak RSS delta in a fresh process"),
        _der("torch", "compiled", "nth_derivative_2", "autograd", None, status="failed", derivative_order=2),
        _der("torch", "compiled", "nth_derivative_2", "grad", 0.001, derivative_order=2),
    ])
    lines = derivatives.findings(c, _fam(c))
    assert any(s.startswith("per_sample_grad_mlp_b8: torch compiled vmap is faster than the loop over examples by "
                            "at least the 10% margin") for s in lines)
    # jax's vmap is within 2% of its loop: not stated as a difference
    assert not any("jax compiled vmap is" in s for s in lines)
    assert any("Against the loop over examples, no stated difference" in s and "jax compiled vmap" in s for s in lines)
    mem = next(s for s in lines if "peak memory" in s)
    assert mem.startswith("hvp_mlp peak memory, torch compiled (peak RSS delta in a fresh process): fwd_rev 4.0 MiB, "
                          "rev_rev 16.0 MiB: fwd_rev is smaller than rev_rev by at least the 10% margin (memory "
                          "ratio 0.25x")
    cap = derivatives_draw.capability(c, set()).set_index(["problem", "transform"])
    assert cap.at[("nth_derivative", "autograd"), "torch compiled"] == "failed: RuntimeError: double backward"
    assert cap.at[("per_sample_grad_mlp", "vmap"), "jax compiled"] == "ok"
    figs = drawings.draw(c, tmp_path / "fig")
    for name in ("der_vmap", "der_order", "der_memory"):
        assert figs[name][0] is not None, name
    # every problem here ran at one size: a point, not a line (issue 41), so der_time says so instead
    assert figs["der_time"] == (None, "The der_time figure: not drawn, no case has the values it plots.")
    # documented score: mean of speed (geomean over tasks two frameworks ran of best time ratios)
    # and coverage (share of (task, eager | accelerated) slots run with some transform)
    s = derivatives.score(c, ["torch", "jax"], set())
    # torch fastest on the one shared task; it ran all 3 task slots (nth_derivative by grad)
    assert s["torch"] == pytest.approx((1.0 + 3 / 3) / 2)
    jax_speed = c.loc[(c["framework"] == "torch") & (c["strategy"] == "vmap"), "median_s"].iloc[0] / \
        c.loc[(c["framework"] == "jax") & (c["strategy"] == "vmap"), "median_s"].iloc[0]
    assert 0.9 < jax_speed < 1 and s["jax"] == pytest.approx((jax_speed + 1 / 3) / 2)   # 1 of 3 slots


def test_concern_weights_names_and_one_line_errors():
    w = findings.parse_weights("dynamic=2,interop=0,derivatives=3")
    assert (w["dynamic"], w["interop"], w["derivatives"]) == (2.0, 0.0, 3.0)
    with pytest.raises(FwbenchError) as e:
        findings.parse_weights("dynamic_shapes=1")
    msg = str(e.value)
    assert "\n" not in msg and "valid are throughput, compile, coverage, dynamic, interop, derivatives" in msg


def test_cli_help_names_every_concern(capsys):
    """--weights' help lists findings.CONCERNS (the sections' from the registry) with each
    section's label, read when help is printed."""
    from reports import sections
    from reports.commands import cli
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "concerns: " + ", ".join(findings.CONCERNS) + " (" in text
    assert findings.CONCERNS[3:] == sections.CONCERNS == ("dynamic", "interop", "derivatives")
    for s in (s for s in sections.SECTIONS if s.concern):
        assert f"{s.concern}: {s.concern_label}" in text


def test_ranking_and_sensitivity_with_the_axes(tmp_path):
    c = _cases(tmp_path, [
        _dyn("torch", "compiled", None, 1.0, 0.1, 0.001), _dyn("jax", "compiled", None, 2.0, 0.1, 0.001),
        ({"framework": "torch", "mode": "compiled", "workload": "interop", "task": "print",
          "fields": {"interop_outcome": "compiled"}}, 0.001),
        ({"framework": "jax", "mode": "compiled", "workload": "interop", "task": "print", "status": "unsupported",
          "reason": "TracerBoolConversionError"}, None),
    ])
    rank, _ = findings.ranking(c, findings.parse_weights(None))
    jax_dyn = rank.at["jax", "dynamic"]
    assert rank.at["torch", "dynamic"] == pytest.approx(1.0) and 0.5 < jax_dyn < 0.7     # the served-cost ratio
    assert rank.at["jax", "interop"] == pytest.approx(0.5)
    sens = findings.sensitivity(rank)
    assert sens.at["torch", "ranks first under"] > 0 and "dynamic shapes" in sens.at["torch", "leads on"]
    only_dyn, _ = findings.ranking(c, findings.parse_weights(
        "throughput=0,compile=0,coverage=0,dynamic=1,interop=0,derivatives=0"))
    assert only_dyn["overall"].to_dict() == pytest.approx({"torch": 1.0, "jax": jax_dyn})
    text = " ".join(findings.flip_sentences(rank, findings.parse_weights(None)))
    assert "torch ranks above jax" in text and "dynamic shapes (+" in text


def test_record_helper_fields_stay_scalar():
    # the fixture's per-process fields are record keys the harness writes as scalars
    rec = record("torch", "prefill", "compiled", workload="dynamic", **stream_fields(1.0, 0.1, 0.01))
    assert all(isinstance(v, (str, int, float, bool, type(None))) for v in rec.values())


def test_jacobian_crossover_is_stated_only_where_decided(tmp_path):
    c = _cases(tmp_path, [
        _der("torch", "compiled", "jacobian_n100_m10", "jacrev", 0.001, n=100, m=10),
        _der("torch", "compiled", "jacobian_n100_m10", "jacfwd", 0.004, n=100, m=10),
        _der("torch", "compiled", "jacobian_n10_m100", "jacrev", 0.004, n=10, m=100),
        _der("torch", "compiled", "jacobian_n10_m100", "jacfwd", 0.00401, n=10, m=100),
    ])
    line = next(s for s in derivatives.findings(c, _fam(c)) if s.startswith("Jacobian"))
    assert "100->10: jacrev faster (jacfwd's speed 0.25x" in line
    assert re.search(r"10->100: (equivalent within \+-10%|inconclusive)", line)


def test_rendered_report_has_the_axes_sections_and_their_method(tmp_path):
    folder = axis_folder(tmp_path / "res", [
        _dyn("torch", "compiled", None, 1.0, 0.1, 0.001), _dyn("jax", "compiled", None, 2.0, 0.1, 0.001),
        ({"framework": "jax", "mode": "compiled", "workload": "interop", "task": "print", "status": "unsupported",
          "reason": "TracerBoolConversionError: boolean of a tracer"}, None),
        _der("torch", "compiled", "hvp_mlp", "fwd_rev", 0.002, params=100)])   # no peak memory recorded
    paths = reports.render(reports.load(folder), tmp_path / "out")
    md = paths["md"].read_text(encoding="utf-8")
    for head in ("## Dynamic shapes", "## What could not be compiled (Python interop)", "## Derivatives and vmap"):
        assert head in md
    assert "refused: TracerBoolConversionError: boolean of a tracer" in md
    assert "The der_memory figure: not drawn, the records lack peak_memory_bytes." in md
    assert "The der_vmap figure: not drawn, no case has the values it plots." in md     # no loop baseline
    assert "Python interop (weight name interop)" in md and "dynamic shapes, cold pass:" in md
    assert (tmp_path / "out" / "figures" / "dyn_compilations.png").exists()
    assert "procs_" not in paths["cases_csv"].read_text(encoding="utf-8")


def test_dynamic_table_without_its_fields_is_a_note(tmp_path):
    c = _cases(tmp_path, [({"framework": "torch", "mode": "compiled", **DYN}, 0.01)], processes=1)
    blocks = drawings.blocks(c, c, {}, _fam(c))
    assert ("p", "The dynamic-shapes table: not shown, the records lack stream_cold_s, distinct_shapes.") in blocks
    assert not any(b[0] == "table" for b in blocks)


def test_a_per_process_value_needs_two_processes_for_an_interval():
    from reports.measures import stats
    one = stats.Est.of({"p0": 1.0})
    assert all(v != v for v in one.interval()) and one.draws("x") is None
    assert stats.ratio(one, stats.Est.of({"q0": 1.0, "q1": 1.1})).kind == "untested"
    e = stats.Est.of({"p0": 1.0, "p1": 1.1, "p2": 1.2})
    lo, hi = e.interval()
    assert lo < e.value < hi and (e.draws("x") == e.draws("x")).all()     # seeded: the same report twice


def test_a_fourth_section_is_one_registration_read_everywhere(tmp_path, monkeypatch):
    """The document, the family of comparisons, the Summary and the Method read the
    registry (reports.sections.SECTIONS, the judging halves) and its drawing halves
    (reports.rendering.sections.DRAWINGS, by name): a new workload's Section shows up in each."""
    from reports import sections
    from reports.rendering.sections.common import Drawing, Table
    from reports.sections.common import Section
    c = _cases(tmp_path, [({"framework": fw, "mode": "compiled", "workload": "toy", "task": "t"}, 0.01)
                          for fw in ("torch", "jax")], processes=2)
    stated = []

    def toy_findings(d, fam, lacking):
        stated.append(len(d))
        return [f"{len(d)} toy cases"]
    toy = Section(name="toy", workload="toy", findings=toy_findings, no_findings="none", concern="toy",
                  concern_label="toy axis", score=lambda d, fws, lacking: {}, scoring="Toy.",
                  summary=lambda d, fam, lacking: ["Toy summary."])
    monkeypatch.setattr(sections, "SECTIONS", (*sections.SECTIONS, toy))
    monkeypatch.setattr(sections, "WORKLOADS", (*sections.WORKLOADS, "toy"))
    with pytest.raises(KeyError, match="no drawing half"):
        drawings.blocks(c, c, {}, _fam(c))
    monkeypatch.setitem(drawings.DRAWINGS, "toy", Drawing(
        name="toy", title="Toy axis", tables=(Table(lambda d, lacking: d[["framework"]], "Toy.", "toy"),),
        method=("toy: how it is measured.",)))
    c = _cases(tmp_path, [({"framework": fw, "mode": "compiled", "workload": "toy", "task": "t"}, 0.01)
                          for fw in ("torch", "jax")], processes=2)
    stated.clear()
    fam = _fam(c)
    assert stated == [2, 2]                     # both passes of the family ran its findings
    blocks = drawings.blocks(c, c, {}, fam)
    assert blocks[0] == ("h", 2, "Toy axis") and blocks[1][0] == "table" and blocks[-1] == ("ul", ["2 toy cases"])
    assert summary.section_sentences(c, fam) == ["Toy summary."]
    assert "toy: how it is measured." in method.method_lines(c, fam)
    assert "toy" not in findings.findings(c)    # its section states its own findings

"""The report as its reader meets it (issue 18): every figure of the committed examples
reads at print size (no overlapping tick or annotation labels, no text cut off, no truncated
caption), and the framework choice is not decided by bookkeeping (a variant only one
framework has changes no other framework's score)."""
from __future__ import annotations

from pathlib import Path

import pytest

import reports
from reports import sections
from reports.conclusions import findings, replicates
from reports.rendering import figures
from reports.rendering import sections as drawings
from reports.sections.common import has
from reports.util import escape
from tests.support.reports_fixtures import simulated_processes

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
FOLDERS = {"cpu-2core": [EXAMPLES / "cpu-2core"],
           "cpu-2core-axes": [EXAMPLES / "cpu-2core-axes" / "dynamic", EXAMPLES / "cpu-2core-axes" / "derivatives"],
           "cpu-2core-serving": [EXAMPLES / "cpu-2core-serving"]}


@pytest.mark.parametrize("example", sorted(FOLDERS))
def test_every_figure_of_the_examples_reads(example):
    paths = [p for p in FOLDERS[example] if p.is_dir()]
    if not paths:
        pytest.skip(f"no committed example {example}")
    c = replicates.cases(reports.load(paths))
    findings.prepare(c)
    d = escape.mpl_frame(c)
    drawn = []
    for name, (fn, caption) in figures.FIGURES.items():
        if figures.too_big(name, d) is None and (fig := fn(d)) is not None:
            drawn.append((name, fig, caption))
    for s in sections.SECTIONS:
        w = s.cases(d)
        for plot in drawings.drawing(s).figures:
            if not w.empty and has(w, *plot.needs) and (fig := plot.draw(w)) is not None:
                drawn.append((plot.name, fig, plot.caption))
    assert len(drawn) >= 5
    for name, fig, caption in drawn:
        figures.declutter(fig)
        assert figures.label_problems(fig) == [], name
        assert not caption.rstrip().endswith(("...", "…")) and caption.rstrip().endswith((".", ")")), name


def test_label_problems_sees_overlapping_ticks():
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2, 2))
    ax = fig.subplots()
    ax.set_xticks([0, 1, 2], ["a long tick label", "another long tick label", "and a third one"])
    assert any("overlaps" in p for p in figures.label_problems(fig))
    figures.declutter(fig)
    assert not any("overlaps" in p for p in figures.label_problems(fig))


def test_slanting_a_log_axis_labels_keeps_its_view():
    """declutter rewrites the tick labels with set_xticks, which widens the view to every tick
    it is given: a log axis's locator has ticks beyond the data (the first-call figure's x axis
    ran to 0.0001 with nothing there)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2.2, 2), layout="constrained")
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.plot([1.2e-3, 4e-2], [1, 2])
    figures.plain_log_labels(fig)
    lim = ax.get_xlim()
    assert any("overlaps" in p for p in figures.label_problems(fig))
    assert figures.declutter(fig) and ax.get_xlim() == lim and figures.label_problems(fig) == []
    assert figures.declutter(fig) is False          # nothing left to slant


def _model_medians(slow: float) -> dict:
    return {("gpt", t, m): 0.01 * slow * (2.0 if m == "eager" else 1.0) for t in ("forward", "train_step")
            for m in ("eager", "compiled")}


def test_a_variant_one_framework_has_changes_no_other_frameworks_score(tmp_path):
    for fw, slow in (("torch", 1.0), ("jax", 1.2)):
        simulated_processes(tmp_path / "a", fw, _model_medians(slow), cold=1, warm=3, seed=len(fw))
    before = findings.scores(reports.load(tmp_path / "a"))
    # the same runs, plus a torch-only train-step recipe (a strategy) that is much faster
    for fw, slow in (("torch", 1.0), ("jax", 1.2)):
        simulated_processes(tmp_path / "b", fw, _model_medians(slow), cold=1, warm=3, seed=len(fw))
    import json
    for f in sorted((tmp_path / "b").glob("torch-*.json")):
        doc = json.loads(f.read_text())
        extra = json.loads(json.dumps(next(b for b in doc["benchmarks"] if b["params"]["task"] == "train_step"
                                          and b["params"]["mode"] == "compiled")))
        extra["extra_info"]["strategy"] = "compiled-adamw"
        extra["stats"]["data"] = [t / 3 for t in extra["stats"]["data"]]
        extra["stats"]["median"] /= 3
        doc["benchmarks"].append(extra)
        f.write_text(json.dumps(doc))
    after = findings.scores(reports.load(tmp_path / "b"))
    for concern in ("throughput", "compile", "coverage"):
        assert after.at["jax", concern] == pytest.approx(before.at["jax", concern]), concern
        assert after.at["torch", concern] == pytest.approx(before.at["torch", concern]), concern
    assert before.at["jax", "coverage"] == 1.0

"""The report as its reader meets it (issue 18): every figure of the committed examples
reads at print size (no overlapping tick or annotation labels, no text cut off, no truncated
caption), and the framework choice is not decided by bookkeeping (a variant only one
framework has changes no other framework's score)."""
from __future__ import annotations

import pytest

import reports
from reports import sections
from reports.conclusions import findings
from reports.rendering import figures
from reports.rendering import sections as drawings
from tests.support.reports_fixtures import simulated_processes
from tests.support.shared import EXAMPLE_RUNS, has_example, rendered_example


@pytest.mark.parametrize("example", sorted(EXAMPLE_RUNS))
def test_every_figure_of_the_examples_reads(example):
    """The example rendered as `fwbench report` renders it (tests/support/shared.py: once per
    test run): render measured each figure it saved, as its PNG drew it (figures.save:
    label_problems after declutter), and found nothing that would not read."""
    if not has_example(example):
        pytest.skip(f"no committed example {example}")
    out, paths = rendered_example(example)
    assert len(list((out / "figures").glob("*.png"))) >= 5
    assert paths["figure_problems"] == {}


def test_every_figure_caption_is_whole():
    captions = [caption for _, caption in figures.FIGURES.values()]
    captions += [plot.caption for s in sections.SECTIONS for plot in drawings.drawing(s).figures]
    assert len(captions) >= 5
    for caption in captions:
        assert not caption.rstrip().endswith(("...", "\u2026")) and caption.rstrip().endswith((".", ")")), caption


def test_render_returns_what_of_a_saved_figure_would_not_read(tmp_path):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2, 2))
    ax = fig.subplots()
    ax.text(0.2, 0.5, "one annotation here")
    ax.text(0.25, 0.5, "and another one on it")
    with figures.problems_of_saved() as found:
        figures.save(fig, tmp_path, "clash")
    assert list(found) == ["clash"] and any("overlaps" in p for p in found["clash"]), found
    figures.save(fig, tmp_path, "after")                      # no collection open: nothing measured
    assert list(found) == ["clash"]


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

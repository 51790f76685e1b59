"""fwbench reports: result JSON -> tidy DataFrame -> figures, tables and a document.

    >>> import reports
    >>> df = reports.load(["results/"])      # one row per record; df.attrs["problems"] lists skipped input
    >>> reports.render(df, "report/")        # report.md, report.html, tables.tex, data.csv, cases.csv, figures/

Imports no framework (it reads JSON), so reports render where torch, jax or tensorflow
are not installed. The `fwbench` command line lives in reports.cli, `fwbench run` in
reports.running, the statistics and findings in reports.analysis, the axis workloads'
sections in reports.sections (one registration each), figures and documents in
reports.rendering. pandas and seaborn are imported on first use, so the command line and
the pytest plugin (reports.running.pytest_events) start quickly.
"""
from __future__ import annotations

from typing import Any


def load(paths: Any, strict: bool = False) -> Any:
    """Result files or folders -> tidy pandas DataFrame (see reports.analysis.data.load)."""
    from reports.analysis.data import load as load_
    return load_(paths, strict=strict)


def render(df: Any, out_dir: Any, weights: dict[str, float] | None = None, margin: float | None = None,
           pdf: bool | None = None) -> Any:
    """Figures, report.md, report.html, tables.tex, paper.tex (+ references.bib, and
    paper.pdf with `pdf` and a LaTeX engine), data.csv and cases.csv (see
    reports.rendering.document.render); `margin` is the verdicts' equivalence margin
    (default 0.10)."""
    from reports.rendering.document import render as render_
    return render_(df, out_dir, weights, margin, pdf)


__all__ = ["load", "render"]

"""fwbench reports: result JSON -> tidy DataFrame -> figures, tables and a document.

    >>> import reports
    >>> df = reports.load(["results/"])      # one row per record; df.attrs["problems"] lists skipped input
    >>> reports.render(df, "report/")        # report.md, report.html, tables.tex, data.csv, cases.csv, figures/

Imports no framework (it reads JSON), so reports render where torch, jax or tensorflow
are not installed. pandas and seaborn are imported on first use, so the command line and the
pytest plugin (reports.util.pytest_events) start quickly.

Each folder is a layer, bottom up (LAYERS): a module imports only from its own folder and the
folders below it; tests/test_cli_fwbench.py reads the folders, so a new module needs no test
edit, and the modules at this top level (this file, __main__) sit above every folder.
"""
from __future__ import annotations

from typing import Any

LAYERS = (
    "util",         # atomic writes, signals, escaping, the benchmark processes' pytest plugin
    "measures",     # data, validate, stats, verdicts and the numbers the sections judge
    "sections",     # each section's judging half and their registry
    "conclusions",  # replicates, findings, jobs, claims, summary, narrative, compare, variance
    "rendering",    # the drawing halves, figures, the document, the paper
    "commands",     # the fwbench command line and fwbench run
)


def load(paths: Any, strict: bool = False) -> Any:
    """Result files or folders -> tidy pandas DataFrame (see reports.measures.data.load)."""
    from reports.measures.data import load as load_
    return load_(paths, strict=strict)


def render(df: Any, out_dir: Any, weights: dict[str, float] | None = None, margin: float | None = None,
           pdf: bool | None = None) -> Any:
    """Figures, report.md, report.html, tables.tex, paper.tex (+ references.bib, and
    paper.pdf with `pdf` and a LaTeX engine), data.csv and cases.csv (see
    reports.rendering.document.render); `margin` is the verdicts' equivalence margin
    (default 0.10)."""
    from reports.rendering.document import render as render_
    return render_(df, out_dir, weights, margin, pdf)


__all__ = ["LAYERS", "load", "render"]

"""What every workload section uses: the `Section` it registers (reports.sections holds the
registry) and the helpers the sections share.

A section reads records by field name and tolerates a field being absent: it appears when
its workload has records, and a table or figure whose fields are missing is a one-line note
instead, never an error. It works on reports.analysis.replicates.cases (one row per case,
processes pooled); per-process scalars (a stream's cold pass, peak memory) come as
`procs_<field>` ({process: value}, the fields a Section names in `per_process`), so that
intervals over processes and the replication rule (stats.decided) apply to them as to step
times. Its findings state verdicts against the report's margin (stats.verdict) under the
report's one error rate (the stats.Family that reports.analysis.findings.report_family
makes), through reports.analysis.verdicts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from reports.analysis import stats
from reports.rendering import figures as F

SHORT = 60                 # characters of a reason inside a matrix cell

Lacking = set[tuple[str, str]]      # (framework, mode) pairs a framework does not have (data.lacking_modes)


@dataclass(frozen=True)
class Table:
    """A table of a section: `make` builds it from the workload's cases and the modes the
    frameworks lack; an empty frame is left out (kept with keep_empty), and a str returned
    instead is shown as a one-line note (the fields it needs are missing)."""
    make: Callable[[pd.DataFrame, Lacking], pd.DataFrame | str]
    caption: str
    label: str
    keep_empty: bool = False


@dataclass(frozen=True)
class Plot:
    """A figure of a section, drawn from the workload's cases where they hold every field of
    `needs` (else a one-line note); `draw` returns None when no case has the values it plots."""
    name: str                  # its file name under figures/
    draw: Callable[[pd.DataFrame], Figure | None]
    needs: tuple[str, ...]
    caption: str


@dataclass(frozen=True)
class Section:
    """One workload's section of the report, registered once (reports.sections.SECTIONS) and
    read by the document (title, tables, figures, findings, method), the findings (findings
    in the report's family, score and concern), the Summary (summary), the command line
    (concern) and replicates (per_process, series). Every function takes the workload's
    rows of replicates.cases; `lacking` is data.lacking_modes of the whole report."""
    workload: str              # the records' workload field
    title: str                 # the section's heading
    tables: tuple[Table, ...]
    figures: tuple[Plot, ...]
    findings: Callable[[pd.DataFrame, stats.Family, Lacking], list[str]]
    no_findings: str           # said instead when findings has nothing to say
    concern: str               # its framework-choice concern: a --weights name and a ranking column
    concern_label: str         # the concern in the report's words
    score: Callable[[pd.DataFrame, list[str], Lacking], dict[str, float]]   # framework -> [0, 1]
    scoring: str               # how score scores, in words (Choosing a framework)
    summary: Callable[[pd.DataFrame, stats.Family, Lacking], list[str]]     # the Summary's sentences
    method: tuple[str, ...]    # its lines of the Method section
    per_process: tuple[str, ...] = ()   # per-process scalars replicates keeps (procs_<field>)
    series: tuple[str, ...] = ()        # comma-separated per-request series (element-wise median)
    # its timed cases also get the Findings section's comparisons of step times (fastest
    # framework per task, mode against mode, compilation), as a model workload's do
    generic_findings: bool = False


def has_mode(d: pd.DataFrame, lacking: Lacking) -> np.ndarray:
    """Rows whose framework has the mode (data.lacking_modes: n/a, not unsupported)."""
    return np.array([(f, m) not in lacking for f, m in zip(d["framework"], d["mode"])], dtype=bool)


def has(df: pd.DataFrame, *cols: str) -> bool:
    """Every column exists and holds at least one value."""
    return all(c in df.columns and df[c].notna().any() for c in cols)


def missing_note(what: str, df: pd.DataFrame, cols: tuple[str, ...], verb: str = "not drawn") -> str:
    """The one line a report shows for a figure or table whose fields the records lack."""
    lack = [c for c in cols if not has(df, c)]
    return f"{what}: {verb}, the records lack {', '.join(lack)}."


def strategy_label(r: pd.Series | dict[str, Any]) -> str:
    s = r.get("strategy")
    return f"{r['mode']} {s if isinstance(s, str) else 'default'}"


def case_label(r: pd.Series | dict[str, Any]) -> str:
    return f"{r['framework']} {strategy_label(r)}"


def short(text: Any, n: int = SHORT) -> str:
    t = " ".join(str(text).split()) if isinstance(text, str) else ""
    return t if len(t) <= n else t[:n].rstrip() + "..."


def strategy_styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """A colour and marker per strategy label (within a panel the framework is fixed)."""
    pal = F.CB
    marks = "osD^v<>PXh*"
    return {s: (pal[i % len(pal)], marks[i % len(marks)]) for i, s in enumerate(sorted(set(labels)))}

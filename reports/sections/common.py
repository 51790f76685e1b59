"""What every section's judging half uses: the `Section` it registers (reports.sections holds
the registry) and the helpers the sections share. Nothing here draws: a section's tables,
figures, prose and method text are its drawing half (reports.rendering.sections), which
reads this half, never the other way round.

A section reads records by field name and tolerates a field being absent: it appears when
it has cases, and a table or figure whose fields are missing is a one-line note instead,
never an error. It works on reports.conclusions.replicates.cases (one row per case, processes
pooled); per-process scalars (a stream's cold pass, peak memory) come as `procs_<field>`
({process: value}, the fields a Section names in `per_process`), so that intervals over
processes and the replication rule (stats.decided) apply to them as to step times. Its
findings state verdicts against the report's margin (stats.verdict) under the report's one
error rate (the stats.Family that reports.conclusions.findings.report_family makes), through
reports.measures.verdicts; a section with `own_family` (scale-out) judges in a family of
its own.

Two kinds of section share this class:

    workload axis  a workload that steady-state speed does not show (dynamic, interop,
                   derivatives): its cases are its workload's records (`workload`)
    case axis      a field every workload's cases can vary in (precision, placement): its
                   cases are all of them, it compares each variant with its baseline, and
                   `baseline` says which cases every other comparison of the report reads
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from reports.measures import stats

SHORT = 60                 # characters of a reason inside a matrix cell

Lacking = set[tuple[str, str]]      # (framework, mode) pairs a framework does not have (data.lacking_modes)
Judge = Callable[[pd.DataFrame, stats.Family, Lacking], list[str]]


def _nothing(d: pd.DataFrame, fam: stats.Family, lacking: Lacking) -> list[str]:
    return []


@dataclass(frozen=True)
class Section:
    """The judging half of one report section, registered once (reports.sections.SECTIONS)
    and read by the findings (findings in the report's family, score and concern), the
    Summary (summary, scope), the command line (concern), replicates (per_process, series)
    and every comparison of the model workloads (baseline). Every function takes the
    section's cases (`cases`); `lacking` is data.lacking_modes of the whole report."""
    name: str                  # the registry key, shared with its drawing half
    workload: str | None = None         # a workload axis: the records' workload field; None: a case axis
    findings: Judge = _nothing          # sentences, its comparisons judged in the report's family
    no_findings: str = ""      # said instead when findings has nothing to say
    summary: Judge = _nothing           # the Summary's sentences
    concern: str | None = None          # its framework-choice concern: a --weights name and a ranking column
    concern_label: str = ""    # the concern in the report's words
    score: Callable[[pd.DataFrame, list[str], Lacking], dict[str, float]] | None = None   # framework -> [0, 1]
    scoring: str = ""          # how score scores, in words (Choosing a framework)
    per_process: tuple[str, ...] = ()   # per-process scalars replicates keeps (procs_<field>)
    series: tuple[str, ...] = ()        # comma-separated per-request series (element-wise median)
    # its timed cases also get the Findings section's comparisons of step times (fastest
    # framework per task, mode against mode, compilation), as a model workload's do
    generic_findings: bool = False
    # a case axis: a frame's cases at the axis' baseline (fp32, one device); the model
    # workloads' comparisons, scores and Summary read those only
    baseline: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    # judged in a family of its own from every case (its `summary` gets a family of the
    # report's margin but reads only its margin); the report's family reads the baseline
    own_family: bool = False
    scope: Callable[[pd.DataFrame], str] | None = None     # its words for the Summary's scope ('' : none)

    def cases(self, df: pd.DataFrame) -> pd.DataFrame:
        """Its cases: its workload's, or (a case axis) all of them."""
        return df[df["workload"] == self.workload] if self.workload is not None else df


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

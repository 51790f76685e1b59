"""The precision section's judging half (a case axis: workloads/precision.py): every case
at a precision other than fp32 against the same case at fp32 (reports.measures.precision,
paired over the processes that ran both). Its comparisons join the report's family; their
verdicts are in its table (reports.rendering.sections.precision), so it states no findings
list. The model workloads' comparisons, scores and Summary read the fp32 cases (baseline).
"""
from __future__ import annotations

import pandas as pd

from reports.measures import precision, stats
from reports.sections.common import Lacking, Section


def findings(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """Judges every variant against its fp32 case in the report's family (the verdicts are
    in the section's table)."""
    precision.table(d, fam)
    return []


def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    return precision.sentence(d, fam)


SECTION = Section(name="precision", findings=findings, summary=summary, baseline=precision.default_only)

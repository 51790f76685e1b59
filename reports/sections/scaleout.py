"""The scale-out section's judging half (a case axis: workloads/parallel.py): data-parallel
train steps against the same step on one device (reports.measures.scaleout), judged in a
Holm family of the section's own, from every case. Every other comparison of the report
reads the one-device cases (baseline); its tables and prose are its drawing half
(reports.rendering.sections.scaleout).
"""
from __future__ import annotations

import pandas as pd

from reports.measures import scaleout, stats
from reports.sections.common import Lacking, Section


def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """The Summary's lines on scale-out (its own family, at the report's margin)."""
    return scaleout.sentence(d, fam.margin)


def baseline(d: pd.DataFrame) -> pd.DataFrame:
    """The one-device cases."""
    return scaleout.split(d)[0]


SECTION = Section(name="scaleout", summary=summary, baseline=baseline, own_family=True, scope=scaleout.scope)

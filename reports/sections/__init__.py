"""The report's sections, one registry for all of them: the judging half of each (its
findings, score and concern, Summary sentences, per-process fields, and for a case axis the
comparison of each variant with its baseline) is registered here; its drawing half (title,
tables, figures, prose, method text) in reports.rendering.sections, under the same name.
reports.conclusions (findings and ranking, Summary, replicates) and the command line read
SECTIONS; the document reads both halves.

    dynamic       workload axis: dynamic shapes, requests of varying shapes (workloads/dynamic.py)
    interop       workload axis: what could not be compiled, Python mixed with tensors (workloads/interop.py)
    derivatives   workload axis: higher-order derivatives and vmap (workloads/derivatives.py)
    serving       workload axis: deployable artefacts against the development path, claim 6 (workloads/serving.py)
    precision     case axis: each policy besides fp32 against fp32 (workloads/precision.py; reports.measures.precision)
    scaleout      case axis: data parallel against one device (workloads/parallel.py; reports.measures.scaleout)

The model workloads (gpt, diffusion: every workload without a section), at every case
axis' baseline, are the report's generic tables and figures. A new section is one module
here that ends in `SECTION = Section(...)`, its SECTION added below in the order of the
report, and its drawing half (reports/rendering/sections/).

This folder is one layer of reports.LAYERS: a judging half imports reports.measures and
reports.util only; reports.conclusions and reports.rendering read it (docs/ARCHITECTURE.md).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from reports.sections import derivatives, dynamic, interop, precision, scaleout, serving
from reports.sections.common import Section

SECTIONS: tuple[Section, ...] = (dynamic.SECTION, interop.SECTION, derivatives.SECTION, serving.SECTION,
                                 precision.SECTION, scaleout.SECTION)

WORKLOADS = tuple(s.workload for s in SECTIONS if s.workload is not None)
CASE_AXES = tuple(s for s in SECTIONS if s.workload is None)
CONCERNS = tuple(s.concern for s in SECTIONS if s.concern is not None)
# Per-process scalars and per-request series of any section: replicates keeps them per process.
PER_PROCESS = tuple(dict.fromkeys(f for s in SECTIONS for f in s.per_process))
SERIES = tuple(dict.fromkeys(f for s in SECTIONS for f in s.series))


def concern_label(concern: str) -> str:
    """A concern in the report's words: a section's label, else its own name."""
    return next((s.concern_label for s in SECTIONS if s.concern == concern), concern)


def baseline(df: pd.DataFrame, own_family: bool | None = None) -> pd.DataFrame:
    """The cases at every case axis' baseline (of those with own_family as given; None:
    all): the cases the model workloads' comparisons, scores and Summary read."""
    for s in CASE_AXES:
        if s.baseline is not None and own_family in (None, s.own_family):
            df = s.baseline(df)
    return df


def at_baseline(df: pd.DataFrame) -> np.ndarray:
    """Which rows of a frame of replicates.cases (unique index) are at every baseline."""
    return df.index.isin(baseline(df).index)


def judged_in_report(every: pd.DataFrame) -> pd.DataFrame:
    """The cases of the report's one family: every case but those of a section judged in a
    family of its own (scale-out's data-parallel cases)."""
    return baseline(every, own_family=True)


def summary_order() -> tuple[Section, ...]:
    """The Summary's order: the case axes judged in the report's family (they qualify the
    model workloads' sentences), the workload axes, then those judged in a family of their
    own (after the Summary's cap on key findings)."""
    return (*(s for s in CASE_AXES if not s.own_family), *(s for s in SECTIONS if s.workload is not None))


__all__ = ["CASE_AXES", "CONCERNS", "PER_PROCESS", "SECTIONS", "SERIES", "WORKLOADS", "Section", "at_baseline",
           "baseline", "concern_label", "judged_in_report", "summary_order"]

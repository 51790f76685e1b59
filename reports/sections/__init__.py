"""The report's workload sections: one module per axis workload that steady-state speed does
not show, each registering one `Section` (reports.sections.common): its title, tables,
figures, findings, Summary sentences, framework-choice concern with its score, method text
and the per-process fields replicates keeps. The document, the findings and ranking, the
Summary, the command line and replicates read SECTIONS and nothing else about them.

    dynamic       dynamic shapes: requests of varying shapes (workloads/dynamic.py)
    interop       what could not be compiled: Python mixed with tensors (workloads/interop.py)
    derivatives   higher-order derivatives and vmap (workloads/derivatives.py)

The model workloads (gpt, diffusion: every workload without a section) are the report's
generic tables and figures. A new axis workload is one module here that ends in
`SECTION = Section(...)`, and its SECTION added below, in the order of the report.
"""
from __future__ import annotations

from reports.sections import derivatives, dynamic, interop
from reports.sections.common import Section

SECTIONS: tuple[Section, ...] = (dynamic.SECTION, interop.SECTION, derivatives.SECTION)

WORKLOADS = tuple(s.workload for s in SECTIONS)
CONCERNS = tuple(s.concern for s in SECTIONS)
# Per-process scalars and per-request series of any section: replicates keeps them per process.
PER_PROCESS = tuple(dict.fromkeys(f for s in SECTIONS for f in s.per_process))
SERIES = tuple(dict.fromkeys(f for s in SECTIONS for f in s.series))


def concern_label(concern: str) -> str:
    """A concern in the report's words: a section's label, else its own name."""
    return next((s.concern_label for s in SECTIONS if s.concern == concern), concern)


__all__ = ["CONCERNS", "PER_PROCESS", "SECTIONS", "SERIES", "WORKLOADS", "Section", "concern_label"]

"""The drawing halves of the report's sections, registered by the names of their judging
halves (reports.sections.SECTIONS, whose order is the report's): the document reads the
blocks and figures of every section that has cases from here.

    dynamic, interop, derivatives, serving
                                    workload axes: heading, tables, figures, findings list
    precision, scaleout             case axes: their own blocks (prose and tables)

A new section's drawing half is one module here that ends in `DRAWING = Drawing(...)`
(reports.rendering.sections.common), added to DRAWINGS below.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports import sections
from reports.measures import data as rdata
from reports.measures import stats
from reports.rendering import figures
from reports.rendering.sections import derivatives, dynamic, interop, precision, scaleout, serving
from reports.rendering.sections.common import Block, Drawing, figure_block
from reports.sections.common import Section, has, missing_note
from reports.util import escape

DRAWINGS: dict[str, Drawing] = {d.name: d for d in (dynamic.DRAWING, interop.DRAWING, derivatives.DRAWING,
                                                     serving.DRAWING, precision.DRAWING, scaleout.DRAWING)}


def drawing(s: Section) -> Drawing:
    """A section's drawing half; a section registered without one is one clear error."""
    if s.name not in DRAWINGS:
        raise KeyError(f"report section {s.name!r} has no drawing half: add its DRAWING to "
                       "reports/rendering/sections/__init__.py (DRAWINGS)")
    return DRAWINGS[s.name]


def _frame(s: Section, df: pd.DataFrame, every: pd.DataFrame) -> pd.DataFrame:
    """A section's cases: from every case where it judges in a family of its own, else
    from the report's."""
    return s.cases(every if s.own_family else df)


def blocks(df: pd.DataFrame, every: pd.DataFrame, figs: dict[str, tuple[Path | None, str]],
           fam: stats.Family) -> list[Block]:
    """Every registered section, in the registry's order, where it has cases: a case axis'
    own blocks; a workload axis' title, tables, figures and findings (a table or figure
    without its fields is a one-line note)."""
    b: list[Block] = []
    lacking = rdata.lacking_modes(df)
    for s in sections.SECTIONS:
        d, dr = _frame(s, df, every), drawing(s)
        if d.empty:
            continue
        if dr.blocks is not None:          # a case axis: its blocks, then its figures that were drawn
            b += dr.blocks(d, fam)
            b += [x for plot in dr.figures if figs.get(plot.name, (None,))[0] is not None
                  for x in figure_block(figs, plot.name)]
            continue
        b.append(("h", 2, dr.title))
        for t in dr.tables:
            made = t.make(d, lacking)
            if isinstance(made, str):
                b.append(("p", made))
            elif t.keep_empty or not made.empty:
                b.append(("table", made, t.caption, t.label))
        for plot in dr.figures:
            b += figure_block(figs, plot.name)
        b.append(("ul", s.findings(d, fam, lacking) or [s.no_findings]))
    return b


def draw(cases: pd.DataFrame, out_dir: Path) -> dict[str, tuple[Path | None, str]]:
    """Each section's figures where it has cases: (PNG, caption), or (None, a one-line
    note) when the records lack its fields or it has nothing to draw."""
    df = escape.mpl_frame(cases)
    done: dict[str, tuple[Path | None, str]] = {}
    for s in sections.SECTIONS:
        d = s.cases(df)
        if d.empty:
            continue
        for plot in drawing(s).figures:
            if not has(d, *plot.needs):
                done[plot.name] = (None, missing_note(f"The {plot.name} figure", d, plot.needs))
                continue
            fig = plot.draw(d)
            if fig is None:
                done[plot.name] = (None, f"The {plot.name} figure: not drawn, no case has the values it plots.")
                continue
            png, _ = figures.save(fig, out_dir, plot.name)
            done[plot.name] = (png, plot.caption)
    return done


def method(df: pd.DataFrame) -> list[str]:
    """The Method section's lines of every section that has cases."""
    return [t for s in sections.SECTIONS if not s.cases(df).empty for t in drawing(s).method]


__all__ = ["DRAWINGS", "Block", "Drawing", "blocks", "draw", "drawing", "method"]

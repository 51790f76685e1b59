"""What every section's drawing half uses: the `Drawing` it registers (its registry is
reports.rendering.sections, keyed by the names of reports.sections.SECTIONS), its `Table`s
and `Plot`s, the document's `Block`s, and the helpers the drawings share. A drawing reads
its judging half (reports.sections), the measures and the conclusions; nothing below reads a drawing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from reports.measures import stats
from reports.rendering import figures as F
from reports.sections.common import Lacking

# ("h", level, text) | ("p", text) | ("ul", [text]) | ("table", df, caption, label) | ("fig", name, png, caption)
Block = tuple


@dataclass(frozen=True)
class Table:
    """A table of a section: `make` builds it from the section's cases and the modes the
    frameworks lack; an empty frame is left out (kept with keep_empty), and a str returned
    instead is shown as a one-line note (the fields it needs are missing)."""
    make: Callable[[pd.DataFrame, Lacking], pd.DataFrame | str]
    caption: str
    label: str
    keep_empty: bool = False


@dataclass(frozen=True)
class Plot:
    """A figure of a section, drawn from the section's cases where they hold every field of
    `needs` (else a one-line note); `draw` returns None when no case has the values it plots."""
    name: str                  # its file name under figures/
    draw: Callable[[pd.DataFrame], Figure | None]
    needs: tuple[str, ...]
    caption: str


@dataclass(frozen=True)
class Drawing:
    """The drawing half of one report section (its judging half: reports.sections, the same
    `name`), read by the document. A workload axis: its heading, tables, figures, then its
    judging half's findings as a list (or no_findings). A case axis draws its own blocks
    (`blocks`: heading, prose and tables, [] where it has nothing to show) from its cases,
    the report's family and the report's margin. `method`: its lines of the Method section."""
    name: str
    title: str = ""
    tables: tuple[Table, ...] = ()
    figures: tuple[Plot, ...] = ()
    method: tuple[str, ...] = ()
    blocks: Callable[[pd.DataFrame, stats.Family], list[Block]] | None = None


def strategy_styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """A colour and marker per strategy label, the same in every panel of a figure (call it
    once over the figure's labels); more labels than the colourblind palette's 10 take tab20's
    20 colours, so no two labels share a colour up to 20."""
    n = len(set(labels))
    pal = F.CB if n <= len(F.CB) else sns.color_palette("tab20").as_hex()
    return {s: (pal[i % len(pal)], MARKS[i % len(MARKS)]) for i, s in enumerate(sorted(set(labels)))}


# Marker shapes that stay distinct at 4 points ('o', 'h', 'H' and '8' all read as a circle):
# filled shapes only, none a near-circle but the circle itself.
MARKS = "osD^vP*X<>pd"


def figure_block(figs: dict[str, tuple[Path | None, str]], name: str) -> list[Block]:
    """A figure's block; a note instead where it was not drawn (too large to read, or its
    fields missing)."""
    if name not in figs:
        return []
    png, text = figs[name]
    return [("fig", name, png, text)] if png is not None else [("p", text)]

"""The document's blocks (reports.rendering.sections.common.Block) written three ways, and the
tidy frame as CSV: report.md (figures linked from figures/*.png, PDF beside each),
report.html (self-contained: CSS inline, figures embedded as base64 PNG), tables.tex (every
table as a booktabs `table` environment, reports.rendering.latex) and data.csv / cases.csv
(same JSON in, same bytes out).
"""
from __future__ import annotations

import base64
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from reports.rendering import latex
from reports.rendering.sections.common import Block
from reports.util import escape


def _text(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def _md_cell(x: Any) -> str:
    return escape.markdown(_text(x))


def markdown(blocks: list[Block], out_dir: Path) -> str:
    out = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            out.append("#" * blk[1] + " " + _md_cell(blk[2]))
        elif kind == "p":
            out.append(_md_cell(blk[1]))
        elif kind == "ul":
            out.append("\n".join(f"- {_md_cell(x)}" for x in blk[1]))
        elif kind == "table":
            t = blk[1]
            lines = ["| " + " | ".join(map(_md_cell, t.columns)) + " |", "|" + "---|" * len(t.columns)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in t.itertuples(index=False)]
            out.append("\n".join(lines) + f"\n\n*Table: {_md_cell(blk[2])}*")
        elif kind == "fig":
            png = Path(blk[2]).relative_to(out_dir).as_posix()
            out.append(f"![{_md_cell(blk[1])}]({png})\n\n*Figure: {_md_cell(blk[3])}* ([PDF]({png[:-4]}.pdf))")
    return "\n\n".join(out) + "\n"


def _html_cell(x: Any) -> str:
    return escape.html(_text(x))


# a table cell may break after these characters (<wbr>) and, printed, nowhere else inside a word
_CELL_BREAK = re.compile(r"([/_\-=:+]|,(?!\d)|\.(?=[^\d\s<]))(?=[^\s<])")   # not inside 11,229 or 1.5


def _html_table_cell(x: Any) -> str:
    """A table cell: escaped, with break points after / _ - . , = : + (the LaTeX tables' own; never inside a
    number such as 11,229 or 1.53),
    so print never splits a word such as 'framework' or 'compiled'."""
    return _CELL_BREAK.sub(lambda m: m.group(1) + "<wbr>", _html_cell(x))


def html_doc(blocks: list[Block]) -> str:
    css = (Path(__file__).parent / "report.css").read_text(encoding="utf-8")
    title = next((b[2] for b in blocks if b[0] == "h"), "fwbench report")
    h = _html_cell
    body = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            body.append(f"<h{blk[1]}>{h(blk[2])}</h{blk[1]}>")
        elif kind == "p":
            body.append(f"<p>{h(blk[1])}</p>")
        elif kind == "ul":
            body.append("<ul>\n" + "\n".join(f"<li>{h(x)}</li>" for x in blk[1]) + "\n</ul>")
        elif kind == "table":
            t = blk[1]
            head = "".join(f"<th>{_html_table_cell(c)}</th>" for c in t.columns)
            rows = "\n".join("<tr>" + "".join(f"<td>{_html_table_cell(v)}</td>" for v in row) + "</tr>"
                             for row in t.itertuples(index=False))
            body.append(f"<table>\n<caption>{h(blk[2])}</caption>\n<thead><tr>{head}</tr></thead>\n"
                        f"<tbody>\n{rows}\n</tbody>\n</table>")
        elif kind == "fig":
            data = base64.b64encode(Path(blk[2]).read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{h(blk[1])}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{h(blk[3])}</figcaption></figure>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{h(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def latex_tables(blocks: list[Block]) -> str:
    """tables.tex: every table, fitted to the line width (reports.rendering.latex)."""
    return latex.tables_file(blocks)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """The tidy frame without the per-round and per-block times; fixed float format and line endings."""
    frame = escape.csv_frame(df.drop(columns=["times", "blocks"], errors="ignore"))
    frame.to_csv(path, index=False, float_format="%.9g", lineterminator="\n")

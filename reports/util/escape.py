"""One escaping function per output format, for every string a report writes.

Text in a report comes partly from result files (workload and task names, reasons,
versions, CPU names), which fwbench does not control: a crafted file must not be able to
add markup, commands or formulas to what it renders. Each renderer passes every string
through its format's function here, whatever its origin:

    markdown(s)     report.md: no raw HTML, links, images, code spans or line breaks
    html(s)         report.html: entities for & < > " '
    latex(s)        tables.tex: TeX's special characters as text; latex_label(s) for \\label{}
    csv_cell(s)     data.csv, compare --csv: a cell that a spreadsheet would run as a
                    formula (= + - @ tab CR first) gets a leading apostrophe
    mpl(s)          figure text: '$' would start matplotlib's mathtext
    terminal(s)     compare's table: no control characters (no terminal escape sequences)

Control characters (newlines included) become spaces in every format but the terminal's
line breaks. Framework-free, pandas only for the frame helpers.
"""
from __future__ import annotations

import html as _html
import re
import zlib
from typing import Any

import pandas as pd

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# a ']' followed by '(' '[' or ':' would close a link, a reference or a reference definition
_MD = {"\\": "\\\\", "`": "\\`", "<": "&lt;", ">": "&gt;", "&": "&amp;", "|": "\\|"}
_MD_BLOCK_START = ("#", "-", "+", "=", "~", ":")      # would open a heading, list, rule or fence
_MD_RE = re.compile("[" + re.escape("".join(_MD)) + "]|\\](?=[(\\[:])")
_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", "\u00b5": r"$\mu$", "\u03bc": r"$\mu$"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def one_line(s: Any) -> str:
    """The text on one line: every control character (newline, tab, ESC, ...) a space."""
    return _CONTROL.sub(" ", str(s))


def markdown(s: Any) -> str:
    """Markdown text that renders as exactly these characters: no HTML, no link, no
    emphasis, no table cell break, no new block."""
    out = _MD_RE.sub(lambda m: _MD.get(m.group(), "\\]"), one_line(s))
    return "\\" + out if out.startswith(_MD_BLOCK_START) else out


def html(s: Any) -> str:
    return _html.escape(one_line(s), quote=True)


def latex(s: Any) -> str:
    """TeX's special characters as text, µ as a math mu, and '--' kept as two hyphens ('-{}-'), so
    a command such as `fwbench report --job` prints, and copies, as typed (TeX joins '--' into an en
    dash)."""
    return re.sub(r"-(?=-)", "-{}", "".join(_TEX.get(ch, ch) for ch in one_line(s)))


def latex_label(s: Any) -> str:
    """A \\label{} key: letters, digits and '-' only, with a checksum of the original when
    anything was replaced, so distinct names keep distinct labels."""
    text = str(s)
    safe = re.sub(r"[^A-Za-z0-9-]", "-", text)[:80]
    return safe if safe == text else f"{safe}-{zlib.crc32(text.encode('utf-8')):08x}"


def csv_cell(s: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: strings starting like a formula get a "'"."""
    if isinstance(s, str) and s.startswith(FORMULA_START):
        return "'" + s
    return s


def mpl(s: Any) -> str:
    """Text for matplotlib: a literal '$' (mathtext would parse, and can fail on, the rest)."""
    return one_line(s).replace("$", r"\$")


def terminal(s: str) -> str:
    """Text for a terminal: control characters other than line breaks shown as spaces."""
    return "\n".join(one_line(line) for line in s.split("\n"))


def _frame(df: pd.DataFrame, fn: Any) -> pd.DataFrame:
    """A copy of `df` with `fn` applied to every string cell and column name."""
    out = df.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c]):
            out[c] = out[c].map(lambda v: fn(v) if isinstance(v, str) else v)
    out.columns = [fn(c) if isinstance(c, str) else c for c in out.columns]
    out.attrs = dict(df.attrs)
    return out


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    return _frame(df, csv_cell)


def mpl_frame(df: pd.DataFrame) -> pd.DataFrame:
    """String cells (not column names: the figures select columns by name) made safe for matplotlib."""
    out = _frame(df, mpl)
    out.columns = df.columns
    return out

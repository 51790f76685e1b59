"""LaTeX output that fits the page: tables for `tables.tex` and a complete article,
`paper.tex` (with `references.bib`), compiled to `paper.pdf` where a LaTeX engine is on the
PATH (the old tables overflowed the page by up to 4435 pt; a reviewer wrote every
figure environment by hand).

Tables are `longtable`s (they break across pages, the header repeated) whose columns are
`p{}` boxes sized as shares of the line width from their contents, set ragged-right, in a
font that shrinks with the column count; every cell may break after `/ _ - . , = :` so no
long name (a strategy, a path, a reason) pushes a line over. A test compiles both files and
fails on a LaTeX error, an overfull box wider than 1 pt, an undefined reference or citation, or a
BibTeX warning; and on a main-text figure whose smallest font prints below 6 pt
(printed_figures: the figure's own font sizes scaled by its printed width over its width).

Packages: booktabs, longtable, array (texlive-latex-base and -recommended on Debian), and for
the article graphicx, geometry, caption, natbib, hyperref; bibtex (texlive-binaries).
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd

from reports.util import escape

PACKAGES = r"\usepackage{booktabs,longtable,array,pdflscape}"
# after these (escaped) characters a cell may break its line; \allowbreak adds no space
_BREAK_AFTER = re.compile(r"(/|\\_\{\}|\\_|-|\.(?=[^\d\s])|,(?!\d)|=|:|\+)(?=\S)")   # not inside 11,229


_QUOTED = re.compile(r'"([^"]*)"')
_TIMES = re.compile(r"(?<=\d)x(?=[\s,;:.)\]]|$)|(?<= )x(?= (?!axis))")     # 1.5x; framework x mode


def typeset(s: str) -> str:
    """Escaped text's quotes as ``...'' and a number's x as a times sign ('"up to
    40%"' printed as two closing quotes, '1.5x' as a letter)."""
    s = _QUOTED.sub(lambda m: "``" + m.group(1) + "''", s).replace('"', "''")
    return _TIMES.sub(r"$\\times$", s)


def cell(x: Any) -> str:
    """A table cell's text for LaTeX: escaped, with break points inside long words."""
    s = escape.latex("" if x is None or (isinstance(x, float) and math.isnan(x)) else
                     (f"{x:.2f}" if isinstance(x, float) else str(x)))
    return typeset(_BREAK_AFTER.sub(lambda m: m.group(1) + r"\allowbreak{}", s))


def prose(text: str) -> str:
    """A paragraph's text for LaTeX: escaped, with break points and typeset quotes and signs."""
    return cell(text)


# Text width and the widest character advance (bold headers) per font, in points: an
# unbreakable piece of k characters needs about k x this. Shares of \linewidth adapt to any
# page, but the pieces must fit the narrowest one a reader may \input the tables into: the
# standard article's 345 pt (paper.tex's 2 cm margins give 483 pt).
LINE_PT = 345.0
LANDSCAPE_PT = 550.0       # the standard article's page turned (pdflscape), for the widest tables
FONTS = ((r"\footnotesize", 5.2), (r"\scriptsize", 4.6), (r"\tiny", 3.65))
_PIECES = re.compile(r"[\s/_\-,=:+]|\.(?=[^\d\s])")


def _widths(t: pd.DataFrame, char_pt: float, line_pt: float = LINE_PT) -> list[float] | None:
    """Each column's share of the line width: proportional to the square root of its longest
    cell (header included), but never below what its longest unbreakable piece needs at
    `char_pt` per character (plus the column gap); None when those minima alone overflow."""
    want, need = [], []
    for c in t.columns:
        texts = [str(c)] + ["" if v is None else str(v) for v in t[c].tolist()]
        want.append(math.sqrt(max(max(len(x) for x in texts), 1)))
        piece = max([len(p) for x in texts[1:] for p in _PIECES.split(x)]      # the header is bold:
                    + [1.1 * len(p) for p in _PIECES.split(texts[0])])        # a tenth wider
        need.append((piece * char_pt + 8.0) / line_pt)
    if sum(need) > 1.0:
        return None
    shares = [w / sum(want) for w in want]
    for _ in range(len(shares)):                     # raise the short ones, take it from the others
        low = [i for i, (s, n) in enumerate(zip(shares, need)) if s < n]
        if not low:
            break
        fixed = ({i: need[i] for i in low}
                 | {i: shares[i] for i, s in enumerate(shares) if s <= need[i] and i not in low})
        free = [i for i in range(len(shares)) if i not in fixed]
        rest = 1.0 - sum(fixed.values())
        tot = sum(want[i] for i in free) or 1.0
        shares = [fixed.get(i, rest * want[i] / tot) for i in range(len(shares))]
    return shares


def table(t: pd.DataFrame, caption: str, label: str) -> str:
    """One table as a longtable that fits the line width (see the module docstring)."""
    n = len(t.columns)
    start = 0 if n <= 6 else 1
    font, widths, turned = FONTS[-1][0], None, False
    for line_pt in (LINE_PT, LANDSCAPE_PT):          # portrait first; a page turned for the widest
        for name, char_pt in FONTS[start:]:
            widths = _widths(t, char_pt, line_pt)
            if widths is not None:
                font, turned = name, line_pt == LANDSCAPE_PT
                break
        if widths is not None:
            break
    if widths is None:                                # even a turned page in \tiny cannot: equal shares
        widths, turned = [1.0 / n] * n, True
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{\dimexpr {w:.4f}\linewidth-2\tabcolsep\relax}}"
                   for w in widths)
    head = " & ".join(rf"\textbf{{{cell(c)}}}" for c in t.columns) + r" \\"
    # no hyphen inside a word: every column is at least its longest unbreakable piece wide
    lines = [r"\begingroup", font, r"\setlength{\tabcolsep}{3pt}", r"\sloppy", r"\hyphenpenalty=10000",
             r"\exhyphenpenalty=10000",
             rf"\begin{{longtable}}{{@{{}}{spec}@{{}}}}",
             rf"\caption{{{escape.latex(caption)}}}\label{{tab:fwbench-{escape.latex_label(label)}}}\\",
             r"\toprule", head, r"\midrule", r"\endfirsthead",
             r"\toprule", head, r"\midrule", r"\endhead",
             r"\bottomrule", r"\endlastfoot"]
    lines += [" & ".join(cell(v) for v in row) + r" \\" for row in t.itertuples(index=False)]
    lines += [r"\end{longtable}", r"\endgroup", ""]
    if turned:
        lines = [r"\begin{landscape}", *lines, r"\end{landscape}", ""]
    return "\n".join(lines)


def tables_file(blocks: list[tuple]) -> str:
    """tables.tex: every table of the report, fitted, ready for \\input."""
    out = [f"% fwbench tables: {PACKAGES} in the preamble, then \\input{{tables.tex}}", ""]
    out += [table(b[1], b[2], b[3]) for b in blocks if b[0] == "table"]
    return "\n".join(out)


# ----------------------------------------------------------------------------- the article

# paper.tex's page: letter paper, 2 cm margins (paper.article's geometry): its \linewidth, in TeX points
PAPER_LINE_PT = (8.5 * 72.27) - 2 * (2 / 2.54 * 72.27)


def engine() -> str | None:
    """The LaTeX engine on the PATH (pdflatex, else tectonic), or None."""
    return next((e for e in ("pdflatex", "tectonic") if shutil.which(e)), None)


INSTALL_HINT = ("no LaTeX engine on the PATH: paper.tex was written but not compiled; install one "
                "(Debian/Ubuntu: apt-get install texlive-latex-recommended, which brings bibtex; or tectonic) and run "
                "pdflatex paper, bibtex paper, then pdflatex paper twice in the report folder")


APPENDIX_LABEL = "fwbench-appendix"        # paper.tex's \\label where the appendix starts, on a page of its own
MAIN_END_LABEL = "fwbench-main-end"        # its \\label at the end of the main text (the references follow)


def pages_of(log: str, aux: str) -> dict[str, int]:
    """{'total': the PDF's pages, 'main': the main text's (to the page where MAIN_END_LABEL stands, the
    references not counted; else those before the appendix), 'appendix': the appendix's} from a LaTeX
    log and .aux (what is found)."""
    out = {}
    m = re.search(r"Output written on .*?\((\d+) pages?", log.replace("\n", ""))
    if m:
        out["total"] = int(m.group(1))
    page = {k: int(v) for k, v in re.findall(r"\\newlabel\{([\w-]+)\}\{\{[^}]*\}\{(\d+)\}", aux)}
    if APPENDIX_LABEL in page:
        out["main"] = page.get(MAIN_END_LABEL, page[APPENDIX_LABEL] - 1)
        if "total" in out:
            out["appendix"] = out["total"] - page[APPENDIX_LABEL] + 1
    return out


UNDEFINED = re.compile(r"(?:LaTeX|natbib|Package natbib) Warning: (?:Reference|Citation) `([^']*)' "
                       r"(?:on page \d+ )?undefined|There were undefined (?:references|citations)")


def undefined(log: str) -> list[str]:
    """A LaTeX log's undefined references and citations, one line each."""
    return sorted({m.group(0) for m in UNDEFINED.finditer(log.replace("\n", " "))})


def bibtex_problems(blg: str) -> list[str]:
    """BibTeX's warnings and errors from its .blg (a missing field, an entry it could not read)."""
    return [ln.strip() for ln in blg.splitlines() if ln.startswith("Warning--") or "error message" in ln
            or ln.startswith("I couldn't") or ln.startswith("I found no")]


_FIGURE_LINE = re.compile(r"fwbench-figure (main|appendix): (\S+): ([\d.]+)pt")


def figure_fonts(pdf: Path) -> tuple[float, float] | None:
    """(width in bp, the smallest font size in bp) of a figure PDF as matplotlib writes it: the
    MediaBox's width and every text's 'Tf' size in its content streams; None where either is not
    found."""
    import zlib
    data = pdf.read_bytes()
    box = re.search(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)", data)
    sizes = []
    for m in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            body = zlib.decompress(m.group(1))
        except zlib.error:
            body = m.group(1)
        sizes += [float(x) for x in re.findall(rb"/[\w.+-]+\s+([\d.]+)\s+Tf", body)]
    if not box or not sizes:
        return None
    return float(box.group(3)) - float(box.group(1)), min(sizes)


def printed_figures(log: str, folder: Path) -> dict[str, tuple[str, float]]:
    """{figure file: (main or appendix, its smallest font as printed, in points)} for every figure
    paper.tex placed with \\fwbenchfigure: the figure's smallest font x its printed width (the log's,
    TeX points as bp) / its own width."""
    out = {}
    for where, name, wd in _FIGURE_LINE.findall(log.replace("\n", "")):
        f = figure_fonts(folder / name)
        if f:
            out[name] = (where, f[1] * (float(wd) * 72 / 72.27) / f[0])
    return out


def compile_pdf(tex: Path, timeout: float = 300.0, pages: dict[str, int] | None = None,
                fonts: dict[str, tuple[str, float]] | None = None) -> tuple[Path | None, list[str]]:
    """Compile `tex` into a PDF beside it: pdflatex, bibtex where it cites a .bib, then pdflatex twice
    (references and citations settle). Returns the PDF (None if it could not) and the problems: LaTeX
    errors, overfull boxes wider than 1 pt, undefined references or citations, BibTeX's warnings;
    `pages` (if given) gets pages_of the result, `fonts` printed_figures'."""
    eng = engine()
    if eng is None:
        return None, [INSTALL_HINT]
    cmd = ([eng, "-interaction=nonstopmode", "-halt-on-error", tex.name] if eng == "pdflatex"
           else [eng, tex.name])
    log, blg = "", ""
    try:
        for i in range(3 if eng == "pdflatex" else 1):
            p = subprocess.run(cmd, cwd=tex.parent, capture_output=True, text=True, timeout=timeout)
            log = p.stdout
            if p.returncode != 0:
                break
            aux = tex.with_suffix(".aux")
            if i == 0 and aux.exists() and "\\bibdata" in aux.read_text(errors="replace"):
                if shutil.which("bibtex") is None:
                    return None, ["bibtex is not on the PATH (Debian: texlive-binaries, which "
                                  "texlive-latex-base brings): paper.tex cites references.bib"]
                subprocess.run(["bibtex", tex.stem], cwd=tex.parent, capture_output=True, text=True, timeout=timeout)
                b = tex.with_suffix(".blg")
                blg = b.read_text(errors="replace") if b.exists() else ""
    except (OSError, subprocess.SubprocessError) as e:
        return None, [f"{eng} failed to run: {e}"]
    problems = (overfull(log) + [ln for ln in log.splitlines() if ln.startswith("!")][:3] + undefined(log)
                + bibtex_problems(blg))
    pdf = tex.with_suffix(".pdf")
    aux = tex.with_suffix(".aux")
    if pages is not None:
        pages.update(pages_of(log, aux.read_text(errors="replace") if aux.exists() else ""))
    if fonts is not None:
        fonts.update(printed_figures(log, tex.parent))
    for ext in (".aux", ".log", ".out", ".toc", ".bbl", ".blg"):
        tex.with_suffix(ext).unlink(missing_ok=True)
    return (pdf if pdf.exists() and not any(x.startswith("!") for x in problems) else None), problems


def overfull(log: str, limit: float = 1.0) -> list[str]:
    """The overfull boxes of a LaTeX log wider than `limit` points."""
    return [m.group(0) for m in re.finditer(r"Overfull \\[hv]box \((\d+(?:\.\d+)?)pt too \w+\)[^\n]*", log)
            if float(m.group(1)) > limit]


def compile_check(text: str, folder: Path, name: str = "check") -> list[str]:
    """Compile a LaTeX document in `folder` and return its problems (tests use this)."""
    folder.mkdir(parents=True, exist_ok=True)
    tex = folder / f"{name}.tex"
    tex.write_text(text, encoding="utf-8")
    pdf, problems = compile_pdf(tex)
    return problems if pdf is not None or problems else ["no PDF"]


def wrap_tables(tables_tex: str) -> str:
    """The standard article (its default, narrowest margins) around tables.tex's content,
    as a reader would \\input it (for checks)."""
    return "\n".join([r"\documentclass{article}", PACKAGES, r"\begin{document}", tables_tex, r"\end{document}"])

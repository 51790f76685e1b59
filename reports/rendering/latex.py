"""LaTeX output that fits the page: tables for `tables.tex` and a complete article,
`paper.tex` (with `references.bib`), compiled to `paper.pdf` where a LaTeX engine is on the
PATH (issue 18: the old tables overflowed the page by up to 4435 pt; a reviewer wrote every
figure environment by hand).

Tables are `longtable`s (they break across pages, the header repeated) whose columns are
`p{}` boxes sized as shares of the line width from their contents, set ragged-right, in a
font that shrinks with the column count; every cell may break after `/ _ - . , = :` so no
long name (a strategy, a path, a reason) pushes a line over. A test compiles both files and
fails on a LaTeX error or an overfull box wider than 1 pt.

Packages: booktabs, longtable, array (texlive-latex-base and -recommended on Debian), and for
the article graphicx, geometry, caption, hyperref.
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd

from reports.rendering import escape

PACKAGES = r"\usepackage{booktabs,longtable,array,pdflscape}"
# after these (escaped) characters a cell may break its line; \allowbreak adds no space
_BREAK_AFTER = re.compile(r"(/|\\_\{\}|\\_|-|\.(?=[^\d\s])|,|=|:|\+)(?=\S)")


def cell(x: Any) -> str:
    """A table cell's text for LaTeX: escaped, with break points inside long words."""
    s = escape.latex("" if x is None or (isinstance(x, float) and math.isnan(x)) else
                     (f"{x:.2f}" if isinstance(x, float) else str(x)))
    return _BREAK_AFTER.sub(lambda m: m.group(1) + r"\allowbreak{}", s)


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
        piece = max(len(p) for x in texts for p in _PIECES.split(x))
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
    lines = [r"\begingroup", font, r"\setlength{\tabcolsep}{3pt}", r"\sloppy",
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

CLAIMS = [
    ("PyTorch 2's compiler (Dynamo + Inductor) makes training and inference \"up to 40%\" faster.",
     "the speedup of torch.compile over torch eager, with its break-even (Results, Findings)"),
    ("TensorFlow's static graphs make variable-length sequences awkward.",
     "the dynamic-shapes streams: compilations per shape and the cost of serving N requests (Dynamic shapes)"),
    ("JAX leads on higher-order derivatives and vmap.",
     "per-sample gradients, HVPs, Hessians, Jacobians, n-th derivatives and ensembles (Derivatives and vmap)"),
    ("torch.compile keeps working where other compilers refuse Python code, \"reporting what it could and "
     "couldn't optimize\".", "eight programs that mix tensors with plain Python (What could not be compiled)"),
]

REFERENCES = {
    "ansel2024pytorch2": ("J. Ansel et al.", "PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode "
                          "Transformation and Graph Compilation", "ASPLOS 2024"),
    "bradbury2018jax": ("J. Bradbury et al.", "JAX: composable transformations of Python+NumPy programs",
                        "software, http://github.com/jax-ml/jax, 2018"),
    "abadi2016tensorflow": ("M. Abadi et al.", "TensorFlow: A System for Large-Scale Machine Learning",
                            "OSDI 2016"),
    "kalibera2013rigorous": ("T. Kalibera and R. Jones", "Rigorous Benchmarking in Reasonable Time", "ISMM 2013"),
    "mytkowicz2009producing": ("T. Mytkowicz, A. Diwan, M. Hauswirth and P. F. Sweeney",
                               "Producing Wrong Data Without Doing Anything Obviously Wrong!", "ASPLOS 2009"),
    "holm1979simple": ("S. Holm", "A Simple Sequentially Rejective Multiple Test Procedure",
                       "Scandinavian Journal of Statistics 6(2), 1979"),
    "fwbench": ("The fwbench authors", "fwbench: equal-work benchmarks of PyTorch, JAX and TensorFlow",
                "software, this repository"),
}


def bibtex() -> str:
    """references.bib with the entries the article cites."""
    out = []
    for key, (who, title, where) in REFERENCES.items():
        kind = "misc" if where.startswith("software") else "inproceedings" if re.search(r"\d{4}$", where) and \
            not where.startswith("Scandinavian") else "article"
        field = "howpublished" if kind == "misc" else "booktitle" if kind == "inproceedings" else "journal"
        out.append(f"@{kind}{{{key},\n  author = {{{who}}},\n  title = {{{{{title}}}}},\n"
                   f"  {field} = {{{where}}},\n}}\n")
    return "\n".join(out)


def _thebibliography() -> str:
    items = [rf"\bibitem{{{k}}} {escape.latex(who)}. \emph{{{escape.latex(t)}}}. {escape.latex(w)}."
             for k, (who, t, w) in REFERENCES.items()]
    return "\n".join([r"\begin{thebibliography}{9}", *items, r"\end{thebibliography}"])


def _para(text: str) -> str:
    return _BREAK_AFTER.sub(lambda m: m.group(1) + r"\allowbreak{}", escape.latex(text))


def article(blocks: list[tuple], abstract: list[str], threats: list[str], fig_dir: str = "figures") -> str:
    """paper.tex: the report's blocks as an article: title, abstract (the summary), the claims
    it tests, every section in the report's order (sections named 'Appendix' after
    \\appendix), figures (the vector PDFs) with numbered captions, tables fitted, threats
    to validity and the references."""
    out = [r"\documentclass[10pt]{article}", r"\usepackage[margin=2cm]{geometry}", PACKAGES,
           r"\usepackage{graphicx,caption}", r"\usepackage[hidelinks]{hyperref}",
           r"\emergencystretch=3em", r"\hbadness=10000",
           r"\title{PyTorch, JAX and TensorFlow on equal work: an fwbench report}",
           r"\author{fwbench}", r"\date{}", r"\begin{document}", r"\maketitle",
           r"\begin{abstract}", " ".join(_para(x) for x in abstract), r"\end{abstract}",
           r"\section{Claims under test}",
           r"Articles and talks make four claims about these frameworks; this report measures them "
           r"\cite{ansel2024pytorch2,bradbury2018jax,abadi2016tensorflow} with fwbench \cite{fwbench}:",
           r"\begin{enumerate}"]
    out += [rf"\item {_para(c)} \emph{{Measured by}} {_para(how)}." for c, how in CLAIMS]
    out += [r"\end{enumerate}",
            r"A claim whose workload did not run in this report is not evidence either way. The statistics follow "
            r"Kalibera and Jones \cite{kalibera2013rigorous} (the process is the unit of replication), randomise "
            r"the environment size against layout effects \cite{mytkowicz2009producing}, and control the chance "
            r"of any false difference with Holm's procedure \cite{holm1979simple}."]
    appendix = False
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            if blk[1] == 1:
                continue
            if blk[1] == 2 and str(blk[2]).startswith("Appendix") and not appendix:
                out += [r"\section{Threats to validity}", r"\begin{itemize}",
                        *[rf"\item {_para(t)}" for t in threats], r"\end{itemize}", _thebibliography(),
                        r"\appendix"]
                appendix = True
            out.append((r"\section{" if blk[1] == 2 else r"\subsection{") + _para(blk[2]) + "}")
        elif kind == "p":
            out.append(_para(blk[1]))
        elif kind == "ul":
            out += [r"\begin{itemize}", *[rf"\item {_para(x)}" for x in blk[1]], r"\end{itemize}"]
        elif kind == "table":
            out.append(table(blk[1], blk[2], blk[3]))
        elif kind == "fig":
            # not a float: a float page of two tall figures overflowed; a minipage keeps the
            # figure with its caption and moves to the next page when it does not fit
            out += [r"\par\medskip\noindent\begin{minipage}{\linewidth}\centering",
                    rf"\includegraphics[width=\linewidth,height=0.6\textheight,keepaspectratio]{{{fig_dir}/{blk[1]}.pdf}}",
                    rf"\captionof{{figure}}{{{_para(blk[3])}}}\label{{fig:fwbench-{escape.latex_label(blk[1])}}}",
                    r"\end{minipage}\par\medskip"]
    if not appendix:
        out += [r"\section{Threats to validity}", r"\begin{itemize}", *[rf"\item {_para(t)}" for t in threats],
                r"\end{itemize}", _thebibliography()]
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def engine() -> str | None:
    """The LaTeX engine on the PATH (pdflatex, else tectonic), or None."""
    return next((e for e in ("pdflatex", "tectonic") if shutil.which(e)), None)


INSTALL_HINT = ("no LaTeX engine on the PATH: paper.tex was written but not compiled; install one "
                "(Debian/Ubuntu: apt-get install texlive-latex-recommended; or tectonic) and run "
                "`pdflatex paper.tex` twice in the report folder")


def compile_pdf(tex: Path, timeout: float = 300.0) -> tuple[Path | None, list[str]]:
    """Compile `tex` into a PDF beside it (two passes, for references). Returns the PDF (None
    if it could not) and the problems: LaTeX errors, overfull boxes wider than 1 pt."""
    eng = engine()
    if eng is None:
        return None, [INSTALL_HINT]
    cmd = ([eng, "-interaction=nonstopmode", "-halt-on-error", tex.name] if eng == "pdflatex"
           else [eng, tex.name])
    log = ""
    try:
        for _ in range(2 if eng == "pdflatex" else 1):
            p = subprocess.run(cmd, cwd=tex.parent, capture_output=True, text=True, timeout=timeout)
            log = p.stdout
            if p.returncode != 0:
                break
    except (OSError, subprocess.SubprocessError) as e:
        return None, [f"{eng} failed to run: {e}"]
    problems = overfull(log) + [ln for ln in log.splitlines() if ln.startswith("!")][:3]
    pdf = tex.with_suffix(".pdf")
    for ext in (".aux", ".log", ".out", ".toc"):
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

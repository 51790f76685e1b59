"""paper.tex and tables.tex compile, fit the page and read as a paper (issues 18, 28, 41): each
example's paper, rendered from its JSON as `fwbench report` does, compiles with BibTeX with no LaTeX
error, no overfull box wider than 1 pt, no undefined reference or citation and no BibTeX warning; its
main text is at most 9 pages; every main-text figure's smallest font prints at 6 pt or more (its own
font sizes scaled by its printed width over its width); its abstract has at most 200 words and a
ratio with an interval; no time prints as '1.41e+03 ms' or in 'us'; its references.bib holds exactly
the works it cites. Needs a LaTeX engine and bibtex (.ci/run installs texlive-latex-recommended from
Debian's packages; FWBENCH_REQUIRE_LATEX=1 there makes their absence a failure, not a skip)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

import reports
from reports.rendering import bibliography, latex
from reports.rendering import paper as paper_
from tests.support.reports_fixtures import simulated_processes
from tests.support.shared import EXAMPLE_RUNS, has_example, rendered_example

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reports" / "examples"

if latex.engine() is None or shutil.which("bibtex") is None:
    if os.environ.get("FWBENCH_REQUIRE_LATEX") == "1":
        pytest.fail("no LaTeX engine or bibtex on the PATH, but FWBENCH_REQUIRE_LATEX=1", pytrace=False)
    pytest.skip(latex.INSTALL_HINT, allow_module_level=True)

MIN_FONT_PT = 6.0
BAD_UNITS = re.compile(r"e\+\d\d (ms|s)\b| us\b")
PLURALS = re.compile(r"[a-z]\((?:s|es)\)")          # 'process(es)', 'thread(s)'; a unit '(s)' has a space
RATIO_WITH_INTERVAL = re.compile(r"\d+(?:\.\d+)?\$\\times\$ \[\d+(?:\.\d+)?, \d+(?:\.\d+)?\]")


def abstract_of(tex: str) -> str:
    return tex.split(r"\begin{abstract}", 1)[1].split(r"\end{abstract}", 1)[0].strip()


def check_paper(tex: str, bib: str, problems: list[str], pages: dict[str, int],
                fonts: dict[str, tuple[str, float]]) -> None:
    """Everything issue 41 asks of a compiled paper (the module docstring)."""
    assert problems == [], problems[:5]
    assert 1 <= pages["main"] <= paper_.MAX_MAIN_PAGES, pages
    main = {f: pt for f, (where, pt) in fonts.items() if where == "main"}
    assert main and all(pt >= MIN_FONT_PT for pt in main.values()), main
    abstract = abstract_of(tex)
    assert len(abstract.split()) <= 200 and RATIO_WITH_INTERVAL.search(abstract), abstract
    assert not BAD_UNITS.search(tex), BAD_UNITS.search(tex).group(0)
    assert set(bibliography.cited(tex)) == set(bibliography.entries_text(bib))
    assert "Appendix A:" not in tex and not PLURALS.search(tex.split(r"\appendix")[0])   # the appendix quotes records


def test_a_small_runs_paper_compiles_with_bibtex_and_reads_as_a_paper(tmp_path):
    medians = {("gpt", t, m): 0.01 * (2.0 if m == "eager" else 1.0) for t in ("forward", "train_step")
               for m in ("eager", "compiled")}
    for fw, slow in (("torch", 1.0), ("jax", 1.3)):
        simulated_processes(tmp_path / "res", fw, {k: v * slow for k, v in medians.items()}, cold=3, warm=3,
                            seed=len(fw), fwbench_commit="abc1234-dirty")
    paths = reports.render(reports.load(tmp_path / "res"), tmp_path / "out", pdf=True)
    tex, bib = paths["paper"].read_text(), paths["bib"].read_text()
    for part in (r"\begin{abstract}", r"\section{Introduction}", r"\begin{enumerate}", r"\section{Related work}",
                 r"\section{Benchmark design}", r"\section{Results}", r"\section{The claims}",
                 r"\section{Discussion}", r"\section{Limitations}", r"\section{Reproducibility}",
                 r"\section{Conclusion}", r"\bibliography{references}", r"\appendix", r"\begin{figure}[tbp]",
                 r"\fwbenchfigure{figures/pareto_jobs.pdf}", r"\begin{longtable}", r"\citet{industry2023claims}",
                 r"\citep{coleman2017dawnbench}", r"\citet{bahrampour2015comparative}"):
        assert part in tex, part
    assert "thebibliography" not in tex and "minipage" not in tex
    assert "@inproceedings{ansel2024pytorch2" in bib and "@misc{fwbench" in bib
    check_paper(tex, bib, paths["paper_problems"], paths["paper_pages"], paths["paper_fonts"])
    # a run measured from a modified working tree says so on page 1, in the report and the paper
    md = (tmp_path / "out" / "report.md").read_text()
    first_page = md.split("## Summary")[0]
    assert "abc1234-dirty" in first_page and "uncommitted changes" in first_page
    assert "uncommitted changes" in tex.split(r"\section{Introduction}")[0]


def test_quotes_and_times_signs_are_typeset():
    assert latex.prose('the "up to 40%" claim, 1.53x faster') == r"the ``up to 40\%'' claim, 1.53$\times$ faster"
    assert latex.prose("framework x mode") == r"framework $\times$ mode"
    assert latex.cell("1.31x [1.20, 1.43]") == r"1.31$\times$ [1.20, 1.43]"
    assert latex.cell("jax-x2") == "jax-\\allowbreak{}x2" and latex.prose("the x axis") == "the x axis"


def test_a_command_keeps_its_two_hyphens():
    """'--job' typeset as an en dash: a copied command failed (issue 41)."""
    from reports.util import escape
    assert escape.latex("fwbench report --job TASK:N") == "fwbench report -{}-job TASK:N"
    tex = latex.prose("fwbench run --quick")            # no '--' ligature, and both hyphens kept
    assert "--" not in tex and tex.count("-") == 2
    assert latex.prose("495 \u00b5s") == r"495 $\mu$s"


@pytest.mark.parametrize("example", sorted(EXAMPLE_RUNS))
def test_each_examples_paper_compiles_and_reads_as_a_paper(example):
    """Rendered from the example's JSON as `fwbench report` does (tests/support/shared.py: once per
    test run): compiled with BibTeX, no undefined reference or citation, no overfull box, main
    text at most 9 pages (the references and the appendix after it), main-text figures legible
    at print size, a short abstract with a ratio and its interval, times in units a reader reads."""
    if not has_example(example):
        pytest.skip(f"no committed example {example}")
    out, paths = rendered_example(example)
    paths.update(paper=out / "paper.tex", bib=out / "references.bib")
    check_paper(paths["paper"].read_text(), paths["bib"].read_text(), paths["paper_problems"],
                paths["paper_pages"], paths["paper_fonts"])
    md = (out / "report.md").read_text()
    prose = "\n".join(ln for ln in md.splitlines() if not ln.startswith("|"))   # tables quote the records' text
    assert not BAD_UNITS.search(md) and not PLURALS.search(prose), (BAD_UNITS.search(md), PLURALS.search(prose))


def test_a_run_of_sets_is_described_as_sets_not_as_lone_processes():
    """The committed example is a run of process sets (its steady state from every set's blocks, the
    cold set's too): the report and the paper say so, and no sentence of the lone-process design
    (steady state from warm processes only, one process at a time) is left in them."""
    if not has_example("cpu-2core"):
        pytest.skip("no committed example cpu-2core")
    out, _ = rendered_example("cpu-2core")
    md, tex = (out / "report.md").read_text(), (out / "paper.tex").read_text()
    for lone in ("comes from warm processes", "Steady state comes from warm processes only", "warm processes' median",
                 "one at a time in a seeded order", "processes (cold+warm)", "round-to-round"):
        assert lone not in md and lone not in tex, lone
    assert "| sets (cold+warm) |" in md and "The cold sets' steady step over the warm sets'" in md
    # page 1 says why no job cost has an interval: the one cold set (its steady steps have 3 sets)
    assert "no interval: each cold first call comes from 1 cold set, fewer than 3 (fwbench run --cold 3)" in md
    # the Replication line's interval for a ratio is the paired one the Scope states, not the unpaired
    paired = re.search(r"Paired by set \(.*?\), a ratio between two frameworks' configurations has a 95% interval of "
                       r"about \+-([0-9.]+)% \(median of (\d+) comparisons; \+-([0-9.]+)% were the sets not paired", md)
    scope = re.search(r"between frameworks \+-([0-9.]+)% at 95% and .*? \(median of (\d+) comparisons\)", md)
    assert paired and scope and paired.group(1, 2) == scope.group(1, 2), (paired, scope)
    assert float(paired.group(3)) > float(paired.group(1))
    if has_example("cpu-2core-serving"):      # a serving case is per process, in sets too
        serving = (rendered_example("cpu-2core-serving")[0] / "report.md").read_text()
        assert "no interval: each cold first call comes from 1 cold process, fewer than 3" in serving
    assert "Cold and warm sets: " in md and "Steady state comes from every set's blocks, cold and warm" in md
    assert "Intervals of what is measured once per process (first calls;" in md
    assert "draws of each term's t distribution over sets" in md and "fewer than 3 sets leaves the cost" in md
    assert "Each framework ran in process sets: 1 cold set" in tex and "paired by set" in tex
    assert "process sets as replicates" in tex and "processes as replicates" not in tex          # related work
    assert "the process set as the unit of replication" in tex                                  # contributions
    assert "no job cost has an interval (each cold first call comes from 1 cold set" in tex      # abstract
    assert "whiskers: 95\\% t interval over sets" in tex or "95% t interval over sets" in md


@pytest.mark.parametrize("example", ["cpu-2core", "cpu-2core-axes", "cpu-2core-serving",
                                     # its MFU table's "211GFLOP/s" and bold headers overflowed by 1.6 pt
                                     "../../docs/measurements/allocation-rerun/report"])
def test_the_examples_tables_fit_the_page(example, tmp_path):
    folder = EXAMPLES / example
    if not (folder / "tables.tex").exists():
        pytest.skip(f"no committed example {example}")
    problems = latex.compile_check(latex.wrap_tables((folder / "tables.tex").read_text()), tmp_path)
    assert problems == []


@pytest.mark.parametrize("example", ["cpu-2core", "cpu-2core-axes"])
def test_the_committed_papers_compile_with_bibtex_as_a_reader_compiles_them(example, tmp_path):
    """The committed paper.tex, references.bib and figures as a reader compiles them (pdflatex,
    bibtex, pdflatex twice): every check of a rendered paper holds for the committed one too."""
    folder = EXAMPLES / example
    if not (folder / "paper.tex").exists():
        pytest.skip(f"no committed example {example}")
    for name in ("paper.tex", "references.bib"):
        shutil.copy(folder / name, tmp_path / name)
    shutil.copytree(folder / "figures", tmp_path / "figures")
    pages: dict[str, int] = {}
    fonts: dict[str, tuple[str, float]] = {}
    pdf, problems = latex.compile_pdf(tmp_path / "paper.tex", pages=pages, fonts=fonts)
    assert pdf is not None
    check_paper((folder / "paper.tex").read_text(), (folder / "references.bib").read_text(), problems, pages, fonts)
    for name in ("report.md", "paper.tex", "tables.tex"):
        assert not BAD_UNITS.search((folder / name).read_text()), name


def test_a_figure_too_small_to_read_is_caught(tmp_path):
    """The printed font check sees a figure drawn 12 inches wide with 7 pt text placed at the line
    width (about 2.9 pt printed), and passes the same text drawn at the line width."""
    from matplotlib.figure import Figure
    body = [r"\documentclass[10pt,letterpaper]{article}", r"\usepackage[margin=2cm]{geometry}",
            r"\usepackage{graphicx}", paper_.FIGURE_MACRO, r"\begin{document}"]
    for name, width in (("wide", 12.0), ("fits", 6.9)):
        fig = Figure(figsize=(width, 3))
        ax = fig.subplots()
        ax.plot([1, 2], [1, 2])
        ax.tick_params(labelsize=7)
        ax.set_title("a title", fontsize=7)
        fig.savefig(tmp_path / f"{name}.pdf")
        body.append(rf"\noindent\fwbenchfigure{{{name}.pdf}}{{0.5}}{{main}}\par")
    (tmp_path / "f.tex").write_text("\n".join(body + [r"\end{document}"]))
    fonts: dict[str, tuple[str, float]] = {}
    pdf, problems = latex.compile_pdf(tmp_path / "f.tex", fonts=fonts)
    assert pdf is not None and problems == []
    assert fonts["wide.pdf"][1] == pytest.approx(7 * 6.9 / 12, rel=0.05) and fonts["wide.pdf"][1] < MIN_FONT_PT
    assert fonts["fits.pdf"][1] == pytest.approx(7 * 6.93 / 6.9, rel=0.05) and fonts["fits.pdf"][1] >= MIN_FONT_PT


def test_undefined_references_and_citations_are_problems(tmp_path):
    tex = "\n".join([r"\documentclass{article}", r"\usepackage[round,authoryear]{natbib}", r"\begin{document}",
                     r"See Section~\ref{sec:nowhere} and \citet{holm1979simple} and \citep{nobody2020}.",
                     r"\bibliographystyle{plainnat}", r"\bibliography{references}", r"\end{document}"])
    (tmp_path / "references.bib").write_text(bibliography.bibtex(["holm1979simple"]))
    problems = latex.compile_check(tex, tmp_path, "refs")
    assert any("sec:nowhere" in p for p in problems) and any("nobody2020" in p for p in problems)
    assert not any("holm1979simple" in p for p in problems)


def test_the_bibliography_is_valid_bibtex_with_years_and_full_author_lists(tmp_path):
    """Every entry of references.bib: a year, a title, authors as BibTeX writes them ('First Last and
    ...', never 'et al.' inside the field nor names joined by commas), and BibTeX reads them all
    without a warning; a key the paper cites but the file lacks is an error, not an undefined
    citation."""
    entries = bibliography.entries(bibliography.SOURCE)
    assert len(entries) >= 25
    for key, e in entries.items():
        assert re.fullmatch(r"\d{4}", bibliography.field(e, "year") or ""), key
        assert bibliography.field(e, "title"), key
        who = bibliography.field(e, "author")
        assert who and "et al" not in who, key
        names = [n.strip() for n in who.split(" and ")]
        assert all(n and (n.startswith("{") or "," not in n) for n in names), key
    for key in ("bretz2009graphical", "schuirmann1987comparison", "chowdhery2022palm", "ho2020denoising",
                "karpathy2022nanogpt", "coleman2017dawnbench", "reddi2020mlperf", "mattson2020mlperf",
                "bahrampour2015comparative", "shi2016benchmarking", "liu2018benchmarking", "georges2007statistically",
                "hoefler2015scientific", "mytkowicz2009producing", "curtsinger2013stabilizer",
                "kalibera2013rigorous", "industry2023claims"):
        assert key in entries, key
    keys = list(entries) + [bibliography.FWBENCH]
    (tmp_path / "references.bib").write_text(bibliography.bibtex(keys, 2026, "commit abc1234"))
    tex = "\n".join([r"\documentclass{article}", r"\usepackage[round,authoryear]{natbib}", r"\usepackage{hyperref}",
                     r"\begin{document}", r"\nocite{*}", r"\bibliographystyle{plainnat}", r"\bibliography{references}",
                     r"\end{document}"])
    assert latex.compile_check(tex, tmp_path, "all") == []
    with pytest.raises(KeyError, match="nobody2020"):
        bibliography.bibtex(["holm1979simple", "nobody2020"])


def test_the_reports_words_cite_the_works_they_name():
    """The Method's 'Bretz et al. 2009', 'PaLM's' formula and the like cite their entries in paper.tex."""
    t = bibliography.cite_phrases(latex.prose("a graphical Holm procedure, Bretz et al. 2009; PaLM's 6N; "
                                              "two one-sided tests"))
    assert bibliography.cited(t) == ["bretz2009graphical", "chowdhery2022palm", "schuirmann1987comparison"]


def test_the_readmes_install_command_is_on_its_first_screen():
    lines = (ROOT / "README.md").read_text().splitlines()
    first = "\n".join(lines[:25])
    assert 'pip install -e ".[all]" -c constraints/cpu.txt' in first
    assert "python -m pytest" in first and "fwbench run" in first


def test_a_table_that_cannot_fit_is_caught(tmp_path):
    t = pd.DataFrame({"a": ["x" * 400], "b": ["y"], "c": ["z"]})
    problems = latex.compile_check(latex.wrap_tables(latex.table(t, "too wide", "wide")), tmp_path)
    assert any("Overfull" in p for p in problems)
    ok = pd.DataFrame({"case": ["gpt/train_step/torch/compiled/compiled-autograd/small/cpu"] * 3,
                       "reason": ["RuntimeError: a long message / with paths/and_underscores_everywhere"] * 3})
    assert latex.compile_check(latex.wrap_tables(latex.table(ok, "fits", "fits")), tmp_path / "ok") == []


def test_a_number_never_breaks_inside_a_table_cell():
    """A thousands separator or a decimal point is no break point (page 1 printed 'N = 11,'
    above '229'); a comma between words still is."""
    from reports.rendering import formats
    assert latex.cell("from N = 11,229: torch") == "from N = 11,229: torch"
    assert latex.cell("jax,torch") == "jax,\\allowbreak{}torch"
    assert "<wbr>" not in formats._html_table_cell("N = 11,229 at 1.53x")
    assert formats._html_table_cell("jax,torch") == "jax,<wbr>torch"

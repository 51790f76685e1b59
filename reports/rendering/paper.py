"""paper.tex, the report shaped as a paper (issue 28): at most about 10 pages of main text,
then an appendix with everything else the report holds.

    abstract         the recommendation (page 1's first sentence), the run in one sentence, then its
                     answers (answer_sentences)
    1 Introduction   the claims under test with their real sources
    2 Related work   TorchBench, the Keras 3 benchmarks, AlgoPerf, MLPerf, Kalibera & Jones
    3 Method         one paragraph (the report's full Method is in the appendix)
    4 Results        the Summary's bullets and the table of their figures, its first other table,
                     MAIN_FIGURES figures as floats
    5 Limitations    computed from the run (limitations)
    References
    Appendix         every other section of the report, in its order, every per-case table

The report's own "Appendix X: ..." headings lose their prefix, so the paper's appendix
letters are LaTeX's (no "B Appendix D"). `APPENDIX_LABEL` marks where the appendix starts
(on a page of its own): its page in the .aux less one is the main text's length, which
latex.compile_pdf reports and tests/test_paper.py bounds.
"""
from __future__ import annotations

import re

import pandas as pd

from reports.analysis import claims, stats
from reports.analysis.data import TIMED
from reports.rendering import escape, latex
from reports.rendering.parts import DETAILS_LABEL
from reports.sections.dynamic import SERVED

RECOMMENDATION = "Recommendation for "       # summary.recommendation's first words: the abstract opens with it
APPENDIX_TITLES = {"Results": "Further results", "Method": "The method in full"}   # not the main text's names
MAIN_FIGURES = 4                    # 3-5 figures in the main text (issue 28)
APPENDIX_LABEL = latex.APPENDIX_LABEL
# the figures the main text prefers, in this order; the others (and any beyond MAIN_FIGURES) stay
# in their appendix sections
PREFERRED = ("throughput", "speedup", "first_call", "cold_warm", "dyn_stream_time", "der_time", "der_vmap",
             "dyn_compilations")

# the claims' source (analysis.claims.CLAIMS: ../shared/CLAIMS.md) as a key of latex.REFERENCES
SOURCE = "industry2023claims"

RELATED = (
    r"TorchBench \cite{hao2023torchbench} runs PyTorch's model zoo and reports each configuration (compiler "
    r"$\times$ mode) on its own dashboard, never one framework score. The Keras 3 benchmarks "
    r"\cite{keras3benchmarks} time the same models on the JAX, TensorFlow and PyTorch backends and conclude that "
    r"no single backend is fastest, with a table per model. AlgoPerf \cite{dahl2023algoperf} and MLPerf Training "
    r"\cite{mattson2020mlperf} state the time to do a job (reach a target quality) rather than weighted points. "
    r"Kalibera and Jones \cite{kalibera2013rigorous} show that the process (not the round) is the unit of "
    r"replication of a benchmark and how to spread a fixed budget over processes and rounds; Mytkowicz et al. "
    r"\cite{mytkowicz2009producing} that an innocuous change of environment can change a result. fwbench follows "
    r"them: equal work per framework, every process a replicate, every difference stated with one error rate for "
    r"the report (Holm \cite{holm1979simple}).")


def _para(text: str) -> str:
    return latex.prose(text)


def _table(blocks: list[tuple], label: str) -> pd.DataFrame | None:
    return next((b[1] for b in blocks if b[0] == "table" and b[3] == label), None)


def _jobs_sentence(jobs: pd.DataFrame) -> str:
    """The jobs table's answers grouped: the commonest answer with its count, each other answer
    with its jobs ("torch cheapest in 10 of 12 jobs; jax cheapest: gpt generate: 100 calls")."""
    groups = jobs.groupby("answer", sort=False)["job"].apply(list)
    groups = groups.loc[groups.map(len).sort_values(ascending=False, kind="stable").index]
    first, rest = groups.index[0], groups.iloc[1:]
    parts = [f"{first} in {len(groups.iloc[0])} of {len(jobs)} jobs"] if len(groups.iloc[0]) > 1 else \
        [f"{first}: {groups.iloc[0][0]}"]
    parts += [f"{a}: {', '.join(js)}" for a, js in rest.items()]
    return "Per job (cost in a fresh process: start-up + first call + N steps): " + "; ".join(parts) + "."


def answer_sentences(blocks: list[tuple]) -> list[str]:
    """The answers an abstract states, read from the report's page 1 (rendering.choice.page_one):
    each job's answer (the jobs table, --job included) and each claim's verdict (the claims
    table)."""
    out = []
    jobs = _table(blocks, "jobs")
    if jobs is not None and not jobs.empty:
        out.append(_jobs_sentence(jobs))
    cl = _table(blocks, "claims")
    if cl is not None and not cl.empty:
        out.append("The claims: " + "; ".join(f"{r['claim']} ({r['verdict']})" for _, r in cl.iterrows()) + ".")
    return out


def abstract(cases: pd.DataFrame, blocks: list[tuple]) -> list[str]:
    """What ran, in one sentence, then the answers (answer_sentences)."""
    t = cases[cases["status"].isin(TIMED)]
    fws = ", ".join(sorted(set(t["framework"]))) or "no framework"
    wls = ", ".join(sorted(set(t["workload"]))) or "no workload"
    dev = "CPU" if not cases["device"].isin(["cuda", "gpu"]).any() else "an accelerator"
    n = t["n_processes"].dropna()
    procs = f"{int(n.min())}-{int(n.max())}" if len(n) and n.min() != n.max() else f"{int(n.max())}" if len(n) else "0"
    rec = next((b[1] for b in blocks if b[0] == "p" and str(b[1]).startswith(RECOMMENDATION)), None)
    return ([rec] if rec else []) + [
        f"We time {fws} doing the same work ({wls}) on one {dev} machine, {len(t)} timed cases with {procs} "
        "steady-state process(es) each, and state every difference with one error rate for the report."] + \
        answer_sentences(blocks)


def limitations(cases: pd.DataFrame, threats: list[str]) -> list[str]:
    """This run's limits, computed from its cases, then the report's threats to validity."""
    out = []
    t = cases[cases["status"].isin(TIMED) & cases["median_s"].notna()]
    if len(t):
        one = int((t["n_processes"] == 1).sum())
        few = int((t["n_processes"] < stats.MIN_TESTED).sum())
        out.append(f"{one} of {len(t)} timed cases ({100 * one / len(t):.0f}%) come from one process and {few} "
                   f"({100 * few / len(t):.0f}%) from fewer than {stats.MIN_TESTED}: they are indicative, their "
                   "comparisons not tested." if few else
                   f"Every one of the {len(t)} timed cases has {stats.MIN_TESTED} or more steady-state processes.")
        cold = t["n_first_cold"].dropna() if "n_first_cold" in t.columns else pd.Series(dtype=float)
        if len(cold) and cold.max() < stats.MIN_TESTED:
            out.append(f"Cold first calls come from {int(cold.max())} process(es) per case: they are shown with "
                       "their range, and no comparison of cold first calls is tested.")
    if "requests" in t.columns and "stream_cold_s" in t.columns:
        k = t.loc[t["stream_cold_s"].notna(), "requests"].dropna()
        if len(k):
            beyond = [n for n in SERVED if n > k.min()]
            if beyond:
                out.append(f"The dynamic streams hold {int(k.min())}-{int(k.max())} requests; the serving costs of "
                           f"{', '.join(map(str, beyond))} requests are extrapolated from the cold pass and the warm "
                           "per-request time, not measured.")
    comp = t[(t["mode"] != "eager") & t["compilations"].notna()] if "compilations" in t.columns else t.iloc[0:0]
    if len(comp):
        per = comp.groupby("framework")["compilations"].median()
        out.append("The frameworks compile different amounts of each job: torch compiles the step and loops over it in "
                   "Python, JAX and TensorFlow compile whole loops (generate, sample); their own counters (median per "
                   "compiled case: " + ", ".join(f"{f} {v:.0f}" for f, v in per.items())
                   + ") count different events and are not comparable.")
    return out + threats


def _main_figures(blocks: list[tuple]) -> list[tuple]:
    figs = [b for b in blocks if b[0] == "fig"]
    rank = {n: i for i, n in enumerate(PREFERRED)}
    return sorted(figs, key=lambda b: (rank.get(b[1], len(rank)), figs.index(b)))[:MAIN_FIGURES]


def _section(blocks: list[tuple], title: str) -> tuple[int, int]:
    """[start, end) of the level-2 section `title` in blocks (heading included); (0, 0) if none."""
    for i, b in enumerate(blocks):
        if b[0] == "h" and b[1] == 2 and b[2] == title:
            j = next((k for k in range(i + 1, len(blocks)) if blocks[k][0] == "h" and blocks[k][1] <= 2), len(blocks))
            return i, j
    return 0, 0


def _figure(b: tuple, fig_dir: str, height: str) -> list[str]:
    return [r"\begin{figure}[tbp]\centering",
            rf"\includegraphics[width=\linewidth,height={height}\textheight,keepaspectratio]{{{fig_dir}/{b[1]}.pdf}}",
            rf"\caption{{{_para(b[3])}}}\label{{fig:fwbench-{escape.latex_label(b[1])}}}", r"\end{figure}"]


def _blocks(blocks: list[tuple], fig_dir: str) -> list[str]:
    out = []
    for b in blocks:
        if b[0] == "h":
            if b[1] == 1:
                continue
            title = re.sub(r"^Appendix [A-Z]: ", "", str(b[2]))
            title = APPENDIX_TITLES.get(title, title) if b[1] == 2 else title
            out.append((r"\section{" if b[1] == 2 else r"\subsection{") + _para(title[:1].upper() + title[1:]) + "}")
        elif b[0] == "p":
            out.append(_para(b[1]))
        elif b[0] == "ul":
            out += [r"\begin{itemize}", *[rf"\item {_para(x)}" for x in b[1]], r"\end{itemize}"]
        elif b[0] == "table":
            out.append(latex.table(b[1], b[2], b[3]))
        elif b[0] == "fig":
            out += _figure(b, fig_dir, "0.45")
    return out


def article(blocks: list[tuple], abstract_lines: list[str], limits: list[str], workloads: set[str],
            method: str, fig_dir: str = "figures") -> str:
    """paper.tex (see the module docstring)."""
    s0, s1 = _section(blocks, "Summary")
    summ = blocks[s0 + 1:s1]
    details = next((b for b in summ if b[0] == "table" and b[3] == DETAILS_LABEL), None)
    table = next((b for b in summ if b[0] == "table" and b is not details), None)
    main_figs = _main_figures(blocks)
    # the report's introduction (before the Summary) is the paper's introduction and method; the
    # Summary's sentences and its first table are the results; its other tables open the appendix
    more = [b for b in summ if b[0] == "table" and b is not table and b is not details]
    used = {id(b) for b in blocks[:s1]} | {id(b) for b in main_figs}
    rest = ([("h", 2, "Summary tables")] + more if more else []) + [b for b in blocks if id(b) not in used]
    out = [r"\documentclass[10pt]{article}", r"\usepackage[margin=2cm]{geometry}", latex.PACKAGES,
           r"\usepackage{graphicx,caption}", r"\usepackage[hidelinks]{hyperref}",
           r"\emergencystretch=3em", r"\hbadness=10000",
           r"\title{PyTorch, JAX and TensorFlow on equal work: an fwbench report}",
           r"\author{fwbench}", r"\date{}", r"\begin{document}", r"\maketitle",
           r"\begin{abstract}", " ".join(_para(x) for x in abstract_lines), r"\end{abstract}",
           r"\section{Introduction}",
           r"Framework choice is argued with claims like the seven below, which an industry article \cite{"
           + SOURCE + r"} quotes from three practitioners; the article gives no measurements of its own, so each is "
           r"an opinion under test. This paper measures them on equal work with "
           r"fwbench \cite{fwbench}, on the systems the claims are about \cite{ansel2024pytorch2,bradbury2018jax,"
           r"abadi2016tensorflow}, and answers those whose workloads ran (Section~\ref{sec:results}); the others are "
           r"not tested here and are evidence neither way.", r"\begin{enumerate}"]
    verdicts = _table(blocks, "claims")
    for i, c in enumerate(claims.CLAIMS):
        row = verdicts.iloc[i] if verdicts is not None and i < len(verdicts) else None
        ran = c.workload in ("", "*") or c.workload in workloads
        said = (f"Verdict: {row['verdict']}" + (f" ({row['caveat']})" if row["caveat"] else "")
                if row is not None else "under test" if ran else "not tested in this run")
        out.append(rf"\item {_para(c.text)} ({_para(c.said_by)}, quoted in \cite{{{SOURCE}}}). "
                   rf"\emph{{Measured by}} {_para(c.measured)}. {_para(said)}.")
    out += [r"\end{enumerate}", r"\section{Related work}", RELATED,
            r"\section{Method}", _para(method)
            + r" The full method, with every definition, is in the appendix.",
            r"\section{Results}\label{sec:results}"]
    for b in summ:
        if b[0] in ("p", "ul"):
            out += _blocks([b], fig_dir)
        if b[0] == "ul" and details is not None:      # the bullets' figures, right under them
            out.append(latex.table(details[1], details[2], details[3]))
    if table is not None:
        out.append(latex.table(table[1], table[2], table[3]))
    if main_figs:
        out.append("Figures " + ", ".join(rf"\ref{{fig:fwbench-{escape.latex_label(b[1])}}}" for b in main_figs)
                   + " show the main comparisons; the appendix has every figure and per-case table.")
    for b in main_figs:
        out += _figure(b, fig_dir, "0.4")
    out += [r"\section{Limitations}", r"\begin{itemize}", *[rf"\item {_para(x)}" for x in limits],
            r"\end{itemize}", latex.thebibliography(), r"\clearpage", r"\appendix",
            rf"\label{{{APPENDIX_LABEL}}}"]
    out += _blocks(rest, fig_dir)
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def method_paragraph(cases: pd.DataFrame, fam: stats.Family) -> str:
    """The main text's method: the allocation, the intervals, the verdicts and the family."""
    t = cases[cases["status"].isin(TIMED)]
    cold = int(t["n_cold"].max()) if "n_cold" in t.columns and t["n_cold"].notna().any() else 0
    warm = int(t["n_warm"].max()) if "n_warm" in t.columns and t["n_warm"].notna().any() else 0
    m = f"{100 * fam.margin:.0f}%"
    return (f"Each framework ran in its own processes (up to {cold} cold, every compile cache empty, and {warm} warm, "
            "the run's cache filled) with the same thread count and the same model, inputs and checked outputs. "
            "Steady state comes from the warm processes: a case's time is the geometric mean of its processes' "
            "median rounds with a Student-t interval over processes; a ratio of two cases uses Welch's t, or a "
            "paired t where both ran in the same processes. A comparison needs "
            f"{stats.MIN_TESTED} processes a side; below that its processes' range is shown and it is not tested. "
            f"Verdicts are stated against a {m} margin, and the report's {fam.m} tested comparisons share one 5% "
            "chance of any false 'faster' or 'slower' (Holm, those against op-by-op eager modes a group of their "
            "own), each interval shown at its Holm level; equivalence is two one-sided tests at the same level.")

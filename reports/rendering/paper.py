"""paper.tex, the report written as a Datasets-and-Benchmarks paper: at most
MAX_MAIN_PAGES pages of main text, then an appendix with everything else the report holds.

    title, authors, date   from Meta (fwbench report --title/--author/--date), else pyproject.toml's
                           [project] authors and the runs' date; the provenance line under the abstract
    abstract               narrative.abstract: at most 200 words, with the run's headline ratio and interval
    1 Introduction         motivation, the claims' source, a numbered list of contributions
    2 Related work         benchmark suites, earlier framework comparisons, benchmarking methodology
    3 Benchmark design     workloads (parameters, FLOPs per step), frameworks and machine, measurement
    4 Results              the choice per job (its table and the job view, figure 1), then a paragraph per
                           concern with its reason where the data show it (at most MAIN_FIGURES figures,
                           each drawn at the printed width: figures.PRINT_WIDTH_IN)
    5 The claims           verdicts, and what was measured for each tested claim
    6 Discussion, 7 Limitations, 8 Reproducibility, 9 Conclusion
    References             BibTeX (natbib, plainnat) from references.bib (bibliography)
    Appendix               every section of the report in its order, every per-case table

Cross-references are LaTeX's: a report section's "Appendix B" becomes \\ref to the label of the
appendix section it names, "(Method)" the method's, "(table)" the table under the Summary.
`APPENDIX_LABEL` marks where the appendix starts (on a page of its own): its page in the .aux less
one is the main text's length, which latex.compile_pdf reports and tests/test_paper.py bounds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from reports.conclusions import claims
from reports.measures import data as rdata
from reports.measures import stats
from reports.measures.data import TIMED
from reports.rendering import bibliography, latex
from reports.rendering.parts import CAVEATS, DETAILS_LABEL
from reports.util import escape

RECOMMENDATION = "Recommendation for "       # summary.recommendation's first words (page 1's first paragraph)
APPENDIX_TITLES = {"Results": "Further results", "Method": "The method in full"}   # not the main text's names
MAX_MAIN_PAGES = 9
MAIN_FIGURES = ("pareto_jobs", "speedup")    # drawn at the printed width; the recommendation's job view first
APPENDIX_LABEL = latex.APPENDIX_LABEL
SOURCE = "industry2023claims"                # the claims' source (../shared/CLAIMS.md), a key of references.bib
DEFAULT_AUTHORS = ["The fwbench contributors"]

WORKLOAD_TEXT = {
    "gpt": r"The GPT follows GPT-2's architecture \citep{radford2019language} (pre-norm blocks, tied embeddings, "
           r"GELU) with nanoGPT's training step \citep{karpathy2022nanogpt}: AdamW \citep{loshchilov2019decoupled} "
           r"with global-norm clipping; its tasks are a forward pass, a train step and greedy generation. Model "
           r"FLOPs per step follow PaLM's formula \citep{chowdhery2022palm}, $6N + 12LHQT$ per trained token.",
    "diffusion": r"The diffusion model is the DDPM UNet \citep{ho2020denoising} (residual blocks, attention at one "
                 r"resolution, a sinusoidal time embedding); its tasks are a forward pass (noise prediction), a "
                 r"train step and a sampler of fixed steps; its FLOPs count 2 per multiply-add of every "
                 r"convolution, dense and attention product, a train step three forward passes.",
    "dynamic": r"The dynamic-shapes workload serves streams of requests whose shapes vary (prompts, batches, "
               r"images), cold (every shape new once) and warm, under each framework's strategies for varying "
               r"shapes (TensorFlow's input signatures and retracing, torch's dynamic and marked dimensions, "
               r"padding to buckets).",
    "interop": r"The interop workload runs eight programs that mix tensors with Python (a data-dependent branch, a "
               r"Python loop, a call into numpy or scipy, a print, a side effect, ...) under each framework's "
               r"compiler, as written and rewritten in the framework's idiom.",
    "derivatives": r"The derivatives workload times higher-order derivatives, Jacobians, Hessian-vector products, "
                   r"per-example gradients and model ensembles under each framework's transforms (vmap, jacfwd, "
                   r"jacrev, vectorized\_map, a loop), each result checked against a float64 reference first.",
}

RELATED = (
    r"\paragraph{Benchmark suites.} DAWNBench \citep{coleman2017dawnbench} and MLPerf Training "
    r"\citep{mattson2020mlperf} time a training job to a target quality, MLPerf Inference \citep{reddi2020mlperf} "
    r"the latency and throughput of serving scenarios, and AlgoPerf \citep{dahl2023algoperf} training algorithms by "
    r"their time to a result. They rank systems, hardware and software together, on fixed tasks; fwbench holds the "
    r"machine fixed and varies the framework, at the level of a user's job. TorchBench \citep{hao2023torchbench} "
    r"covers PyTorch's API surface over a model zoo and reports each configuration on its own; the Keras~3 "
    r"benchmarks \citep{keras3benchmarks} time the same models on the JAX, TensorFlow and PyTorch backends and find "
    r"no backend fastest throughout."
    "\n\n"
    r"\paragraph{Framework comparisons.} \citet{bahrampour2015comparative}, \citet{shi2016benchmarking} and "
    r"\citet{liu2018benchmarking} compared the deep-learning frameworks of their day on the time per mini-batch of "
    r"fixed networks on CPUs and GPUs. They predate the compilers now in the loop (torch.compile "
    r"\citep{ansel2024pytorch2}, jax.jit \citep{bradbury2018jax}, tf.function with XLA), whose one-off cost per "
    r"process decides which framework is cheapest for a short job; fwbench prices that cost with the steady step, "
    r"per job, and checks that the frameworks compute the same thing before timing them."
    "\n\n"
    r"\paragraph{Benchmarking methodology.} \citet{georges2007statistically} argue for confidence intervals over "
    r"repeated runs rather than single numbers, \citet{kalibera2013rigorous} for the process as the unit of "
    r"replication and for spreading a budget over processes and iterations; \citet{mytkowicz2009producing} show that "
    r"an innocuous change of environment can bias a result, and \citet{curtsinger2013stabilizer} randomise memory "
    r"layout to remove that bias; \citet{hoefler2015scientific} give rules for reporting performance (intervals, the "
    r"machine, what exactly was measured). fwbench follows them: processes as replicates, an environment padded to "
    r"a random length per process, Student-t intervals over processes, one error rate for a report (Holm's "
    r"procedure \citep{holm1979simple} in the graphical form of \citet{bretz2009graphical}, equivalence by two "
    r"one-sided tests \citep{schuirmann1987comparison}), and the machine's load recorded per case.")


@dataclass
class Meta:
    """The paper's title, authors and date (fwbench report --title, --author, --date); None: computed."""
    title: str | None = None
    authors: list[str] | None = None
    date: str | None = None


LONE_DESIGN = (r"processes as replicates, an environment padded to a random length per process, Student-t intervals "
               r"over processes")
SETS_DESIGN = (r"process sets as replicates, the configurations of a task timed side by side in each (one block at a "
               r"time, in an order drawn per cycle) so that a ratio is paired by set, an environment padded to a "
               r"random length per process, Student-t intervals over sets")


def related(sets: bool) -> str:
    """The related-work section, its last sentence in the words of the run's design."""
    return RELATED.replace(LONE_DESIGN, SETS_DESIGN) if sets else RELATED


@dataclass
class Text:
    """What the paper says that the report's blocks do not hold (reports.conclusions.narrative's)."""
    abstract: list[str]
    provenance: str
    work: str
    workloads: list[str]
    workloads_table: pd.DataFrame
    machine: str
    versions: str
    method: str
    results: list[tuple[str, str]]
    job_why: str
    discussion: list[str]
    limitations: list[str]
    reproducibility: list[tuple[str, str]]
    conclusion: str
    title: str
    date: str
    authors: list[str] = field(default_factory=list)
    sets: bool = False          # a run of process sets (side by side), not of lone processes


# ----------------------------------------------------------------------------- text

def _refs(tex: str, labels: dict[str, str]) -> str:
    """The report's words that point at a part of it, as LaTeX references: 'Appendix B' (the letter of
    a report heading 'Appendix B: ...'), '(Method)', '(table)' (the table under the Summary)."""
    def appendix(m: re.Match) -> str:
        lab = labels.get(m.group(1))
        return rf"Appendix~\ref{{{lab}}}" if lab else m.group(0)
    tex = re.sub(r"\bAppendix ([A-Z])\b", appendix, tex)
    if "Method" in labels:
        tex = tex.replace("(Method)", rf"(Appendix~\ref{{{labels['Method']}}})")
    for title, lab in labels.items():
        if len(title) > 1:
            tex = tex.replace(f"(see {title})", rf"(Appendix~\ref{{{lab}}})")
            tex = tex.replace(f": {title}.", rf": Appendix~\ref{{{lab}}}.")
    details = rf"Table~\ref{{tab:fwbench-{DETAILS_LABEL}}}"
    tex = tex.replace("(table)", f"({details})").replace(": table)", f": {details})")
    return re.sub(r"\bin the table\b", lambda m: f"in {details}", tex)


def _para(text: str, labels: dict[str, str] | None = None) -> str:
    """Report text as LaTeX: escaped, typeset, its references and the works it names cited."""
    return bibliography.cite_phrases(_refs(latex.prose(text), labels or {}))


def _section_label(title: str) -> str:
    return "sec:fwbench-" + escape.latex_label(title)


def _labels(blocks: list[tuple]) -> dict[str, str]:
    """The report's level-2 headings as the appendix labels they become: by appendix letter ('B') and
    by title ('Method', 'Replication and stability')."""
    out = {}
    for b in blocks:
        if b[0] == "h" and b[1] == 2:
            m = re.match(r"Appendix ([A-Z]): (.*)", str(b[2]))
            title = m.group(2) if m else str(b[2])
            shown = APPENDIX_TITLES.get(title, title)
            if m:
                out[m.group(1)] = _section_label(shown)
            out[str(b[2]) if not m else title] = _section_label(shown)
    return out


def _table(blocks: list[tuple], label: str) -> pd.DataFrame | None:
    return next((b[1] for b in blocks if b[0] == "table" and b[3] == label), None)


def _section(blocks: list[tuple], title: str) -> tuple[int, int]:
    """[start, end) of the level-2 section `title` in blocks (heading included); (0, 0) if none."""
    for i, b in enumerate(blocks):
        if b[0] == "h" and b[1] == 2 and b[2] == title:
            j = next((k for k in range(i + 1, len(blocks)) if blocks[k][0] == "h" and blocks[k][1] <= 2), len(blocks))
            return i, j
    return 0, 0


# ----------------------------------------------------------------------------- figures

FIGURE_MACRO = "\n".join([
    r"\newsavebox{\fwbenchfig}",
    r"% a figure at the line width, its printed width written to the log (latex.printed_figures reads it)",
    r"\newcommand{\fwbenchfigure}[3]{\sbox{\fwbenchfig}{\includegraphics[width=\linewidth,height=#2\textheight,"
    r"keepaspectratio]{#1}}\typeout{fwbench-figure #3: #1: \the\wd\fwbenchfig}\usebox{\fwbenchfig}}",
])


def _figure(b: tuple, fig_dir: str, height: str, labels: dict[str, str], where: str = "appendix") -> list[str]:
    return [r"\begin{figure}[tbp]\centering",
            rf"\fwbenchfigure{{{fig_dir}/{b[1]}.pdf}}{{{height}}}{{{where}}}",
            rf"\caption{{{_para(b[3], labels)}}}\label{{fig:fwbench-{escape.latex_label(b[1])}}}", r"\end{figure}"]


def _inline_figure(b: tuple, fig_dir: str, height: str, labels: dict[str, str]) -> list[str]:
    """An appendix figure where the report has it, not floated: a float waiting beside a longtable
    overfilled a page (LaTeX's longtable does not see pending floats)."""
    return [r"\begin{center}", rf"\fwbenchfigure{{{fig_dir}/{b[1]}.pdf}}{{{height}}}{{appendix}}\par\nopagebreak",
            rf"\captionof{{figure}}{{{_para(b[3], labels)}}}\label{{fig:fwbench-{escape.latex_label(b[1])}}}",
            r"\end{center}"]


def _main_figures(blocks: list[tuple]) -> list[tuple]:
    figs = {b[1]: b for b in blocks if b[0] == "fig"}
    return [figs[n] for n in MAIN_FIGURES if n in figs]


def fig_ref(name: str) -> str:
    return rf"Figure~\ref{{fig:fwbench-{escape.latex_label(name)}}}"


# ----------------------------------------------------------------------------- the appendix

def _blocks(blocks: list[tuple], fig_dir: str, labels: dict[str, str]) -> list[str]:
    out = []
    for b in blocks:
        if b[0] == "h":
            if b[1] == 1:
                continue
            title = re.sub(r"^Appendix [A-Z]: ", "", str(b[2]))
            title = APPENDIX_TITLES.get(title, title) if b[1] == 2 else title
            head = _para(title[:1].upper() + title[1:])
            out.append(rf"\section{{{head}}}\label{{{_section_label(title)}}}" if b[1] == 2 else
                       rf"\subsection{{{head}}}")
        elif b[0] == "p":
            out.append(_para(b[1], labels))
        elif b[0] == "ul":
            out += [r"\begin{itemize}", *[rf"\item {_para(x, labels)}" for x in b[1]], r"\end{itemize}"]
        elif b[0] == "table":
            out.append(_refs(latex.table(b[1], b[2], b[3]), labels))
        elif b[0] == "fig":
            out += _inline_figure(b, fig_dir, "0.84", labels)
    return out


# ----------------------------------------------------------------------------- main text

def _compact_jobs(jt: pd.DataFrame) -> pd.DataFrame:
    """The job table without its last column (where the cheapest configuration changes: the appendix's)."""
    return jt.drop(columns=[c for c in jt.columns if c.startswith("cheapest configuration")])


def _said_by(text: str) -> str:
    """'an industry article (2023) quoting Luca Antiga, CTO of ...' -> 'Luca Antiga'."""
    return str(text).split("quoting ", 1)[-1].split(",", 1)[0]


def _claims_main(ct: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"#": ct["#"], "claim": ct["claim"], "said by": ct["said by"].map(_said_by),
                         "verdict": ct["verdict"]})


def _claims_text(ct: pd.DataFrame, labels: dict[str, str]) -> list[str]:
    """For each claim this run could judge: what was measured and the caveat."""
    out = []
    for _, r in ct.iterrows():
        v = str(r["verdict"])
        if v.startswith((claims.NOT_RUN, claims.NOT_TESTABLE)):
            continue
        out.append(rf"\textbf{{Claim {r['#']}}} ({_para(v)}): {_para(str(r['what was measured']), labels)}"
                   + (f"; {_para(str(r['caveat']), labels)}" if r["caveat"] else "") + ".")
    return out


def _intro(text: Text, n_claims: int, jobs_figure: bool) -> list[str]:
    return [
        r"\section{Introduction}\label{sec:intro}",
        r"Which deep-learning framework to use is argued more often with claims than with measurements. Three "
        rf"practitioners quoted in \citet{{{SOURCE}}} make {n_claims} such claims about PyTorch "
        r"\citep{paszke2019pytorch,ansel2024pytorch2}, JAX \citep{bradbury2018jax} and TensorFlow "
        r"\citep{abadi2016tensorflow}: that the PyTorch~2 compiler makes training and inference faster, with gains "
        r"``as high as 40\%'', that JAX's program transforms are ahead of PyTorch's, that TensorFlow's static "
        r"graphs make variable-length sequences awkward, and more (Section~\ref{sec:claims}); the article gives no "
        r"measurements of its own. Earlier comparisons of frameworks timed the steady step of each framework's model "
        r"(Section~\ref{sec:related}). Since then compilers have moved into the loop: a compiled mode pays its "
        r"compiler once per process and then runs faster, so which framework is cheapest depends on how long the "
        r"job is, and a single speed ranking cannot answer the question a user has. This paper measures "
        rf"{latex.prose(text.work)} on equal work with fwbench \citep{{fwbench}} and answers per job. Its "
        r"contributions:",
        r"\begin{enumerate}",
        r"\item Equal work in three frameworks: every implementation is checked against an independent numpy float64 "
        r"reference (outputs, losses, gradients, optimizer steps) before anything is timed, each on its "
        r"framework's idiomatic fast path (Section~\ref{sec:design}).",
        (r"\item A measurement design with the process set as the unit of replication, the frameworks' "
         r"configurations timed side by side in each so that ratios are paired, " if text.sets else
         r"\item A measurement design with the process as the unit of replication \citep{kalibera2013rigorous}, ")
        + r"cold and warm compile caches by design, the compiler's one-off start-up measured apart, one error rate "
        r"per report \citep{holm1979simple}, and the smallest difference the run resolves stated with its answers.",
        r"\item An answer per job instead of a framework score: the cost of $N$ steps, calls or requests in a "
        r"fresh process with its interval, every pair of frameworks tested on its ratio "
        rf"(Section~\ref{{sec:results}}{', ' + fig_ref('pareto_jobs') if jobs_figure else ''}).",
        rf"\item The {n_claims} claims tested by one rule per kind of claim, each verdict for the device and sizes "
        r"measured (Section~\ref{sec:claims}).",
        r"\item The result files, the full report and this paper, which regenerate from those files with one "
        r"command (Section~\ref{sec:repro}).",
        r"\end{enumerate}",
    ]


def _design(text: Text, caveats: list[str], labels: dict[str, str]) -> list[str]:
    wt = text.workloads_table
    out = [r"\section{Benchmark design}\label{sec:design}", r"\subsection{Workloads}",
           " ".join(WORKLOAD_TEXT[w] for w in text.workloads if w in WORKLOAD_TEXT)
           + r" Table~\ref{tab:fwbench-workloads} gives each workload's size as run."]
    if wt is not None and not wt.empty:
        out.append(latex.table(wt, "The workloads as run: preset, shape of a call, parameters, and the model FLOPs "
                                   "of one step of each task (the workload's formula, the same for every "
                                   "framework).", "workloads"))
    out += [r"\subsection{Frameworks and machine}",
            f"Versions: {latex.prose(text.versions)}. Machine: {latex.prose(text.machine)}. Every framework runs in "
            "processes of its own with the same intra-op thread count, the same C heap policy and float32 "
            "throughout; its other runtime settings are listed in the appendix's set-up table.",
            r"\subsection{Measurement}", _para(text.method, labels)]
    out += [_para(c, labels) for c in caveats]
    return out


def _results(blocks: list[tuple], text: Text, figs: list[tuple], fig_dir: str, labels: dict[str, str]) -> list[str]:
    rec = next((str(b[1]) for b in blocks if b[0] == "p" and str(b[1]).startswith(RECOMMENDATION)), "")
    jt = _table(blocks, "jobs")
    out = [r"\section{Results}\label{sec:results}", r"\subsection{The choice per job}"]
    placed = {b[1]: False for b in figs}
    for b in figs:
        if b[1] == "pareto_jobs":           # the job view first, floated to the top of a page near here
            out += _figure(b, fig_dir, "0.75", labels, "main")
            placed[b[1]] = True
    if rec:
        out.append(_para(rec, labels) + (" " + _para(text.job_why, labels) if text.job_why else ""))
    if jt is not None and not jt.empty:
        out.append(r"Table~\ref{tab:fwbench-jobs-main} gives each job's cost per framework, "
                   + (f"{fig_ref('pareto_jobs')} the configurations behind it; " if "pareto_jobs" in placed else "")
                   + r"the appendix's Table~\ref{tab:fwbench-jobs} adds where the cheapest configuration changes "
                     r"with $N$.")
        out.append(_refs(latex.table(_compact_jobs(jt), "The choice per job, cold cache: each framework's cheapest "
                                     "configuration (framework x mode x strategy, eager included) and its cost in a "
                                     "fresh process = the compiled mode's compiler start-up + first call + N x steady "
                                     "step, with its 95% interval; the answer tests every pair of frameworks on the "
                                     "ratio of their costs, the job's pairs sharing a 5% error rate.", "jobs-main"),
                         labels))
    for concern, paragraph in text.results:
        out += [rf"\subsection{{{latex.prose(concern)}}}", _para(paragraph, labels)]
        if concern.startswith("Claim 1") and "speedup" in placed and not placed["speedup"]:
            out[-1] += rf" {fig_ref('speedup')} shows every compiled mode's speedup over its own eager mode."
            out += _figure(next(b for b in figs if b[1] == "speedup"), fig_dir, "0.6", labels, "main")
            placed["speedup"] = True
    for b in figs:
        if not placed[b[1]]:
            out.append(rf"{fig_ref(b[1])}: {_para(b[3].split('.')[0], labels)}.")
            out += _figure(b, fig_dir, "0.6", labels, "main")
    return out


def _claims_section(blocks: list[tuple], labels: dict[str, str]) -> list[str]:
    ct = _table(blocks, "claims")
    out = [r"\section{The claims}\label{sec:claims}",
           rf"Each claim is quoted as \citet{{{SOURCE}}} reports it; each verdict follows the "
           r"rule for its kind of claim (appendix, ``The method in full''), holds for this run's device and sizes "
           r"only, and reads ``(indicative)'' where it rests on point estimates."]
    if ct is None or ct.empty:
        return out
    out.append(latex.table(_claims_main(ct), "The claims under test and their verdicts in this run (the appendix's "
                                             "claims table adds what was measured and each caveat).", "claims-main"))
    return out + _claims_text(ct, labels)


def title(text: Text, meta: Meta) -> tuple[str, list[str], str]:
    return (meta.title or text.title, meta.authors or text.authors or DEFAULT_AUTHORS, meta.date or text.date)


def article(blocks: list[tuple], text: Text, meta: Meta | None = None, fig_dir: str = "figures") -> str:
    """paper.tex (see the module docstring)."""
    meta = meta or Meta()
    labels = _labels(blocks)
    s0, s1 = _section(blocks, "Summary")
    summ = blocks[s0 + 1:s1]
    main_figs = _main_figures(blocks)
    caveats = [str(b[1]) for b in blocks[:s0] if b[0] == "p" and str(b[1]).startswith(CAVEATS)]
    # the Summary's tables and scope open the appendix; its sentences are the results' (narrative.results)
    rest = [("h", 2, "Summary tables")] + [b for b in summ if b[0] in ("table", "p")]
    used = {id(b) for b in blocks[:s1]} | {id(b) for b in main_figs}
    rest += [b for b in blocks[s1:] if id(b) not in used]
    head, people, date = title(text, meta)
    out = [r"\documentclass[10pt,letterpaper]{article}", r"\usepackage[margin=2cm]{geometry}", latex.PACKAGES,
           r"\usepackage{graphicx,caption}", r"\usepackage[round,authoryear]{natbib}",
           r"\usepackage[hidelinks]{hyperref}", r"\emergencystretch=3em", r"\hbadness=10000", FIGURE_MACRO,
           r"\renewcommand{\topfraction}{0.9}", r"\renewcommand{\textfraction}{0.07}",
           r"\renewcommand{\floatpagefraction}{0.8}",
           rf"\title{{{latex.prose(head)}}}",
           r"\author{" + r" \and ".join(latex.prose(a) for a in people) + "}",
           rf"\date{{{latex.prose(date)}}}", r"\begin{document}", r"\maketitle",
           r"\begin{abstract}", " ".join(_para(x) for x in text.abstract), r"\end{abstract}",
           r"\noindent\textit{Provenance.} " + _para(text.provenance), ""]
    out += _intro(text, len(claims.CLAIMS), any(b[1] == "pareto_jobs" for b in main_figs))
    out += [r"\section{Related work}\label{sec:related}", related(text.sets)]
    out += _design(text, caveats, labels)
    out += _results(blocks, text, main_figs, fig_dir, labels)
    out += _claims_section(blocks, labels)
    out += [r"\section{Discussion}\label{sec:discussion}", *[_para(p, labels) for p in text.discussion]]
    out += [r"\section{Limitations}\label{sec:limitations}", r"\begin{itemize}",
            *[rf"\item {_para(x, labels)}" for x in text.limitations], r"\end{itemize}"]
    out += [r"\section{Reproducibility}\label{sec:repro}", r"\begin{description}",
            *[rf"\item[{latex.prose(k)}] {_command(v) if k in COMMANDS else _para(v, labels)}"
              for k, v in text.reproducibility], r"\end{description}"]
    out += [r"\section{Conclusion}\label{sec:conclusion}", _para(text.conclusion, labels),
            rf"\label{{{latex.MAIN_END_LABEL}}}"]
    out += [r"\bibliographystyle{plainnat}", r"\bibliography{references}", r"\clearpage", r"\appendix",
            rf"\label{{{APPENDIX_LABEL}}}"]
    out += _blocks(rest, fig_dir, labels)
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


COMMANDS = ("Measure", "Re-render")       # reproducibility items whose text holds commands, set as typed


def _command(text: str) -> str:
    """Command lines in typewriter type, '--' as typed: a line breaks only between words and after a
    '/' of a path, never inside an option (a copied 'fwbench run -' + '-workload' fails)."""
    def word(w: str) -> str:
        return r"\allowbreak{}".join(rf"\mbox{{{escape.latex(p)}}}" for p in re.split(r"(?<=/)", w) if p)
    return r"{\raggedright\texttt{" + " ".join(word(w) for w in text.split(" ") if w) + r"}\par}"


def _design_sentences(cases: pd.DataFrame, cold: int, warm: int) -> str:
    """How the processes ran and what a steady step and a ratio are, for the run's design: process sets
    (side by side) or lone processes one at a time."""
    if rdata.side_by_side(cases):
        return (f"Each framework ran in process sets: {stats.plural(cold, 'cold set')} (every compile cache empty) "
                f"and {stats.plural(warm, 'warm set')} (the run's cache filled), one after another, each one process "
                "per framework and a second process of one framework (an A/A control), alive together and started "
                "in an order drawn per set, each with the same model, inputs and checked outputs. Task by task, the "
                "configurations took turns in cycles of one block each, in an order drawn per cycle, one block at "
                "a time. A case's steady step is the geometric mean over sets of its blocks' time per call with a "
                "Student-t interval over sets (df = sets - 1); a ratio of two cases is paired by set (the per-set "
                "mean of each cycle's log ratio), so the machine's state during a cycle falls on both.")
    return (f"Each framework ran in processes of its own: up to {stats.plural(cold, 'cold process')} (every compile "
            f"cache empty for every case) and {stats.plural(warm, 'warm process')} (the run's cache filled), one at a "
            "time in a seeded order, each with the same model, inputs and checked outputs. A case's steady step "
            "is the geometric mean of its warm processes' median rounds with a Student-t interval over "
            "processes (df = processes - 1); a ratio of two cases uses Welch's standard error with Hsu's "
            "conservative df, min(processes a, processes b) - 1, or a paired t interval where both ran in the same "
            "processes.")


def method_paragraph(cases: pd.DataFrame, fam: stats.Family) -> str:
    """The main text's method: the allocation, the intervals (as computed), the verdicts, the family
    and the job costs."""
    t = cases[cases["status"].isin(TIMED)]
    cold = int(t["n_cold"].max()) if "n_cold" in t.columns and t["n_cold"].notna().any() else 0
    warm = int(t["n_warm"].max()) if "n_warm" in t.columns and t["n_warm"].notna().any() else 0
    m = f"{100 * fam.margin:.0f}%"
    u = rdata.unit(cases)
    return (_design_sentences(cases, cold, warm)
            + f" A comparison needs {stats.MIN_TESTED} {u} a side; below that the {u}' range is "
            f"shown and it is not tested. Verdicts are stated against a {m} margin, "
            + (f"and the report's {stats.plural(fam.m, 'tested comparison')} share one 5% chance of any false "
               "'faster' or 'slower' (Holm's step-down procedure in two groups, those against op-by-op eager modes "
               "apart), each interval shown at its Holm level; equivalence is two one-sided tests at the same level."
               if fam.m else f"but no comparison of this run has 3 {u} a side, so none is tested and no "
               "difference is stated.")
            + " A job's cost in a fresh "
            "process is the compiled mode's compiler start-up + first call (cold cache) + N x steady step, its "
            "95% interval from draws of each term's t distribution; every pair of frameworks' cheapest "
            "configurations is tested on the ratio of their costs (Bonferroni over the job's pairs). The full "
            "method is in the appendix (Method).")

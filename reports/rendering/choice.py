"""The choice per job and the claims, drawn: the Summary's page-1 blocks (the job
table, the claims table, the --quick warning) and the section "The choice per job" (the
Pareto fronts of steady step against first call, as a table and a figure per workload, and
every task's jobs with a warm cache). The numbers come from reports.conclusions.jobs and
reports.conclusions.claims; nothing here computes a cost.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from reports.conclusions import claims, jobs
from reports.measures import data as rdata
from reports.measures import stats
from reports.measures.data import framework_order
from reports.rendering import figures as F
from reports.rendering.sections.common import Block, figure_block
from reports.util import escape

PANELS_PER_ROW = 4
# two lines: on one (3.4 in at its size) it ran out of a figure of one or two rows of panels
Y_LABEL = "start-up + first call,\ncold cache (s, log scale)"


def page_one(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None,
             every: pd.DataFrame | None = None) -> list[Block]:
    """The Summary's answer: what each job costs per framework's cheapest configuration and
    the claims' verdicts (`every`: all cases, scale-out's included, for claim 5), with the
    --quick warning first where the presets were tiny."""
    b: list[Block] = []
    if jobs.tiny_presets(df):
        b.append(("p", "Tiny presets (`fwbench run --quick`): these models are far smaller than the default (small) "
                       "presets, so which framework is cheapest here need not predict which is cheapest at the "
                       "default presets or at your model's size; run without --quick before choosing."))
    jt = jobs.job_table(df, job_list)
    u = rdata.unit(df)
    if not jt.empty:
        b.append(("table", jt, "The choice per job, cold cache (every compile cache empty): for each job (a task and "
                  "a count), each framework's cheapest configuration (framework x mode x strategy, eager included) "
                  "and its cost in a fresh process = the compiled mode's compiler start-up + first call + N x steady "
                  "step (streams: the cold pass, then the warm rate) with its 95% interval (from draws of each term's "
                  f"t distribution over {u}; none where a term has fewer than 3 {u}). The answer tests "
                  "every pair of frameworks on the ratio of their costs, the job's pairs sharing a 5% error rate: "
                  "'cheapest: X' where X is cheaper than every other, 'not resolved against Y' where that pair's "
                  "interval holds 1, 'indicative' where no pair with X has an interval. Last, the cheapest "
                  "configuration by N (point estimates), each change with the 95% interval of its N, or 'not "
                  "resolved' where the two steps do not differ. Your own job: fwbench report --job TASK:N. "
                  "Warm-cache costs and the Pareto fronts: The choice per job.",
                  "jobs"))
    ct = claims.table(df, fam, every)
    b.append(("table", ct, "The seven claims fwbench was set up to check, as an industry article (2023) quotes three "
              "practitioners (it gives no measurements of its own): each verdict by the rule for its kind of claim "
              "(Method), from this run's data, for the device and sizes it names; 'not tested in this run' where "
              f"the claim's workload did not run; '(indicative)': it rests on point estimates, fewer than 3 {u} "
              "a side.", "claims"))
    return b


def section(df: pd.DataFrame, figs: dict[str, tuple[Path | None, str]],
            job_list: list[jobs.Job] | None) -> list[Block]:
    """The choice per job: the Pareto fronts (table and figures) and the warm-cache jobs."""
    pt = jobs.pareto_table(df)
    if pt.empty:
        return []
    b: list[Block] = [("h", 2, "The choice per job"),
                      ("p", "A configuration is what you would deploy: framework x mode x strategy, eager included. "
                            "Per task, the configurations on the Pareto front of steady step against first call "
                            "(none other is at least as fast on both and faster on one): with every compile cache "
                            "empty (cold) and with the run's cache filled (warm); the first call includes the "
                            "compiled mode's compiler start-up, which a fresh process pays once. A job's cost is that "
                            "+ N x steady step, so a short job favours the front's left end and a long job its lower "
                            "end; the cheapest configuration changes at the N given in the job table.")]
    b.append(("table", pt, "Pareto front per task: configuration (steady step, first call with the compiler's "
              "start-up), fastest first call first.", "pareto"))
    for name in sorted((k for k in figs if k.startswith("pareto_")), key=lambda k: (k != JOBS_FIGURE, k)):
        b += figure_block(figs, name)
    warm = jobs.job_table(df, job_list, role="warm")
    if not warm.empty:
        b.append(("table", warm, "The choice per job with a warm compile cache (the run's cache filled before the "
                  "first call; streams are measured cold only): as the Summary's job table otherwise.", "jobs-warm"))
    return b


def _n_words(n: int) -> str:
    """A job's count in a panel's label: 100, 1k, 100k, 2.5M."""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:g}{suffix}"
    return f"{n:,}"


def _pareto_panel(ax: object, g: pd.DataFrame, front: pd.DataFrame, colours: dict[str, str], size: float,
                  labels: dict[str, list[int]] | None = None) -> None:
    """One task's configurations: x the steady step, y what a fresh process waits for before its
    first result (the compiler's start-up + the first call, cold cache), as the first_call figure
    orients them; colour framework, marker mode (figures.MODE_MARKERS), the cold front dashed;
    `labels`: configuration -> the job counts it is cheapest for, written beside its point."""
    for (fw, mode), h in g.groupby(["framework", "mode"], sort=False):
        ax.scatter(h["median_s"], h["first_call_cold_s"], color=colours.get(fw, "grey"), s=size,
                   marker=F.MODE_MARKERS.get(mode, "D"), edgecolor="black", linewidth=0.4, zorder=3,
                   label=f"{fw} {mode}")
    if len(front):
        f = front.sort_values("step", kind="stable")
        ax.step(f["step"], f["first call"], where="post", color="black", lw=0.8, ls="--", zorder=2)
    for conf, ns in (labels or {}).items():
        h = g[g["configuration"] == conf]
        if len(h):
            ax.annotate("N=" + ", ".join(_n_words(n) for n in sorted(ns)), (h["median_s"].iloc[0],
                        h["first_call_cold_s"].iloc[0]), xytext=(4, 3), textcoords="offset points",
                        fontsize=6.5, zorder=4, bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.55,
                                                      "pad": 0.5})
    xs, ys = g["median_s"].astype(float), g["first_call_cold_s"].astype(float)
    x0, x1, y0, y1 = xs.min() / 1.6, xs.max() * (3.5 if labels else 1.6), ys.min() / 1.6, ys.max() * 2.2
    ax.set_xlim(x0, x1)             # before the log scales: one point's own limits are no range to scale
    ax.set_ylim(y0, y1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    F._plain_ticks(ax.xaxis, x1 / x0, few=labels is not None)
    F._plain_ticks(ax.yaxis, y1 / y0, few=labels is not None)


TITLE_CHARS = 20      # a longer task name ran out of its panel (per_sample_grad_mlp_b32: 23)


def _two_lines(name: str) -> str:
    """`name` broken after its underscore nearest the middle (unchanged where it has none)."""
    cuts = [i for i, c in enumerate(name) if c == "_"]
    if not cuts:
        return name
    i = min(cuts, key=lambda k: abs(k - len(name) / 2))
    return f"{name[:i + 1]}\n{name[i + 1:]}"


def _legend(fig: object, axes: list, ncol: int) -> None:
    handles: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    handles["Pareto front (cold cache)"] = Line2D([], [], color="black", lw=0.8, ls="--")
    fig.legend(handles.values(), handles.keys(), loc="outside upper center", ncols=min(ncol, len(handles)),
               frameon=False)


def _conf(df: pd.DataFrame) -> pd.DataFrame:
    conf = jobs.configurations(df)
    if len(conf):       # what a fresh process waits for: the mode's compiler start-up, then the first call
        conf = conf.assign(first_call_cold_s=conf["first_call_cold_s"] + conf["startup_s"])
        conf = conf[conf["first_call_cold_s"].notna()]
    return conf


JOBS_FIGURE = "pareto_jobs"       # the main text's job view: the recommendation's tasks at print size


def draw(df: pd.DataFrame, out_dir: Path, job_list: list[jobs.Job] | None = None
         ) -> dict[str, tuple[Path | None, str]]:
    """pareto_<workload>: a panel per task, every configuration (colour: framework; marker: mode)
    placed by its steady step and what a fresh process waits for (start-up + first call, cold
    cache), the cold front dashed (not drawn, and a note instead, past figures.MAX_PANELS tasks: the
    rule of every figure with a panel per task); and pareto_jobs, the same for the tasks of the job table only,
    drawn at the paper's line width (figures.print_style), each configuration that is cheapest for
    one of the jobs labelled with the jobs' counts (a note instead past MAX_PANELS tasks too)."""
    df = escape.mpl_frame(df)           # names from result files are text to matplotlib, never markup
    conf = _conf(df)
    out: dict[str, tuple[Path | None, str]] = {}
    if conf.empty:
        return out
    front = jobs.pareto(df, "cold")
    colours = F.colours(framework_order(conf["framework"]))
    for wl, w in conf.groupby("workload", sort=True):
        tasks = sorted(set(w["task"]))
        name = "pareto_" + re.sub(r"[^A-Za-z0-9_-]", "_", str(wl))     # a file name whatever the workload is called
        why = F.too_many(name, len(tasks))
        if why:                             # a panel per task, as the figures of figures.FIGURES
            out[name] = (None, why)
            continue
        with F._style():
            rows = math.ceil(len(tasks) / PANELS_PER_ROW)
            fig, axes = F.line_grid(len(tasks), PANELS_PER_ROW, 1.6 if rows <= 4 else 1.4)
            for ax, task in zip(axes, tasks):
                f = front[(front["workload"] == wl) & (front["task"] == task)] if len(front) else front
                _pareto_panel(ax, w[w["task"] == task], f, colours, 16)
                ax.set_title(_two_lines(task) if len(task) > TITLE_CHARS else task, fontsize=6.8)
            fig.set_figheight(max(fig.get_figheight(), 3.2))
            fig.supxlabel("steady step (s, log scale)")
            fig.supylabel(Y_LABEL)
            _legend(fig, axes, 4)
        png, _ = F.save(fig, out_dir, name)
        out[name] = (png, caption(name))
    outs = jobs.outcomes(df, job_list, "cold")
    keys = list(dict.fromkeys((o.job.workload, o.job.task) for o in outs))
    if keys and (why := F.too_many(JOBS_FIGURE, len(keys))):
        out[JOBS_FIGURE] = (None, why)
    elif keys:
        out[JOBS_FIGURE] = (_jobs_figure(conf, front, colours, outs, keys, out_dir), caption(JOBS_FIGURE))
    return out


def _jobs_figure(conf: pd.DataFrame, front: pd.DataFrame, colours: dict[str, str], outs: list[jobs.Outcome],
                 keys: list[tuple[str, str]], out_dir: Path) -> Path:
    """pareto_jobs (draw): a panel per (workload, task) of the jobs, at the paper's line width."""
    cheapest: dict[tuple[str, str], dict[str, list[int]]] = {}
    for o in outs:
        cheapest.setdefault((o.job.workload, o.job.task), {}).setdefault(
            str(o.best.iloc[0]["configuration"]), []).append(o.job.n)
    ncols = 3 if len(keys) <= 9 else 4
    rows = math.ceil(len(keys) / ncols)
    # a title that would run into its neighbour's takes two lines: the workload, then the task
    two = max(len(f"{wl} {task}") for wl, task in keys) > 78 / ncols
    per = 1.62 + (0.12 if two else 0.0)
    with F.print_style():
        fig, axes = F.line_grid(len(keys), ncols, per)
        fig.set_figheight(per * rows + 0.55)
        for ax, (wl, task) in zip(axes, keys):
            g = conf[(conf["workload"] == wl) & (conf["task"] == task)]
            f = front[(front["workload"] == wl) & (front["task"] == task)] if len(front) else front
            _pareto_panel(ax, g, f, colours, 16, cheapest.get((wl, task), {}))
            ax.set_title(f"{wl}\n{task}" if two else f"{wl} {task}", fontsize=6.8, linespacing=1.0)
        fig.supxlabel("steady step (s, log scale)")
        fig.supylabel(Y_LABEL)
        _legend(fig, axes, 4)
    png, _ = F.save(fig, out_dir, JOBS_FIGURE)
    return png


def caption(name: str) -> str:
    """The caption of a figure drawn here (pareto_<workload>, pareto_jobs)."""
    what = ("per configuration (colour: framework; marker: mode, circle eager, square TensorFlow graph, triangle "
            "compiled; both axes log): its steady step (for a stream, its warm pass) against what a "
            "fresh process waits for before its first result, the compiled mode's compiler start-up (where the "
            "runs measured it) + the first call with every compile cache empty; dashed: the Pareto front. A job "
            "of N calls costs about the first + N x the step, so short jobs favour the front's upper left end "
            "and long jobs its lower right")
    if name == JOBS_FIGURE:
        return ("The choice per job, for the tasks of the job table: " + what + ". N = ...: the configuration "
                "cheapest for a job of that count (point estimates; the job table has each cost's interval and "
                "which differences are resolved).")
    return f"{name.removeprefix('pareto_')}: " + what + ". Strategies of a mode share its marker."

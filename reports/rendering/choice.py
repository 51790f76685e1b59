"""The choice per job and the claims, drawn (issue 28): the Summary's page-1 blocks (the job
table, the claims table, the --quick warning) and the section "The choice per job" (the
Pareto fronts of steady step against first call, as a table and a figure per workload, and
every task's jobs with a warm cache). The numbers come from reports.analysis.jobs and
reports.analysis.claims; nothing here computes a cost.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from reports.analysis import claims, jobs, stats
from reports.analysis.data import framework_order
from reports.rendering import escape
from reports.rendering import figures as F
from reports.rendering.sections.common import Block, figure_block

MODE_MARKERS = {"eager": "o", "graph": "s", "compiled": "^"}
PANELS_PER_ROW = 4


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
    if not jt.empty:
        b.append(("table", jt, "The choice per job, cold cache (every compile cache empty): for each job (a task and "
                  "a count), each framework's cheapest configuration (framework x mode x strategy, eager included) "
                  "and its cost in a fresh process = the compiled mode's compiler start-up + first call + N x steady "
                  "step (streams: the cold pass, then the warm rate) with its 95% interval (from draws of each term's "
                  "t distribution over processes; none where a term has fewer than 3 processes). The answer tests "
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
              "the claim's workload did not run; '(indicative)': it rests on point estimates, fewer than 3 processes "
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
    for name in sorted(k for k in figs if k.startswith("pareto_")):
        b += figure_block(figs, name)
    warm = jobs.job_table(df, job_list, role="warm")
    if not warm.empty:
        b.append(("table", warm, "The choice per job with a warm compile cache (the run's cache filled before the "
                  "first call; streams are measured cold only): as the Summary's job table otherwise.", "jobs-warm"))
    return b


def draw(df: pd.DataFrame, out_dir: Path) -> dict[str, tuple[Path | None, str]]:
    """pareto_<workload>: a panel per task, steady step against cold first call, every
    configuration (colour: framework; marker: mode), the cold front as a line."""
    df = escape.mpl_frame(df)           # names from result files are text to matplotlib, never markup
    conf = jobs.configurations(df)
    if len(conf):       # what a fresh process waits for: the mode's compiler start-up, then the first call
        conf = conf.assign(first_call_cold_s=conf["first_call_cold_s"] + conf["startup_s"])
        conf = conf[conf["first_call_cold_s"].notna()]
    out: dict[str, tuple[Path | None, str]] = {}
    if conf.empty:
        return out
    front = jobs.pareto(df, "cold")
    colours = F.colours(framework_order(conf["framework"]))
    for wl, w in conf.groupby("workload", sort=True):
        tasks = sorted(set(w["task"]))
        cols = min(PANELS_PER_ROW, len(tasks))
        rows = math.ceil(len(tasks) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
        for ax, task in zip(axes.flat, tasks):
            g = w[w["task"] == task]
            for (fw, mode), h in g.groupby(["framework", "mode"], sort=False):
                ax.scatter(h["first_call_cold_s"], h["median_s"], c=colours.get(fw, "grey"),
                           marker=MODE_MARKERS.get(mode, "x"), s=22, label=f"{fw} {mode}")
            f = front[(front["workload"] == wl) & (front["task"] == task)] if len(front) else front
            if len(f):
                ax.step(f["first call"], f["step"], where="post", color="black", lw=0.8, ls="--")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(task, fontsize=8)
            ax.tick_params(which="both", labelsize=7)
        for ax in list(axes.flat)[len(tasks):]:
            ax.axis("off")
        fig.supxlabel("start-up + first call, cold cache (s, log scale)", fontsize=8)
        fig.supylabel("steady step (s, log scale)", fontsize=8)
        handles = {}
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        top = 1 - 0.35 / fig.get_figheight()
        fig.legend(handles.values(), handles.keys(), loc="upper center", ncol=min(7, len(handles)), fontsize=7,
                   frameon=False, bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout(rect=(0, 0, 1, top))
        name = "pareto_" + re.sub(r"[^A-Za-z0-9_-]", "_", str(wl))     # a file name whatever the workload is called
        png, _ = F.save(fig, out_dir, name)
        plt.close(fig)
        out[name] = (png, caption(name))
    return out


def caption(name: str) -> str:
    """The caption of a figure drawn here (pareto_<workload>)."""
    return (f"{name.removeprefix('pareto_')}: steady step against cold first call (the mode's compiler start-up "
            "included, where the runs measured it) per configuration (colour: "
            "framework; marker: mode, circle eager, square TF graph, triangle compiled; both axes log); dashed: the "
            "Pareto front. Strategies of a mode share its marker.")

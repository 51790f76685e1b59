"""The derivatives section (workloads/derivatives.py): per-example gradients, Hessian-vector
products, Hessians, Jacobians, n-th derivatives and ensembles, each by several transforms
(strategies: vmap, jacfwd/jacrev, ... and the plain `loop` over examples).

    tables   capability: problem x transform x framework/mode, the statuses over the
             problem's sizes with the first reason that is not ok
    figures  der_time (time per problem vs its size: batch, parameters, order, models;
             log-log), der_vmap (speedup of each transform over the `loop` baseline), der_order
             (run time and compile time vs derivative order), der_memory (peak memory of the
             HVP variants with what measured it)
    findings each transform against its loop (paired over processes), the Jacobian's forward
             against its reverse mode per shape, the HVP variants' peak memory (a per-process
             scalar) and the fastest framework per task
    score    "derivatives and vmap": the mean of a speed score and the coverage of (task,
             eager | accelerated) slots
"""
from __future__ import annotations

import math
import re

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.analysis import stats
from reports.analysis.data import TIMED, finite, framework_order, mode_order
from reports.analysis.verdicts import judge, judge_scalar, versus
from reports.rendering import figures as F
from reports.sections.common import (
    Lacking,
    Plot,
    Section,
    Table,
    case_label,
    has,
    has_mode,
    short,
    strategy_label,
    strategy_styles,
)

BASELINE_STRATEGY = "loop"     # the plain loop the vectorised transforms are compared with
SIZE_FIELDS = ("derivative_order", "models", "params", "batch")   # a problem's size: the first that varies


def problem(task: str) -> str:
    """The problem of a derivatives task name without its size: 'hessian_p100' -> 'hessian'."""
    return re.sub(r"(_[a-z]?\d+)+$", "", str(task))


def _size_axis(g: pd.DataFrame) -> tuple[str, list[float | str]]:
    """The size a problem's tasks vary in (the first of SIZE_FIELDS that varies, else the Jacobian's n
    for Jacobians, else the first present), and each row's value of it."""
    present = [k for k in SIZE_FIELDS if has(g, k)]
    varying = [k for k in present if g[k].nunique() > 1]
    if varying or (present and not has(g, "n")):
        k = (varying or present)[0]
        return k, [float(v) if finite(v) else str(t) for v, t in zip(g[k], g["task"])]
    if has(g, "n") and has(g, "m"):     # the Jacobian: n m is fixed, so n alone places a shape, numerically
        return "n (inputs; outputs m = n m / n)", [float(n) if finite(n) else str(t) for n, t in zip(g["n"], g["task"])]
    return "task", [str(t) for t in g["task"]]


def capability(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame:
    """problem x transform (strategy) x framework/mode: each cell the statuses over the
    problem's sizes, with the first non-ok reason, shortened."""
    d = d[has_mode(d, lacking)]
    if d.empty:
        return pd.DataFrame()
    d = d.assign(problem=d["task"].map(problem), transform=d["strategy"].fillna("default"))
    cols = [f"{f} {m}" for f in framework_order(d["framework"])
            for m in mode_order(d.loc[d["framework"] == f, "mode"])]
    rows = []
    for (p, s), g in d.groupby(["problem", "transform"], sort=True):
        row = {"problem": p, "transform": s}
        for (f, m), h in g.groupby(["framework", "mode"]):
            counts = h["status"].value_counts()
            cell = (counts.index[0] if len(counts) == 1 else
                    ", ".join(f"{k} {v}/{len(h)}" for k, v in counts.items()))
            bad = h[h["status"] != "ok"]
            why = short(bad["reason"].iloc[0]) if len(bad) else ""
            row[f"{f} {m}"] = cell + (f": {why}" if why else "")
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=["problem", "transform", *cols]).fillna("-")


def _vs_loop(d: pd.DataFrame) -> pd.DataFrame:
    """Rows with a `loop` baseline in the same framework, mode and task: speedup over it
    (the loop's time over the transform's, paired over the processes both ran in), with its
    95% interval, and the baseline's case (`loop_case`) for the report's verdict."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    base = t[t["strategy"] == BASELINE_STRATEGY].set_index(["framework", "mode", "task"])
    rows = []
    for _, r in t[t["strategy"] != BASELINE_STRATEGY].iterrows():
        k = (r["framework"], r["mode"], r["task"])
        if k not in base.index:
            continue
        b = base.loc[k]
        b = b.iloc[0] if isinstance(b, pd.DataFrame) else b
        x = stats.ratio(b["est"], r["est"]) if isinstance(b["est"], stats.Est) else None
        lo, hi = x.interval() if x is not None else (math.nan, math.nan)
        rows.append({**r.to_dict(), "vs_loop": b["median_s"] / r["median_s"], "vs_loop_lo": lo, "vs_loop_hi": hi,
                     "loop_est": b["est"], "loop_case": b["case"]})
    return pd.DataFrame(rows)


def findings(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """Each transform against its loop, Jacobian forward against reverse mode, the HVP
    variants' peak memory and the fastest framework per task, by the report's verdicts."""
    out = []
    v = _vs_loop(d)
    same = []
    for _, r in v.iterrows():
        j = fam.judge(f"vs loop|{r['case']}", r["est"], r["loop_est"], (r["case"], r["loop_case"]))
        if j.decided:
            out.append(f"{r['task']}: " + stats.sentence(j, case_label(r), "the loop over examples", fam.margin,
                                                          flags=fam.key_flags.get(j.key, ())) + ".")
        else:
            same.append(f"{r['task']} {case_label(r)}: {stats.words(j.verdict, fam.margin)} ({j.interval_text()})")
    if same:
        out.append("Against the loop over examples, no stated difference: " + "; ".join(same) + ".")
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    out += _crossover(t, fam)
    out += _memory_findings(t, fam)
    for task, g in t.groupby("task", sort=True):
        best = g.sort_values("median_s").drop_duplicates("framework")
        if len(best) >= 2:
            out.append(versus(best.iloc[0], best.iloc[1], f"fastest {task} (each framework's best transform and mode)",
                              fam))
    return out


CROSSOVER = ("jacfwd", "jacrev")       # the Jacobian's two modes, compared per shape


def _crossover(t: pd.DataFrame, fam: stats.Family) -> list[str]:
    """Per framework and mode: at which Jacobian shapes (n -> m) forward mode beats reverse
    mode and the other way round, by the report's verdicts."""
    out = []
    j = t[t["task"].map(problem) == "jacobian"]
    for (f, m), g in j.groupby(["framework", "mode"], sort=False):
        parts = []
        for task, h in g.groupby("task", sort=True):
            a, b = (h[h["strategy"] == s] for s in CROSSOVER)
            if a.empty or b.empty:
                continue
            jj = judge(a.iloc[0], b.iloc[0], fam)
            r0 = h.iloc[0]
            shape = f"{r0['n']:.0f}->{r0['m']:.0f}" if finite(r0.get("n")) and finite(r0.get("m")) else str(task)
            v = stats.coarse(jj.verdict)
            head = {stats.FASTER: "jacfwd faster", stats.SLOWER: "jacrev faster"}.get(v, stats.words(jj.verdict,
                                                                                               fam.margin))
            parts.append(f"{shape}: {head} (jacfwd's {jj.interval_text()} over jacrev's)")
        if parts:
            out.append(f"Jacobian (n -> m), {f} {m}, forward vs reverse mode: " + "; ".join(parts) + ".")
    return out


def _memory_findings(t: pd.DataFrame, fam: stats.Family) -> list[str]:
    """Per HVP task, framework and mode: the variants' peak memory against each other (a
    per-process measurement, paired over the processes both ran in), with what measured it."""
    out = []
    if not has(t, "peak_memory_bytes"):
        return out
    h = t[(t["task"].map(problem).str.startswith("hvp")) & t["peak_memory_bytes"].notna()]
    for (task, f, m), g in h.groupby(["task", "framework", "mode"], sort=False):
        g = g.sort_values("peak_memory_bytes")
        if len(g) < 2:
            continue
        a, b = g.iloc[0], g.iloc[-1]
        j = judge_scalar(a, b, "peak_memory_bytes", "memory", fam)
        mib = {k: f"{v['strategy']} {v['peak_memory_bytes'] / 2 ** 20:.1f} MiB" for k, v in (("a", a), ("b", b))}
        what = f"{task} peak memory, {f} {m} ({short(_memory_source(a), 80)}): {mib['a']}, {mib['b']}: "
        out.append(what + stats.sentence(j, str(a["strategy"]), str(b["strategy"]), fam.margin, label="memory ratio",
                                         speed=False, faster="smaller", slower="larger",
                                         flags=fam.key_flags.get(j.key, ())) + ".")
    return out


def score(d: pd.DataFrame, fws: list[str], lacking: Lacking = frozenset()) -> dict[str, float]:
    """The mean of (a) speed: geometric mean over the tasks two frameworks or more ran of the
    best framework's time over this framework's best (any transform and mode; 0 if it ran
    none), and (b) coverage: share of the (task, eager | accelerated) slots it ran with some
    transform (ok 1, fallback 0.5): which transform a framework offers is its API, not a
    capability another framework lacks."""
    d = d[has_mode(d, lacking)]
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    if t.empty:
        return {}
    speed: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in t.groupby("task"):
        best = g.groupby("framework")["median_s"].min()
        if len(best) < 2:
            continue
        for f in best.index:
            if f in speed:
                speed[f].append(best.min() / best[f])
    cls = d.assign(cls=["eager" if m == "eager" else "accelerated" for m in d["mode"]],
                   score=d["status"].map({"ok": 1.0, "fallback": 0.5}).fillna(0.0))
    slots = cls.groupby(["task", "cls"]).ngroups
    out = {}
    for f in fws:
        sp = stats.geomean(speed[f]) if speed[f] else 0.0
        mine = cls[cls["framework"] == f]
        cov = float(mine.groupby(["task", "cls"])["score"].max().sum()) / slots if len(mine) and slots else math.nan
        out[f] = (sp + cov) / 2 if finite(cov) else math.nan
    return out


# ----------------------------------------------------------------------------- figures

def _der_lines(d: pd.DataFrame, ycol: str, ylabel: str, title: str, problems: list[str] | None = None,
               lo: str | None = None, hi: str | None = None, ref: float | None = None) -> Figure | None:
    d = d[d[ycol].notna()] if ycol in d.columns else d.iloc[0:0]
    d = d.assign(problem=d["task"].map(problem))
    if problems is not None:
        d = d[d["problem"].isin(problems)]
    if d.empty:
        return None
    ps = sorted(d["problem"].unique())
    col, fws = F.colours(d["framework"]), framework_order(d["framework"])
    with F._style():
        fig, panels = F.panel_grid(len(ps), 3, F.PANEL_W + 0.8, F.PANEL_H + 0.4)
        for i, ax in enumerate(panels):
            g = d[d["problem"] == ps[i]]
            xname, size = _size_axis(g)
            numeric = all(isinstance(v, float) for v in size)
            cats = [] if numeric else sorted({str(v) for v in size})
            g = g.assign(_x=[v if numeric else cats.index(str(v)) for v in size])
            style = strategy_styles([r["strategy"] if isinstance(r["strategy"], str) else "default"
                                      for _, r in g.iterrows()])
            for (f, m, s), h in g.groupby(["framework", "mode", g["strategy"].fillna("default")], sort=False):
                h = h.sort_values("_x")
                ax.plot(h["_x"], h[ycol], color=col[f], marker=style[s][1], markersize=4, linewidth=1,
                        linestyle={"eager": ":", "graph": "--"}.get(m, "-"))
                if lo and hi:
                    ax.fill_between(h["_x"].astype(float), h[lo], h[hi], color=col[f], alpha=0.12, linewidth=0)
            if ref is not None:
                ax.axhline(ref, color="black", linewidth=0.8)
            if numeric and g["_x"].max() / max(g["_x"].min(), 1e-12) > 8:
                ax.set_xscale("log")
            if not numeric:
                ax.set_xticks(range(len(cats)), cats)
            if ax.get_yscale() == "linear" and g[ycol].max() / max(g[ycol].min(), 1e-300) > 10:
                ax.set_yscale("log")
            ax.set_title(ps[i])
            ax.set_xlabel(xname)
            ax.set_ylabel(ylabel)
            ax.legend(handles=[Line2D([], [], color="grey", marker=mk, linestyle="", label=s)
                               for s, (_, mk) in style.items()], fontsize=6, frameon=False)
        modes = [Line2D([], [], color="grey", linestyle={"eager": ":", "graph": "--"}.get(m, "-"), label=m)
                 for m in mode_order(d["mode"])]
        F._framework_legend(fig, fws, col, modes + [Line2D([], [], color="none", label=title)])
    return fig


def fig_der_time(d: pd.DataFrame) -> Figure | None:
    t = d[d["status"].isin(TIMED)]
    return _der_lines(t, "median_s", "median time (s)", "marker: transform")


def fig_der_vmap(d: pd.DataFrame) -> Figure | None:
    v = _vs_loop(d)
    if v.empty:
        return None
    return _der_lines(v, "vs_loop", "speedup over the loop (x)", "marker: transform", lo="vs_loop_lo",
                      hi="vs_loop_hi", ref=1.0)


def fig_der_order(d: pd.DataFrame) -> Figure | None:
    t = d[d["status"].isin(TIMED) & d["task"].map(problem).str.startswith("nth")] if len(d) else d
    if t.empty or not has(t, "derivative_order"):
        return None
    t = t.assign(compile_or_first=[r["compile_s"] if finite(r.get("compile_s")) else r.get("compile_latency_s")
                                   for _, r in t.iterrows()])
    both = pd.concat([t.assign(task="run time", _y=t["median_s"]),
                      t.assign(task="compile time", _y=t["compile_or_first"])])
    return _der_lines(both, "_y", "seconds", "marker: transform")


def _instrument(r: pd.Series) -> str:
    """What measured a case's peak memory, in a few words (the axis label of its panel)."""
    src = _memory_source(r).lower()
    if "rss" in src:
        return "process peak RSS delta of one call"
    if "allocator" in src:
        return f"{r['framework']} allocator peak over one call"
    return short(_memory_source(r), 40)


def fig_der_memory(d: pd.DataFrame) -> Figure | None:
    """Peak memory of the HVP variants: one panel per problem and instrument, so no axis
    mixes two instruments (process RSS for torch and JAX on the CPU, TensorFlow's BFC
    allocator), each axis named by what measured it."""
    t = d[d["task"].map(problem).str.startswith("hvp")] if len(d) else d
    if not has(t, "peak_memory_bytes"):
        return None
    t = t[t["peak_memory_bytes"].notna()]
    t = t.assign(_i=[_instrument(r) for _, r in t.iterrows()], mb=t["peak_memory_bytes"] / 2 ** 20, z=math.nan)
    keys = sorted({(k, i) for k, i in zip(t["task"], t["_i"])})
    col, fws = F.colours(t["framework"]), framework_order(t["framework"])
    with F._style():
        fig, panels = F.panel_grid(len(keys), 2, F.PANEL_W + 1.0, F.PANEL_H + 0.4)
        for n, ax in enumerate(panels):
            task, inst = keys[n]
            g = t[(t["task"] == task) & (t["_i"] == inst)]
            labels = sorted({strategy_label(r) for _, r in g.iterrows()})
            F._bars(ax, g, strategy_label, labels, framework_order(g["framework"]), "mb", "z", "z", col)
            ax.set_title(task)
            ax.set_ylabel(f"MiB: {inst}", fontsize=7)
        F._framework_legend(fig, fws, col)
    return fig


def _memory_source(r: pd.Series) -> str:
    for k in ("peak_memory_source", "memory_note"):
        if isinstance(r.get(k), str):
            return r[k]
    return "the device allocator's peak"


# ----------------------------------------------------------------------------- summary

def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """The Summary's sentences: the best vectorised transform over the loop per framework,
    and who is fastest per task by the verdicts (_winners)."""
    out = []
    v = _vs_loop(d)
    if not v.empty:
        best = v.groupby("framework")["vs_loop"].max()
        out.append("Derivatives: the best vectorised transform over the loop over examples reaches "
                   + ", ".join(f"{f} {x:.1f}x" for f, x in best.items()) + " (per-task verdicts in its section).")
    return out + _winners(d, fam)


def _winners(d: pd.DataFrame, fam: stats.Family) -> list[str]:
    """Per derivatives task, each framework's fastest transform and mode against the
    runner-up's, counted by verdict: who is faster where the family states it."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    if t.empty or fam.m == 0:
        return []
    won: dict[str, int] = {}
    fastest: dict[str, int] = {}
    untested = compared = 0
    for _, g in t.groupby("task", sort=True):
        best = g.sort_values("median_s").drop_duplicates("framework")
        if len(best) < 2:
            continue
        j = judge(best.iloc[0], best.iloc[1], fam)
        compared += 1
        f = best.iloc[0]["framework"]
        fastest[f] = fastest.get(f, 0) + 1
        untested += j.verdict == stats.NOT_TESTED
        if stats.coarse(j.verdict) == stats.FASTER:
            won[f] = won.get(f, 0) + 1
    if not compared:
        return []

    def count(c: dict[str, int]) -> str:
        return ", ".join(f"{f} in {n}" for f, n in sorted(c.items(), key=lambda kv: -kv[1]))
    stated = sum(won.values())
    text = (f"Derivatives, fastest framework per task (each framework's best transform and mode against the "
            f"runner-up's): faster by the verdicts in {stated} of {compared} tasks"
            + (f" ({count(won)})" if won else ""))
    rest = compared - stated - untested
    text += (f"; {rest} equivalent or inconclusive" if rest else "")
    if untested:
        text += (f"; {untested} not tested (one process per case), where the fastest is, indicatively, "
                 + count(fastest))
    return [text + "."]


# ----------------------------------------------------------------------------- registration

TABLES = (
    Table(capability, "Status of every transform per problem, framework and mode, over the problem's sizes (- : the "
          "framework has no such transform), with the first reason when not ok.", "derivatives-capability"),
)

FIGURES = (
    Plot("der_time", fig_der_time, ("median_s",),
         "Median time per problem against the size its tasks vary in (batch, parameter count, derivative "
         "order, the Jacobian's input size n at fixed n m; log-log where the sizes span a decade): colour "
         "framework, line style mode, marker transform; the results table has each interval."),
    Plot("der_vmap", fig_der_vmap, ("median_s",),
         "Speedup of each vectorised transform over the same framework and mode's loop over examples "
         "(loop's median / the transform's; band: 95% interval; line: no change)."),
    Plot("der_order", fig_der_order, ("derivative_order",),
         "n-th derivative: run time (median) and compile time (the framework's own timer, else first call "
         "minus the median) against the order; panels named run time / compile time."),
    Plot("der_memory", fig_der_memory, ("peak_memory_bytes",),
         "Peak memory of one call of each Hessian-vector-product variant: a panel per problem and per "
         "instrument (the axis says which: the process's peak RSS delta for torch and JAX on the CPU, "
         "TensorFlow's allocator peak), so bars on one axis are measured the same way."),
)

METHOD = (
    "derivatives: every result is compared with a float64 reference before it is timed; a difference or a "
    "wrong shape is failed with what differed. The loop baseline compiles the one-example gradient and loops "
    "in Python in every framework, while vmap (and TensorFlow's vectorized_map / pfor) compiles the whole "
    "batch; peak memory is what each framework's record says measured it (peak_memory_source or memory_note), "
    "null where nothing could.",
)

SECTION = Section(
    workload="derivatives",
    title="Derivatives and vmap",
    tables=TABLES,
    figures=FIGURES,
    findings=findings,
    no_findings="Nothing to compare: no task has two frameworks, or a transform and its loop baseline, timed.",
    concern="derivatives",
    concern_label="derivatives and vmap",
    score=score,
    scoring=("Derivatives and vmap (weight name derivatives): the mean of a speed score (geometric mean over "
             "the tasks two frameworks ran of the best framework's time over this framework's best transform "
             "and mode) and its coverage (share of task x eager/accelerated slots it ran with some transform; "
             "fallback half)."),
    summary=summary,
    method=METHOD,
    per_process=("peak_memory_bytes",),
)

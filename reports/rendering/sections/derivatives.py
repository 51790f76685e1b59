"""The derivatives section's drawing half (its judging half: reports.sections.derivatives).

    tables   capability: problem x transform x framework/mode, the statuses over the
             problem's sizes with the first reason that is not ok
    figures  der_time (time per problem vs its size: batch, parameters, order, models;
             log-log), der_vmap (speedup of each transform over the `loop` baseline), der_order
             (run time and compile time vs derivative order), der_memory (peak memory of the
             HVP variants with what measured it)
"""
from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.measures.data import TIMED, finite, framework_order, mode_order
from reports.rendering import figures as F
from reports.rendering.sections.common import Drawing, Plot, Table, strategy_styles
from reports.sections.common import Lacking, has, has_mode, short, strategy_label
from reports.sections.derivatives import against_loop, memory_source, problem

SIZE_FIELDS = ("derivative_order", "models", "params", "batch")   # a problem's size: the first that varies


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


def _der_lines(d: pd.DataFrame, ycol: str, ylabel: str, title: str, problems: list[str] | None = None,
               lo: str | None = None, hi: str | None = None, ref: float | None = None,
               by_mode: bool = False) -> Figure | None:
    d = d[d[ycol].notna()] if ycol in d.columns else d.iloc[0:0]
    d = d.assign(problem=d["task"].map(problem))
    if problems is not None:
        d = d[d["problem"].isin(problems)]
    if d.empty:
        return None
    ps = sorted(d["problem"].unique())
    col, fws = F.colours(d["framework"]), framework_order(d["framework"])
    # one marker per transform across every panel, one legend for the figure (by_mode: a marker per mode,
    # the lines being each mode's fastest transform)
    style = ({m: ("grey", F.MODE_MARKERS.get(m, "D")) for m in mode_order(d["mode"])} if by_mode else
             strategy_styles([r["strategy"] if isinstance(r["strategy"], str) else "default" for _, r in d.iterrows()]))
    with F._style():
        fig, panels = F.panel_grid(len(ps), 3)
        for i, ax in enumerate(panels):
            g = d[d["problem"] == ps[i]]
            xname, size = _size_axis(g)
            # one size is a category, not a point on a continuous axis (one x value on a
            # 114,000-124,000 axis)
            numeric = all(isinstance(v, float) for v in size) and len(set(size)) > 1
            size = [f"{v:g}" if isinstance(v, float) else v for v in size] if not numeric else size
            cats = [] if numeric else sorted({str(v) for v in size})
            g = g.assign(_x=[v if numeric else cats.index(str(v)) for v in size])
            for (f, m, s), h in g.groupby(["framework", "mode", g["strategy"].fillna("default")], sort=False):
                h = h.sort_values("_x")
                ax.plot(h["_x"], h[ycol], color=col[f], marker=style[m if by_mode else s][1], markersize=4,
                        linewidth=1, linestyle={"eager": ":", "graph": "--"}.get(m, "-"))
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
            if not numeric:
                ax.set_xlim(-0.5, len(cats) - 0.5)
        modes = [Line2D([], [], color="grey", linestyle={"eager": ":", "graph": "--"}.get(m, "-"), label=m)
                 for m in mode_order(d["mode"])]
        if by_mode:
            modes = [Line2D([], [], color="grey", linestyle={"eager": ":", "graph": "--"}.get(m, "-"),
                            marker=F.MODE_MARKERS.get(m, "D"), label=m) for m in mode_order(d["mode"])]
            F._framework_legend(fig, fws, col, modes + [Line2D([], [], color="none", label=title)])
            return fig
        marks = [Line2D([], [], color="grey", marker=mk, linestyle="", label=s) for s, (_, mk) in style.items()]
        F._framework_legend(fig, fws, col, modes + [Line2D([], [], color="none", label=title)] + marks)
    return fig


def fig_der_time(d: pd.DataFrame) -> Figure | None:
    """Per problem measured at more than one size, each framework and mode's fastest transform at
    each size (19 transform markers x 3 line styles read as noise; the capability table
    and der_vmap name the transforms; a problem at one size is a point, not a line: the tables)."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    if t.empty:
        return None
    t = t.assign(problem=t["task"].map(problem))
    t = t[t.groupby("problem")["task"].transform("nunique") > 1]
    if t.empty:
        return None
    t = t.loc[t.groupby(["task", "framework", "mode"])["median_s"].idxmin()].drop(columns="problem")
    t = t.assign(strategy=None)          # one line per framework and mode, whichever transform was fastest
    return _der_lines(t, "median_s", "median time (s)", "lines: fastest transform", by_mode=True)


def fig_der_vmap(d: pd.DataFrame) -> Figure | None:
    v = against_loop(d)
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
    src = memory_source(r).lower()
    if src.startswith("peak rss growth"):       # frameworks.harness.memory: one for every framework on the CPU
        return "peak RSS growth of one call"
    if "rss" in src:
        return "process peak RSS delta of one call"
    if "allocator" in src:
        return f"{r['framework']} allocator peak over one call"
    return short(memory_source(r), 40)


def fig_der_memory(d: pd.DataFrame) -> Figure | None:
    """Peak memory of the HVP variants: one panel per problem and instrument, so no axis
    mixes two instruments (on the CPU one for every framework; records from before it:
    process RSS for torch and JAX, TensorFlow's BFC allocator), each axis named by what
    measured it."""
    t = d[d["task"].map(problem).str.startswith("hvp")] if len(d) else d
    if not has(t, "peak_memory_bytes"):
        return None
    t = t[t["peak_memory_bytes"].notna()]
    t = t.assign(_i=[_instrument(r) for _, r in t.iterrows()], mb=t["peak_memory_bytes"] / 2 ** 20, z=math.nan)
    keys = sorted({(k, i) for k, i in zip(t["task"], t["_i"])})
    col, fws = F.colours(t["framework"]), framework_order(t["framework"])
    with F._style():
        fig, panels = F.panel_grid(len(keys), 2, 1.5 * F.PANEL_W)
        for n, ax in enumerate(panels):
            task, inst = keys[n]
            g = t[(t["task"] == task) & (t["_i"] == inst)]
            labels = sorted({strategy_label(r) for _, r in g.iterrows()})
            F._bars(ax, g, strategy_label, labels, framework_order(g["framework"]), "mb", "z", "z", col)
            ax.set_title(f"{task}\n{inst}")
            ax.set_ylabel("MiB")
        F._framework_legend(fig, fws, col)
    return fig


TABLES = (
    Table(capability, "Status of every transform per problem, framework and mode, over the problem's sizes (- : the "
          "framework has no such transform), with the first reason when not ok.", "derivatives-capability"),
)


FIGURES = (
    Plot("der_time", fig_der_time, ("median_s",),
         "Median time per problem against the size its tasks vary in (batch, parameter count, derivative "
         "order, the Jacobian's input size n at fixed n m; log-log where the sizes span a decade), each "
         "framework and mode's fastest transform at each size: colour framework, line style and marker mode; "
         "problems measured at one size only, and which transform was fastest, are in the tables."),
    Plot("der_vmap", fig_der_vmap, ("median_s",),
         "Speedup of each vectorised transform over the same framework and mode's loop over examples "
         "(loop's median / the transform's; band: 95% interval; line: no change)."),
    Plot("der_order", fig_der_order, ("derivative_order",),
         "n-th derivative: run time (median) and compile time (the framework's own timer, else first call "
         "minus the median) against the order; panels named run time / compile time."),
    Plot("der_memory", fig_der_memory, ("peak_memory_bytes",),
         "Peak memory of one call of each Hessian-vector-product variant: a panel per problem and per "
         "instrument (the axis says which: on the CPU the peak RSS growth of one call for every framework; "
         "in older records torch's and JAX's RSS delta, TensorFlow's allocator peak), so bars on one axis are "
         "measured the same way."),
)


METHOD = (
    "derivatives: every result is compared with a float64 reference before it is timed; a difference or a "
    "wrong shape is failed with what differed. The loop baseline compiles the one-example gradient and loops "
    "in Python in every framework, while vmap (and TensorFlow's vectorized_map / pfor) compiles the whole "
    "batch; peak memory is what each framework's record says measured it (peak_memory_source or memory_note), "
    "null where nothing could.",
)


DRAWING = Drawing(name="derivatives", title="Derivatives and vmap", tables=TABLES, figures=FIGURES, method=METHOD)

"""The dynamic-shapes section's drawing half (its judging half: reports.sections.dynamic).

    tables   table: framework x mode x strategy x stream (shapes, compilations, the cold pass
             over processes, a warm pass, new- and seen-shape requests, padding, recompile
             limit); costs (the judging half's): each framework's cost of serving N
             requests, eager apart
    figures  dyn_compilations (cumulative compilations vs requests seen, from
             stream_cold_compilations), dyn_stream_time (cumulative cold stream time from
             stream_cold_request_s, the warm pass as its end point), dyn_new_vs_seen
             (new_shape_latency_s vs seen_shape_latency_s); padding waste is a table column
             only (its figure against the compilations said little the table does not)
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from reports.measures import stats
from reports.measures.data import TIMED, finite, framework_order
from reports.measures.verdicts import procs
from reports.rendering import figures as F
from reports.rendering.sections.common import MARKS, Drawing, Plot, Table, strategy_styles
from reports.sections.common import Lacking, has, missing_note, strategy_label
from reports.sections.dynamic import costs, hit_limit, stream_name


def _times(r: pd.Series) -> str:
    return stats.fmt_time_ci(r["median_s"], r["median_lo_s"], r["median_hi_s"]) if finite(r.get("median_s")) else ""


def _range(vals: dict[str, float]) -> str:
    """The geometric mean over processes with its 95% t interval (stats.MIN_TESTED processes or
    more), the processes' min-max from two, 'one process' from one."""
    e = stats.Est.of(vals)
    if not e.n:
        return ""
    if e.n < 2:
        return stats.fmt_seconds(e.value) + " (one process)"
    return stats.fmt_est(e)


def table(d: pd.DataFrame) -> pd.DataFrame:
    """A row per stream case that ran or failed (unsupported strategies are listed with their
    reasons among the report's unsupported cases)."""
    rows = []
    streams = {t: s for t, s in zip(d["task"], d["stream"]) if isinstance(s, str)} if "stream" in d else {}
    for _, r in d[d["status"] != "unsupported"].iterrows():
        timed = r["status"] in TIMED
        rows.append({
            "stream": r.get("stream") if isinstance(r.get("stream"), str) else streams.get(r["task"], r["task"]),
            "framework": r["framework"], "mode": r["mode"],
            "strategy": r["strategy"] if isinstance(r["strategy"], str) else "default",
            "status": r["status"],
            "shapes": f"{r['distinct_shapes']:.0f}" if finite(r.get("distinct_shapes")) else "",
            "compilations (cold pass)": (f"{r['compilations_cold']:.0f}"
                                         if timed and finite(r.get("compilations_cold")) else "")
                                        + (f" + {r['xla_compilations_cold']:.0f} XLA"
                                           if timed and finite(r.get("xla_compilations_cold")) else ""),
            "cold-pass caches": r.get("stream_cold_cache") if isinstance(r.get("stream_cold_cache"), str) else "",
            "cold stream [95% CI]": _range(procs(r, "stream_cold_s")) if timed else "",
            "warm stream [95% CI]": _times(r) if timed else "",
            "new-shape request": stats.fmt_seconds(r.get("new_shape_latency_s")) if timed else "",
            "seen-shape request": stats.fmt_seconds(r.get("seen_shape_latency_s")) if timed else "",
            "padding waste": f"{100 * r['padding_waste']:.0f}%" if finite(r.get("padding_waste")) else "",
            "recompile limit hit": {True: "YES", False: "no"}.get(r.get("recompile_limit_hit"), "") if timed else "",
        })
    return pd.DataFrame(rows)


def _series(text: Any) -> np.ndarray | None:
    try:
        return np.array([float(x) for x in str(text).split(",")]) if isinstance(text, str) else None
    except ValueError:
        return None


def _per_stream_framework(d: pd.DataFrame, col: str, draw: Callable[[Any, pd.Series, tuple[str, str], np.ndarray],
                                                                       None], ylabel: str, title: str,
                          eager_apart: bool = False) -> Figure | None:
    """A panel per stream and framework (and, with eager_apart, an eager case that counts
    anything on a panel of its own, so JAX's op-by-op compiles set no compiled panel's
    scale); one colour and marker per strategy across every panel (strategy_styles over the
    figure) and one legend for the figure; integer ticks for request counts."""
    d = d[d["status"].isin(TIMED) & d[col].notna()] if col in d.columns else d.iloc[0:0]
    if d.empty:
        return None
    def own_panel(r: pd.Series) -> bool:          # an eager case that counts anything (JAX's op compiles)
        y = _series(r[col])
        return eager_apart and r["mode"] == "eager" and y is not None and bool(np.nanmax(y) > 0)
    d = d.assign(_s=d.apply(stream_name, axis=1), _e=["eager" if own_panel(r) else "" for _, r in d.iterrows()])
    fws = framework_order(d["framework"])
    keys = sorted({(s, f, e) for s, f, e in zip(d["_s"], d["framework"], d["_e"])},
                  key=lambda k: (k[0], fws.index(k[1]), k[2]))
    style = strategy_styles([strategy_label(r) for _, r in d.iterrows()])
    seen: dict[str, Any] = {}
    with F._style():
        cols = 3 if len(keys) <= 12 else 4          # at most five rows: the figure prints on one page
        fig, panels = F.line_grid(len(keys), cols, F.PANEL_H - 0.45)
        for i, ax in enumerate(panels):
            s, f, e = keys[i]
            panel = d[(d["_s"] == s) & (d["framework"] == f) & (d["_e"] == e)]
            for _, r in panel.iterrows():
                y = _series(r[col])
                if y is not None:
                    draw(ax, r, style[strategy_label(r)], y)
            ax.set_title(f"{s}\n{f}" + (" (eager)" if e else ""), fontsize=7, linespacing=1.0)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        extra = ([Line2D([], [], color="grey", linestyle="--", label="recompile limit hit")]
                 if any(ln.get_linestyle() == "--" for ax in panels for ln in ax.get_lines()) else [])
        handles = [seen[k] for k in sorted(seen)] + extra
        fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 4), frameon=False,
                   fontsize=7)
        fig.supxlabel("requests seen")
        fig.supylabel(ylabel)
    return fig


def fig_compilations(d: pd.DataFrame) -> Figure | None:
    def draw(ax: Any, r: pd.Series, st: tuple[str, str], y: np.ndarray) -> None:
        x = np.arange(1, len(y) + 1)
        ax.step(x, y, where="post", color=st[0], marker=st[1], markersize=3, linewidth=1,
                linestyle="--" if hit_limit(r) else "-", label=strategy_label(r))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _per_stream_framework(d, "stream_cold_compilations", draw, "compilations, cumulative (linear scale)",
                                 "", eager_apart=True)


def fig_stream_time(d: pd.DataFrame) -> Figure | None:
    def draw(ax: Any, r: pd.Series, st: tuple[str, str], y: np.ndarray) -> None:
        x = np.arange(1, len(y) + 1)
        ax.plot(x, np.cumsum(y), color=st[0], marker=st[1], markersize=2.5, linewidth=1, label=strategy_label(r))
        if finite(r.get("median_s")):
            ax.plot([len(y)], [r["median_s"]], marker=st[1], color=st[0], markeredgecolor="black", linestyle="")
        ax.set_yscale("log")
    return _per_stream_framework(d, "stream_cold_request_s", draw, "cumulative time (s, log scale)", "")


# the mode of a point by its fill (compiled filled, TensorFlow graph hollow, eager pale), its strategy by its
# shape (three strategies drew the same circle): one shape per strategy name, in every panel
MODE_FILL = {"compiled": "solid", "graph": "hollow", "eager": "pale"}


def _fill(colour: str, mode: str) -> dict[str, Any]:
    kind = MODE_FILL.get(mode, "solid")
    if kind == "hollow":
        return {"facecolors": "white", "edgecolors": colour, "linewidths": 1.3}
    if kind == "pale":
        return {"facecolors": to_rgba(colour, 0.3), "edgecolors": colour, "linewidths": 0.9}
    return {"color": colour, "edgecolor": "black", "linewidth": 0.4}


def _scatter(d: pd.DataFrame, x: str, y: str, xlabel: str, ylabel: str, diag: bool, logx: bool) -> Figure | None:
    """One panel per stream: a point per case, colour = framework, shape = strategy, fill = mode
    (one legend for the figure): no text on the points, which overlapped."""
    d = d[d["status"].isin(TIMED) & d[x].notna() & d[y].notna()]
    if d.empty:
        return None
    d = d.assign(_s=d.apply(stream_name, axis=1), _k=[r["strategy"] if isinstance(r["strategy"], str) else "default"
                                                   for _, r in d.iterrows()])
    streams = sorted(d["_s"].unique())
    col, fws = F.colours(d["framework"]), framework_order(d["framework"])
    kinds = sorted(d["_k"].unique())
    mk = {k: MARKS[i % len(MARKS)] for i, k in enumerate(kinds)}
    with F._style():
        fig, panels = F.panel_grid(len(streams), 3)
        for i, ax in enumerate(panels):
            g = d[d["_s"] == streams[i]]
            for _, r in g.iterrows():
                ax.scatter(r[x], r[y], marker=mk[r["_k"]], s=34, zorder=3, **_fill(col[r["framework"]], r["mode"]))
            if logx:
                ax.set_xscale("log")
                ax.set_yscale("log")
            if diag:
                lim = [min(g[x].min(), g[y].min()) / 1.5, max(g[x].max(), g[y].max()) * 1.5]
                ax.plot(lim, lim, color="grey", linestyle=":", linewidth=0.8)
            ax.set_title(streams[i])
            ax.set_xlabel(xlabel[:-1] + ", log scale)" if logx else xlabel)
            ax.set_ylabel(ylabel[:-1] + ", log scale)" if logx else ylabel)
        shapes = [Line2D([], [], marker=mk[k], linestyle="", color="grey", markeredgecolor="black", label=k)
                  for k in kinds]
        grey = "#7f7f7f"
        fills = [Line2D([], [], marker="o", linestyle="", label=f"{m} (fill)",
                        **({"markerfacecolor": grey, "markeredgecolor": "black"} if k == "solid" else
                           {"markerfacecolor": "white", "markeredgecolor": grey} if k == "hollow" else
                           {"markerfacecolor": to_rgba(grey, 0.3), "markeredgecolor": grey}))
                 for m, k in MODE_FILL.items() if m in set(d["mode"])]
        F._framework_legend(fig, fws, col, fills + shapes)
    return fig


def fig_new_vs_seen(d: pd.DataFrame) -> Figure | None:
    return _scatter(d, "seen_shape_latency_s", "new_shape_latency_s", "seen shape (s)", "new shape (s)", True, True)


def _table_or_note(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame | str:
    if has(d, "stream_cold_s") or has(d, "distinct_shapes"):
        return table(d)
    return missing_note("The dynamic-shapes table", d, ("stream_cold_s", "distinct_shapes"), "not shown")


TABLES = (
    Table(_table_or_note, "Per stream, framework, mode and strategy: distinct shapes, compilations during the cold "
          "pass (each framework's own counter), the cold pass's total time (geometric mean over processes [95% t "
          "interval]), one warm pass (median, 95% interval), the median request whose shape was new / seen, padding "
          "waste, and whether a recompile limit was hit.", "dynamic", keep_empty=True),
    Table(lambda d, lacking: costs(d),
          "The cost of serving N requests of each stream (the cold pass over its requests, then the rest at the warm "
          "per-request rate), each framework's best strategy that ran correctly without hitting a recompile limit; "
          "eager apart from accelerated modes (compiled, TensorFlow graph). The dynamic-shapes concern of the "
          "framework choice reads every row, eager included (serving eagerly is a deployable choice).",
          "dynamic-costs"),
)


FIGURES = (
    Plot("dyn_compilations", fig_compilations, ("stream_cold_compilations",),
         "Compilations (each framework's own counter) after each request of the cold pass, per "
         "strategy; one panel per stream and framework."),
    Plot("dyn_stream_time", fig_stream_time, ("stream_cold_request_s",),
         "Cumulative time of the cold pass over the stream (fresh model, every shape new once), and "
         "the median time of a warm pass (every shape seen) as the marker at the end."),
    Plot("dyn_new_vs_seen", fig_new_vs_seen, ("new_shape_latency_s", "seen_shape_latency_s"),
         "Median latency of a request whose shape is new against one whose shape was seen (colour "
         "framework, marker mode and strategy; dotted: equal). Above the line: the strategy compiles "
         "(or traces) per shape."),
)


METHOD = (
    "dynamic shapes, cold pass: a fresh model (torch: torch._dynamo.reset(); JAX: a new jit; TensorFlow: new "
    "tf.functions) takes every request of the stream once, in arrival order, each timed alone, so each shape's "
    "first request pays its trace and compile. The cold-pass caches column (stream_cold_cache) says whether "
    "every cache, persistent ones included, started empty (TensorFlow with its XLA cache on: programs "
    "compiled earlier may load); records without it had empty in-memory caches and the run's persistent "
    "cache empty only in the first process of each framework. The warm pass repeats the stream with every "
    "shape seen: its median over rounds is the case's step time.",
    "dynamic shapes, compilations count each framework's own events (torch: Dynamo graphs; JAX: XLA backend "
    "compiles; TensorFlow: tf.function traces, and XLA's compiles apart (+ N XLA, from the entries XLA writes "
    "to its cache folder) where recorded; without them an XLA compile per concrete shape under one trace "
    "shows only as a new-shape request slower than a seen one).",
    "dynamic shapes, torch's static strategy recompiles up to Dynamo's recompile limit and then runs eagerly "
    "with only a warning; recompile limit hit comes from that warning. Such a case is not the framework's best "
    "strategy in the dynamic-shapes concern.",
    "dynamic shapes, bucketed: requests are padded to a fixed bucket list (powers of two); padding_waste is "
    "the share of computed tokens or pixels that are padding (the DDPM stream pads the batch only, with zero "
    "images, never pixels); outputs on the real positions are checked against the unpadded float64 "
    "reference before anything is timed, and a wrong one is failed, never timed.",
    "dynamic shapes, loops: in a stream that decodes or samples, torch loops in Python around its compiled "
    "graphs while JAX and TensorFlow compile the loop where they can (see generate and sample); each request "
    "is timed as a user of that framework runs it, so a stream compares those choices, not identical programs.",
)


DRAWING = Drawing(name="dynamic", title="Dynamic shapes", tables=TABLES, figures=FIGURES, method=METHOD)

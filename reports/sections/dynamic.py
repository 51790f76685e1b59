"""The dynamic-shapes section (workloads/dynamic.py): requests of varying shapes served
by each framework and strategy, a cold pass (fresh caches, every shape new once) and warm
passes.

    tables   table: framework x mode x strategy x stream (shapes, compilations, the cold pass
             over processes, a warm pass, new- and seen-shape requests, padding, recompile
             limit); costs: each framework's cost of serving N requests, eager apart
    figures  dyn_compilations (cumulative compilations vs requests seen, from
             stream_cold_compilations), dyn_stream_time (cumulative cold stream time from
             stream_cold_request_s, the warm pass as its end point), dyn_new_vs_seen
             (new_shape_latency_s vs seen_shape_latency_s), dyn_padding (padding_waste vs
             compilations_cold)
    findings a new- against a seen-shape request (a one-sample test of the per-process
             ratios), the recompile limit, bucketing against the best unpadded strategy and
             the fastest cold stream (ratios of per-process cold-pass times, paired where both
             cases ran in the same processes)
    score    "dynamic shapes": accelerated modes, per stream and N in SERVED requests, the best
             framework's cost over this framework's best strategy's; geometric mean
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.analysis import stats
from reports.analysis.data import TIMED, finite, framework_order
from reports.analysis.verdicts import judge_scalar, procs
from reports.rendering import figures as F
from reports.sections.common import (
    Lacking,
    Plot,
    Section,
    Table,
    case_label,
    has,
    missing_note,
    strategy_label,
    strategy_styles,
)


def hit_limit(r: pd.Series | dict[str, Any]) -> bool:
    """The case hit its framework's recompile limit (a bool or numpy bool; absent: no)."""
    v = r.get("recompile_limit_hit")
    return isinstance(v, (bool, np.bool_)) and bool(v)


def _times(r: pd.Series) -> str:
    return stats.fmt_time_ci(r["median_s"], r["median_lo_s"], r["median_hi_s"]) if finite(r.get("median_s")) else ""


def _range(vals: dict[str, float]) -> str:
    """The geometric mean over processes with its 95% t interval ('one process' below two)."""
    e = stats.Est.of(vals)
    if not e.n:
        return ""
    if e.n < 2:
        return stats.fmt_seconds(e.value) + " (one process)"
    return stats.fmt_time_ci(e.value, *e.interval())


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


def _stream(r: pd.Series) -> str:
    return r["stream"] if isinstance(r.get("stream"), str) else str(r["task"])


def findings(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """Sentences with the report's verdicts (see the module docstring)."""
    out: list[str] = []
    t = d[d["status"].isin(TIMED)]
    if has(t, "new_shape_latency_s", "seen_shape_latency_s"):
        for _, r in t[t["mode"] != "eager"].iterrows():
            if not (r["framework"] == "tensorflow" and r["strategy"] == "input_signature"):
                continue
            out.append(_new_vs_seen(r, fam))
        nonee = t[t["mode"] != "eager"]
        js = {i: _new_seen(r, fam) for i, r in nonee.iterrows()}
        slower = [case_label(nonee.loc[i]) + f" ({_stream(nonee.loc[i])})" for i, j in js.items()
                  if j is not None and stats.coarse(j.verdict) == stats.SLOWER]
        out.append(f"{len(slower)} of {len(nonee)} non-eager stream cases are slower on a request of a new shape than "
                   "on a seen one (per-process ratio of the medians, tested over processes): they compile per shape"
                   + (": " + ", ".join(slower) if slower else "") + ".")
    if "recompile_limit_hit" in t.columns:
        for _, r in d.iterrows():
            if r["framework"] == "torch" and r["strategy"] == "static" and r["status"] in TIMED or hit_limit(r):
                shapes = f"{r['distinct_shapes']:.0f}" if finite(r.get("distinct_shapes")) else "?"
                comp = f"{r['compilations_cold']:.0f}" if finite(r.get("compilations_cold")) else "?"
                out.append(f"{case_label(r)} ({_stream(r)}): {comp} compilation(s) for {shapes} distinct shapes; "
                           + ("it hit the recompile limit and ran the remaining new shapes eagerly (only a warning "
                              "says so)." if hit_limit(r) else "the recompile limit was not hit."))
    if has(t, "stream_cold_s"):
        out += _bucketed_findings(t, fam)
        for (s, *_), g in t.groupby([t.apply(_stream, axis=1), "preset", "device"]):
            best = _best_per_framework(g)
            if len(best) >= 2:
                a, b = best.iloc[0], best.iloc[1]
                out.append(_versus(a, b, "stream_cold_s", f"fastest cold {s} stream (each framework's best strategy)",
                                   fam))
    return out


def _new_seen(r: pd.Series, fam: stats.Family) -> stats.Judgement | None:
    """A new-shape request's latency over a seen-shape one's, per process, tested against 1."""
    new, seen = procs(r, "new_shape_latency_s"), procs(r, "seen_shape_latency_s")
    ratio = {k: new[k] / seen[k] for k in new if k in seen and seen[k] > 0 and new[k] > 0}
    if not ratio:
        return None
    return fam.judge(f"new vs seen|{r['case']}", stats.Est.of(ratio), None, (r["case"],))


def _new_vs_seen(r: pd.Series, fam: stats.Family) -> str:
    j = _new_seen(r, fam)
    xla = (f" and {r['xla_compilations_cold']:.0f} XLA compile(s)" if finite(r.get("xla_compilations_cold"))
           else "")
    head = (f"{case_label(r)} ({_stream(r)}): {r['compilations_cold']:.0f} trace(s){xla} for "
            f"{r['distinct_shapes']:.0f} distinct shapes; " if finite(r.get("compilations_cold"))
            and finite(r.get("distinct_shapes")) else f"{case_label(r)} ({_stream(r)}): ")
    if j is None:
        return head + "new- vs seen-shape latency not measured."
    cost = ""
    if finite(r.get("stream_cold_s")) and finite(r.get("median_s")):
        cost = (f"; the cold stream took {stats.fmt_seconds(r['stream_cold_s'])} against "
                f"{stats.fmt_seconds(r['median_s'])} for a warm pass")
    said = stats.sentence(j, "a request of a new shape", "one of a seen shape", fam.margin, label="latency ratio",
                          speed=False, flags=fam.key_flags.get(j.key, ()))
    if stats.coarse(j.verdict) == stats.SLOWER:
        why = ("XLA still compiles per concrete shape" if r["mode"] == "compiled" else
               "a new concrete shape still costs extra under one trace (no XLA here: graph-level work per shape)")
        return head + f"{said}, so {why}{cost}."
    return head + said + cost + "."


def _best_per_framework(g: pd.DataFrame, col: str = "stream_cold_s") -> pd.DataFrame:
    """Each framework's fastest case by `col` among those that ran correctly and did not
    hit a recompile limit, fastest first."""
    ok = g[g[col].notna()]
    ok = ok[~np.array([hit_limit(r) for _, r in ok.iterrows()], dtype=bool)] if len(ok) else ok
    return ok.sort_values(col).drop_duplicates("framework")


def _versus(a: pd.Series, b: pd.Series, col: str, what: str, fam: stats.Family) -> str:
    """'what: a is faster than b ...' for a per-process scalar, by the report's family."""
    j = judge_scalar(a, b, col, what, fam)
    return f"{what}: " + stats.sentence(j, case_label(a), case_label(b), fam.margin,
                                        flags=fam.key_flags.get(j.key, ())) + "."


def _bucketed_findings(t: pd.DataFrame, fam: stats.Family) -> list[str]:
    out = []
    nonbucket = t[(t["strategy"] != "bucketed") & (t["mode"] != "eager")]
    b = t[t["strategy"] == "bucketed"]
    for (fw, mode, s, p, dev), g in b.groupby(["framework", "mode", b.apply(_stream, axis=1), "preset", "device"]):
        others = nonbucket[(nonbucket["framework"] == fw) & (nonbucket["mode"] == mode) & (nonbucket["preset"] == p)
                           & (nonbucket["device"] == dev) & (nonbucket.apply(_stream, axis=1) == s)]
        best = _best_per_framework(others)
        if best.empty:
            continue
        out.append(_versus(g.iloc[0], best.iloc[0], "stream_cold_s",
                           f"bucketed vs the best unpadded strategy, {fw} {mode}, cold {s} stream", fam))
    return out


# A user's stream lengths: the cost of N requests (cold pass + the rest at the warm rate).
SERVED = (10, 100, 1000)


def served_cost(r: pd.Series | dict[str, Any], n: int) -> float:
    """Seconds to serve n requests of a stream case: its cold pass (every shape new once,
    fresh caches), then n - requests more at its warm per-request rate (a warm pass over
    the requests); nan without them. Fewer than the stream's requests: its share of the cold
    pass."""
    cold, warm, k = r.get("stream_cold_s"), r.get("median_s"), r.get("requests")
    if not (finite(cold) and finite(warm) and finite(k) and k > 0):
        return math.nan
    return float(cold + max(n - k, 0) * warm / k) if n >= k else float(cold * n / k)


def _best_served(g: pd.DataFrame, n: int) -> pd.Series:
    """Per framework, the cost of n requests of its best strategy that ran correctly without
    hitting a recompile limit."""
    ok = g[[not hit_limit(r) for _, r in g.iterrows()]] if len(g) else g
    costs = pd.Series([served_cost(r, n) for _, r in ok.iterrows()], index=ok.index, dtype=float)
    return costs.groupby(ok["framework"]).min().dropna()


def score(d: pd.DataFrame, fws: list[str], lacking: Lacking = frozenset()) -> dict[str, float]:
    """Accelerated modes only (compiled, TF graph: the claim is about compilers and static
    graphs; eager is shown apart, `costs`): per stream and N in SERVED, the best
    framework's cost of N requests over this framework's (each its best strategy that ran
    correctly without a recompile-limit hit), geometric mean over the streams and N that two
    frameworks or more ran; 0 for a framework whose accelerated strategies all failed."""
    if not has(d, "stream_cold_s"):
        return {}
    t = d[d["status"].isin(TIMED) & (d["mode"] != "eager")]
    ratios: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in (t.groupby([t.apply(_stream, axis=1), "preset", "device"]) if len(t) else []):
        for n in SERVED:
            best = _best_served(g, n)
            if len(best) < 2:
                continue
            for f in best.index:
                if f in ratios:
                    ratios[f].append(best.min() / best[f])
    ran = d[(d["mode"] != "eager") & d["status"].isin(("ok", "fallback", "failed"))]
    return {f: stats.geomean(ratios[f]) if ratios[f] else (0.0 if (ran["framework"] == f).any() else math.nan)
            for f in fws}


def costs(d: pd.DataFrame) -> pd.DataFrame:
    """A row per stream and mode class: each framework's cost of N requests (SERVED) with its
    best strategy, eager apart from accelerated."""
    t = d[d["status"].isin(TIMED)] if "stream_cold_s" in d.columns else d.iloc[0:0]
    if t.empty:
        return pd.DataFrame()
    t = t.assign(_s=t.apply(_stream, axis=1), _c=["eager" if m == "eager" else "accelerated" for m in t["mode"]])
    rows = []
    fws = framework_order(t["framework"])
    for (s, c, p, dev), g in t.groupby(["_s", "_c", "preset", "device"], sort=True):
        for n in SERVED:
            best = _best_served(g, n)
            rows.append({"stream": s, "modes": c, "requests": n,
                         **{f: stats.fmt_seconds(best[f]) if f in best.index else "-" for f in fws}})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- figures

def _series(text: Any) -> np.ndarray | None:
    try:
        return np.array([float(x) for x in str(text).split(",")]) if isinstance(text, str) else None
    except ValueError:
        return None


def _per_stream_framework(d: pd.DataFrame, col: str, draw: Callable[[Any, pd.Series, tuple[str, str], np.ndarray],
                                                                       None], ylabel: str, title: str) -> Figure | None:
    d = d[d["status"].isin(TIMED) & d[col].notna()] if col in d.columns else d.iloc[0:0]
    if d.empty:
        return None
    d = d.assign(_s=d.apply(_stream, axis=1))
    keys = sorted({(s, f) for s, f in zip(d["_s"], d["framework"])},
                  key=lambda k: (k[0], framework_order(d["framework"]).index(k[1])))
    with F._style():
        fig, panels = F.panel_grid(len(keys), 3, F.PANEL_W + 0.6, F.PANEL_H + 0.4)
        for i, ax in enumerate(panels):
            s, f = keys[i]
            panel = d[(d["_s"] == s) & (d["framework"] == f)]
            style = strategy_styles([strategy_label(r) for _, r in panel.iterrows()])   # per panel: 10 colours
            for _, r in panel.iterrows():
                y = _series(r[col])
                if y is not None:
                    draw(ax, r, style[strategy_label(r)], y)
            ax.set_title(f"{s}: {f}")
            ax.set_xlabel("requests seen")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=6, frameon=False)
        fig.suptitle(title)
    return fig


def fig_compilations(d: pd.DataFrame) -> Figure | None:
    def draw(ax: Any, r: pd.Series, st: tuple[str, str], y: np.ndarray) -> None:
        x = np.arange(1, len(y) + 1)
        ax.step(x, y, where="post", color=st[0], marker=st[1], markersize=3, linewidth=1,
                label=strategy_label(r) + (" (limit hit)" if hit_limit(r) else ""))
    return _per_stream_framework(d, "stream_cold_compilations", draw, "compilations (cumulative)",
                                 "compilations vs requests seen (cold pass)")


def fig_stream_time(d: pd.DataFrame) -> Figure | None:
    def draw(ax: Any, r: pd.Series, st: tuple[str, str], y: np.ndarray) -> None:
        x = np.arange(1, len(y) + 1)
        ax.plot(x, np.cumsum(y), color=st[0], marker=st[1], markersize=2.5, linewidth=1, label=strategy_label(r))
        if finite(r.get("median_s")):
            ax.plot([len(y)], [r["median_s"]], marker=st[1], color=st[0], markeredgecolor="black", linestyle="")
        ax.set_yscale("log")
    return _per_stream_framework(d, "stream_cold_request_s", draw, "cumulative time (s)",
                                 "cumulative stream time: cold pass (line), one warm pass (marker at the end)")


def _scatter(d: pd.DataFrame, x: str, y: str, xlabel: str, ylabel: str, diag: bool, logx: bool) -> Figure | None:
    """One panel per stream: a point per case, colour = framework, marker = mode and
    strategy (one legend for the figure): no text on the points, which overlapped."""
    d = d[d["status"].isin(TIMED) & d[x].notna() & d[y].notna()]
    if d.empty:
        return None
    d = d.assign(_s=d.apply(_stream, axis=1), _l=[strategy_label(r) for _, r in d.iterrows()])
    streams = sorted(d["_s"].unique())
    col, fws = F.colours(d["framework"]), framework_order(d["framework"])
    marks = "osD^v<>PXh*pH8d"
    labels = sorted(d["_l"].unique())
    mk = {lab: marks[i % len(marks)] for i, lab in enumerate(labels)}
    with F._style():
        fig, panels = F.panel_grid(len(streams), 3, F.PANEL_W + 0.6, F.PANEL_H + 0.4)
        for i, ax in enumerate(panels):
            g = d[d["_s"] == streams[i]]
            for _, r in g.iterrows():
                ax.scatter(r[x], r[y], color=col[r["framework"]], marker=mk[r["_l"]], s=34, edgecolor="black",
                           linewidth=0.4, zorder=3)
            if logx:
                ax.set_xscale("log")
                ax.set_yscale("log")
            if diag:
                lim = [min(g[x].min(), g[y].min()) / 1.5, max(g[x].max(), g[y].max()) * 1.5]
                ax.plot(lim, lim, color="grey", linestyle=":", linewidth=0.8)
            ax.set_title(streams[i])
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
        handles = [Line2D([], [], marker=mk[lab], color="grey", markeredgecolor="black", linestyle="", label=lab)
                   for lab in labels]
        F._framework_legend(fig, fws, col, handles)
    return fig


def fig_new_vs_seen(d: pd.DataFrame) -> Figure | None:
    return _scatter(d, "seen_shape_latency_s", "new_shape_latency_s", "seen-shape request (s, median)",
                    "new-shape request (s, median)", True, True)


def fig_padding(d: pd.DataFrame) -> Figure | None:
    return _scatter(d, "compilations_cold", "padding_waste", "compilations (cold pass)",
                    "padding waste (1 - needed / computed)", False, False)


# ----------------------------------------------------------------------------- summary

def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """The Summary's sentences: the cheapest 100 requests per stream, and the compilations
    each framework needed (_compilations_sentence)."""
    if not has(d, "stream_cold_s"):
        return []
    out, costs = [], []
    t = d[d["status"].isin(TIMED) & (d["mode"] != "eager")]
    for (s, _, _), g in t.groupby([t.apply(_stream, axis=1), "preset", "device"]):
        best = _best_served(g, 100)
        if len(best) >= 2:
            costs.append(f"{s}: {best.idxmin()} ({stats.fmt_seconds(best.min())})")
    if costs:
        out.append("Dynamic shapes, 100 requests served in an accelerated mode (cold pass, then the warm rate; each "
                   "framework's best strategy), cheapest: " + "; ".join(costs) + ".")
    return out + _compilations_sentence(d)


def _compilations_sentence(d: pd.DataFrame) -> list[str]:
    """The static-graph claim in numbers: for the stream with the most distinct shapes, the
    fewest compilations each framework needed to serve it in an accelerated mode (its own
    counter in the cold pass: Dynamo graphs, jit compiles, tf.function traces plus XLA
    programs), bucketing aside (it changes the shapes), against its default strategy's."""
    t = d[d["status"].isin(TIMED) & (d["mode"] != "eager") & (d["strategy"] != "bucketed")]
    if not has(t, "compilations_cold", "distinct_shapes"):
        return []
    t = t[t["compilations_cold"].notna() & t["distinct_shapes"].notna()]
    t = t.assign(_s=t.apply(_stream, axis=1),
                 _n=t["compilations_cold"] + (t["xla_compilations_cold"].fillna(0) if "xla_compilations_cold"
                                              in t.columns else 0))
    if t.empty:
        return []
    stream = t.groupby("_s")["distinct_shapes"].max().idxmax()
    g = t[t["_s"] == stream]
    parts = []
    for f in framework_order(g["framework"]):
        h = g[g["framework"] == f].sort_values("_n", kind="stable")
        if h.empty:
            continue
        best = h.iloc[0]
        dflt = h[h["strategy"].isna() | (h["strategy"] == "default")]
        text = f"{f} {best['_n']:.0f} ({strategy_label(best)})"
        if not dflt.empty and dflt["_n"].min() > best["_n"]:
            text += f", {dflt['_n'].min():.0f} by default"
        parts.append(text)
    if len(parts) < 2:
        return []
    return [f"Dynamic shapes, compilations to serve the {stream} stream's {g['distinct_shapes'].max():.0f} distinct "
            "shapes (cold pass, fewest over each framework's accelerated modes and unpadded strategies; traces plus "
            "XLA programs for TensorFlow): " + "; ".join(parts) + "."]


# ----------------------------------------------------------------------------- registration

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
          "framework choice reads the accelerated rows.", "dynamic-costs"),
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
    Plot("dyn_padding", fig_padding, ("padding_waste", "compilations_cold"),
         "Padding waste (share of computed tokens or pixels that are padding) against the compilations "
         "of the cold pass; colour framework, marker mode and strategy (bucketed pads, the others do not)."),
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

SECTION = Section(
    workload="dynamic",
    title="Dynamic shapes",
    tables=TABLES,
    figures=FIGURES,
    findings=findings,
    no_findings="Nothing to compare: no timed stream case.",
    concern="dynamic",
    concern_label="dynamic shapes",
    score=score,
    scoring=("Dynamic shapes (weight name dynamic): accelerated modes only (eager is shown apart): per stream "
             "and N = 10, 100, 1000 requests, the best framework's cost of N requests (the cold pass, then the "
             "rest at the warm rate) over this framework's, each with its best strategy that ran correctly "
             "without hitting a recompile limit; geometric mean over the streams and N."),
    summary=summary,
    method=METHOD,
    per_process=("stream_cold_s", "new_shape_latency_s", "seen_shape_latency_s", "compilations_cold",
                 "xla_compilations_cold"),
    series=("stream_cold_request_s", "stream_cold_compilations"),
)

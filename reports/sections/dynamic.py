"""The judging half of the dynamic-shapes section (workloads/dynamic.py): requests of varying
shapes served by each framework and strategy, a cold pass (fresh caches, every shape new
once) and warm passes.

    drawing  reports.rendering.sections.dynamic: its tables and figures (the judging half
             here imports nothing that draws)
    findings a new- against a seen-shape request (a one-sample test of the per-process
             ratios), the recompile limit, bucketing against the best unpadded strategy and
             the fastest cold stream (ratios of per-process cold-pass times, paired where both
             cases ran in the same processes)
    score    "dynamic shapes": every mode (eager included), per stream and N in SERVED requests,
             the best framework's cost over this framework's cheapest configuration's; geometric mean
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports.measures import stats
from reports.measures.bullets import Finding, tally
from reports.measures.data import TIMED, finite, framework_order
from reports.measures.verdicts import judge_scalar, pairs, procs
from reports.sections.common import (
    Lacking,
    Section,
    case_label,
    has,
    strategy_label,
)


def hit_limit(r: pd.Series | dict[str, Any]) -> bool:
    """The case hit its framework's recompile limit (a bool or numpy bool; absent: no)."""
    v = r.get("recompile_limit_hit")
    return isinstance(v, (bool, np.bool_)) and bool(v)


def stream_name(r: pd.Series) -> str:
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
        slower = [case_label(nonee.loc[i]) + f" ({stream_name(nonee.loc[i])})" for i, j in js.items()
                  if j is not None and stats.coarse(j.verdict) == stats.SLOWER]
        out.append(f"{len(slower)} of {len(nonee)} non-eager stream cases are slower on a request of a new shape than "
                   "on a seen one (per-process ratio of the medians, tested over processes): they compile per shape"
                   + (": " + ", ".join(slower) if slower else "") + ".")
    if "recompile_limit_hit" in t.columns:
        for _, r in d.iterrows():
            if r["framework"] == "torch" and r["strategy"] == "static" and r["status"] in TIMED or hit_limit(r):
                shapes = f"{r['distinct_shapes']:.0f}" if finite(r.get("distinct_shapes")) else "?"
                comp = (stats.plural(int(r["compilations_cold"]), "compilation") if finite(r.get("compilations_cold"))
                        else "? compilations")
                out.append(f"{case_label(r)} ({stream_name(r)}): {comp} for {shapes} distinct shapes; "
                           + ("it hit the recompile limit and ran the remaining new shapes eagerly (only a warning "
                              "says so)." if hit_limit(r) else "the recompile limit was not hit."))
    if has(t, "stream_cold_s"):
        out += _bucketed_findings(t, fam)
        for (s, *_), g in t.groupby([t.apply(stream_name, axis=1), "preset", "device"]):
            for a, b in pairs(_best_per_framework(g)):     # each framework's fastest against each other's
                out.append(_versus(a, b, "stream_cold_s", f"cold {s} stream, {a['framework']}'s fastest "
                                   f"configuration against {b['framework']}'s", fam))
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
    xla = (f" and {stats.plural(int(r['xla_compilations_cold']), 'XLA compile')}"
           if finite(r.get("xla_compilations_cold")) else "")
    head = (f"{case_label(r)} ({stream_name(r)}): {stats.plural(int(r['compilations_cold']), 'trace')}{xla} for "
            f"{r['distinct_shapes']:.0f} distinct shapes; " if finite(r.get("compilations_cold"))
            and finite(r.get("distinct_shapes")) else f"{case_label(r)} ({stream_name(r)}): ")
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
    for (fw, mode, s, p, dev), g in b.groupby(["framework", "mode", b.apply(stream_name, axis=1), "preset", "device"]):
        others = nonbucket[(nonbucket["framework"] == fw) & (nonbucket["mode"] == mode) & (nonbucket["preset"] == p)
                           & (nonbucket["device"] == dev) & (nonbucket.apply(stream_name, axis=1) == s)]
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
    """Every mode, eager included (serving eagerly is a deployable choice): per
    stream and N in SERVED, the best framework's cost of N requests over this framework's
    (each its best strategy that ran correctly without a recompile-limit hit), geometric mean
    over the streams and N that two frameworks or more ran; 0 for a framework whose
    accelerated strategies all failed."""
    if not has(d, "stream_cold_s"):
        return {}
    t = d[d["status"].isin(TIMED)]
    ratios: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in (t.groupby([t.apply(stream_name, axis=1), "preset", "device"]) if len(t) else []):
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
    t = t.assign(_s=t.apply(stream_name, axis=1), _c=["eager" if m == "eager" else "accelerated" for m in t["mode"]])
    rows = []
    fws = framework_order(t["framework"])
    for (s, c, p, dev), g in t.groupby(["_s", "_c", "preset", "device"], sort=True):
        for n in SERVED:
            best = _best_served(g, n)
            rows.append({"stream": s, "modes": c, "requests": n,
                         **{f: stats.fmt_seconds(best[f]) if f in best.index else "-" for f in fws}})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- summary

def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """The Summary's sentences: the cheapest 100 requests per stream, and the compilations
    each framework needed (_compilations_sentence)."""
    if not has(d, "stream_cold_s"):
        return []
    out, costs = [], []
    t = d[d["status"].isin(TIMED)]          # eager included: serving eagerly is a choice a user has
    for (s, _, _), g in t.groupby([t.apply(stream_name, axis=1), "preset", "device"]):
        best = _best_served(g, 100)
        if len(best) >= 2:
            f = best.idxmin()
            how = g[(g["framework"] == f)]
            how = how.loc[pd.Series([served_cost(r, 100) for _, r in how.iterrows()], index=how.index).idxmin()]
            costs.append((s, f"{f} {how['mode']}", f"{f} {how['mode']} ({stats.fmt_seconds(best.min())})"))
    if costs:
        count = ", ".join(f"{c} on {n}" for c, n in tally(c[1] for c in costs))
        out.append(Finding(f"Dynamic shapes, 100 requests served (cold pass, then the warm rate; each framework's "
                           f"cheapest mode and strategy, eager included): the cheapest is {count} of {len(costs)} "
                           "streams (costs in the table).", "dynamic shapes: 100 requests, cheapest",
                           [(s, c) for s, _, c in costs]))
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
    t = t.assign(_s=t.apply(stream_name, axis=1),
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
        text = f"{best['_n']:.0f} ({strategy_label(best)})"
        if not dflt.empty and dflt["_n"].min() > best["_n"]:
            text += f", {dflt['_n'].min():.0f} by default"
        parts.append((f, f"{best['_n']:.0f}", text + ("; traces plus XLA programs" if f == "tensorflow" else "")))
    if len(parts) < 2:
        return []
    return [Finding(f"Dynamic shapes, compilations to serve the {stream} stream's {g['distinct_shapes'].max():.0f} "
                    "distinct shapes (cold pass, fewest over accelerated modes and unpadded strategies): "
                    + ", ".join(f"{f} {n}" for f, n, _ in parts) + " (strategies and defaults in the table).",
                    f"dynamic shapes: compilations, {stream} stream", [(f, x) for f, _, x in parts])]


# ----------------------------------------------------------------------------- registration


SECTION = Section(
    name="dynamic",
    workload="dynamic",
    findings=findings,
    no_findings="Nothing to compare: no timed stream case.",
    concern="dynamic",
    concern_label="dynamic shapes",
    score=score,
    scoring=("Dynamic shapes (weight name dynamic): every mode, eager included: per stream "
             "and N = 10, 100, 1000 requests, the best framework's cost of N requests (the cold pass, then the "
             "rest at the warm rate) over this framework's, each with its best strategy that ran correctly "
             "without hitting a recompile limit; geometric mean over the streams and N."),
    summary=summary,
    per_process=("stream_cold_s", "new_shape_latency_s", "seen_shape_latency_s", "compilations_cold",
                 "xla_compilations_cold"),
    series=("stream_cold_request_s", "stream_cold_compilations"),
)

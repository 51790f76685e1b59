"""The report's sections for the three axes that steady-state throughput does not show:
dynamic shapes (workloads/dynamic.py), what could not be compiled (workloads/interop.py),
and higher-order derivatives and vmap (workloads/derivatives.py).

Everything here reads records by field name and tolerates a field being absent: a section
appears when its workload has records, and a figure or table whose fields are missing is
skipped with a one-line note (`Section.notes`), never an error. It works on
reports.analysis.replicates.cases (one row per case, processes pooled); per-process scalars (a
stream's cold pass) come as `procs_<field>` tuples, so that intervals over processes and the
replication rule (stats.decided) apply to them as to step times.

    dynamic      table framework x mode x strategy x stream; figures dyn_compilations
                 (cumulative compilations vs requests seen, from stream_cold_compilations),
                 dyn_stream_time (cumulative cold stream time from stream_cold_request_s, the
                 warm pass as its end point), dyn_new_vs_seen (new_shape_latency_s vs
                 seen_shape_latency_s), dyn_padding (padding_waste vs compilations_cold)
    interop      matrix program x framework/mode: the outcome (interop_outcome, else from the
                 status) and the record's own reason, shortened (full text in the appendix)
    derivatives  capability rows problem x transform x framework/mode; figures der_time (time
                 per problem vs its size: batch, parameters, order, models; log-log), der_vmap
                 (speedup of each transform over the `loop` baseline), der_order (run time and
                 compile time vs derivative order), der_memory (peak memory of the HVP variants
                 with what measured it)

Findings state verdicts against the report's margin (stats.verdict) under the report's
one error rate (the stats.Family that reports.analysis.findings.report_family makes): ratios of
per-process scalars (cold stream times, peak memory) are ratios of stats.Est over processes,
paired where both cases ran in the same processes; a new- against a seen-shape request is
a one-sample test of the per-process ratios; one process decides nothing ("not tested").
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from reports.analysis import stats
from reports.analysis.data import TIMED, finite, framework_order, mode_order
from reports.analysis.verdicts import judge, judge_scalar, procs, versus
from reports.rendering import figures as F

DYNAMIC, INTEROP, DERIVATIVES = "dynamic", "interop", "derivatives"
SHORT = 60                 # characters of a reason inside a matrix cell
# interop outcomes (workloads/interop.py) and the status each is recorded with; records
# without interop_outcome are read through this table backwards
OUTCOME_OF_STATUS = {"ok": "compiled", "fallback": "graph_breaks", "failed": "wrong", "unsupported": "refused"}
BASELINE_STRATEGY = "loop"             # derivatives: the plain loop the vectorised transforms are compared with
SIZE_FIELDS = ("derivative_order", "models", "params", "batch")   # a problem's size: the first that varies


@dataclass
class Section:
    """What one axis contributes: tables (caption, label, frame), sentences, figure names,
    notes for what was skipped."""
    tables: list[tuple[pd.DataFrame, str, str]] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _has_mode(d: pd.DataFrame, lacking: set[tuple[str, str]]) -> np.ndarray:
    """Rows whose framework has the mode (data.lacking_modes: n/a, not unsupported)."""
    return np.array([(f, m) not in lacking for f, m in zip(d["framework"], d["mode"])], dtype=bool)


def hit_limit(r: pd.Series | dict[str, Any]) -> bool:
    """The case hit its framework's recompile limit (a bool or numpy bool; absent: no)."""
    v = r.get("recompile_limit_hit")
    return isinstance(v, (bool, np.bool_)) and bool(v)


def has(df: pd.DataFrame, *cols: str) -> bool:
    """Every column exists and holds at least one value."""
    return all(c in df.columns and df[c].notna().any() for c in cols)


def missing_note(what: str, df: pd.DataFrame, cols: tuple[str, ...], verb: str = "not drawn") -> str:
    """The one line a report shows for a figure or table whose fields the records lack."""
    lack = [c for c in cols if not has(df, c)]
    return f"{what}: {verb}, the records lack {', '.join(lack)}."


def strategy_label(r: pd.Series | dict[str, Any]) -> str:
    s = r.get("strategy")
    return f"{r['mode']} {s if isinstance(s, str) else 'default'}"


def case_label(r: pd.Series | dict[str, Any]) -> str:
    return f"{r['framework']} {strategy_label(r)}"


def short(text: Any, n: int = SHORT) -> str:
    t = " ".join(str(text).split()) if isinstance(text, str) else ""
    return t if len(t) <= n else t[:n].rstrip() + "..."


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


# ----------------------------------------------------------------------------- dynamic shapes

def dynamic_table(d: pd.DataFrame) -> pd.DataFrame:
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


def dynamic_findings(d: pd.DataFrame, fam: stats.Family) -> list[str]:
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


def dynamic_score(d: pd.DataFrame, fws: list[str]) -> dict[str, float]:
    """Accelerated modes only (compiled, TF graph: the claim is about compilers and static
    graphs; eager is shown apart, `dynamic_costs`): per stream and N in SERVED, the best
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


def dynamic_costs(d: pd.DataFrame) -> pd.DataFrame:
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


# ----------------------------------------------------------------------------- interop

def outcome(r: pd.Series) -> str:
    o = r.get("interop_outcome")
    return o if isinstance(o, str) else OUTCOME_OF_STATUS.get(r["status"], r["status"])


IDIOMATIC = "idiomatic"     # workloads.interop's strategy: the framework's own rewrite of a program


def _as_written(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["strategy"].isna()] if "strategy" in d.columns else d


def _rewritten(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["strategy"] == IDIOMATIC] if "strategy" in d.columns else d.iloc[:0]


def _cell(r: pd.Series) -> str:
    why = short(r["reason"])
    took = f" ({stats.fmt_seconds(r['median_s'])})" if r["status"] in TIMED and finite(r["median_s"]) else ""
    return outcome(r) + took + (f": {why}" if why else "")


def _matrix(d: pd.DataFrame, cell: Callable[[pd.Series], str]) -> pd.DataFrame:
    cols = [f"{f} {m}" for f in framework_order(d["framework"])
            for m in mode_order(d.loc[d["framework"] == f, "mode"])]
    rows = []
    for task, g in d.groupby("task", sort=True):
        row = {"program": task}
        for _, r in g.iterrows():
            row[f"{r['framework']} {r['mode']}"] = cell(r)
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=["program", *cols])


def interop_matrix(d: pd.DataFrame, lacking: set[tuple[str, str]]) -> pd.DataFrame:
    """program x framework/mode, each program as written: the outcome, the median call where
    it ran, and the record's reason, shortened."""
    d = _as_written(d[_has_mode(d, lacking)])
    if d.empty:
        return pd.DataFrame()
    return _matrix(d, _cell).fillna("not run")


def interop_rewrites(d: pd.DataFrame, lacking: set[tuple[str, str]]) -> pd.DataFrame:
    """program x framework/accelerated mode, each framework's idiomatic rewrite (strategy
    `idiomatic`): the outcome, its median call, what it uses and the lines it changes; "-"
    where the framework has none (it compiles the program as written, or has no such mode)."""
    d = _rewritten(d[_has_mode(d, lacking)])
    if d.empty:
        return pd.DataFrame()

    def cell(r: pd.Series) -> str:
        n = r.get("rewrite_lines")
        how = f"{r.get('rewrite_uses')}, {int(n)} line{'s' if n != 1 else ''}" if finite(n) else ""
        return _cell(r) + (f" [{how}]" if how else "")
    return _matrix(d, cell).fillna("-")


INTEROP_SCORE = {"compiled": 1.0, "graph_breaks": 0.5, "refused": 0.5, "wrong": 0.0}
REWRITE_CREDIT = 0.75      # a program that compiles only once rewritten, in the framework's idiom


def interop_score(d: pd.DataFrame, fws: list[str], lacking: set[tuple[str, str]]) -> dict[str, float]:
    """Per program, the framework's best accelerated mode scores INTEROP_SCORE of its outcome
    as written: compiled whole and correct 1, but 0.5 when its call is slower than the same
    framework's eager call (a compile that does not pay is no success); graph breaks
    (correct, partly in Python) 0.5; refused with an error 0.5 (you learn at once and
    rewrite); wrong, silently, 0. Where the framework's idiomatic rewrite (strategy
    `idiomatic`) scores more, it counts at REWRITE_CREDIT of its own score (compiled whole
    after a rewrite 0.75: the program had to change). The mean over the programs."""
    c = d[(d["mode"] != "eager") & _has_mode(d, lacking)]
    if c.empty:
        return {}
    eager = _as_written(d[(d["mode"] == "eager") & d["status"].isin(TIMED)]).set_index(
        ["framework", "task"])["median_s"]

    def score(r: pd.Series) -> float:
        o = outcome(r)
        x = INTEROP_SCORE.get(o, 0.0)
        e = eager.get((r["framework"], r["task"]))
        if o == "compiled" and finite(e) and finite(r.get("median_s")) and r["median_s"] > e:
            x = 0.5
        return x * (REWRITE_CREDIT if r.get("strategy") == IDIOMATIC else 1.0)
    s = c.assign(score=[score(r) for _, r in c.iterrows()])
    best = s.groupby(["framework", "task"])["score"].max()
    programs = c["task"].nunique()
    return {f: float(best.loc[f].sum()) / programs if f in best.index.get_level_values(0) else math.nan for f in fws}


def _span(x: pd.Series) -> str:
    lo, hi = int(x.min()), int(x.max())
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def interop_findings(d: pd.DataFrame, lacking: set[tuple[str, str]]) -> list[str]:
    c = d[(d["mode"] != "eager") & _has_mode(d, lacking)]
    out = []
    w, rw = _as_written(c), _rewritten(c)
    for (f, m), g in w.groupby(["framework", "mode"], sort=False):
        n = g.assign(o=[outcome(r) for _, r in g.iterrows()])["o"].value_counts()
        n = n.reindex(sorted(n.index, key=lambda o: (list(INTEROP_SCORE).index(o) if o in INTEROP_SCORE else 9, o)))
        line = f"{f} {m}: of {len(g)} programs as written, " + ", ".join(f"{v} {k}" for k, v in n.items())
        h = rw[(rw["framework"] == f) & (rw["mode"] == m)]
        if not h.empty:
            ok = h[[outcome(r) == "compiled" for _, r in h.iterrows()]]
            lines = ok["rewrite_lines"].dropna() if "rewrite_lines" in ok.columns else pd.Series(dtype=float)
            line += (f"; of {len(h)} idiomatic rewrites, {len(ok)} compile whole and correct"
                     + (f" ({_span(lines)} line{'' if lines.max() == 1 else 's'} changed)" if len(lines) else ""))
        out.append(line + ".")
    return out


# ----------------------------------------------------------------------------- derivatives

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


def derivatives_capability(d: pd.DataFrame, lacking: set[tuple[str, str]]) -> pd.DataFrame:
    """problem x transform (strategy) x framework/mode: each cell the statuses over the
    problem's sizes, with the first non-ok reason, shortened."""
    d = d[_has_mode(d, lacking)]
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


def derivatives_findings(d: pd.DataFrame, fam: stats.Family) -> list[str]:
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


def derivatives_score(d: pd.DataFrame, fws: list[str], lacking: set[tuple[str, str]]) -> dict[str, float]:
    """The mean of (a) speed: geometric mean over the tasks two frameworks or more ran of the
    best framework's time over this framework's best (any transform and mode; 0 if it ran
    none), and (b) coverage: share of the (task, eager | accelerated) slots it ran with some
    transform (ok 1, fallback 0.5): which transform a framework offers is its API, not a
    capability another framework lacks."""
    d = d[_has_mode(d, lacking)]
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

def _strategy_styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """A colour and marker per strategy label (within a panel the framework is fixed)."""
    pal = F.CB
    marks = "osD^v<>PXh*"
    return {s: (pal[i % len(pal)], marks[i % len(marks)]) for i, s in enumerate(sorted(set(labels)))}


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
            style = _strategy_styles([strategy_label(r) for _, r in panel.iterrows()])   # per panel: 10 colours
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
            style = _strategy_styles([r["strategy"] if isinstance(r["strategy"], str) else "default"
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


# name -> (workload, function, fields it reads, caption)
FIGURES: dict[str, tuple[str, Callable[[pd.DataFrame], Figure | None], tuple[str, ...], str]] = {
    "dyn_compilations": (DYNAMIC, fig_compilations, ("stream_cold_compilations",),
                         "Compilations (each framework's own counter) after each request of the cold pass, per "
                         "strategy; one panel per stream and framework."),
    "dyn_stream_time": (DYNAMIC, fig_stream_time, ("stream_cold_request_s",),
                        "Cumulative time of the cold pass over the stream (fresh model, every shape new once), and "
                        "the median time of a warm pass (every shape seen) as the marker at the end."),
    "dyn_new_vs_seen": (DYNAMIC, fig_new_vs_seen, ("new_shape_latency_s", "seen_shape_latency_s"),
                        "Median latency of a request whose shape is new against one whose shape was seen (colour "
                        "framework, marker mode and strategy; dotted: equal). Above the line: the strategy compiles "
                        "(or traces) per shape."),
    "dyn_padding": (DYNAMIC, fig_padding, ("padding_waste", "compilations_cold"),
                    "Padding waste (share of computed tokens or pixels that are padding) against the compilations "
                    "of the cold pass; colour framework, marker mode and strategy (bucketed pads, the others do not)."),
    "der_time": (DERIVATIVES, fig_der_time, ("median_s",),
                 "Median time per problem against the size its tasks vary in (batch, parameter count, derivative "
                 "order, the Jacobian's input size n at fixed n m; log-log where the sizes span a decade): colour framework, line style mode, marker "
                 "transform; the results table has each interval."),
    "der_vmap": (DERIVATIVES, fig_der_vmap, ("median_s",),
                 "Speedup of each vectorised transform over the same framework and mode's loop over examples "
                 "(loop's median / the transform's; band: 95% interval; line: no change)."),
    "der_order": (DERIVATIVES, fig_der_order, ("derivative_order",),
                  "n-th derivative: run time (median) and compile time (the framework's own timer, else first call "
                  "minus the median) against the order; panels named run time / compile time."),
    "der_memory": (DERIVATIVES, fig_der_memory, ("peak_memory_bytes",),
                   "Peak memory of one call of each Hessian-vector-product variant: a panel per problem and per "
                   "instrument (the axis says which: the process's peak RSS delta for torch and JAX on the CPU, "
                   "TensorFlow's allocator peak), so bars on one axis are measured the same way."),
}


def draw(cases: pd.DataFrame, out_dir: Path) -> dict[str, tuple[Path | None, str]]:
    """Each figure whose workload has records: (PNG, caption), or (None, a one-line note)
    when the records lack its fields or it has nothing to draw."""
    from reports.rendering import escape
    df = escape.mpl_frame(cases)
    done: dict[str, tuple[Path | None, str]] = {}
    for name, (wl, fn, needs, caption) in FIGURES.items():
        d = df[df["workload"] == wl]
        if d.empty:
            continue
        if not has(d, *needs):
            done[name] = (None, missing_note(f"The {name} figure", d, needs))
            continue
        fig = fn(d)
        if fig is None:
            done[name] = (None, f"The {name} figure: not drawn, no case has the values it plots.")
            continue
        png, _ = F.save(fig, out_dir, name)
        done[name] = (png, caption)
    return done

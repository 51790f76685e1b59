"""The judging half of the derivatives section (workloads/derivatives.py): per-example
gradients, Hessian-vector products, Hessians, Jacobians, n-th derivatives and ensembles,
each by several transforms (strategies: vmap, jacfwd/jacrev, ... and the plain `loop` over
examples).

    drawing  reports.rendering.sections.derivatives: its tables and figures (the judging half
             here imports nothing that draws)
    findings each transform against its loop (paired over processes), the Jacobian's forward
             against its reverse mode per shape, the HVP variants' peak memory (a per-process
             scalar) and each framework's fastest against each other's per task
    score    "derivatives and vmap": the mean of a speed score and the coverage of (task,
             eager | accelerated) slots
"""
from __future__ import annotations

import math
import re

import pandas as pd

from reports.measures import stats
from reports.measures.bullets import Finding
from reports.measures.data import TIMED, finite
from reports.measures.verdicts import fastest_per_framework, judge, judge_scalar, pairs, versus
from reports.sections.common import (
    Lacking,
    Section,
    case_label,
    has,
    has_mode,
    short,
)

BASELINE_STRATEGY = "loop"     # the plain loop the vectorised transforms are compared with


def problem(task: str) -> str:
    """The problem of a derivatives task name without its size: 'hessian_p100' -> 'hessian'."""
    return re.sub(r"(_[a-z]?\d+)+$", "", str(task))


def against_loop(d: pd.DataFrame) -> pd.DataFrame:
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
    v = against_loop(d)
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
    for task, g in t.groupby("task", sort=True):      # each framework's fastest against each other's
        for a, b in pairs(fastest_per_framework(g)):
            out.append(versus(a, b, f"{task}, {a['framework']}'s fastest transform and mode against "
                                    f"{b['framework']}'s", fam))
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
        what = f"{task} peak memory, {f} {m} ({short(memory_source(a), 80)}): {mib['a']}, {mib['b']}: "
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


def memory_source(r: pd.Series) -> str:
    for k in ("peak_memory_source", "memory_note"):
        if isinstance(r.get(k), str):
            return r[k]
    return "the device allocator's peak"


# ----------------------------------------------------------------------------- summary

def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """The Summary's sentences: the best vectorised transform over the loop per framework,
    and who is fastest per task by the verdicts (_winners)."""
    out = []
    v = against_loop(d)
    if not v.empty:
        top = v.loc[v.groupby("framework")["vs_loop"].idxmax()]
        out.append(Finding(
            "Derivatives: the best vectorised transform over the loop over examples reaches "
            + ", ".join(f"{r['framework']} {r['vs_loop']:.1f}x" for _, r in top.iterrows())
            + " (tasks and each framework's absolute time in the table; per-task verdicts in its section).",
            "derivatives: vectorised over the loop",
            [(r["framework"], f"{r['vs_loop']:.1f}x ({r['task']})") for _, r in top.iterrows()]
            + [(f"{k}, absolute (fastest configuration)", _absolute(d, k).split(": ", 1)[1])
               for k in dict.fromkeys(top["task"])]))
    return out + _winners(d, fam)


def _absolute(d: pd.DataFrame, task: str) -> str:
    """'task: torch compiled vmap 0.50 ms, ...': each framework's fastest configuration's
    steady step on a task, fastest first (a ratio over a framework's own loop says nothing of
    who is fastest)."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna() & (d["task"] == task)]
    best = t.sort_values("median_s", kind="stable").drop_duplicates("framework")
    return f"{task}: " + ", ".join(f"{r['framework']} {r['mode']} {r['strategy']} {stats.fmt_seconds(r['median_s'])}"
                                   for _, r in best.iterrows())


def _winners(d: pd.DataFrame, fam: stats.Family) -> list[str]:
    """Per derivatives task, each framework's fastest transform and mode against the
    second-fastest's, counted by verdict: who is faster where the family states it."""
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
    text = (f"Derivatives, fastest framework per task (best transform and mode against the second-fastest's): faster "
            f"by the verdicts in {stated} of {compared} tasks"
            + (f" ({count(won)})" if won else ""))
    rest = compared - stated - untested
    text += (f"; {rest} equivalent or inconclusive" if rest else "")
    rows = []
    if untested:
        text += f"; {untested} not tested (one process per case; the fastest, indicatively, in the table)"
        rows.append((f"{untested} tasks not tested", "fastest, indicatively: " + count(fastest)))
    return [Finding(text + ".", "derivatives: fastest framework per task", rows)]


# ----------------------------------------------------------------------------- registration


SECTION = Section(
    name="derivatives",
    workload="derivatives",
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
    per_process=("peak_memory_bytes",),
)

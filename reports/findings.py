"""Findings written from the data, and the framework-choice ranking.

Findings name a winner only when the 95% interval of the ratio of medians excludes 1
(reports.stats.significant); otherwise they say the difference is not significant.

The ranking scores each framework per concern on [0, 1], 1 being the best framework in
this report, then combines the concerns with the user's weights:

    throughput   geometric mean over cases of (framework's best throughput / best of all);
                 a case is (workload, task, strategy, preset, device), the framework's best mode
    compile      geometric mean over cases of (lowest compile latency / framework's), taking the
                 latency of the framework's fastest non-eager mode, floored at 1 s
    coverage     share of (case, eager | accelerated) slots that ran: ok 1, fallback 0.5,
                 unsupported or failed 0, so TensorFlow's graph mode and the others' compiled
                 mode count as the same capability
    dynamic, derivatives
                 throughput restricted to those workloads, a concern of their own where such
                 records exist (they are left out of the general throughput score)
    overall      sum(w_c * score_c) / sum(w_c)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports import stats
from reports.data import TIMED, finite
from reports.figures import framework_order
from workloads.base import FwbenchError

GROUP = ["workload", "task", "strategy", "preset", "device"]
# Workloads that are a concern of their own in the framework choice (label -> concern name)
OWN_CONCERN = {"dynamic": "dynamic shapes", "derivatives": "derivatives"}
CONCERNS = ("throughput", "compile", "coverage", *OWN_CONCERN)
DEFAULT_WEIGHTS = {c: 1.0 for c in CONCERNS}
COMPILE_FLOOR_S = 1.0      # compile latencies under a second count as one second: nobody waits for them
SLOT_SCORE = {"ok": 1.0, "fallback": 0.5, "unsupported": 0.0, "failed": 0.0}


def parse_weights(text: str | None) -> dict[str, float]:
    """'throughput=2,compile=1' -> weights (unnamed concerns keep weight 1)."""
    w = dict(DEFAULT_WEIGHTS)
    if not text:
        return w
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or not name:
            raise FwbenchError(f"--weights takes name=value pairs like throughput=2,compile=1, got {part!r}")
        if name not in CONCERNS:
            raise FwbenchError(f"unknown concern {name!r} in --weights: valid are {', '.join(CONCERNS)}")
        try:
            v = float(value)
        except ValueError:
            v = -1.0
        if not (v >= 0 and math.isfinite(v)):
            raise FwbenchError(f"weight of {name} must be a non-negative number, got {value.strip()!r}")
        w[name] = v
    return w


def _name(r: pd.Series) -> str:
    return f"{r['framework']} {r['mode']}" + (f" ({r['strategy']})" if isinstance(r["strategy"], str) else "")


def _case(r: pd.Series) -> str:
    return f"{r['workload']} {r['task']}" + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else "")


def _group_key(r: pd.Series) -> tuple[str, ...]:
    return tuple("-" if pd.isna(r[k]) else str(r[k]) for k in GROUP)


def _boot(r: pd.Series) -> np.ndarray | None:
    return stats.boot_medians(r["times"], f"{r['run_file']}|{r['case']}")


def compare_rows(a: pd.Series, b: pd.Series) -> tuple[float, float, float]:
    """How many times faster a is than b: median_b / median_a, with its 95% interval."""
    lo, hi = stats.ratio_interval(_boot(b), _boot(a))
    return b["median_s"] / a["median_s"], lo, hi


def versus(a: pd.Series, b: pd.Series, what: str) -> str:
    """'jax compiled runs at 1.31x [1.25, 1.37] the speed of torch compiled' (speed = 1 / median
    time), or 'no significant difference' when the interval includes 1."""
    r, lo, hi = compare_rows(a, b)
    if stats.significant(lo, hi):
        return f"{what}: {_name(a)} runs at {stats.fmt_ratio(r, lo, hi)} the speed of {_name(b)}"
    return (f"{what}: no significant difference between {_name(a)} and {_name(b)} "
            f"({stats.fmt_ratio(r, lo, hi)})")


def findings(df: pd.DataFrame) -> dict[str, list[str]]:
    """Findings per workload, as sentences."""
    out: dict[str, list[str]] = {}
    t = df[df["status"].isin(TIMED) & df["median_s"].notna()]
    for wl, w in t.groupby("workload", sort=True):
        lines: list[str] = []
        for _, g in w.groupby(GROUP, sort=False, dropna=False):
            first = g.iloc[0]
            case = _case(first)
            # fastest framework overall (each framework's best mode), against the runner-up
            best = g.sort_values("median_s").drop_duplicates("framework")
            if len(best) >= 2:
                a, b = best.iloc[0], best.iloc[1]
                lines.append(versus(a, b, f"fastest {case}") + f" ({stats.fmt_count(a['throughput'])} {a['unit']}/s)")
            # each mode, frameworks against each other
            for mode, m in g.groupby("mode", sort=False):
                if m["framework"].nunique() < 2:
                    continue
                m = m.sort_values("median_s")
                lines.append(versus(m.iloc[0], m.iloc[1], f"{case}, {mode}"))
        lines += _compile_findings(w)
        u = w[w["utilisation"].notna()]
        if not u.empty:
            top = u.loc[u["utilisation"].idxmax()]
            lines.append(f"Highest utilisation: {_name(top)} {_case(top)} at {100 * top['utilisation']:.1f}% of the "
                         f"machine's fp32 GEMM rate ({top['flops'] / top['median_s'] / 1e9:.1f} GFLOP/s of model "
                         "FLOPs).")
        out[str(wl)] = lines
    return out


def _compile_findings(w: pd.DataFrame) -> list[str]:
    c = w[(w["mode"] != "eager") & w["speedup_vs_eager"].notna()]
    if c.empty:
        return []
    lines = []
    faster = c[c["speedup_lo"] > 1]
    slower = c[c["speedup_hi"] < 1]
    claim = c[c["speedup_lo"] >= 1.4]
    lines.append(f"{len(faster)} of {len(c)} non-eager cases are significantly faster than their framework's eager, "
                 f"{len(slower)} significantly slower; {len(claim)} reach the \"up to 40%\" claim (1.4x) with "
                 "their whole interval.")
    for _, r in c.iterrows():
        s = stats.fmt_ratio(r["speedup_vs_eager"], r["speedup_lo"], r["speedup_hi"])
        if r["speedup_hi"] < 1:
            lines.append(f"{_name(r)} {_case(r)} is slower than eager: {s}.")
    lat = c[c["compile_latency_s"].notna()]
    if not lat.empty:
        lo, hi = lat.loc[lat["compile_latency_s"].idxmin()], lat.loc[lat["compile_latency_s"].idxmax()]
        lines.append(f"Compile latency (first call minus eager's first call) ranges from "
                     f"{stats.fmt_seconds(lo['compile_latency_s'])} ({_name(lo)}, {_case(lo)}) to "
                     f"{stats.fmt_seconds(hi['compile_latency_s'])} ({_name(hi)}, {_case(hi)})."
                     + (" A negative latency means the first compiled call took less time than the first "
                        "eager call (an eager mode that compiles op by op pays on its first call too)."
                        if lo["compile_latency_s"] < 0 else ""))
    be = c[c["break_even_steps"].notna()]
    for _, r in be.sort_values("break_even_steps").iterrows():
        n = r["break_even_steps"]
        if math.isinf(n):
            lines.append(f"{_name(r)} {_case(r)} never pays back its first call: its steps are not faster than eager.")
    fin = be[np.isfinite(be["break_even_steps"])]
    if not fin.empty:
        hi = fin.loc[fin["break_even_steps"].idxmax()]
        lines.append(f"The slowest to pay back compilation is {_name(hi)} {_case(hi)}: "
                     f"{hi['break_even_steps']:,.0f} steps before it has cost less total time than eager.")
    return lines


# ----------------------------------------------------------------------------- ranking

def _throughput_score(t: pd.DataFrame, fws: list[str]) -> dict[str, float]:
    ratios: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in t.groupby(GROUP, dropna=False):
        best = g.groupby("framework")["throughput"].max()
        for f, v in best.items():
            if f in ratios:
                ratios[f].append(v / best.max())
    return {f: stats.geomean(v) for f, v in ratios.items()}


def scores(df: pd.DataFrame) -> pd.DataFrame:
    """Per framework x concern score in [0, 1] (NaN where the concern has no data)."""
    fws = framework_order(df["framework"])
    t = df[df["status"].isin(TIMED) & df["throughput"].notna()]
    own = t["workload"].isin(list(OWN_CONCERN))
    out = pd.DataFrame(index=pd.Index(fws, name="framework"), columns=list(CONCERNS), dtype=float)
    for f, v in _throughput_score(t[~own], fws).items():
        out.at[f, "throughput"] = v
    for wl in OWN_CONCERN:
        for f, v in _throughput_score(t[t["workload"] == wl], fws).items():
            out.at[f, wl] = v
    # compile: latency of each framework's fastest non-eager mode per case
    c = t[(t["mode"] != "eager") & t["compile_latency_s"].notna()]
    lat: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in c.groupby(GROUP, dropna=False):
        pick = g.sort_values("median_s").drop_duplicates("framework")
        l = pick.set_index("framework")["compile_latency_s"].clip(lower=COMPILE_FLOOR_S)
        for f, v in l.items():
            lat[f].append(l.min() / v)
    for f, v in lat.items():
        out.at[f, "compile"] = stats.geomean(v)
    # coverage over (case, eager | accelerated) slots
    d = df.assign(slot=np.where(df["mode"] == "eager", "eager", "accelerated"),
                  score=df["status"].map(SLOT_SCORE).fillna(0.0))
    slots = d.groupby([*GROUP, "slot"], dropna=False).ngroups
    if slots:
        best = d.groupby(["framework", *GROUP, "slot"], dropna=False)["score"].max()
        for f in fws:
            out.at[f, "coverage"] = float(best.loc[f].sum()) / slots if f in best.index.get_level_values(0) else 0.0
    return out


def ranking(df: pd.DataFrame, weights: dict[str, float]) -> tuple[pd.DataFrame, list[str]]:
    """Scores per concern plus the weighted overall score and rank; and notes on what was
    left out (concerns without data)."""
    s = scores(df)
    used = [c for c in CONCERNS if s[c].notna().any() and weights.get(c, 0) > 0]
    notes = [f"{c}: no data in these results, so not scored" for c in CONCERNS if s[c].isna().all()
             and (c in ("throughput", "compile", "coverage"))]
    total = sum(weights[c] for c in used)
    overall = sum(s[c].fillna(0.0) * weights[c] for c in used) / total if total else pd.Series(np.nan, index=s.index)
    s = s[[c for c in CONCERNS if s[c].notna().any()]]
    s["overall"] = overall
    s["rank"] = s["overall"].rank(ascending=False, method="min")
    s = s.sort_values(["rank"], kind="stable")
    return s, notes


def ranking_sentences(r: pd.DataFrame, weights: dict[str, float]) -> list[str]:
    out = []
    for c in r.columns:
        if c == "rank" or r[c].isna().all():
            continue
        order = r[c].sort_values(ascending=False, kind="stable")
        label = "overall" if c == "overall" else OWN_CONCERN.get(c, c)
        out.append(f"{label}: " + ", ".join(f"{i}. {f} ({v:.2f})" for i, (f, v) in enumerate(order.items(), 1)
                                            if finite(v)))
    w = ", ".join(f"{c}={weights[c]:g}" for c in r.columns if c in weights)
    out.append(f"weights used: {w} (set with --weights, e.g. --weights throughput=2,compile=1)")
    return out


def reasons(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Cases that did not run normally (fallback, unsupported, failed) with their reasons."""
    d = df[df["status"] != "ok"]
    return [{"case": _case(r), "framework": r["framework"], "mode": r["mode"], "status": r["status"],
             "reason": r["reason"] if isinstance(r["reason"], str) else ""} for _, r in d.iterrows()]

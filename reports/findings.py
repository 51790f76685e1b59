"""Findings written from the data, and the framework-choice ranking.

Findings, break-even and "never pays back" work on reports.replicates.cases (one row per
case, its processes pooled) and follow the rule of `fwbench compare` (stats.decided): a
winner is named only when the 95% interval of the ratio of medians (hierarchical bootstrap
over processes, then rounds) excludes 1 and the ratio exceeds the minimum effect in force
(stats.MIN_EFFECT, or the larger spread between processes observed in the data); otherwise
the finding says there is no significant difference. Cases of different processes where
one was timed in a single process state no difference at all (one_process_apart): their
ratio carries the drift between processes, which one process cannot measure.

The "up to 40%" claim is made for torch.compile against PyTorch's eager mode, so it is
tested on torch's compiled cases only; JAX's and TensorFlow's eager modes run op by op
(OP_BY_OP_EAGER), and their speedups over it are labelled so.

The ranking scores each framework per concern on [0, 1], 1 being the best framework in
this report, then combines the concerns with the user's weights:

    throughput   geometric mean over cases of (framework's best throughput / best of all);
                 a case is (workload, task, strategy, preset, device), the framework's best mode
    compile      geometric mean over cases of (lowest first call / framework's), taking the first
                 call (trace + compile + run, the cold-cache one where measured) of the
                 framework's fastest non-eager mode: the wait before the first result. No floor:
                 a first call is never zero, so the ratio needs none
    coverage     share of (case, eager | accelerated) slots that ran: ok 1, fallback 0.5,
                 unsupported or failed 0, so TensorFlow's graph mode and the others' compiled
                 mode count as the same capability
    dynamic      "dynamic shapes" (reports.axes.dynamic_score): per stream, the best framework's
                 cold stream time (fresh model, every shape new once) over this framework's, each
                 taking its best strategy that ran correctly without hitting a recompile limit;
                 geometric mean over the streams it ran (0 if none); times the share
                 of its non-eager stream cases that ran correctly without a limit hit (failed:
                 wrong output; unsupported strategies are left out)
    interop      "Python interop" (axes.interop_score): per program, the outcome of the
                 framework's best non-eager mode: compiled or with graph breaks 1 (runs
                 correctly), refused 0.5 (the framework says so at once; you rewrite the
                 program), wrong 0 (a silently wrong result); the mean over programs
    derivatives  "derivatives and vmap" (axes.derivatives_score): the mean of a speed score
                 (geometric mean over the tasks it ran of the best framework's time over this
                 one's best transform and mode; 0 if it ran none) and its coverage (share of its
                 task x transform x mode cases that ran: ok 1, fallback 0.5), where what it
                 could not run counts
                 These workloads are left out of the throughput score.
    overall      sum(w_c * score_c) / sum(w_c) for the weights given

No weighting is the verdict: `sensitivity` ranks the frameworks under every weight vector of
a grid (each concern weighted 0 to 3) and reports how often each framework comes first, and
`deciding_sentences` names the concern on which the choice turns (each concern's leader).
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd

from reports import axes, replicates, stats
from reports.data import TIMED, finite
from reports.figures import OP_BY_OP_EAGER, framework_order, lacking_modes
from workloads.base import FwbenchError

GROUP = ["workload", "task", "strategy", "preset", "device"]
# Workloads that are a concern of their own in the framework choice (label -> concern name)
OWN_CONCERN = {"dynamic": "dynamic shapes", "interop": "Python interop", "derivatives": "derivatives and vmap"}
CONCERNS = ("throughput", "compile", "coverage", *OWN_CONCERN)
DEFAULT_WEIGHTS = {c: 1.0 for c in CONCERNS}
GRID_WEIGHTS = (0.0, 1.0, 2.0, 3.0)    # each concern's weight in the sensitivity grid
CLAIM = 1.4                # "up to 40% faster" with torch.compile, as the claim is usually made
CLAIM_FRAMEWORK = "torch"
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


def _vs_eager(r: pd.Series) -> str:
    """'vs eager', or 'vs op-by-op eager' for frameworks whose eager mode runs op by op."""
    return "op-by-op eager" if r["framework"] in OP_BY_OP_EAGER else "eager"


def one_process_apart(a: pd.Series, b: pd.Series) -> bool:
    """Cases timed in different processes, one of them in a single process: their ratio
    carries the drift between processes, which one process cannot measure, so no finding
    rests on it (the process is the unit of replication). Cases of the same process (one
    framework's modes and strategies) are compared by their rounds."""
    return min(a["n_processes"], b["n_processes"]) < 2 and a["run_file"] != b["run_file"]


def compare_rows(a: pd.Series, b: pd.Series) -> tuple[float, float, float]:
    """How many times faster case a is than case b: median_b / median_a, with its 95%
    interval from the two cases' bootstrap draws (replicates.cases); no interval (nan)
    where one_process_apart."""
    if one_process_apart(a, b):
        return b["median_s"] / a["median_s"], math.nan, math.nan
    lo, hi = stats.ratio_interval(b["boot"], a["boot"])
    return b["median_s"] / a["median_s"], lo, hi


def versus(a: pd.Series, b: pd.Series, what: str, min_effect: float = stats.MIN_EFFECT) -> str:
    """'jax compiled runs at 1.31x [1.25, 1.37] the speed of torch compiled' (speed = 1 / median
    time), or 'no significant difference' unless the interval excludes 1 and the ratio
    exceeds the minimum effect."""
    r, lo, hi = compare_rows(a, b)
    if one_process_apart(a, b):
        return (f"{what}: no finding between {_name(a)} and {_name(b)} ({r:.2f}x from one process; a "
                f"difference between processes needs two processes or more)")
    if stats.decided(r, lo, hi, min_effect):
        return f"{what}: {_name(a)} runs at {stats.fmt_ratio(r, lo, hi)} the speed of {_name(b)}"
    return (f"{what}: no significant difference between {_name(a)} and {_name(b)} "
            f"({stats.fmt_ratio(r, lo, hi)}; a finding needs the interval to exclude 1 and at least "
            f"{100 * min_effect:.0f}%)")


def findings(df: pd.DataFrame) -> dict[str, list[str]]:
    """Findings per workload, as sentences (from records or from replicates.cases)."""
    df = replicates.cases(df)
    me = df.attrs.get("min_effect", stats.MIN_EFFECT)
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
                lines.append(versus(a, b, f"fastest {case}", me) + f" ({stats.fmt_count(a['throughput'])} {a['unit']}/s)")
            # each mode, frameworks against each other
            for mode, m in g.groupby("mode", sort=False):
                if m["framework"].nunique() < 2:
                    continue
                m = m.sort_values("median_s")
                lines.append(versus(m.iloc[0], m.iloc[1], f"{case}, {mode}", me))
        lines += _compile_findings(w, me)
        u = w[w["utilisation"].notna()]
        if not u.empty:
            top = u.loc[u["utilisation"].idxmax()]
            lines.append(f"Highest utilisation: {_name(top)} {_case(top)} at {100 * top['utilisation']:.1f}% of the "
                         f"machine's fp32 GEMM rate ({top['flops'] / top['median_s'] / 1e9:.1f} GFLOP/s of model "
                         "FLOPs).")
        out[str(wl)] = lines
    return out


def _compile_findings(w: pd.DataFrame, me: float) -> list[str]:
    c = w[(w["mode"] != "eager") & w["speedup_vs_eager"].notna()]
    if c.empty:
        return []
    lines = []
    won = c.apply(lambda r: stats.decided(r["speedup_vs_eager"], r["speedup_lo"], r["speedup_hi"], me), axis=1)
    faster, slower = c[won & (c["speedup_vs_eager"] > 1)], c[won & (c["speedup_vs_eager"] < 1)]
    lines.append(f"{len(faster)} of {len(c)} non-eager cases are faster than their framework's eager by the report's "
                 f"rule (interval above 1, at least {100 * me:.0f}%), {len(slower)} slower; JAX's and TensorFlow's "
                 "eager modes run op by op, so their speedups are over op-by-op execution, not over a fast eager mode.")
    torch_c = c[(c["framework"] == CLAIM_FRAMEWORK) & (c["mode"] == "compiled")]
    if not torch_c.empty:
        claim = torch_c[torch_c["speedup_lo"] >= CLAIM]
        lines.append(f"The \"up to 40%\" claim is about torch.compile: {len(claim)} of {len(torch_c)} torch compiled "
                     f"cases reach 1.4x over torch eager with their whole interval.")
    for _, r in slower.iterrows():
        s = stats.fmt_ratio(r["speedup_vs_eager"], r["speedup_lo"], r["speedup_hi"])
        lines.append(f"{_name(r)} {_case(r)} is slower than {_vs_eager(r)}: {s}.")
    lat = c[c["compile_latency_s"].notna()]
    if not lat.empty:
        lo, hi = lat.loc[lat["compile_latency_s"].idxmin()], lat.loc[lat["compile_latency_s"].idxmax()]
        lines.append(f"Compile latency (a mode's first call minus its own median step) ranges from "
                     f"{stats.fmt_seconds(lo['compile_latency_s'])} ({_name(lo)}, {_case(lo)}) to "
                     f"{stats.fmt_seconds(hi['compile_latency_s'])} ({_name(hi)}, {_case(hi)}).")
    for _, r in c[np.isinf(c["break_even_steps"])].iterrows():
        lines.append(f"{_name(r)} {_case(r)} never pays back its first call: its steps are slower than "
                     f"{_vs_eager(r)} by the report's rule.")
    fin = c[np.isfinite(c["break_even_steps"])]
    if not fin.empty:
        hi = fin.loc[fin["break_even_steps"].idxmax()]
        lines.append(f"The slowest to pay back compilation is {_name(hi)} {_case(hi)}: "
                     f"{hi['break_even_steps']:,.0f} steps before it has cost less total time than {_vs_eager(hi)}.")
    undecided = c[c["break_even_steps"].isna()]
    if not undecided.empty:
        lines.append(f"{len(undecided)} non-eager case(s) have no break-even: their steps do not differ from eager's "
                     "by the report's rule.")
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
    df = replicates.cases(df)
    fws = framework_order(df["framework"])
    t = df[df["status"].isin(TIMED) & df["throughput"].notna()]
    own = t["workload"].isin(list(OWN_CONCERN))
    out = pd.DataFrame(index=pd.Index(fws, name="framework"), columns=list(CONCERNS), dtype=float)
    for f, v in _throughput_score(t[~own], fws).items():
        out.at[f, "throughput"] = v
    lacking = lacking_modes(df)
    for wl, v in (("dynamic", axes.dynamic_score(df[df["workload"] == "dynamic"], fws)),
                  ("interop", axes.interop_score(df[df["workload"] == "interop"], fws, lacking)),
                  ("derivatives", axes.derivatives_score(df[df["workload"] == "derivatives"], fws, lacking))):
        for f, x in v.items():
            out.at[f, wl] = x
    # compile: first call of each framework's fastest non-eager mode per case
    c = t[(t["mode"] != "eager") & (t["first_call_s"] > 0)]
    lat: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in c.groupby(GROUP, dropna=False):
        pick = g.sort_values("median_s").drop_duplicates("framework")
        l = pick.set_index("framework")["first_call_s"]
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


def sensitivity(s: pd.DataFrame) -> pd.DataFrame:
    """Per framework: the share of the weight grid (each concern with data weighted by every
    value of GRID_WEIGHTS, all-zero left out) under which it ranks first (ties share first
    place), and the concerns it leads on."""
    concerns = [c for c in CONCERNS if c in s.columns and s[c].notna().any()]
    grid = np.array(list(itertools.product(GRID_WEIGHTS, repeat=len(concerns))), dtype=float).reshape(-1, len(concerns))
    grid = grid[grid.sum(axis=1) > 0]
    sc = s[concerns].fillna(0.0).to_numpy(dtype=float)                  # (frameworks, concerns)
    overall = grid @ sc.T / grid.sum(axis=1, keepdims=True)              # (vectors, frameworks)
    first = np.isclose(overall, overall.max(axis=1, keepdims=True), rtol=0, atol=1e-12)
    lead = {c: s[c].idxmax() for c in concerns}
    out = pd.DataFrame({"ranks first under": first.mean(axis=0) if len(grid) else np.nan,
                        "leads on": [", ".join(OWN_CONCERN.get(c, c) for c in concerns if lead[c] == f) or "-"
                                     for f in s.index]}, index=s.index).rename_axis("framework")
    out.attrs["vectors"] = len(grid)
    return out


def deciding_sentences(sens: pd.DataFrame) -> list[str]:
    """Whether one framework ranks first under every weighting, else which concern decides."""
    if sens.empty or sens["ranks first under"].isna().all():
        return []
    share = sens["ranks first under"].sort_values(ascending=False, kind="stable")
    n = sens.attrs.get("vectors", 0)
    if share.iloc[0] >= 1.0:
        return [f"{share.index[0]} ranks first under every weighting of the grid ({n} weight vectors, each concern "
                "weighted 0 to 3): no weighting of these concerns changes the choice."]
    leads = "; ".join(f"{f} leads on {v}" for f, v in sens["leads on"].items() if v != "-")
    return [f"No framework ranks first under every weighting: " +
            ", ".join(f"{f} under {100 * v:.0f}%" for f, v in share.items() if v > 0) +
            f" of {n} weight vectors (each concern weighted 0 to 3).",
            f"The choice turns on which concern matters most to you: {leads}."]


def reasons(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Cases that did not run normally (fallback, unsupported, failed) with their reasons."""
    d = df[df["status"] != "ok"]
    return [{"case": _case(r), "framework": r["framework"], "mode": r["mode"], "status": r["status"],
             "reason": r["reason"] if isinstance(r["reason"], str) else ""} for _, r in d.iterrows()]

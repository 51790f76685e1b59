"""Findings written from the data, and the framework-choice ranking.

Findings, break-even and "never pays back" work on replicates.cases (one row per
case, its processes pooled) and state a verdict for every comparison (stats.verdict, against
the report's margin): faster or slower by at least the margin, faster or slower, equivalent
within the margin, inconclusive, or not tested (fewer than 3 processes). Every comparison of a report,
here and in reports.sections, belongs to one stats.Family, which holds the chance of any false
"faster"/"slower" in the report at 5% (Holm) and flags verdicts that change on the second
half of the rounds or without one process (`report_family`). Ratios between frameworks
compare warm processes (Welch); a framework's modes and strategies, measured in the same
processes, are compared process by process (paired).

The "as high as 40%" claim is made for torch.compile against PyTorch's eager mode, so it is
tested on torch's compiled cases only; JAX's and TensorFlow's eager modes run op by op
(OP_BY_OP_EAGER), and their speedups over it are labelled so.

The ranking scores each framework per concern on [0, 1], 1 being the best framework in
this report, over work two frameworks or more ran (SLOT: the model workloads count each
framework's default strategy; a variant only one framework has is left out of the
cross-framework means), then combines the concerns with the user's weights:

    throughput   geometric mean over tasks of (framework's best throughput / best of all);
                 a task is (workload, task, preset, device), the framework's best mode
    compile      geometric mean over tasks of (lowest first call / framework's), taking the
                 first call (trace + compile + run, the cold one where measured) of the
                 framework's fastest accelerated mode: the wait before the first result
    coverage     share of (task, eager | accelerated) slots that ran: ok 1, fallback 0.5,
                 unsupported or failed 0; a mode a framework does not have is n/a
    dynamic      "dynamic shapes" (reports.sections.dynamic.score): accelerated modes, per
                 stream and N in 10, 100, 1000 requests, the best framework's cost of N requests
                 (cold pass, then the warm rate) over this framework's best strategy's;
                 geometric mean
    interop      "Python interop" (sections.interop.score): per program, the framework's best
                 accelerated mode: compiled whole 1 (0.5 if slower than eager), graph breaks
                 0.5, refused 0.5, wrong 0; the mean over programs
    derivatives  "derivatives and vmap" (sections.derivatives.score): the mean of a speed score
                 (geometric mean over tasks two frameworks ran of best time / this one's best
                 transform and mode) and its coverage of (task, eager | accelerated) slots
                 Each section's concern (reports.sections: Section.concern and score); these
                 workloads are left out of the throughput, compile and coverage scores.
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

from reports import sections
from reports.conclusions import replicates
from reports.measures import stats, verdicts
from reports.measures.data import OP_BY_OP_EAGER, TIMED, finite, framework_order, lacking_modes, unit
from reports.measures.verdicts import fastest_per_framework, pairs, versus
from workloads.base import FwbenchError
from workloads.record import NOT_REACHED

GROUP = ["workload", "task", "strategy", "precision", "preset", "device"]
# The model workloads' concerns, then each section's (a concern of its own in the framework choice)
CONCERNS = ("throughput", "compile", "coverage", *sections.CONCERNS)
DEFAULT_WEIGHTS = {c: 1.0 for c in CONCERNS}
GRID_WEIGHTS = (0.0, 1.0, 2.0, 3.0)    # each concern's weight in the sensitivity grid
CLAIM = 1.4                # gains "as high as 40%" with the PyTorch 2 compiler (claim 1 of ../shared/CLAIMS.md)
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


def _case(r: pd.Series) -> str:
    return (f"{r['workload']} {r['task']}" + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else "")
            + (f" ({r['precision']})" if r.get("precision") not in (None, "fp32") else ""))


TASK = ["workload", "task", "precision", "preset", "device"]     # a task, whatever the configuration


def _task(r: pd.Series) -> str:
    return f"{r['workload']} {r['task']}" + (f" ({r['precision']})" if r.get("precision") not in (None, "fp32")
                                             else "")


def _vs_eager(r: pd.Series) -> str:
    """'vs eager', or 'vs op-by-op eager' for frameworks whose eager mode runs op by op."""
    return "op-by-op eager" if r["framework"] in OP_BY_OP_EAGER else "eager"


# ----------------------------------------------------------------------------- the report's family

def report_family(df: pd.DataFrame, margin: float = stats.MARGIN) -> stats.Family:
    """Every comparison the report states (findings here, the sections' findings, each
    non-eager case against its eager), under one error rate: pass 1 collects the p-values,
    Holm sets the levels, pass 2 words the verdicts and runs the stability checks. The
    family is kept in the cases frame's attrs, so every later call states the same."""
    df = replicates.cases(df)
    fam = stats.Family(margin=margin, group_of=op_by_op_grouping(df))
    for _ in range(2):
        _statements(df, fam)
        if not fam.closed:
            fam.close()
    df.attrs["family"] = replicates.SharedObject(fam)
    return fam


def op_by_op_grouping(df: pd.DataFrame):  # noqa: ANN201
    """The family's grouping (stats.GROUP_SHARES): a comparison with an op-by-op eager case
    (JAX's, TensorFlow's eager mode) on either side in a Holm group of its own."""
    op = set(df.loc[df["framework"].isin(OP_BY_OP_EAGER) & (df["mode"] == "eager"), "case"])
    return lambda cases: stats.OP_BY_OP if op & set(cases) else stats.MAIN


def prepare(df: pd.DataFrame, margin: float = stats.MARGIN) -> stats.Family:
    """The cases frame's family for `margin` (report_family), made and the frame annotated
    (annotate) once."""
    f = df.attrs.get("family")
    if isinstance(f, replicates.SharedObject) and f.obj.margin == margin and "flags" in df.columns:
        return f.obj
    fam = report_family(df, margin)
    annotate(df, fam)
    return fam


def family_of(df: pd.DataFrame) -> stats.Family:
    """The frame's family (report_family), made now with the default margin if it has none."""
    f = df.attrs.get("family")
    return f.obj if isinstance(f, replicates.SharedObject) else report_family(df)


def _statements(df: pd.DataFrame, fam: stats.Family) -> None:
    _findings(df, fam)
    lacking = lacking_modes(df)
    for s in sections.SECTIONS:
        d = s.cases(df)
        if not s.own_family and not d.empty:
            s.findings(d, fam, lacking)


def speedup_judgement(df: pd.DataFrame, r: pd.Series, fam: stats.Family) -> stats.Judgement | None:
    """A non-eager case's time against its eager case's (paired over their processes)."""
    e = replicates.eager_of(df, r)
    if e is None or not isinstance(r.get("est"), stats.Est) or not isinstance(e.get("est"), stats.Est):
        return None
    return fam.judge(f"vs eager|{r['case']}", r["est"], e["est"], (r["case"], e["case"]))


def findings(df: pd.DataFrame) -> dict[str, list[str]]:
    """Findings per workload, as sentences (from records or from replicates.cases)."""
    df = replicates.cases(df)
    return _findings(df, family_of(df))


def _findings(df: pd.DataFrame, fam: stats.Family) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    t = df[df["status"].isin(TIMED) & df["median_s"].notna()]
    own = [s.workload for s in sections.SECTIONS if s.workload and not s.generic_findings]   # they state their own
    t = t[~t["workload"].isin(own)]
    for wl, w in t.groupby("workload", sort=True):
        lines: list[str] = []
        # each framework's fastest configuration (any mode and strategy) against each other's:
        # every pair, so the largest gap between frameworks is tested too
        for _, g in w.groupby(TASK, sort=False, dropna=False):
            best = fastest_per_framework(g)
            for i, (a, b) in enumerate(pairs(best)):
                lines.append(versus(a, b, f"{_task(a)}, {a['framework']}'s fastest configuration against "
                                          f"{b['framework']}'s", fam)
                             + (f"; {stats.fmt_count(a['throughput'])} {a['unit']}/s" if i == 0 else ""))
        for _, g in w.groupby(GROUP, sort=False, dropna=False):
            case = _case(g.iloc[0])
            # each mode, its fastest framework against the second-fastest
            for mode, m in g.groupby("mode", sort=False):
                if m["framework"].nunique() < 2:
                    continue
                m = m.sort_values("median_s")
                lines.append(versus(m.iloc[0], m.iloc[1], f"{case}, {mode}", fam))
        lines += _compile_findings(df, w, fam)
        u = w[w["utilisation"].notna() & (w["utilisation"] > 0)]      # a program without model FLOPs has none
        if not u.empty and u["utilisation"].max() >= 5e-4:
            top = u.loc[u["utilisation"].idxmax()]
            lines.append(f"Highest utilisation: {verdicts.name(top)} {_case(top)} at {100 * top['utilisation']:.1f}% "
                         f"of the machine's {top.get('peak_precision') or 'fp32'} GEMM rate "
                         f"({top['flops'] / top['median_s'] / 1e9:.1f} GFLOP/s of "
                         "model FLOPs).")
        out[str(wl)] = lines
    return out


def _compile_findings(df: pd.DataFrame, w: pd.DataFrame, fam: stats.Family) -> list[str]:
    c = w[(w["mode"] != "eager") & w["speedup_vs_eager"].notna()]
    if c.empty:
        return []
    js = {i: speedup_judgement(df, r, fam) for i, r in c.iterrows()}
    js = {i: j for i, j in js.items() if j is not None}
    count = {v: sum(coarse == v for coarse in (stats.coarse(j.verdict) for j in js.values()))
             for v in (stats.FASTER, stats.SLOWER, stats.EQUIVALENT, stats.INCONCLUSIVE, stats.NOT_TESTED)}
    me = f"{100 * fam.margin:.0f}%"
    u = unit(df)
    lines = [f"Against their framework's eager mode (paired over the {u} both ran in), of {len(js)} non-eager "
             f"cases {count[stats.FASTER]} are faster, {count[stats.SLOWER]} slower, {count[stats.EQUIVALENT]} "
             f"equivalent within +-{me}, {count[stats.INCONCLUSIVE]} inconclusive"
             + (f", {count[stats.NOT_TESTED]} not tested (fewer than 3 {u})" if count[stats.NOT_TESTED] else "")
             + "; JAX's and TensorFlow's eager modes run op by op, so their speedups are over op-by-op execution, "
             "not over a fast eager mode."]
    torch_c = c[(c["framework"] == CLAIM_FRAMEWORK) & (c["mode"] == "compiled")]
    if not torch_c.empty:
        reach = [i for i in torch_c.index if i in js and js[i].decided and js[i].speed()[1] >= CLAIM]
        lines.append(f"The \"as high as 40%\" claim is about torch.compile: {len(reach)} of {len(torch_c)} torch "
                     "compiled cases reach 1.4x over torch eager with their whole interval.")
    for i, j in js.items():
        r = c.loc[i]
        if stats.coarse(j.verdict) == stats.SLOWER:
            lines.append(f"{verdicts.name(r)} {_case(r)} is slower than {_vs_eager(r)}: "
                         + stats.sentence(j, verdicts.name(r), _vs_eager(r), fam.margin,
                                          flags=fam.key_flags.get(j.key, ())) + ".")
    lat = c[c["compile_latency_s"].notna()]
    if not lat.empty:
        lo, hi = lat.loc[lat["compile_latency_s"].idxmin()], lat.loc[lat["compile_latency_s"].idxmax()]
        lines.append(f"Compile latency (a mode's cold first call minus its own steady step) ranges from "
                     f"{_latency(lo)} ({verdicts.name(lo)}, {_case(lo)}) to {_latency(hi)} ({verdicts.name(hi)}, "
                     f"{_case(hi)}).")
    be = {i: break_even(df, c.loc[i], fam) for i in js}
    for i, (n, _, _) in be.items():
        if math.isinf(n):
            r = c.loc[i]
            lines.append(f"{verdicts.name(r)} {_case(r)} never pays back its first call: its steps are slower than "
                         f"{_vs_eager(r)} (the verdict above).")
    fin = {i: v for i, v in be.items() if math.isfinite(v[0])}
    if fin:
        i = max(fin, key=lambda k: fin[k][0])
        r, (n, lo, hi) = c.loc[i], fin[i]
        lines.append(f"The slowest to pay back compilation is {verdicts.name(r)} {_case(r)}: "
                     f"{_steps_ci(n, lo, hi)} step{'s' if n != 1 else ''} before it has cost less total time than "
                     f"{_vs_eager(r)}.")
    undecided = [i for i, v in be.items() if math.isnan(v[0])]
    if undecided:
        lines.append(f"{stats.plural(len(undecided), 'non-eager case')} {'has' if len(undecided) == 1 else 'have'} "
                     "no break-even: their steps are not faster or slower than eager's by the verdicts "
                     "(equivalent, inconclusive, or not tested).")
    return lines


def _latency(r: pd.Series) -> str:
    return stats.fmt_time_ci(r["compile_latency_s"], r["compile_latency_lo_s"], r["compile_latency_hi_s"])


def _steps_ci(n: float, lo: float, hi: float) -> str:
    def one(x: float) -> str:
        return "never" if math.isinf(x) else f"{x:,.0f}"
    return one(n) + (f" [{one(lo)}, {one(hi)}]" if finite(lo) or (isinstance(lo, float) and math.isinf(lo)) else "")


def break_even(df: pd.DataFrame, r: pd.Series, fam: stats.Family) -> tuple[float, float, float]:
    """(steps, lo, hi): the first n at which first call + (n-1) x step is below eager's, when
    the case is faster than its eager by the family's verdict; inf when slower ("never pays
    back"); nan otherwise. The interval (95%) from draws of the first calls' and the steps'
    t distributions (the step ratio paired over processes); nan below two processes."""
    j = speedup_judgement(df, r, fam) if r["mode"] != "eager" else None
    if j is None:
        return math.nan, math.nan, math.nan
    v = stats.coarse(j.verdict)
    if v == stats.SLOWER:
        return math.inf, math.inf, math.inf
    e = replicates.eager_of(df, r)
    if v != stats.FASTER or not (finite(r["first_call_s"]) and finite(e["first_call_s"])):
        return math.nan, math.nan, math.nan
    from reports.measures.data import break_even as point
    n = point(r["first_call_s"], r["median_s"], e["first_call_s"], e["median_s"])
    fc, fe = (_first_est(x).draws(f"first|{x['case']}") for x in (r, e))
    sc = r["est"].draws(f"step|{r['case']}")
    d = stats.ratio(e["est"], r["est"]).draws(f"speedup|{r['case']}")
    if any(x is None for x in (fc, fe, sc, d)):
        return n, math.nan, math.nan
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):   # heavy-tailed t draws
        step_c = np.exp(sc)
        gain, extra = step_c * (np.exp(d) - 1.0), np.exp(fc) - np.exp(fe)
        steps = np.where(gain <= 0, np.inf, np.where(extra < 0, 1.0, np.floor(extra / gain) + 2))
    lo, hi = np.quantile(steps, [(1 - stats.LEVEL) / 2, (1 + stats.LEVEL) / 2])
    return n, float(lo), float(hi)


def _first_est(r: pd.Series) -> stats.Est:
    """The Est behind a case's first_call_s (cold where measured, else warm)."""
    cold = r.get("est_first_cold")
    return cold if isinstance(cold, stats.Est) and cold.n else r.get("est_first_warm") or stats.Est({})


def annotate(df: pd.DataFrame, fam: stats.Family) -> None:
    """Columns that need the report's family, added in place: vs_eager_verdict, break-even
    (break_even_steps, _lo, _hi) and the stability flags (flags: reason, in words)."""
    said, be, flags = [], [], []
    for _, r in df.iterrows():
        j = speedup_judgement(df, r, fam) if r["mode"] != "eager" and r["status"] in TIMED else None
        said.append(stats.words(j.verdict, fam.margin) if j is not None else None)
        be.append(break_even(df, r, fam) if j is not None else (math.nan,) * 3)
        flags.append(case_flags(r, fam))
    df["vs_eager_verdict"] = said
    df["break_even_steps"], df["break_even_lo"], df["break_even_hi"] = (list(x) for x in zip(*be)) if be else ([],) * 3
    df["flags"] = flags


def case_flags(r: pd.Series, fam: stats.Family) -> str:
    """A case's flags in words: the verdicts its instability could change, a busy machine, a
    recompilation during the timed rounds, an invalid first call."""
    out = [f"{why} ({len(keys)} comparison{'s' if len(keys) > 1 else ''})"
           for why, keys in sorted(fam.flags.get(r["case"], {}).items())]
    if finite(r.get("busy_left_out")) and r["busy_left_out"] > 0:
        out.append(BUSY)
    if r.get("recompiled_during_timing") is True:
        out.append(RECOMPILED)
    if finite(r.get("first_call_invalid")) and r["first_call_invalid"] > 0:
        out.append(INVALID_FIRST)
    return "; ".join(out)


BUSY = "machine busy: processes left out"
RECOMPILED = "recompiled during the timed rounds"
INVALID_FIRST = "a first call that compiled nothing (left out)"
# What each flag means, for the report's summary table.
FLAG_MEANING = {
    stats.HALF: "the rounds were still settling: on the second half of every process's rounds a verdict it is part "
                "of changes class (faster, slower, equivalent, inconclusive)",
    stats.ONE_CARRIES: "one process carries a verdict: with the most deviant process replaced by the others' median, "
                       "the verdict changes class",
    BUSY: "another process used CPU (or the hypervisor stole it) while the case was timed, also when measured "
          "again: those processes' measurements are left out of every number, so the case rests on fewer processes",
    RECOMPILED: "the framework compiled during the timed rounds: the steady state was not steady",
    INVALID_FIRST: "a compiled mode's first call compiled nothing (it reused code compiled earlier in the process): "
                   "not a cold first call, left out of the first-call statistics",
}


# ----------------------------------------------------------------------------- ranking

# A framework-choice slot: a piece of work in one framework. The model workloads (gpt,
# diffusion) count each framework's default strategy only: a variant (torch's train-step
# recipes) is one framework's API, which the others cannot have, so it is left out of the
# cross-framework means (it gave torch free best scores and JAX and TensorFlow "not run"
# slots). The sections' workloads score each framework's best strategy (reports.sections).
SLOT = ["workload", "task", "preset", "device"]


def mode_class(mode: Any) -> str:
    """eager, or accelerated (compiled, TensorFlow's graph): the two ways a user runs a model."""
    return "eager" if mode == "eager" else "accelerated"


def _shared_slots(t: pd.DataFrame) -> pd.DataFrame:
    """Rows of slots that two frameworks or more ran: a slot only one framework has (a
    torch-only train-step recipe, another framework's API) is left out of cross-framework
    means, so it gives nobody a free best score."""
    n = t.groupby(SLOT, dropna=False)["framework"].transform("nunique")
    return t[n >= 2]


def _throughput_score(t: pd.DataFrame, fws: list[str]) -> dict[str, float]:
    ratios: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in _shared_slots(t).groupby(SLOT, dropna=False):
        best = g.groupby("framework")["throughput"].max()
        for f, v in best.items():
            if f in ratios:
                ratios[f].append(v / best.max())
    return {f: stats.geomean(v) for f, v in ratios.items()}


def scores(df: pd.DataFrame) -> pd.DataFrame:
    """Per framework x concern score in [0, 1] (NaN where the concern has no data), on
    strategy-agnostic slots (SLOT: each framework's best strategy), over slots two or more
    frameworks ran (see the module docstring)."""
    df = replicates.cases(df)
    fws = framework_order(df["framework"])
    t = df[df["status"].isin(TIMED) & df["throughput"].notna()]
    own = (t["workload"].isin(sections.WORKLOADS) | t["strategy"].notna()     # variants: see SLOT
           | ~sections.at_baseline(t))                                          # a case axis' variants
    out = pd.DataFrame(index=pd.Index(fws, name="framework"), columns=list(CONCERNS), dtype=float)
    for f, v in _throughput_score(t[~own], fws).items():
        out.at[f, "throughput"] = v
    lacking = lacking_modes(df)
    for s in sections.SECTIONS:
        for f, x in (s.score(s.cases(df), fws, lacking) if s.score is not None else {}).items():
            out.at[f, s.concern] = x
    # compile: the first call of the configuration throughput scores (each framework's fastest
    # mode and strategy per slot, eager included): one configuration for both concerns
    c = _shared_slots(t[~own & (t["first_call_s"] > 0)])
    lat: dict[str, list[float]] = {f: [] for f in fws}
    for _, g in c.groupby(SLOT, dropna=False):
        pick = g.sort_values("median_s").drop_duplicates("framework")
        l = pick.set_index("framework")["first_call_s"]
        for f, v in l.items():
            lat[f].append(l.min() / v)
    for f, v in lat.items():
        out.at[f, "compile"] = stats.geomean(v)
    # coverage over (slot, eager | accelerated) of the model workloads: the best status of the
    # framework's strategies in the class; modes a framework does not have are n/a, not 0
    m = sections.baseline(df[~df["workload"].isin(sections.WORKLOADS) & df["strategy"].isna()])
    m = m[[(f, mo) not in lacking for f, mo in zip(m["framework"], m["mode"])]] if len(m) else m
    m = m[~m["reason"].fillna("").str.match(NOT_REACHED)] if len(m) else m   # its process ended first: unknown
    d = m.assign(cls=[mode_class(x) for x in m["mode"]], score=m["status"].map(SLOT_SCORE).fillna(0.0))
    slots = d.groupby([*SLOT, "cls"], dropna=False).ngroups if len(d) else 0
    if slots:
        best = d.groupby(["framework", *SLOT, "cls"], dropna=False)["score"].max()
        for f in fws:    # over the slots whose outcome is known for f (reached by its processes)
            mine = best.loc[f] if f in best.index.get_level_values(0) else None
            out.at[f, "coverage"] = float(mine.sum()) / len(mine) if mine is not None and len(mine) else 0.0
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
        label = "overall" if c == "overall" else sections.concern_label(c)
        out.append(f"{label}: " + ", ".join(f"{i}. {f} ({v:.2f})" for i, (f, v) in enumerate(order.items(), 1)
                                            if finite(v)))
    w = ", ".join(f"{c}={weights[c]:g}" for c in r.columns if c in weights)
    out.append(f"weights used: {w} (set with --weights, e.g. --weights throughput=2,compile=1)")
    return out


def flip_sentences(r: pd.DataFrame, weights: dict[str, float]) -> list[str]:
    """What drives the ranking and what would flip it, in words: the leader's margin over
    each other framework, concern by concern (weighted), and the weight one concern would
    need (the others as given) for that framework to rank first."""
    concerns = [c for c in CONCERNS if c in r.columns and r[c].notna().any()]
    if len(r) < 2 or not concerns:
        return []
    sc = r[concerns].fillna(0.0)
    w = {c: float(weights.get(c, 0.0)) for c in concerns}
    total = sum(w.values()) or 1.0
    lead = r["overall"].idxmax()
    out = []
    for b in [f for f in r.index if f != lead]:
        parts = sorted(((w[c] * (sc.at[lead, c] - sc.at[b, c]) / total, c) for c in concerns), reverse=True)
        pro = [f"{sections.concern_label(c)} (+{x:.2f})" for x, c in parts if x > 0.005]
        con = [f"{sections.concern_label(c)} ({x:.2f})" for x, c in parts if x < -0.005]
        text = (f"{lead} ranks above {b} by {r.at[lead, 'overall'] - r.at[b, 'overall']:.2f} overall: "
                + (f"it gains on {', '.join(pro)}" if pro else "it gains on no concern")
                + (f" and loses on {', '.join(con)}" if con else "") + ".")
        flips = []
        for c in concerns:
            a_rest = sum(w[k] * sc.at[lead, k] for k in concerns if k != c)
            b_rest = sum(w[k] * sc.at[b, k] for k in concerns if k != c)
            gap = sc.at[b, c] - sc.at[lead, c]
            if gap > 0 and a_rest - b_rest > 0:
                flips.append(f"{sections.concern_label(c)} weighs at least {(a_rest - b_rest) / gap:.2f}")
        text += (f" {b} would rank above {lead} if " + " or if ".join(flips) + " (the other weights as given)."
                 if flips else f" No single weight puts {b} above {lead}.")
        out.append(text)
    return out


def sensitivity(s: pd.DataFrame) -> pd.DataFrame:
    """Per framework: the share of the weight grid (each concern with data weighted by every
    value of GRID_WEIGHTS, all-zero left out) under which it ranks first (ties share first
    place), and the concerns it leads on."""
    concerns = [c for c in CONCERNS if c in s.columns and s[c].notna().any()]
    if not concerns:     # no concern has data (a report of a workload without one, such as serving alone)
        out = pd.DataFrame({"ranks first under": np.nan, "leads on": "-"}, index=s.index).rename_axis("framework")
        out.attrs["vectors"] = 0
        return out
    grid = np.array(list(itertools.product(GRID_WEIGHTS, repeat=len(concerns))), dtype=float).reshape(-1, len(concerns))
    grid = grid[grid.sum(axis=1) > 0]
    sc = s[concerns].fillna(0.0).to_numpy(dtype=float)                  # (frameworks, concerns)
    overall = grid @ sc.T / grid.sum(axis=1, keepdims=True)              # (vectors, frameworks)
    first = np.isclose(overall, overall.max(axis=1, keepdims=True), rtol=0, atol=1e-12)
    # a concern's leader only where it alone has the top score (a tie is a tie, not the first listed)
    top = {c: [f for f in s.index if np.isclose(s.at[f, c], s[c].max(), rtol=0, atol=0.005)] for c in concerns}
    lead = {c: top[c][0] if len(top[c]) == 1 else None for c in concerns}
    out = pd.DataFrame({"ranks first under": first.mean(axis=0) if len(grid) else np.nan,
                        "leads on": [", ".join(sections.concern_label(c) for c in concerns if lead[c] == f) or "-"
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
    return ["No framework ranks first under every weighting: " +
            ", ".join(f"{f} under {100 * v:.0f}%" for f, v in share.items() if v > 0) +
            f" of {n} weight vectors (each concern weighted 0 to 3).",
            f"The choice turns on which concern matters most to you: {leads}."]


def reasons(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Cases that did not run normally (fallback, unsupported, failed) with their reasons."""
    d = df[df["status"] != "ok"]
    return [{"case": _case(r), "framework": r["framework"], "mode": r["mode"], "status": r["status"],
             "reason": r["reason"] if isinstance(r["reason"], str) else ""} for _, r in d.iterrows()]

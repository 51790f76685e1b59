"""The report's Summary: what the data support, first (the anchors are the TorchBench/PyTorch 2
dashboard summaries and MLPerf's result tables, which lead with a compact table and their
variance statements).

    key_findings(df, fam)   5-8 bullets of at most 40 words (analysis.bullets), their other figures
                            (intervals and verdicts, the family's) in the table under them
    framework_table(df)     one row per framework x mode: geometric-mean speed relative to the
                            fastest of each task, cold and warm first call, pass rate, peak memory
    scope(df)               what the run can and cannot say: machine, threads, dtype, presets,
                            processes, equivalence testing

Everything is computed from replicates.cases and the report's stats.Family: no sentence here
says more than a verdict of the family does. Works on the model workloads (gpt, diffusion:
the workloads without a section) where they ran; each section (reports.sections) adds its
own sentences where its workload ran.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize as sps_opt
from scipy import stats as sps

from reports import sections
from reports.conclusions import findings, jobs, replicates
from reports.measures import precision, stats, verdicts
from reports.measures.bullets import Finding, tally
from reports.measures.data import OP_BY_OP_EAGER, TIMED, finite, framework_order, lacking_modes, side_by_side, unit
from workloads.base import is_accelerator
from workloads.record import NOT_REACHED


def _model(df: pd.DataFrame, every_precision: bool = False, any_strategy: bool = False) -> pd.DataFrame:
    """Timed default-strategy cases of the model workloads (what the framework choice reads):
    fp32 only, unless every_precision; every strategy with any_strategy."""
    t = df[df["status"].isin(TIMED) & df["median_s"].notna() & (df["strategy"].isna() | any_strategy)]
    t = t[~t["workload"].isin(sections.WORKLOADS)]
    return t if every_precision else sections.baseline(t)


def _pass_rate(cases: pd.DataFrame) -> str:
    """ok or fallback over the cases that ran; those whose process ended before them are
    counted apart ('not reached'): nothing was learned about them."""
    unknown = cases["reason"].fillna("").str.match(NOT_REACHED)
    ran = cases[~unknown]
    return f"{int(ran['status'].isin(TIMED).sum())}/{len(ran)}" + (f" ({int(unknown.sum())} not reached)"
                                                                    if unknown.any() else "")


def framework_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per framework x mode over the model workloads' default cases: the geometric
    mean over tasks of (the task's fastest time of any framework and mode / this one's), the
    geometric mean of the cold and warm first calls, the pass rate (ok or fallback over the
    cases the mode has) and the peak memory where a framework measured it."""
    t = _model(df, every_precision=True)
    allc = df[~df["workload"].isin(sections.WORKLOADS) & df["strategy"].isna()]
    if t.empty:
        return pd.DataFrame()
    best = t.groupby(["workload", "task"])["median_s"].min()
    rows = []
    split = precision.has_other(df)            # a precision column where a run has more than fp32
    keys = ["framework", "mode", "precision"] if split else ["framework", "mode"]
    for key, g in t.groupby(keys, sort=False):
        f, m = key[0], key[1]
        rel = [best[(w, k)] / x for w, k, x in zip(g["workload"], g["task"], g["median_s"])]
        cases = allc[(allc["framework"] == f) & (allc["mode"] == m)]
        if split:
            cases = cases[cases["precision"].fillna("fp32") == key[2]]
        mem = g["peak_memory_bytes"].dropna() if "peak_memory_bytes" in g.columns else pd.Series(dtype=float)
        rows.append({"framework": f, "mode": m + (" (op by op)" if m == "eager" and f in OP_BY_OP_EAGER else ""),
                     **({"precision": key[2]} if split else {}),
                     "speed vs fastest (geo. mean)": f"{stats.geomean(rel):.2f}",
                     "first call, cold (geo. mean)": _geo_seconds(g["first_call_cold_s"]),
                     "first call, warm (geo. mean)": _geo_seconds(g["first_call_warm_s"]),
                     "pass rate": _pass_rate(cases),
                     memory_label(df): _mib(np.median(mem)) if len(mem) else "not measured"})
    out = pd.DataFrame(rows)
    order = framework_order(out["framework"])
    out["_k"] = [order.index(f) for f in out["framework"]]
    return out.sort_values(["_k"], kind="stable").drop(columns="_k").reset_index(drop=True)


def _mib(b: float) -> str:
    """Bytes in MiB: one decimal below 10 MiB (a tiny preset's 0.3 MiB is not 0)."""
    m = b / 2 ** 20
    return f"{m:.1f} MiB" if m < 10 else f"{m:.0f} MiB"


RSS_GROWTH = "peak RSS growth of one call"      # frameworks.harness.memory's instrument on the CPU


def memory_label(df: pd.DataFrame) -> str:
    """framework_table's memory column, named as measured (the RSS growth of one call
    was labelled 'peak memory', a footprint it is not): 'per-call RSS growth' where every figure
    comes from that instrument, else 'peak memory (see caption)'."""
    t = _model(df, every_precision=True)
    if "peak_memory_source" not in t.columns or not t["peak_memory_bytes"].notna().any():
        return "peak memory"
    src = t.loc[t["peak_memory_bytes"].notna(), "peak_memory_source"].fillna("")
    return "per-call RSS growth" if src.str.startswith(RSS_GROWTH).all() else "peak memory (see caption)"


def memory_instrument(df: pd.DataFrame) -> str:
    """What framework_table's peak memory column measured, from the records: one
    instrument named once where every framework's figure comes from it (on the CPU,
    frameworks.harness.memory's), else each framework's; 'not measured' where none has one."""
    t = _model(df, every_precision=True)
    if "peak_memory_bytes" not in t.columns:
        return "not measured"
    t = t[t["peak_memory_bytes"].notna()]
    src = (t["peak_memory_source"] if "peak_memory_source" in t.columns else pd.Series(None, index=t.index))
    if "memory_note" in t.columns:
        src = src.fillna(t["memory_note"])
    src = src.fillna("the device allocator's peak")
    per = {f: sorted(set(src[t["framework"] == f])) for f in framework_order(t["framework"])}
    if not per:
        return "not measured"
    every = {s for v in per.values() for s in v}
    missing = [f for f in framework_order(df["framework"]) if f not in per]
    text = (f"one instrument for {'every framework' if not missing else ', '.join(per)}: {every.pop()}"
            if len(every) == 1 and len(per) > 1 else "; ".join(f"{f}: {' / '.join(v)}" for f, v in per.items()))
    return text + (f"; not measured for {', '.join(missing)}" if missing else "")


def _geo_seconds(values: pd.Series) -> str:
    v = [x for x in values if finite(x) and x > 0]
    return stats.fmt_seconds(stats.geomean(v)) if v else "-"


def _ratio_range(values: list[float]) -> str:
    return f"{min(values):.2f}x" if len(values) == 1 else f"{min(values):.2f}-{max(values):.2f}x"


def key_findings(df: pd.DataFrame, fam: stats.Family) -> list[str]:
    """5-8 sentences: who is fastest where (with the verdicts' counts), eager against compiled
    and the "as high as 40%" claim, the price of the first call cold and warm, break-even, and one
    sentence per axis that ran. Indicative runs (one process) say so instead of verdicts."""
    t = _model(df)
    out: list[str] = []
    if not t.empty:
        out += _best_configuration_sentence(df, fam)
        out += _speed_sentences(df, t, fam)
        out += _first_call_sentences(t)
        out += _claim_sentence(df, t, fam)
    out += section_sentences(df, fam)
    return out[:9]


def section_sentences(df: pd.DataFrame, fam: stats.Family, own_family: bool = False) -> list[str]:
    """Each section's Summary sentences (reports.sections: Section.summary), where it has
    cases, in sections.summary_order: those judged in the report's family (own_family False:
    from the report's cases), or those judged in a family of their own (True: from every
    case, such as scale-out's, which a Summary adds after its key findings)."""
    out = []
    lacking = lacking_modes(df)
    for s in sections.summary_order() if not own_family else [s for s in sections.SECTIONS if s.own_family]:
        d = s.cases(df)
        if not d.empty:
            out += s.summary(d, fam, lacking)
    return out


def section_scopes(every: pd.DataFrame) -> list[str]:
    """The sections' own words for the Summary's scope (Section.scope), from every case."""
    return [t for s in sections.SECTIONS if s.scope is not None and (t := s.scope(every))]


def _winners(df: pd.DataFrame, t: pd.DataFrame, fam: stats.Family, cls: str
             ) -> tuple[dict[str, list[tuple[str, str]]], int, int]:
    """Per task, the fastest framework of a mode class against the second-fastest: {winner: [(task,
    ratio over the second-fastest)]} for the differences the family states, and (stated, compared)."""
    sub = t[[findings.mode_class(m) == cls for m in t["mode"]]]
    won: dict[str, list[str]] = {}
    stated = compared = 0
    for (w, k), g in sub.groupby(["workload", "task"], sort=True):
        best = g.sort_values("median_s").drop_duplicates("framework")
        if len(best) < 2:
            continue
        a, b = best.iloc[0], best.iloc[1]
        j = verdicts.judge(a, b, fam)
        compared += 1
        if stats.coarse(j.verdict) == stats.FASTER:
            stated += 1
            x, lo, hi = j.speed()
            flag = " (flagged)" if fam.key_flags.get(j.key) else ""
            ci = f"{stats.fmt_x(x)}x [{stats.fmt_x(lo)}, {stats.fmt_x(hi)}]"
            won.setdefault(a["framework"], []).append((f"{w} {k}", f"{a['framework']} {ci} over "
                                                                    f"{b['framework']}{flag}"))
    return won, stated, compared


def times_text(best: dict[str, tuple[str, float]]) -> str:
    """'torch compiled 31.7 ms, ...': jobs.best_times's configurations and steady steps, fastest first."""
    return ", ".join(f"{c} {stats.fmt_seconds(x)}" for c, x in best.values())


def _best_configuration_sentence(df: pd.DataFrame, fam: stats.Family) -> list[str]:
    """Who is fastest per model task with each framework's best configuration (any mode,
    eager included), in absolute steady-step times, and every pair of those configurations by
    the report's verdicts (the comparisons findings registers: verdicts.pairs)."""
    t = _model(df, any_strategy=True)
    conf = jobs.configurations(df)
    best = {(w, k): jobs.best_times(df, k, w, conf) for (w, k), _ in t.groupby(["workload", "task"], sort=True)}
    tasks = [wk for wk, b in best.items() if b]
    if not tasks:
        return []
    firsts = [next(iter(best[wk])) for wk in tasks]
    count = ", ".join(f"{f}'s in {n}" for f, n in tally(firsts))
    rows = [(f"{w} {k}", times_text(best[(w, k)])) for w, k in tasks]
    stated = compared = 0
    if fam.m:
        for (w, k), g in t.groupby(["workload", "task"], sort=True):
            for a, b in verdicts.pairs(verdicts.fastest_per_framework(g)):
                j = verdicts.judge(a, b, fam)
                compared += 1
                if stats.coarse(j.verdict) == stats.FASTER:
                    stated += 1
                    flag = " (flagged)" if fam.key_flags.get(j.key) else ""
                    rows.append((f"{w} {k}", f"{a['framework']} faster than {b['framework']}: "
                                 + j.interval_text() + flag))
    pairs = f"; {stated} of the {compared} pairs of frameworks differ by the verdicts" if compared else ""
    return [Finding(f"Each framework's fastest configuration (any mode), steady step: the lowest is {count} of "
                    f"{len(tasks)} tasks" + pairs + " (table).", "fastest configuration per framework, fastest first",
                    rows)]


def _speed_sentences(df: pd.DataFrame, t: pd.DataFrame, fam: stats.Family) -> list[str]:
    if fam.m == 0:
        one = "steady-state set" if side_by_side(t) else "warm process"
        return [f"Steady state: every case has a single {one}, so no framework is found faster than "
                "another (indicative numbers only; run without --quick for verdicts)."]
    out = []
    for cls, what in (("accelerated", "compiled (or TF graph)"), ("eager", "eager")):
        won, stated, compared = _winners(df, t, fam, cls)
        if not compared:
            continue
        if not won:
            out.append(f"Steady state, {what} modes: no framework is faster than the second-fastest in any of "
                       f"{compared} tasks by the verdicts (equivalent or inconclusive).")
            continue
        ranked = sorted(won.items(), key=lambda kv: -len(kv[1]))
        rest = compared - stated
        out.append(Finding(
            f"Steady state, {what} modes: the fastest framework is faster than the second-fastest in {stated} of "
            f"{compared} tasks: " + ", ".join(f"{f} in {len(v)}" for f, v in ranked)
            + (f"; the other {rest} {'is' if rest == 1 else 'are'} equivalent or inconclusive" if rest else "")
            + " (ratios in the table)." + (" JAX's and TensorFlow's eager modes run op by op."
                                           if cls == "eager" else ""),
            f"{what} modes: fastest over the second-fastest", sorted(x for _, v in ranked for x in v)))
    return out


def _first_call_sentences(t: pd.DataFrame) -> list[str]:
    """Cold first calls per framework (accelerated, range over tasks) and what a warm cache
    cuts them by (cold over warm)."""
    acc = t[t["mode"] != "eager"]
    parts, warm = [], []
    for f in framework_order(acc["framework"]):
        g = acc[(acc["framework"] == f) & acc["first_call_cold_s"].notna()]
        if g.empty:
            continue
        best = g.sort_values("median_s").drop_duplicates(["workload", "task"])
        parts.append(f"{f} {stats.fmt_seconds(best['first_call_cold_s'].min())}-"
                     f"{stats.fmt_seconds(best['first_call_cold_s'].max())}")
        cut = (best["first_call_cold_s"] / best["first_call_warm_s"]).dropna()
        if len(cut):
            warm.append(f"{f}'s {cut.min():.1f}-{cut.max():.1f}x" if cut.max() >= 1.2 else
                        f"{f}'s by at most {100 * (1 - 1 / cut.max()):.0f}%" if cut.max() > 1 else f"{f}'s not at all")
    if not parts:
        return []
    n = int(acc["n_first_cold"].max()) if acc["n_first_cold"].notna().any() else 0
    su = jobs.startups(t)
    order = framework_order(f for f, _ in su)
    start = [(f"{f} {m}", f"{stats.fmt_seconds(e.value)} ("
              + (f"geometric mean of {e.n} processes)" if e.n > 1 else "one process)"))
             for (f, m), e in sorted(su.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1]))]
    out = [Finding("First call of the fastest compiled mode, cold (every cache empty; "
                   f"{stats.plural(n, 'cold process')} each), over the tasks: " + ", ".join(parts)
                   + (" (plus each process's compiler start-up: table)" if start else "") + ".",
                   "compiler start-up, once per process", start)]
    if warm:
        tf = [("tensorflow", "its XLA cache keys entries by the tf.function's process-unique name, so a new process "
                             "compiles again")] if any(w.startswith("tensorflow") for w in warm) else []
        out.append(Finding("A warm compile cache cuts the first call by " + ", ".join(warm) + " (cold over warm first "
                           "call, range over tasks).", "warm compile cache", tf))
    return out


def _eager_time(t: pd.DataFrame, r: pd.Series) -> str:
    e = t[(t["framework"] == r["framework"]) & (t["mode"] == "eager") & (t["workload"] == r["workload"])
          & (t["task"] == r["task"])]["median_s"]
    return stats.fmt_seconds(e.iloc[0]) if len(e) else "not measured"


def _claim_sentence(df: pd.DataFrame, t: pd.DataFrame, fam: stats.Family) -> list[str]:
    """The "as high as 40%" claim: torch.compile over torch eager, with the break-even."""
    c = t[(t["framework"] == findings.CLAIM_FRAMEWORK) & (t["mode"] == "compiled")]
    if c.empty or fam.m == 0:
        return []
    js = [(r, findings.speedup_judgement(df, r, fam)) for _, r in c.iterrows()]
    js = [(r, j) for r, j in js if j is not None]
    if not js:
        return []
    sp = [j.speed()[0] for _, j in js]
    reach = sum(j.decided and j.speed()[1] >= findings.CLAIM for _, j in js)
    up = [stats.exp_bound(-stats.ratio(r["est"], e["est"]).diff + stats.t_quantile(x.df, 1 - 2 * stats.ALPHA) * x.se)
          for r, _ in js if (e := replicates.eager_of(df, r)) is not None
          and (x := stats.ratio(r["est"], e["est"])).tested]
    be = [(r, *findings.break_even(df, r, fam)) for r, _ in js]
    fin = [(r, n, lo, hi) for r, n, lo, hi in be if finite(n) and not math.isinf(n)]
    top = js[int(np.argmax(sp))][0]
    text = (f"The \"as high as 40%\" claim (claim 1): torch.compile runs the model tasks at {_ratio_range(sp)} torch "
            f"eager's speed; {reach} of {len(js)} reach 1.4x with their whole interval"
            + (f", every one-sided 95% upper bound is below it (largest {max(up):.2f}x)" if up and len(up) == len(js)
               and max(up) < findings.CLAIM else ""))
    rows = [(f"{top['workload']} {top['task']} (the largest)",
             f"torch compiled {stats.fmt_seconds(top['median_s'])} against eager " + _eager_time(t, top)
             + "; each framework's fastest: " + times_text(jobs.best_times(df, top["task"], top["workload"])))]
    if fin:
        r, n, lo, hi = max(fin, key=lambda x: x[1])
        span = (f"[{lo:,.0f}, {'never' if math.isinf(hi) else f'{hi:,.0f}'}]" if not math.isnan(lo) and
                not math.isnan(hi) else "(no interval: too few processes)")
        text += f"; faster compiled steps pay back the first call within {n:,.0f} steps"
        rows.append((f"{r['workload']} {r['task']} (the longest break-even)",
                     f"the first call pays back after {n:,.0f} steps {span}"))
    return [Finding(text + ".", "\"as high as 40%\"", rows)]


POWER = 0.80     # the power at which a report states the smallest difference it could detect
TARGET = 0.20    # the difference between frameworks a default run should find with POWER
SIDE_TARGET = 0.05   # the same for a run of sets, side by side
MAX_NEEDED = 60  # warm processes (sets) per framework beyond which a report says "more than"


def detectable(se: float, df: float, level: float, power: float = POWER) -> float:
    """The smallest true log ratio a t test of standard error `se` and `df` degrees of freedom
    at `level` (two-sided) finds with `power`: the noncentral t's power solved for its
    noncentrality (the normal shortcut t_{1-alpha/2} + t_{power} overstates the power at few
    degrees of freedom)."""
    if not (se > 0 and df > 0 and math.isfinite(se)):
        return math.nan
    q = stats.t_quantile(df, level)
    def miss(nc: float) -> float:
        return float(sps.nct.sf(q, df, nc) + np.nan_to_num(sps.nct.cdf(-q, df, nc))) - power   # nan: far in the tail
    hi = q + stats.t_quantile(df, 2 * power - 1) + 1.0
    while miss(hi) < 0:
        hi *= 2
    return float(sps_opt.brentq(miss, 0.0, hi, xtol=1e-6)) * se


def resolution(df: pd.DataFrame, fam: stats.Family) -> dict[str, Any]:
    """What this report can resolve, from its own processes: `case`, the median
    half-width of the cases' 95% intervals (as a fraction, over cases with an interval over
    processes); over the comparisons between two frameworks in the family's main group,
    `between_95` and `between_used`, the median half-width of their intervals at 95% and at
    the Holm level each was judged at, and `detectable`, the median smallest true difference
    each would call faster or slower with POWER (`detectable_lo`/`_hi` their range; from its
    Welch standard error and degrees of freedom at its level, `detectable`). `n_cases`,
    `n_between`: what the medians are over. `needed`: the fewest processes a side at which the
    median comparison's detectable difference would be TARGET or less, each comparison's two
    spreads as measured, its level as used (`needed_processes`); `processes`: the most a side
    now."""
    est = {r["case"]: r["est"] for _, r in df.iterrows() if isinstance(r.get("est"), stats.Est)}
    fw = dict(zip(df["case"], df["framework"]))
    case = [e.interval()[1] / e.value - 1 for e in est.values() if e.tested]
    b95, used, det, spreads = [], [], [], []
    for key, level in fam.levels.items():
        cs = fam.members.get(key, ())
        if fam.groups.get(key) != stats.MAIN or len(cs) != 2 or not all(c in est for c in cs) \
                or fw.get(cs[0]) == fw.get(cs[1]):
            continue
        r = stats.ratio(est[cs[0]], est[cs[1]])
        if not r.tested:
            continue
        b95.append(stats.exp_bound(stats.t_quantile(r.df) * r.se) - 1)
        used.append(stats.exp_bound(stats.t_quantile(r.df, level) * r.se) - 1)
        det.append(stats.exp_bound(detectable(r.se, r.df, level)) - 1)
        n = max(est[cs[0]].n, est[cs[1]].n)
        spreads.append((r.se * r.se * (r.df + 1), level, n))     # a replicate's variance of the log ratio
    med = (lambda v: float(np.median(v)) if v else math.nan)   # noqa: E731
    return {"case": med(case), "n_cases": len(case), "between_95": med(b95), "between_used": med(used),
            "detectable": med(det), "detectable_lo": min(det, default=math.nan),
            "detectable_hi": max(det, default=math.nan), "n_between": len(det),
            "needed": needed_processes(spreads, SIDE_TARGET if side_by_side(df) else TARGET),
            "processes": max((x[2] for x in spreads), default=0)}


def needed_processes(spreads: list[tuple[float, float, int]], target: float = TARGET) -> int | None:
    """The fewest replicates a side P (stats.MIN_TESTED to MAX_NEEDED; processes, or sets paired)
    at which the median over comparisons of the smallest difference found with POWER is `target`
    or less: each comparison (v, level, _) at the standard error sqrt(v / P) of its log ratio (v:
    one replicate's variance of it as measured, sd_a^2 + sd_b^2 between processes, the paired
    differences' between sets), df P - 1, its level. None past MAX_NEEDED or without comparisons.
    The spreads are this run's estimates, so the figure is as uncertain as they are: a guide to
    the next run's --warm, not a promise."""
    if not spreads:
        return None
    for n in range(stats.MIN_TESTED, MAX_NEEDED + 1):
        det = [stats.exp_bound(detectable(math.sqrt(v / n), n - 1, lv)) - 1 for v, lv, _ in spreads]
        if float(np.median(det)) <= target:
            return n
    return None


def resolution_line(df: pd.DataFrame, fam: stats.Family) -> list[str]:
    """The scope's sentence on what this report resolves (`resolution`)."""
    r = resolution(df, fam)
    u = unit(df)
    if not r["n_cases"]:
        return [f"Resolution: no case has an interval over {u} (fewer than "
                f"{stats.MIN_TESTED} steady-state {u}), so this report resolves no difference."]
    pct = (lambda x: f"{100 * x:.1f}%")    # noqa: E731
    out = f"Resolution: median 95% half-width per case +-{pct(r['case'])} ({r['n_cases']} cases)"
    if r["n_between"]:
        out += (f"; between frameworks +-{pct(r['between_95'])} at 95% and +-{pct(r['between_used'])} at the Holm "
                f"levels used (median of {r['n_between']} comparisons); the smallest difference between frameworks "
                f"this report would call faster or slower with {100 * POWER:.0f}% power, from its own {u}' "
                f"spread: {pct(r['detectable'])} (median; {pct(r['detectable_lo'])}-{pct(r['detectable_hi'])} over "
                "those comparisons)")
        target = SIDE_TARGET if u == "sets" else TARGET
        what = "sets" if u == "sets" else "warm processes per framework"
        if r["detectable"] > target:
            n = r["needed"]
            out += (f"; {pct(target)} at the median comparison would take about {n} {what} "
                    if n else f"; {pct(target)} at the median comparison would take more than {MAX_NEEDED} {what} ") \
                + f"at this spread (this run: {r['processes']}; fwbench run --warm)"
    return [out + "."]


def scope(df: pd.DataFrame) -> list[str]:
    """What the run can and cannot say."""
    runs = df.attrs.get("runs", [])
    cpu = sorted({str(r.get("cpu")) for r in runs if r.get("cpu")})
    acc = sorted({str(r.get("gpu_model") or r.get("accelerator")) for r in runs
                  if r.get("gpu_model") or r.get("accelerator")})
    if not acc and "device" in df.columns and df["device"].map(is_accelerator).any():
        acc = ["a GPU (its model not recorded)"]
    threads = sorted({int(x) for x in df["threads"].dropna()}) if "threads" in df.columns else []
    presets = sorted({f"{w} {p}" for w, p in zip(df["workload"], df["preset"])})
    cold = sorted({int(x) for x in df["n_cold"].dropna()}) if "n_cold" in df.columns else []
    warm = sorted({int(x) for x in df["n_warm"].dropna()}) if "n_warm" in df.columns else []
    lines = [f"Machine: {', '.join(cpu) or 'not recorded'}" + (f"; accelerator {', '.join(acc)}" if acc else
                                                                  "; CPU only: not evidence about GPUs")
             + f"; {', '.join(map(str, threads)) or '?'} intra-op thread{'' if threads == [1] else 's'} for every "
             "framework; dtype "
             f"{', '.join(sorted(set(df['param_dtype'].dropna())))}"
             + (f", precisions {', '.join(sorted(set(df['precision'].dropna())))} ("
                + "; ".join(f"{p}: workloads/precision.py's policy, {precision.cpu_words(df, p)}"
                            for p in precision.others(df)) + ")"
                if precision.has_other(df) else "") + ".",
             (f"Work: {', '.join(presets)}; sets: {'/'.join(map(str, cold)) or '?'} cold + "
              f"{'/'.join(map(str, warm)) or '?'} warm, each one process per framework and a control, the "
              "configurations of each task timed side by side (steady state from every set's blocks)."
              if side_by_side(df) else
              f"Work: {', '.join(presets)}; processes per framework: {'/'.join(map(str, cold)) or '?'} cold + "
              f"{'/'.join(map(str, warm)) or '?'} warm ("
              + ("steady state from the warm ones" if warm and min(warm) > 0 else
                 "steady state from the cold processes where a case had no warm one") + ")."),
             "Equal work: the three implementations of each model are tested equivalent before anything is timed "
             "(same numpy weights and inputs: logits, losses, gradients and optimizer steps against numpy float64 "
             "references and finite differences, at tolerances ten times the error achieved; tests/)."]
    return lines + busy_scope(df)


def busy_scope(df: pd.DataFrame) -> list[str]:
    """Page 1's count of what a busy machine cost the run (replicates.cases' busy_left_out and
    busy): measurements timed while other processes used the CPU, also when the harness measured
    them again, are left out of every number, verdict, first call and the choice."""
    if "busy" not in df.columns or not df["busy"].notna().any():
        return ["Machine state: not recorded (result files from before fwbench recorded load and steal time)."]
    left = df["busy_left_out"].fillna(0) if "busy_left_out" in df.columns else pd.Series(0, index=df.index)
    n, cases, none = int(left.sum()), int((left > 0).sum()), int((df["busy"] == True).sum())   # noqa: E712
    if not n:
        return ["Machine state: no case was timed on a busy machine (after re-measurement)."]
    return [f"Machine state: {stats.plural(n, 'measurement')} of {stats.plural(cases, 'case')} "
            f"{'was' if n == 1 else 'were'} timed while other processes used the CPU, also when measured again, and "
            f"{'is' if n == 1 else 'are'} left out of every number, verdict, first call and the choice"
            + (f"; {stats.plural(none, 'case')} {'has' if none == 1 else 'have'} no measurement left." if none
               else ".")]


# ----------------------------------------------------------------------------- the recommendation


def _jobs_words(os: list[jobs.Outcome], conf: pd.DataFrame) -> str:
    """'diffusion forward (100 and 100,000 calls), gpt train_step (100 steps)': jobs by task."""
    by: dict[str, list[jobs.Job]] = {}
    for o in os:
        by.setdefault(f"{o.job.workload + ' ' if o.job.workload else ''}{o.job.task}", []).append(o.job)
    return ", ".join(f"{t} ({' and '.join(f'{j.n:,}' for j in js)} "
                     f"{jobs.job_unit(js[0].workload or '', js[0].task, conf)})" for t, js in by.items())


def _configurations_words(os: list[jobs.Outcome]) -> str:
    """'torch eager at 100, torch compiled at 100,000': each configuration with the counts it is
    cheapest at."""
    by: dict[str, set[int]] = {}
    for o in os:
        by.setdefault(str(o.best.iloc[0]["configuration"]), set()).add(o.job.n)
    return ", ".join(f"{c} at {' and '.join(f'{n:,}' for n in sorted(ns))}" for c, ns in by.items())


def no_interval(df: pd.DataFrame) -> str:
    """Why no job cost has an interval: a term from fewer than MIN_TESTED values, most often the cold
    first call (one cold process or set a case, where the steady step has more)."""
    u = unit(df)
    cold = df["n_first_cold"].dropna() if "n_first_cold" in df.columns else pd.Series(dtype=float)
    if len(cold) and cold.max() < stats.MIN_TESTED:
        return (f"each cold first call comes from "
                f"{stats.plural(int(cold.max()), 'cold set' if u == 'sets' else 'cold process')}, fewer than "
                f"{stats.MIN_TESTED} (fwbench run --cold {stats.MIN_TESTED})")
    return f"fewer than {stats.MIN_TESTED} {u}"


def recommendation(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None = None) -> str:
    """Page 1's first sentence, computed from the cold-cache job table (jobs.outcomes: a fresh
    process, every compile cache empty): which framework and configuration for which jobs on
    which device, by how much (the next framework's cost over its own, with the interval at the
    job's level), the jobs no framework is resolved cheapest for, and how sure (the job's level
    and the run's resolution between frameworks)."""
    from reports.conclusions import claims
    outs = [o for o in jobs.outcomes(df, job_list, "cold") if len(o.best) > 1]
    if not outs:
        return ""
    conf = jobs.configurations(df)
    won: dict[str, list[jobs.Outcome]] = {}
    for o in outs:
        if o.verdict == jobs.LEADER:
            won.setdefault(o.named[0], []).append(o)
    parts = []
    for f, os in sorted(won.items(), key=lambda kv: -len(kv[1])):
        ps = [(o.pair(f, o.runner_up()), o) for o in os]
        lo, hi = min(ps, key=lambda p: 1 / p[0].ratio), max(ps, key=lambda p: 1 / p[0].ratio)
        by = (f"{_pair_words(lo[0])}" if lo[1] is hi[1] else f"{_pair_words(lo[0])} to {_pair_words(hi[0])}")
        parts.append(f"{f} for {len(os)} of the {len(outs)} jobs, {_jobs_words(os, conf)} "
                     f"({_configurations_words(os)}), {by} cheaper than the next framework's cheapest configuration")
    open_ = [o for o in outs if o.verdict != jobs.LEADER]
    if open_:
        tasks = list(dict.fromkeys(f"{o.job.workload + ' ' if o.job.workload else ''}{o.job.task}" for o in open_))
        lead = ", ".join(f"{f} for {n}" for f, n in tally(str(o.best.iloc[0]["framework"]) for o in open_))
        why = (f"; no interval: {no_interval(df)}" if all(o.verdict == jobs.INDICATIVE for o in open_) else "")
        parts.append(f"no framework is resolved cheapest for {'the other ' if won else ''}{len(open_)} job"
                     f"{'s' if len(open_) > 1 else ''} ({', '.join(tasks)}{why}), where the cheapest by the point "
                     f"estimates is {lead}")
    level = stats.level_text(max((o.level for o in outs), key=lambda x: x))
    r = resolution(df, fam)
    sure = (f" How sure: each 'cheaper' holds at {level} per job (a job's pairs of frameworks share a 5% error rate)"
            + (f"; between two frameworks' steps this run finds a difference of {100 * r['detectable']:.0f}% with "
               f"{100 * POWER:.0f}% power (median comparison), so smaller differences go unresolved"
               if finite(r["detectable"]) else "") + ".")
    return (f"Recommendation for {claims.where(df)}, each job in a fresh process with empty compile caches: "
            + "; ".join(parts) + "." + sure)


def _pair_words(p: jobs.Pair) -> str:
    """'1.48x [1.36, 1.62]': the other framework's cost over the cheapest's, at the job's level."""
    return f"{stats.fmt_x(1 / p.ratio)}x [{stats.fmt_x(1 / p.hi)}, {stats.fmt_x(1 / p.lo)}]"

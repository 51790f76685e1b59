"""What the paper says in words, computed from the run: plain sentences with their
numbers, no markup (reports.rendering.paper typesets them, cites and cross-references).

    abstract(df, fam, jobs)        at most ABSTRACT_WORDS words: the problem, what was measured, the
                                   recommendation with its largest ratio and interval (headline), the
                                   claims, the resolution, the scope
    headline(df, fam, jobs)        the run's ratio with an interval that the abstract states: the
                                   recommendation's, else the largest vectorised-over-loop speedup,
                                   else the largest speedup over eager
    workloads_table(df)            per workload: preset, shape, parameters, each task's FLOPs per step
    machine(df), versions(df)      the machine as the runs recorded it; frameworks, Python, numpy
    results(df, fam, jobs)         [(concern, paragraph)]: the Summary's sentences by concern, each
                                   with the reason the data show (why)
    discussion(df, fam, jobs)      paragraphs: what the choice depends on, the compilers, the caches
    limitations(df, fam)           this run's limits: resolution, machine and date, sizes, the
                                   implementations being fwbench's own, equal work, counters
    reproducibility(df)            [(item, text)]: code and commit, commands, versions, compute,
                                   licence, where the data are
    provenance(df)                 page 1's line where a run came from a modified working tree
    conclusion(df, fam, jobs)      two or three sentences

Nothing here states a number that the report's tables do not hold or recompute: the ratios come
from conclusions.jobs (the job table), stats (rounds of one process) and the cases' own intervals.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import workloads
from reports import sections
from reports.conclusions import claims, jobs, summary
from reports.measures import data as rdata
from reports.measures import stats
from reports.measures.data import OP_BY_OP_EAGER, TIMED, finite, framework_order

ABSTRACT_WORDS = 200
REPOSITORY = Path(__file__).resolve().parents[2]
NAMES = {"torch": "PyTorch", "jax": "JAX", "tensorflow": "TensorFlow"}     # a framework as prose names it
MODEL_WORDS = {"gpt": "a GPT-2-architecture language model", "diffusion": "a DDPM UNet",
               "dynamic": "variable-shape request streams", "interop": "Python-interop programs",
               "derivatives": "derivative and vmap transforms"}


def words(text: str) -> int:
    return len(text.split())


def _runs(df: pd.DataFrame) -> list[dict[str, Any]]:
    return list(df.attrs.get("runs", []) or [])


def _timed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"].isin(TIMED) & df["median_s"].notna()]


def _listing(items: list[str]) -> str:
    items = [str(x) for x in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


# ----------------------------------------------------------------------------- the run as recorded

def dates(df: pd.DataFrame) -> list[datetime]:
    """Each process's start (the runs' date), sorted."""
    out = []
    for r in _runs(df):
        try:
            out.append(datetime.fromisoformat(str(r.get("date"))))
        except (TypeError, ValueError):
            continue
    return sorted(out)


def run_date(df: pd.DataFrame) -> str:
    """'5 December 2026' (the last process's start), '' where no run recorded a date."""
    d = dates(df)
    return f"{d[-1].day} {d[-1]:%B %Y}" if d else ""


def machine(df: pd.DataFrame) -> str:
    """'AMD EPYC as the machine reports it (CPUID family 25, model 17, stepping 1; 2.60 GHz; L2 2 MiB,
    L3 1 MiB), 2 cores, Linux 6.18...': what the runs recorded, nothing inferred."""
    runs = _runs(df)
    cpu = sorted({str(r["cpu"]) for r in runs if r.get("cpu")})
    detail = sorted({str(r["cpu_detail"]) for r in runs if r.get("cpu_detail")})
    cores = sorted({int(r["cores"]) for r in runs if isinstance(r.get("cores"), int)})
    acc = sorted({str(r.get("gpu_model") or r.get("accelerator")) for r in runs
                  if r.get("gpu_model") or r.get("accelerator")})
    kernel = sorted({str(r["kernel"]) for r in runs if r.get("kernel")})
    system = sorted({str(r["system"]) for r in runs if r.get("system")})
    out = (f"{' / '.join(cpu) or 'a CPU whose model was not recorded'}, as the machine names itself"
           + (f" ({'; '.join(detail)})" if detail else ""))
    out += f", {'/'.join(map(str, cores))} cores" if cores else ""
    out += f"; accelerator {', '.join(acc)}" if acc else ""
    out += f"; {', '.join(system)} {', '.join(kernel)}".rstrip() if system else ""
    return out


def versions(df: pd.DataFrame) -> str:
    """'torch 2.13.0+cpu, jax 0.10.2, tensorflow 2.21.0; Python 3.11.7; numpy 2.4.6'."""
    v: dict[str, set[str]] = {}
    for r in _runs(df):
        for name, info in (r.get("frameworks") or {}).items():
            if isinstance(info, dict) and info.get("version"):
                v.setdefault(name, set()).add(str(info["version"]))
    for _, r in df.drop_duplicates("framework").iterrows():
        if isinstance(r.get("framework_version"), str):
            v.setdefault(r["framework"], set()).add(r["framework_version"])
    fws = ", ".join(f"{n} {'/'.join(sorted(v[n]))}" for n in framework_order(v))
    py = sorted({str(r["python"]) for r in _runs(df) if r.get("python")})
    npv = sorted({str(r["numpy"]) for r in _runs(df) if r.get("numpy")})
    return "; ".join(x for x in (fws, f"Python {', '.join(py)}" if py else "", f"numpy {', '.join(npv)}"
                                 if npv else "") if x)


def commits(df: pd.DataFrame) -> list[str]:
    return sorted({str(r["fwbench_commit"]) for r in _runs(df) if r.get("fwbench_commit")})


def provenance(df: pd.DataFrame, rendered_by: str | None = None) -> str:
    """Page 1's provenance: the commit(s) the runs were measured with, said plainly where the working
    tree had uncommitted changes (git's '-dirty'), and the commit that rendered the report."""
    cs = commits(df)
    dirty = [c for c in cs if c.endswith("-dirty")]
    out = (f"Measured with fwbench {', '.join(cs)}" if cs else "The runs recorded no fwbench commit")
    if dirty:
        out += (" from a working tree with uncommitted changes ('-dirty'): the code that measured is that commit "
                "plus edits no commit records")
    if rendered_by:
        out += f"; rendered by fwbench {rendered_by}" + (" (uncommitted changes)" if rendered_by.endswith("-dirty")
                                                       else "")
    return out + "."


def _presets(df: pd.DataFrame) -> dict[str, str]:
    t = df[~df["workload"].isin(sections.WORKLOADS)] if len(df) else df
    return {w: str(p) for w, p in zip(t["workload"], t["preset"]) if isinstance(p, str)}


def _n_params(workload: str, preset: str) -> int | None:
    """The parameter count of a model workload's preset (its parameter shapes: workloads, no framework)."""
    try:
        mod = workloads.get(workload)
        cfg = mod.preset(preset).config
        return int(sum(int(np.prod(s)) for s in mod.param_shapes(cfg).values()))
    except Exception:        # noqa: BLE001 - a workload or preset this checkout does not have: no count
        return None


def workloads_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model workload and preset: the shape of a call, its parameters and each task's
    model FLOPs per step (the record's `flops`, the workload's formula); the axis workloads as one
    row each with their task count."""
    rows = []
    t = df[df["status"].isin(TIMED)]
    for (w, p), g in t.groupby(["workload", "preset"], sort=True):
        if w in sections.WORKLOADS:
            rows.append({"workload": w, "preset": p, "what": MODEL_WORDS.get(w, w),
                         "parameters": "per task (appendix)", "model FLOPs per step":
                         f"{g['task'].nunique()} tasks ({g['framework'].nunique()} frameworks)"})
            continue
        n = _n_params(w, p)
        fl = g.groupby("task")["flops"].median()
        shapes = sorted({str(s) for s in g["shape"].dropna()})
        rows.append({"workload": w, "preset": p,
                     "what": MODEL_WORDS.get(w, w) + (f" ({', '.join(shapes)})" if shapes else ""),
                     "parameters": f"{n / 1e6:.2f}M" if n else "n/a",
                     "model FLOPs per step": "; ".join(f"{k} {stats.fmt_count(v)}" for k, v in fl.items()
                                                       if finite(v))})
    return pd.DataFrame(rows)


def _processes(df: pd.DataFrame) -> tuple[list[int], list[int]]:
    t = df[df["status"].isin(TIMED)]
    cold = sorted({int(x) for x in t["n_cold"].dropna()}) if "n_cold" in t.columns else []
    warm = sorted({int(x) for x in t["n_warm"].dropna()}) if "n_warm" in t.columns else []
    return cold, warm


def _span(v: list[int]) -> str:
    return f"{min(v)}" if min(v) == max(v) else f"{min(v)}-{max(v)}"


def process_words(df: pd.DataFrame) -> str:
    """'2 cold and 7 warm processes per framework', '1-2 cold processes per framework and no warm one'."""
    cold, warm = _processes(df)
    if rdata.side_by_side(df):
        return (f"{_span(cold) if cold else 'no'} cold and {_span(warm) if warm else 'no'} warm process sets, each "
                "one process per framework and a control, timed side by side")
    c = f"{_span(cold)} cold" if cold else "no cold"
    w = f"{_span(warm)} warm" if warm and max(warm) > 0 else ""
    many = max(cold + warm, default=0) > 1
    return (f"{c} and {w} process{'es' if many else ''} per framework" if w else
            f"{c} process{'es' if many else ''} per framework and no warm one")


def tested(df: pd.DataFrame) -> bool:
    """Whether any case has enough steady-state processes for a comparison (stats.MIN_TESTED)."""
    t = _timed(df)
    return bool(len(t)) and int(t["n_processes"].max()) >= stats.MIN_TESTED


# ----------------------------------------------------------------------------- the headline ratio

@dataclass(frozen=True)
class Headline:
    """A ratio the abstract states with its interval: `lead` introduces it ('Vectorised transforms run up
    to'), `text` says what exactly it is of."""
    text: str
    ratio: float
    lo: float
    hi: float
    lead: str = "The largest ratio:"


def _won(outs: list[jobs.Outcome]) -> dict[str, list[jobs.Outcome]]:
    won: dict[str, list[jobs.Outcome]] = {}
    for o in outs:
        if o.verdict == jobs.LEADER:
            won.setdefault(o.named[0], []).append(o)
    return won


def _outcomes(df: pd.DataFrame, job_list: list[jobs.Job] | None) -> list[jobs.Outcome]:
    return [o for o in jobs.outcomes(df, job_list, "cold") if len(o.best) > 1]


def _vs_runner_up(o: jobs.Outcome, f: str) -> tuple[float, float, float]:
    p = o.pair(f, o.runner_up())
    return (1 / p.ratio, 1 / p.hi if p.hi else math.inf, 1 / p.lo if p.lo else math.inf) if p else (math.nan,) * 3


def _vmap_headline(df: pd.DataFrame) -> Headline | None:
    """The largest speedup of a vectorised transform over the same framework and mode's loop, with
    its interval: over processes where there are enough, else over the rounds of the one process
    that ran both (round noise only, said so)."""
    t = _timed(df[df["workload"] == "derivatives"]) if "workload" in df.columns else df.iloc[0:0]
    if t.empty or "strategy" not in t.columns:
        return None
    base = t[t["strategy"] == "loop"].set_index(["framework", "mode", "task"])
    best = None
    for _, r in t[t["strategy"].notna() & (t["strategy"] != "loop")].iterrows():
        k = (r["framework"], r["mode"], r["task"])
        if k not in base.index or not isinstance(r.get("est"), stats.Est):
            continue
        b = base.loc[k]
        b = b.iloc[0] if isinstance(b, pd.DataFrame) else b
        x = b["median_s"] / r["median_s"]
        if best is None or x > best[0]:
            best = (x, r, b)
    if best is None:
        return None
    x, r, b = best
    x, lo, hi, how = _interval(b["est"], r["est"])
    if not finite(x):
        return None
    return Headline(f"{r['framework']} {r['mode']} {r['strategy']} on {r['task']}; {how}", x, lo, hi,
                    "Vectorised per-example transforms run up to")


def _interval(a: Any, b: Any) -> tuple[float, float, float, str]:
    """a's time over b's with its 95% interval, the point and the interval from the same numbers: over
    processes (the ratio of their geometric means) where both have enough, else over the rounds of their
    one process each (the ratio of the rounds' geometric means; round noise only); nan without either."""
    if not (isinstance(a, stats.Est) and isinstance(b, stats.Est)):
        return math.nan, math.nan, math.nan, ""
    r = stats.ratio(a, b)
    if r.tested:
        unit = "sets" if all(k.startswith("set ") for k in a.logs) else "processes"
        return r.value, *r.interval(), f"95% interval over {unit}"
    lo, hi = stats.rounds_ratio(a.rounds, b.rounds)
    if not (finite(lo) and finite(hi)):
        return math.nan, math.nan, math.nan, ""
    x = stats.geomean(a.rounds) / stats.geomean(b.rounds)
    return x, lo, hi, "geometric means of one process's rounds, 95% interval over them: round noise only"


def _eager_headline(df: pd.DataFrame) -> Headline | None:
    """The largest speedup of a compiled (or graph) mode over the same framework's eager mode on a task
    where both have an interval."""
    t = _timed(df)
    t = t[t["strategy"].isna()] if "strategy" in t.columns else t
    eager = t[t["mode"] == "eager"].set_index(["workload", "task", "framework"])
    best = None
    for _, r in t[t["mode"] != "eager"].iterrows():
        k = (r["workload"], r["task"], r["framework"])
        if k not in eager.index:
            continue
        e = eager.loc[k]
        e = e.iloc[0] if isinstance(e, pd.DataFrame) else e
        x, lo, hi, how = _interval(e.get("est"), r.get("est"))
        if finite(x) and (best is None or x > best.ratio):
            best = Headline(f"{r['framework']} {r['mode']} over its "
                            f"{'op-by-op ' if r['framework'] in OP_BY_OP_EAGER else ''}eager mode on {r['workload']} "
                            f"{r['task']}; {how}", x, lo, hi, "A compiled mode runs up to")
    return best


def headline(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None = None) -> Headline | None:
    """The abstract's ratio with an interval: the largest next-framework-over-cheapest cost ratio of
    a resolved job; else the largest vectorised-over-loop speedup; else the largest speedup over
    eager (each with its interval as the report computes it)."""
    best = None
    for f, os in _won(_outcomes(df, job_list)).items():
        for o in os:
            x, lo, hi = _vs_runner_up(o, f)
            if finite(x) and (best is None or x > best.ratio):
                best = Headline(f"{f} against {o.runner_up()} on {o.job.label()}", x, lo, hi)
    return best or _vmap_headline(df) or _eager_headline(df)


def fmt(h: Headline) -> str:
    return f"{stats.fmt_x(h.ratio)}x [{stats.fmt_x(h.lo)}, {stats.fmt_x(h.hi)}]"


# ----------------------------------------------------------------------------- abstract

def work(df: pd.DataFrame) -> str:
    wls = [w for w in ("gpt", "diffusion", "dynamic", "interop", "derivatives") if w in set(df["workload"])]
    wls += sorted(set(df["workload"]) - set(wls))
    presets = sorted({str(p) for p in df["preset"].dropna()})
    return _listing([MODEL_WORDS.get(w, w) for w in wls]) + (f" at the {'/'.join(presets)} preset"
                                                              + ("s" if len(presets) > 1 else "") if presets else "")


def cores(df: pd.DataFrame) -> int | None:
    """The machine's core count where every run recorded the same."""
    c = {int(r["cores"]) for r in _runs(df) if isinstance(r.get("cores"), int)}
    return c.pop() if len(c) == 1 else None


def _machine_short(df: pd.DataFrame) -> str:
    runs = _runs(df)
    cpu = sorted({str(r["cpu"]) for r in runs if r.get("cpu")})
    threads = sorted({int(x) for x in df["threads"].dropna()}) if "threads" in df.columns else []
    acc = sorted({str(r.get("gpu_model") or r.get("accelerator")) for r in runs
                  if r.get("gpu_model") or r.get("accelerator")})
    if acc:
        return f"one {', '.join(acc)}"
    return (f"one {'/'.join(cpu) or 'CPU'} machine at {'/'.join(map(str, threads)) or '?'} "
            f"thread{'' if threads == [1] else 's'}")


def _recommendation(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None) -> str:
    """The recommendation in one sentence for the abstract (summary.recommendation is page 1's long form)."""
    outs = _outcomes(df, job_list)
    if not outs:
        return ""
    won = _won(outs)
    parts = []
    for f, os in sorted(won.items(), key=lambda kv: -len(kv[1])):
        rs = sorted((_vs_runner_up(o, f) for o in os), key=lambda x: x[0])
        by = (f"{stats.fmt_x(rs[0][0])}x [{stats.fmt_x(rs[0][1])}, {stats.fmt_x(rs[0][2])}]"
              + (f" to {stats.fmt_x(rs[-1][0])}x [{stats.fmt_x(rs[-1][1])}, {stats.fmt_x(rs[-1][2])}]"
                 if len(rs) > 1 else ""))
        parts.append(f"for {len(os)} of the {len(outs)} jobs the cheapest framework is {f}, by {by} in cost over "
                     "the next framework")
    rest = [o for o in outs if o.verdict != jobs.LEADER]
    if rest:
        lead = ", ".join(f"{f} for {n}" for f, n in pd.Series([str(o.best.iloc[0]["framework"]) for o in rest])
                         .value_counts().items())
        if won:
            parts.append(f"for the other {len(rest)} no framework is resolved cheapest")
        else:
            why = (f"no job cost has an interval ({summary.no_interval(df)})" if all(
                o.verdict == jobs.INDICATIVE for o in rest) else "no framework is resolved cheapest")
            parts.append(f"by the point estimates the cheapest framework is {lead} of the {len(rest)} jobs; {why}")
    return "; ".join(parts)


def _claims_words(ct: pd.DataFrame) -> str:
    if ct is None or ct.empty:
        return ""
    order = [claims.NOT_SUPPORTED, claims.SUPPORTED, claims.INCONCLUSIVE, claims.NOT_TESTABLE, claims.NOT_RUN]
    kinds = [next((k for k in order if str(v).startswith(k)), "other") for v in ct["verdict"]]
    counts = pd.Series(kinds).value_counts()
    shown = [claims.SUPPORTED, claims.NOT_SUPPORTED, claims.INCONCLUSIVE, claims.NOT_TESTABLE, claims.NOT_RUN]
    return ", ".join(f"{counts[v]} {v}" for v in shown if v in counts)


def abstract(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None = None,
             claims_table: pd.DataFrame | None = None) -> list[str]:
    """The abstract's sentences (at most ABSTRACT_WORDS words together): the problem, what was measured,
    the recommendation with the headline ratio, the claims, the resolution, the scope; optional
    sentences are dropped, last first, while the whole is too long."""
    fws = framework_order(df["framework"])
    t = _timed(df)
    h = headline(df, fam, job_list)
    rec = _recommendation(df, fam, job_list)
    must = [f"Which of {_listing([NAMES.get(f, f) for f in fws])} should run a given job, and do practitioners' "
            "claims about them hold?",
            f"We run the same work, {work(df)}, in each framework, each implementation checked against a float64 "
            f"reference, and time {len(t)} cases on {_machine_short(df)} ({process_words(df)}), pricing each job "
            "as a fresh process pays it: compiler start-up, first call and N steps."]
    if rec:
        must.append(rec[:1].upper() + rec[1:] + ".")
    if h is not None and not (rec and "the cheapest framework is" in rec and " by " in rec):
        faster = " faster than a loop over examples" if "Vectorised" in h.lead else " as fast as eager" \
            if "compiled mode" in h.lead else ""
        must.append(f"{h.lead} {fmt(h)}{faster} ({h.text}).")
    r = summary.resolution(df, fam)
    res = (f"Between two frameworks' steps the run resolves a difference of {100 * r['detectable']:.0f}% with 80% "
           "power; smaller ones stay unresolved." if finite(r["detectable"]) else
           f"No case has {stats.MIN_TESTED} or more processes, so no difference between frameworks is tested: the "
           "answers are indicative.")
    must.append(res)
    optional = []
    cw = _claims_words(claims_table)
    if cw:
        optional.append(f"Of seven practitioners' claims under test: {cw}.")
    d = run_date(df)
    optional.append((f"All numbers come from one machine on {d}" if d else "All numbers come from one machine")
                    + (", with no accelerator" if not claims.on_gpu(df) else "") + ".")
    optional.append("Code, data and this paper regenerate from the result files with one command.")
    out = must + optional
    while words(" ".join(out)) > ABSTRACT_WORDS and len(out) > len(must):
        out.pop()
    return out


# ----------------------------------------------------------------------------- results by concern

CONCERNS = (   # (concern, the Summary sentences' first words that belong to it)
    ("Steady state", ("Each framework's fastest configuration", "Steady state")),
    ("First calls and compilation", ("First call", "A warm compile cache")),
    ("Claim 1: the compiler's gains", ('The "as high as 40%"',)),
    ("Dynamic shapes", ("Dynamic shapes",)),
    ("Python interop", ("Python interop",)),
    ("Derivatives and vmap", ("Derivatives",)),
    ("Precision", ("bf16", "Precision")),
    ("Scale-out", ("Scale-out", "Data-parallel")),
)


def _group(sentences: list[str]) -> list[tuple[str, list[str]]]:
    out: dict[str, list[str]] = {}
    for s in sentences:
        concern = next((c for c, starts in CONCERNS if s.startswith(starts)), "Other findings")
        out.setdefault(concern, []).append(s)
    order = [c for c, _ in CONCERNS] + ["Other findings"]
    return sorted(out.items(), key=lambda kv: order.index(kv[0]))


CLAIMED = 1.4       # claim 1's "as high as 40%"


def _utilisation_why(df: pd.DataFrame) -> str:
    """Where the data bound the compiler's gain: a task whose torch eager step already runs at u of the
    machine's measured GEMM rate (model FLOPs / step / rate) could gain 1.4x only at 1.4 u of it."""
    t = _timed(df[~df["workload"].isin(sections.WORKLOADS)])
    t = t[(t["framework"] == "torch") & t["strategy"].isna() & (t["mode"] == "eager")] if len(t) else t
    if t.empty or "utilisation" not in t.columns or not t["utilisation"].notna().any():
        return ""
    r = t.loc[t["utilisation"].idxmax()]
    u = float(r["utilisation"])
    if CLAIMED * u < 0.9:
        return ""
    return (f"On {r['workload']} {r['task']} torch's eager step already runs at {100 * u:.0f}% of the machine's "
            "measured fp32 GEMM rate (the task's model FLOPs over its step time), so a 1.4x gain there would need "
            f"{100 * CLAIMED * u:.0f}% of it.")


def _op_by_op_why(df: pd.DataFrame) -> str:
    t = _timed(df[~df["workload"].isin(sections.WORKLOADS)])
    t = t[t["strategy"].isna()] if len(t) else t
    ob = t[(t["mode"] != "eager") & t["framework"].isin(OP_BY_OP_EAGER) & t["speedup_vs_eager"].notna()]
    if ob.empty:
        return ""
    tc = t[(t["framework"] == "torch") & (t["mode"] == "compiled") & t["speedup_vs_eager"].notna()]
    torch = (f", against {tc['speedup_vs_eager'].min():.2f}-{tc['speedup_vs_eager'].max():.2f}x for torch.compile "
             "over torch's eager mode" if len(tc) else "")
    whose = _listing([f"{NAMES.get(f, f)}'s" for f in framework_order(ob["framework"])])
    return (f"Over those op-by-op eager modes, {whose} "
            f"compiled and graph modes gain {ob['speedup_vs_eager'].min():.1f}-{ob['speedup_vs_eager'].max():.1f}x"
            f"{torch}: an eager comparison across frameworks measures how each runs uncompiled Python, not what the "
            "framework can do.")


def _generate_why(df: pd.DataFrame, fam: stats.Family) -> str:
    """generate: torch's Python decode loop against the compiled loops, where torch's best is slower."""
    best = jobs.best_times(df, "generate", "gpt")
    if "torch" not in best or len(best) < 2:
        return ""
    fastest = next(iter(best))
    if fastest == "torch":
        return ""
    x = best["torch"][1] / best[fastest][1]
    return (f"On gpt generate torch's fastest configuration takes {x:.2f}x the time of {fastest}'s: torch decodes in a "
            "Python loop around its compiled step, one call per token, while JAX (lax.fori_loop) and TensorFlow "
            "(tf.while_loop) compile the whole decode loop.")


def _cache_why(df: pd.DataFrame) -> str:
    t = _timed(df)
    if "first_call_warm_s" not in t.columns or not (t["framework"] == "tensorflow").any():
        return ""
    tf = t[(t["framework"] == "tensorflow") & (t["mode"] != "eager")]
    r = (tf["first_call_cold_s"] / tf["first_call_warm_s"]).dropna()
    if r.empty or r.max() > 1.5:
        return ""
    return (f"TensorFlow's warm cache changes its first call by {r.min():.1f}-{r.max():.1f}x: its persistent XLA cache "
            "keys programs by the tf.function's process-unique name, so a new process compiles again.")


def results(df: pd.DataFrame, fam: stats.Family, key_findings: list[str], job_list: list[jobs.Job] | None = None
            ) -> list[tuple[str, str]]:
    """[(concern, paragraph)] from the Summary's sentences, each concern's reason where the data show it."""
    why = {"Steady state": [_op_by_op_why(df), _generate_why(df, fam)],
           "First calls and compilation": [_cache_why(df)],
           "Claim 1: the compiler's gains": [_utilisation_why(df)]}
    out = []
    for concern, ss in _group(key_findings):
        out.append((concern, " ".join(ss + [w for w in why.get(concern, []) if w])))
    return out


def job_why(df: pd.DataFrame, job_list: list[jobs.Job] | None = None) -> str:
    """What decides the cheapest configuration by the job's length, from the job table's changes."""
    outs = _outcomes(df, job_list)
    by_task: dict[tuple[str, str], set[str]] = {}
    for o in outs:
        by_task.setdefault((o.job.workload or "", o.job.task), set()).add(str(o.best.iloc[0]["configuration"]))
    changed = [k for k, v in by_task.items() if len(v) > 1]
    conf = jobs.configurations(df)
    eager_short = [o for o in outs if o.job.n <= jobs.SHORT and " eager" in str(o.best.iloc[0]["configuration"])]
    out = []
    if changed:
        out.append(f"On {len(changed)} of the {len(by_task)} tasks the cheapest configuration changes with the job's "
                   "length: a short job is decided by what a fresh process waits for before its first result, a long "
                   "one by the steady step.")
    if eager_short and len(conf):
        comp = conf[conf["mode"] != "eager"]
        first = (comp["first_call_cold_s"] + comp["startup_s"]).dropna()
        if len(first):
            out.append(f"An eager configuration is cheapest for {len(eager_short)} short jobs: it compiles nothing, "
                       f"while a compiled configuration waits {stats.fmt_seconds(first.min())} to "
                       f"{stats.fmt_seconds(first.max())} (compiler start-up and first call, cold cache) before its "
                       "first result.")
    return " ".join(out)


# ----------------------------------------------------------------------------- discussion, limits

def discussion(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None = None) -> list[str]:
    """Paragraphs on what the results mean for a reader choosing a framework."""
    out = []
    outs = _outcomes(df, job_list)
    if outs:
        won = _won(outs)
        n_open = sum(o.verdict != jobs.LEADER for o in outs)
        wins = _listing([f"{f} wins {len(v)}" for f, v in won.items()])
        lead = (f"No framework is cheapest for every job: {wins} of the {len(outs)} jobs, and {n_open} stay "
                "unresolved at this run's resolution." if won else
                f"No job is resolved here: with {process_words(df)} the job costs carry no interval, so the cheapest "
                "configurations named are point estimates to be confirmed by a run with "
                + ("more sets." if rdata.side_by_side(df) else "warm processes."))
        out.append(lead + " A reader should take the row of the job table closest to their own job (or run "
                   "fwbench report --job TASK:N) rather than a single framework ranking; the weighted ranking kept "
                   "in the appendix shows how any single score depends on its weights.")
    t = _timed(df[~df["workload"].isin(sections.WORKLOADS)])
    if len(t):
        sp = t[(t["mode"] != "eager") & t["speedup_vs_eager"].notna() & t["strategy"].isna()]
        per = sp.groupby("framework")["speedup_vs_eager"].agg(["min", "max"])
        if len(per):
            out.append("Compilers matter most where the eager mode is slow: on this machine the compiled modes run at "
                       + ", ".join(f"{f} {v['min']:.2f}-{v['max']:.2f}x" for f, v in per.iterrows())
                       + " their own eager speed. The compiled mode's price is paid once per process (its start-up "
                       "and first call), so whether it pays back is a question of the job's length, which the "
                       "break-even steps in the appendix answer per task.")
    if not tested(df):
        out.append(f"Because every case has fewer than three steady-state {rdata.unit(df)}, this run's verdicts are "
                   "indicative throughout; its value is in what ran, what compiled and what was refused "
                   "(capabilities, counts, outcomes), which do not need replication to be read.")
    return out


def limitations(df: pd.DataFrame, fam: stats.Family) -> list[str]:
    """This run's limits, each computed from it or stated once for every run."""
    out = []
    t = _timed(df)
    r = summary.resolution(df, fam)
    sets = rdata.side_by_side(df)
    cold, warm = _processes(df)
    if finite(r["detectable"]):
        out.append(f"Resolution: with {process_words(df)}, a difference between two frameworks' steps smaller than "
                   f"about {100 * r['detectable']:.0f}% (the median comparison, 80% power) is not resolved; "
                   "equivalence within the margin needs more processes still."
                   + (f" About {r['needed']} {'sets' if sets else 'warm processes per framework'} would resolve "
                      f"{100 * (summary.SIDE_TARGET if sets else summary.TARGET):.0f}% at this spread."
                      if r.get("needed") else ""))
    elif len(t):
        u, one = ("sets", "one-set case cover block-to-block") if sets else ("processes", "one-process case cover "
                                                                             "round-to-round")
        out.append(f"Resolution: no case has {stats.MIN_TESTED} or more steady-state {u} ({process_words(df)}), "
                   f"so no difference between {u} is tested and every ratio is a point estimate; intervals "
                   f"shown for a {one} noise only.")
    if cold and max(cold) < stats.MIN_TESTED and len(t):
        out.append(f"Cold first calls come from {stats.plural(max(cold), 'process')} per case: their intervals rest "
                   "on a spread pooled over a framework's cases of one mode, an assumption that the cases share it.")
    d = dates(df)
    span = (f"between {d[0]:%H:%M} and {d[-1]:%H:%M} UTC on {run_date(df)}" if d and d[0].date() == d[-1].date()
            else f"from {d[0]:%d %B %Y} to {d[-1]:%d %B %Y}" if d else "on an unrecorded date")
    out.append(f"One machine, one session: {machine(df)}, processes started {span}. The CPU model is what the "
               "(virtual) machine reports; another machine, a later day or another load may order the frameworks "
               "differently, and nothing here is evidence about GPUs."
               if not claims.on_gpu(df) else
               f"One machine, one session: {machine(df)}, processes started {span}; another machine or day may "
               "order the frameworks differently.")
    presets = sorted({f"{w} {p}" for w, p in zip(df["workload"], df["preset"]) if isinstance(p, str)})
    th = sorted({int(x) for x in df["threads"].dropna()}) if "threads" in df.columns else []
    out.append(f"Sizes: {', '.join(presets)} at {'/'.join(map(str, th)) or '?'} threads; per-step overheads (dispatch, "
               "Python loops) weigh more at these sizes than at training scale, so the ordering of frameworks need "
               "not hold for larger models.")
    out.append("Own implementations: every model is fwbench's own, written to one plan in each framework's idiom "
               "(torch loops over a compiled step where JAX and TensorFlow compile the loop; TensorFlow's AdamW is "
               "written out over tf.Variables because Keras's places epsilon differently from torch's); a "
               "framework's usual library implementation may be faster or slower, which the peers table (Method) "
               "measures where it exists.")
    out.append("Equal work is checked at float32 tolerances, ten times the error each implementation achieves "
               "against float64 references: a difference in the work below them would go unseen.")
    if "compilations" in t.columns and (t["mode"] != "eager").any():
        out.append("Compile counters are each framework's own events (graphs, XLA compiles, traces) and are not "
                   "compared across frameworks.")
    if "requests" in t.columns and "stream_cold_s" in t.columns:
        k = t.loc[t["stream_cold_s"].notna(), "requests"].dropna()
        beyond = [n for n in (jobs.STREAM_REQUESTS,) if len(k) and n > k.min()]
        if beyond:
            out.append(f"The dynamic streams hold {int(k.min())}-{int(k.max())} requests; a job of "
                       f"{jobs.STREAM_REQUESTS:,} requests is priced from the cold pass and the warm per-request "
                       "rate, not measured.")
    return out


# ----------------------------------------------------------------------------- reproducibility

def _relative(path: str) -> str:
    p = Path(path)
    try:
        return str(p.resolve().relative_to(REPOSITORY))
    except (ValueError, OSError):
        return p.name


def result_folders(df: pd.DataFrame) -> list[str]:
    """The folders of the result files, relative to the repository where they are inside it."""
    return sorted({_relative(str(Path(r["path"]).parent)) for r in _runs(df) if r.get("path")})


def run_command(df: pd.DataFrame) -> list[str]:
    """The fwbench run command(s) that reproduce the runs' settings, one per distinct setting."""
    out = []
    for r in _runs(df):
        wl = ",".join(str(w) for w in r.get("workloads") or [])
        th = r.get("machine_threads")
        cmd = (f"fwbench run --workload {wl or '?'}" + (f" --threads {th}" if th else "")
               + (f" --cold {r['cold']} --warm {r['warm']}" if isinstance(r.get("cold"), int) and
                  isinstance(r.get("warm"), int) else "")
               + (f" --preset {r['preset']}" if r.get("preset") and "small" not in str(r["preset"]) else ""))
        if cmd not in out:
            out.append(cmd)
    return out


def licence() -> str:
    """The project's licence as pyproject.toml declares it (with the LICENSE file's name where present)."""
    try:
        import tomllib
        lic = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"].get("license", {})
        text = lic.get("text") if isinstance(lic, dict) else str(lic)
    except (OSError, KeyError, ImportError, ValueError):
        text = None
    return (text or "not declared") + (" (LICENSE)" if (REPOSITORY / "LICENSE").exists() else "")


def authors() -> list[str]:
    """pyproject.toml's [project] authors, by name."""
    try:
        import tomllib
        people = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"].get("authors", [])
        return [str(p["name"]) for p in people if isinstance(p, dict) and p.get("name")]
    except (OSError, KeyError, ImportError, ValueError):
        return []


def wall_time(df: pd.DataFrame) -> str:
    d = dates(df)
    if len(d) < 2:
        return "not recorded" if not d else f"{len(_runs(df))} process started at {d[0]:%Y-%m-%d %H:%M} UTC"
    minutes = (d[-1] - d[0]).total_seconds() / 60
    by_day: dict[Any, list[datetime]] = {}
    for x in d:
        by_day.setdefault(x.date(), []).append(x)
    return (f"{len(d)} processes, run one at a time; the first started at {d[0]:%Y-%m-%d %H:%M} UTC and the last at "
            f"{d[-1]:%Y-%m-%d %H:%M} UTC" + (f" ({minutes:.0f} minutes apart, the last process's own time on top)"
                                             if len(by_day) == 1 else ""))


def reproducibility(df: pd.DataFrame, rendered_by: str | None = None) -> list[tuple[str, str]]:
    """[(item, text)]: what a reader needs to rerun or re-render this paper."""
    folders = result_folders(df)
    return [
        ("Code", "fwbench, the repository that holds this paper's result files. " + provenance(df, rendered_by)),
        ("Measure", "; ".join(run_command(df)) + " (then fwbench report on the result folder)"),
        ("Re-render", "fwbench report " + " ".join(folders) + " -o OUT (or python -m reports report ...): the "
                      "report, its tables and this paper, from the result files alone"),
        ("Versions", versions(df)),
        ("Compute", f"{machine(df)}; {wall_time(df)}"),
        ("Data", "one JSON file per process (pytest-benchmark's format with fwbench's records), with data.csv (every "
                 "record) and cases.csv (one row per case), in " + (", ".join(folders) or "the report's folder")),
        ("Licence", f"code and data: {licence()}"),
        ("Maintenance", "the benchmark, its tests and these examples are kept in one repository; a change to the "
                        "harness or the statistics re-renders the committed examples, whose result files stay as "
                        "measured"),
    ]


def conclusion(df: pd.DataFrame, fam: stats.Family, job_list: list[jobs.Job] | None = None,
               claims_table: pd.DataFrame | None = None) -> str:
    rec = _recommendation(df, fam, job_list)
    cw = _claims_words(claims_table)
    out = []
    if rec:
        out.append(f"On {_machine_short(df)}, {rec}.")
    if cw:
        out.append(f"Of the seven claims: {cw}.")
    out.append("The same commands measure another machine, and a report states what that machine resolves; a "
               "GPU run and serving artefacts (exported models, other engines) are what the untested claims need.")
    return " ".join(out)


_CODE = re.compile(r"`([^`]*)`")


def plain(text: str) -> str:
    """A report sentence without Markdown's code quotes (the paper typesets commands itself)."""
    return _CODE.sub(r"\1", text)

"""The framework choice per job, from deployable configurations (issue 28).

A configuration is what a user would deploy: framework x mode x strategy, eager included.
A job is a task and a count: train N steps, call a model N times, serve N requests of a
stream, per-sample gradients for M examples. Its cost:

    model and derivatives tasks   first call + N x steady step (calls = M / examples per call
                                  for the derivatives tasks, whose count is in the task's unit)
    dynamic streams               the stream's cold pass, then the other requests at the warm
                                  per-request rate (sections.dynamic.served_cost)

each with the first call from a cold cache (every compile cache empty) and from a warm one
(the run's cache filled; streams: cold only). The interval adds the endpoints of the terms'
intervals (first call's + N x the step's): a term's 95% t interval over processes from three
processes on, the range over its processes with two (a t interval at one degree of freedom
says nothing), none with one; a stream's cold pass: the range over its processes. If each
term's interval covers its value, so does the sum, so the cost's interval covers at least as
often as both terms' do together (at least 90% for two 95% intervals; a range's coverage is
unknown), and is wider than a 95% interval of the sum would be.

    configurations(df)   timed cases a job can be run with, one row per configuration
    pareto(df, role)     per task, the configurations no other beats on both the steady step
                         and the first call (cold or warm cache)
    parse_job(text)      'train_step:5000' or 'gpt/train_step:5000' -> Job (one clear line if bad)
    default_jobs(df)     short (100) and long (100,000) jobs per task, 1,000 requests per stream
    job_rows(df, jobs)   per job: each framework's cheapest configuration with its cost and
                         interval, and the verdict: a leader, a tie, or indicative
    leader_changes(g)    the counts N at which the cheapest configuration of a task changes

No leader is named where the intervals overlap (a tie is a tie, whichever is listed first),
and none from a configuration with one process (no interval between processes: indicative).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reports import sections
from reports.analysis import stats
from reports.analysis.data import TIMED, finite, framework_order
from reports.sections.dynamic import hit_limit, served_cost
from workloads.base import FwbenchError

SHORT, LONG = 100, 100_000          # a short and a long job (steps or calls; examples for per-sample gradients)
STREAM_REQUESTS = 1000              # a serving stream's default length
STREAMS = "dynamic"                 # the workload whose tasks are streams of requests
COUNTED_IN_UNITS = ("derivatives",)  # workloads whose job count is in the task's unit (examples, ...), not calls
NOT_JOBS = ("interop",)             # programs that test what compiles, not work a user repeats
ROLES = ("cold", "warm")
TESTED = 3                          # processes from which a term's t interval is used (below: the range)
MAX_N = 10 ** 9                     # leader changes are looked for up to this count

# Verdicts of a job.
LEADER, TIE, INDICATIVE = "cheapest", "tie", "indicative"


@dataclass(frozen=True)
class Job:
    task: str
    n: int
    workload: str | None = None

    def label(self, df: pd.DataFrame | None = None) -> str:
        wl = self.workload or ""
        unit = _unit(wl, self.task, df)
        return f"{wl + ' ' if wl else ''}{self.task}: {self.n:,} {unit}"


def _unit(workload: str, task: str, df: pd.DataFrame | None = None) -> str:
    if workload == STREAMS:
        return "requests"
    if workload in COUNTED_IN_UNITS and df is not None:
        u = df[(df["workload"] == workload) & (df["task"] == task)]["unit"].dropna()
        return str(u.iloc[0]) if len(u) else "items"
    return "steps" if "train" in task else "calls"


JOB_SYNTAX = "TASK:N or WORKLOAD/TASK:N, N a positive whole number (e.g. train_step:5000, gpt/generate:100)"


def parse_job(text: str) -> Job:
    """'train_step:5000', 'gpt/train_step:5000' or '5,000' -> Job; a bad one raises
    FwbenchError with one line saying what is valid."""
    m = re.fullmatch(r"\s*(?:([A-Za-z0-9_]+)/)?([A-Za-z0-9_]+)\s*:\s*([0-9][0-9_,]*)\s*", text or "")
    n = int(m.group(3).replace(",", "").replace("_", "")) if m else 0
    if not m or n <= 0:
        raise FwbenchError(f"--job takes {JOB_SYNTAX}, got {text!r}")
    return Job(m.group(2), n, m.group(1))


def check_jobs(df: pd.DataFrame, jobs: list[Job]) -> None:
    """One line naming the valid tasks where a job's task (or workload) has no timed case."""
    conf = configurations(df)
    tasks = sorted({f"{w}/{t}" for w, t in zip(conf["workload"], conf["task"])}) if len(conf) else []
    for j in jobs:
        if _cases_of(conf, j).empty:
            raise FwbenchError(f"--job {j.workload + '/' if j.workload else ''}{j.task}:{j.n}: no timed case of that "
                               f"task in these results; valid tasks: {', '.join(tasks) or 'none'}")


def _cases_of(conf: pd.DataFrame, j: Job) -> pd.DataFrame:
    if conf.empty:
        return conf
    sel = conf["task"] == j.task
    if j.workload:
        sel &= conf["workload"] == j.workload
    return conf[sel]


def configurations(df: pd.DataFrame) -> pd.DataFrame:
    """The deployable configurations: timed cases at every case axis' baseline (fp32, one
    device) with a steady step, of every workload but interop's programs; a dynamic stream's
    strategy that hit its framework's recompile limit is left out (it did not serve the stream
    as configured)."""
    t = sections.baseline(sections.judged_in_report(df))
    t = t[t["status"].isin(TIMED) & t["median_s"].notna() & ~t["workload"].isin(NOT_JOBS)]
    if len(t):
        t = t[[not hit_limit(r) for _, r in t.iterrows()]]
    return t.assign(configuration=[configuration(r) for _, r in t.iterrows()])


def configuration(r: pd.Series) -> str:
    s = r.get("strategy")
    return f"{r['framework']} {r['mode']}" + (f" {s}" if isinstance(s, str) and s != "default" else "")


def _processes(r: pd.Series, role: str) -> int:
    """The fewest processes behind a cost's terms (steady step, and the first call or the
    stream's cold pass)."""
    steady = r.get("n_processes")
    first = r.get("n_first_cold") if role == "cold" else r.get("n_warm")
    vals = [int(v) for v in (steady, first) if finite(v)]
    return min(vals) if vals else 0


def _bounds(r: pd.Series, est: str, col: str) -> tuple[float, float]:
    """A term's interval: its 95% t interval over processes (the case's <col>_lo_s and
    <col>_hi_s) from TESTED processes on, the range over its processes below that (a t
    interval at one degree of freedom says nothing), none from one process (nan)."""
    e = r.get(est)
    n = e.n if isinstance(e, stats.Est) else 0
    if n < 2:
        return math.nan, math.nan
    if n < TESTED:
        v = [math.exp(x) for x in e.logs.values()]
        return min(v), max(v)
    return r.get(f"{col}_lo_s"), r.get(f"{col}_hi_s")


def cost(r: pd.Series, n: int, role: str = "cold") -> tuple[float, float, float]:
    """(cost, lo, hi) in seconds of n steps, calls or requests of a configuration (module
    docstring); nan where the terms were not measured, lo and hi nan where a term has no
    interval."""
    step = r.get("median_s")
    slo, shi = _bounds(r, "est", "median")
    if r["workload"] == STREAMS:
        if role != "cold":
            return math.nan, math.nan, math.nan
        c = served_cost(r, n)
        procs = r.get("procs_stream_cold_s")
        k = r.get("requests")
        v = [x for x in (procs.values() if isinstance(procs, dict) else procs or ()) if finite(x)]
        if not finite(c) or len(v) < 2 or not (finite(slo) and finite(shi)):
            return c, math.nan, math.nan
        lo = served_cost({"stream_cold_s": min(v), "median_s": slo, "requests": k}, n)
        hi = served_cost({"stream_cold_s": max(v), "median_s": shi, "requests": k}, n)
        return c, lo, hi
    calls = n / r["items"] if r["workload"] in COUNTED_IN_UNITS and finite(r.get("items")) and r["items"] > 0 else n
    first = r.get(f"first_call_{role}_s")
    flo, fhi = _bounds(r, f"est_first_{role}", f"first_call_{role}")
    slo, shi = _bounds(r, "est", "median")
    if not (finite(first) and finite(step)):
        return math.nan, math.nan, math.nan
    c = float(first + calls * step)
    if not all(finite(x) for x in (flo, fhi, slo, shi)):
        return c, math.nan, math.nan
    return c, float(flo + calls * slo), float(fhi + calls * shi)


@dataclass
class Outcome:
    """A job's answer: each framework's cheapest configuration (cost, lo, hi, processes),
    the verdict (LEADER, TIE or INDICATIVE) and the frameworks it names."""
    job: Job
    role: str
    best: pd.DataFrame          # one row per framework, cheapest first: configuration, cost, lo, hi, processes
    verdict: str
    named: list[str]

    def sentence(self) -> str:
        if self.best.empty:
            return "no configuration measured"
        if self.verdict == LEADER:
            return f"{self.named[0]} cheapest"
        if self.verdict == TIE:
            return "tie: " + ", ".join(self.named) + " (intervals overlap)"
        return f"indicative (one process): {self.named[0]} cheapest by the point estimates"


def outcome(conf: pd.DataFrame, job: Job, role: str = "cold") -> Outcome:
    """Each framework's cheapest configuration for the job and the verdict: the cheapest
    framework is named only where its cost's interval lies wholly below every other
    framework's; where they overlap, every framework whose interval reaches the cheapest's
    ties with it; where a term comes from one process (no interval), indicative."""
    g = _cases_of(conf, job)
    rows = []
    for _, r in g.iterrows():
        c, lo, hi = cost(r, job.n, role)
        if finite(c):
            rows.append({"framework": r["framework"], "configuration": r["configuration"], "cost": c, "lo": lo,
                         "hi": hi, "processes": _processes(r, role), "workload": r["workload"]})
    best = pd.DataFrame(rows, columns=["framework", "configuration", "cost", "lo", "hi", "processes", "workload"])
    if best.empty:
        return Outcome(job, role, best, INDICATIVE, [])
    best = best.sort_values("cost", kind="stable").drop_duplicates("framework").reset_index(drop=True)
    lead = best.iloc[0]
    if len(best) == 1:
        return Outcome(job, role, best, LEADER if finite(lead["hi"]) else INDICATIVE, [lead["framework"]])
    if not all(finite(x) for x in (*best["lo"], *best["hi"])):
        return Outcome(job, role, best, INDICATIVE, [lead["framework"]])
    ties = [r["framework"] for _, r in best.iloc[1:].iterrows() if r["lo"] <= lead["hi"]]
    if ties:
        return Outcome(job, role, best, TIE, [lead["framework"], *ties])
    return Outcome(job, role, best, LEADER, [lead["framework"]])


def leader_changes(conf: pd.DataFrame, job: Job, role: str = "cold") -> list[tuple[int, str]]:
    """[(N from which it is cheapest, configuration), ...] over N = 1 .. MAX_N by the point
    estimates: the lower envelope of the lines cost(N) = a + b N of the task's configurations
    (for streams, the piecewise cost of served_cost, walked at its knots and by bisection)."""
    g = _cases_of(conf, job)
    if g.empty:
        return []

    def cheapest(n: int) -> str | None:
        cs = [(cost(r, n, role)[0], r["configuration"]) for _, r in g.iterrows()]
        cs = [x for x in cs if finite(x[0])]
        return min(cs)[1] if cs else None
    # the cheapest is piecewise constant in N between crossings: sample on a log grid, then
    # find each change by bisection (exact to one count)
    grid = sorted({1, *np.unique(np.logspace(0, math.log10(MAX_N), 200).astype(np.int64)).tolist(), MAX_N})
    out: list[tuple[int, str]] = []
    prev_n, prev = grid[0], cheapest(grid[0])
    if prev is None:
        return []
    out.append((1, prev))
    for n in grid[1:]:
        cur = cheapest(n)
        if cur != prev and cur is not None:
            lo, hi = prev_n, n
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if cheapest(mid) == prev:
                    lo = mid
                else:
                    hi = mid
            out.append((hi, cheapest(hi) or cur))
            prev = out[-1][1]
            if prev != cur:      # another change inside the interval: continue from there
                prev = cheapest(n)
                out.append((n, prev))
        prev_n = n
    return out


def changes_text(changes: list[tuple[int, str]]) -> str:
    if not changes:
        return "-"
    if len(changes) == 1:
        return f"{changes[0][1]} at every N"
    return changes[0][1] + "".join(f"; from N = {n:,}: {c}" for n, c in changes[1:])


def default_jobs(conf: pd.DataFrame) -> list[Job]:
    """A short and a long job per model task, 1,000 requests per stream, and M = SHORT and LONG
    examples for the per-sample-gradient tasks (the other derivatives tasks: --job)."""
    out = []
    for (w, t), _ in conf.groupby(["workload", "task"], sort=True):
        if w == STREAMS:
            out.append(Job(t, STREAM_REQUESTS, w))
        elif w in COUNTED_IN_UNITS:
            if str(t).startswith("per_sample_grad"):
                out += [Job(t, SHORT, w), Job(t, LONG, w)]
        else:
            out += [Job(t, SHORT, w), Job(t, LONG, w)]
    return out


def _with_workload(conf: pd.DataFrame, jobs: list[Job]) -> list[Job]:
    """A job given without its workload becomes one job per workload that has the task."""
    out = []
    for j in jobs:
        wls = [j.workload] if j.workload else sorted(set(conf[conf["task"] == j.task]["workload"]))
        out += [Job(j.task, j.n, w) for w in wls]
    return out


def fmt_cost(c: float, lo: float, hi: float) -> str:
    if not finite(c):
        return "-"
    return stats.fmt_time_ci(c, lo, hi) if finite(lo) and finite(hi) else stats.fmt_seconds(c) + " (one process)"


def job_table(df: pd.DataFrame, jobs: list[Job] | None = None, role: str = "cold") -> pd.DataFrame:
    """One row per job: its verdict, each framework's cheapest configuration with its cost
    [interval], and where the cheapest configuration of the task changes with N."""
    conf = configurations(df)
    if conf.empty:
        return pd.DataFrame()
    jobs = _with_workload(conf, jobs) if jobs else default_jobs(conf)
    fws = framework_order(conf["framework"])
    rows = []
    for j in jobs:
        o = outcome(conf, j, role)
        if o.best.empty:
            continue
        b = o.best.set_index("framework")
        rows.append({"job": j.label(conf), "answer": o.sentence(),
                     **{f: (f"{b.at[f, 'configuration']}: {fmt_cost(b.at[f, 'cost'], b.at[f, 'lo'], b.at[f, 'hi'])}"
                            if f in b.index else "-") for f in fws},
                     "cheapest configuration by N": changes_text(leader_changes(conf, j, role))})
    return pd.DataFrame(rows)


def pareto(df: pd.DataFrame, role: str = "cold") -> pd.DataFrame:
    """Per task, the configurations on the front of steady step against first call (role's
    cache): none other has both a shorter (or equal) step and a shorter (or equal) first call,
    one of them strictly. Columns: workload, task, configuration, framework, mode, step,
    first call."""
    conf = configurations(df)
    col = f"first_call_{role}_s"
    if conf.empty or col not in conf.columns:
        return pd.DataFrame()
    c = conf[conf[col].notna()]
    rows = []
    for (w, t), g in c.groupby(["workload", "task"], sort=True):
        g = g.sort_values([col, "median_s"], kind="stable")
        best = math.inf
        for _, r in g.iterrows():
            if r["median_s"] < best:
                best = r["median_s"]
                rows.append({"workload": w, "task": t, "configuration": r["configuration"],
                             "framework": r["framework"], "mode": r["mode"], "step": r["median_s"],
                             "first call": r[col]})
    return pd.DataFrame(rows)


def pareto_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per task: the front with a cold and with a warm cache, each configuration as
    'name (step, first call)', fastest first call first."""
    fronts = {role: pareto(df, role) for role in ROLES}
    tasks = fronts["cold"][["workload", "task"]].drop_duplicates() if len(fronts["cold"]) else pd.DataFrame()
    rows = []
    for _, k in tasks.iterrows():
        row = {"task": f"{k['workload']} {k['task']}"}
        for role, f in fronts.items():
            g = f[(f["workload"] == k["workload"]) & (f["task"] == k["task"])] if len(f) else f
            row[f"front, {role} cache (step, first call)"] = "; ".join(
                f"{r['configuration']} ({stats.fmt_seconds(r['step'])}, {stats.fmt_seconds(r['first call'])})"
                for _, r in g.iterrows()) or "-"
        rows.append(row)
    return pd.DataFrame(rows)


def best_times(df: pd.DataFrame, task: str, workload: str | None = None) -> dict[str, tuple[str, float]]:
    """Each framework's fastest configuration's steady step on a task: {framework:
    (configuration, seconds)}, fastest first (for headlines in absolute terms)."""
    conf = configurations(df)
    g = _cases_of(conf, Job(task, 1, workload))
    out: dict[str, tuple[str, float]] = {}
    for _, r in g.sort_values("median_s", kind="stable").drop_duplicates("framework").iterrows():
        out[r["framework"]] = (r["configuration"], float(r["median_s"]))
    return out


def tiny_presets(df: pd.DataFrame) -> bool:
    """The run used the tiny presets (`fwbench run --quick`)."""
    return "preset" in df.columns and (df["preset"] == "tiny").any()

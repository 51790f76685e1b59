"""The framework choice per job, from deployable configurations.

A configuration is what a user would deploy: framework x mode x strategy, eager included.
A job is a task and a count: train N steps, call a model N times, serve N requests of a
stream, per-sample gradients for M examples. Its cost, in a fresh process:

    model and derivatives tasks   start-up + first call + N x steady step (calls = M / examples
                                  per call for the derivatives tasks, whose count is in the
                                  task's unit)
    dynamic streams               start-up + the stream's cold pass, then the other requests at
                                  the warm per-request rate (sections.dynamic.served_cost)

each with the first call from a cold cache (every compile cache empty) and from a warm one
(the run's cache filled; streams: cold only). start-up: the compiler's one-off start-up of the
configuration's framework and compiled mode (the runs' compiler_startup: each process compiles
a throw-away program from empty caches before that mode's first case, cold and warm processes
alike, so every process that recorded it counts), which every fresh process pays once; none for
eager modes, nor for runs from before it was measured apart (their first compiled case carries
it).

The interval is the 95% percentile interval of draws of the cost: each term drawn from its own
t distribution over processes (a cold first call at the spread pooled over its framework's
cases of the mode, as Appendix C prints it; a warm first call, the step and the start-up over
their processes; a stream's cold pass over its processes), the terms independently. A term
without an interval (fewer than 3 processes, or a first call the pool left out) leaves the cost
without one: never a range over two processes.

    configurations(df)   timed cases a job can be run with, one row per configuration
    pareto(df, role)     per task, the configurations no other beats on both the steady step
                         and the first call (start-up included; cold or warm cache)
    parse_job(text)      'train_step:5000' or 'gpt/train_step:5000' -> Job (one clear line if bad)
    default_jobs(df)     short (100) and long (100,000) jobs per task, 1,000 requests per stream
    outcome(conf, job)   each framework's cheapest configuration, and every pair of frameworks
                         tested on the ratio of their costs' draws (Outcome)
    job_rows(df, jobs)   per job: each framework's cheapest configuration with its cost and
                         interval, and the answer
    leader_changes(g)    the counts N at which the cheapest configuration of a task changes,
                         each with its interval, or "not resolved" where the two steps do not
                         differ at 95%

The answer names the cheapest framework (by the point estimates) and says against which
others that is resolved: every pair of frameworks' cheapest configurations is tested on the
ratio of their costs at 1 - 5%/(pairs), so a job's statements together carry at most a 5%
chance of a false "cheaper" (Bonferroni over its pairs). "cheapest: X" where X is resolved
cheaper than every other; "cheapest: X; not resolved against Y" where a pair's interval
contains 1 (and "Y cheaper than Z" for a resolved pair among those); "indicative" where no
pair with X has an interval.
"""
from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reports import sections
from reports.measures import stats
from reports.measures.data import TIMED, finite, framework_order
from reports.measures.verdicts import proc_est
from reports.sections.dynamic import hit_limit, served_cost
from workloads.base import FwbenchError

SHORT, LONG = 100, 100_000          # a short and a long job (steps or calls; examples for per-sample gradients)
STREAM_REQUESTS = 1000              # a serving stream's default length
STREAMS = "dynamic"                 # the workload whose tasks are streams of requests
COUNTED_IN_UNITS = ("derivatives",)  # workloads whose job count is in the task's unit (examples, ...), not calls
NOT_JOBS = ("interop",)             # programs that test what compiles, not work a user repeats
ROLES = ("cold", "warm")
MAX_N = 10 ** 9                     # leader changes are looked for up to this count


@dataclass(frozen=True)
class Job:
    task: str
    n: int
    workload: str | None = None

    def label(self, df: pd.DataFrame | None = None) -> str:
        wl = self.workload or ""
        unit = job_unit(wl, self.task, df)
        return f"{wl + ' ' if wl else ''}{self.task}: {self.n:,} {unit}"


def job_unit(workload: str, task: str, df: pd.DataFrame | None = None) -> str:
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


def startups(df: pd.DataFrame) -> dict[tuple[str, str], stats.Est]:
    """{(framework, mode): the compiler's start-up over every process that recorded it} (the
    runs' compiler_startup, machine_info: {"framework/mode": seconds}); empty for runs from
    before it was measured apart."""
    vals: dict[tuple[str, str], dict[str, float]] = {}
    for i, r in enumerate(df.attrs.get("runs", []) or []):
        for key, s in sorted((r.get("compiler_startup") or {}).items()):
            fw, _, mode = str(key).partition("/")
            if finite(s):
                vals.setdefault((fw, mode), {})[f"{i}|{r.get('run_file')}"] = float(s)
    return {k: stats.Est.of(v) for k, v in vals.items()}


def configurations(df: pd.DataFrame) -> pd.DataFrame:
    """The deployable configurations: timed cases at every case axis' baseline (fp32, one
    device) with a steady step, of every workload but interop's programs; a dynamic stream's
    strategy that hit its framework's recompile limit is left out (it did not serve the stream
    as configured). Each carries its mode's compiler start-up (`startup_s`, its Est
    `est_startup`; 0 and None where there is none)."""
    su = startups(df)
    t = sections.baseline(sections.judged_in_report(df))
    t = t[t["status"].isin(TIMED) & t["median_s"].notna() & ~t["workload"].isin(NOT_JOBS)]
    if len(t):
        t = t[[not hit_limit(r) for _, r in t.iterrows()]]
    est = [su.get((r["framework"], r["mode"])) if r["mode"] != "eager" else None for _, r in t.iterrows()]
    return t.assign(configuration=[configuration(r) for _, r in t.iterrows()], est_startup=est,
                    startup_s=[e.value if isinstance(e, stats.Est) and e.n else 0.0 for e in est])


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


def term_draws(e: object, name: str) -> np.ndarray | None:
    """Draws in seconds of a term from its t distribution over processes (stats.Est.draws);
    None where it has no interval (fewer than MIN_TESTED processes, or a pooled first call the
    pool left out)."""
    if not isinstance(e, stats.Est) or not e.tested:
        return None
    d = e.draws(name)
    if d is None:
        return None
    with np.errstate(over="ignore"):          # a t draw far in the tail: inf seconds, a valid draw
        return np.exp(d)


def _startup_draws(r: pd.Series) -> np.ndarray | float | None:
    """The start-up term's draws (one stream per framework and mode: the same quantity in every
    configuration of it); 0.0 where the mode has none."""
    e = r.get("est_startup")
    if not isinstance(e, stats.Est) or not e.n:
        return 0.0
    return term_draws(e, f"startup|{r['framework']}/{r['mode']}")


def _startup(r: pd.Series) -> float:
    s = r.get("startup_s")
    return float(s) if finite(s) else 0.0


@dataclass
class Cost:
    """A configuration's cost of a job: its value, 95% interval and draws (None: no interval)."""
    value: float
    lo: float = math.nan
    hi: float = math.nan
    draws: np.ndarray | None = None


def job_cost(r: pd.Series, n: int, role: str = "cold", draws: bool = True) -> Cost:
    """The cost of n steps, calls or requests of a configuration (module docstring); without
    `draws`, its point estimate only."""
    if r["workload"] == STREAMS:
        if role != "cold":
            return Cost(math.nan)
        c = served_cost(r, n)
        if not finite(c) or not draws:
            return Cost(_startup(r) + c)
        k = float(r["requests"])
        s, cold = _startup_draws(r), term_draws(proc_est(r, "stream_cold_s"), f"stream cold|{r['case']}")
        warm = term_draws(r.get("est"), f"step|{r['case']}")
        draws = None
        if s is not None and cold is not None and warm is not None:
            draws = s + (cold + max(n - k, 0.0) * warm / k if n >= k else cold * n / k)
        return _with_interval(_startup(r) + c, draws)
    point = _point_cost(r, role)
    if point is None:
        return Cost(math.nan)
    if not draws:
        return Cost(point(n))
    calls = n / r["items"] if _in_units(r) else n
    s = _startup_draws(r)
    f = term_draws(r.get(f"est_first_{role}"), f"first {role}|{r['case']}")
    t = term_draws(r.get("est"), f"step|{r['case']}")
    draws = s + f + calls * t if s is not None and f is not None and t is not None else None
    return _with_interval(point(n), draws)


def _in_units(r: pd.Series) -> bool:
    """Whether a job's count is of items (COUNTED_IN_UNITS) that a call does `items` of."""
    return r["workload"] in COUNTED_IN_UNITS and finite(r.get("items")) and r["items"] > 0


def _point_cost(r: pd.Series, role: str) -> Callable[[int], float] | None:
    """A configuration's cost of n (not a stream) by the point estimates, as a function of n:
    start-up + first call + calls x step, its terms read from the row once (leader_changes asks
    for thousands of counts); None where the first call or the step is not measured."""
    first, step = r.get(f"first_call_{role}_s"), r.get("median_s")
    if not (finite(first) and finite(step)):
        return None
    fixed, step = _startup(r) + float(first), float(step)
    if _in_units(r):
        items = r["items"]
        return lambda n: fixed + n / items * step
    return lambda n: fixed + n * step


def _with_interval(value: float, draws: np.ndarray | None) -> Cost:
    if draws is None:
        return Cost(value)
    lo, hi = stats.percentile_interval(draws)
    return Cost(value, lo, hi, draws)


def cost(r: pd.Series, n: int, role: str = "cold") -> tuple[float, float, float]:
    """(cost, lo, hi) in seconds of n steps, calls or requests of a configuration (module
    docstring); nan where the terms were not measured, lo and hi nan where a term has no
    interval."""
    c = job_cost(r, n, role)
    return c.value, c.lo, c.hi


@dataclass(frozen=True)
class Pair:
    """Framework a's cheapest configuration's cost over framework b's, with its interval at
    `level` (nan without draws on both sides)."""
    a: str
    b: str
    ratio: float
    lo: float
    hi: float
    level: float

    @property
    def tested(self) -> bool:
        return finite(self.lo) and finite(self.hi)

    @property
    def resolved(self) -> bool:
        """The interval excludes 1: one of the two is cheaper at the pair's level."""
        return self.tested and (self.hi < 1.0 or self.lo > 1.0)

    def text(self) -> str:
        """'1.42x [1.21, 1.68] cheaper (98.3% interval)' of b's cost over a's."""
        x, lo, hi = 1.0 / self.ratio, 1.0 / self.hi if self.hi else math.inf, 1.0 / self.lo if self.lo else math.inf
        if not self.tested:
            return f"{stats.fmt_x(x)}x, no interval"
        return f"{stats.fmt_x(x)}x [{stats.fmt_x(lo)}, {stats.fmt_x(hi)}], {stats.level_text(self.level)} interval"


# Verdicts of a job.
LEADER, UNRESOLVED, INDICATIVE = "cheapest", "not resolved", "indicative"


@dataclass
class Outcome:
    """A job's answer: each framework's cheapest configuration (cost, lo, hi, processes),
    every pair of them tested (`pairs`, at `level`), the verdict (LEADER, UNRESOLVED or
    INDICATIVE) and the frameworks it names (the cheapest first, then those not resolved
    against it)."""
    job: Job
    role: str
    best: pd.DataFrame          # one row per framework, cheapest first: configuration, cost, lo, hi, processes
    verdict: str
    named: list[str]
    pairs: dict[tuple[str, str], Pair] = field(default_factory=dict)
    level: float = stats.LEVEL

    def pair(self, a: str, b: str) -> Pair | None:
        """a's cost over b's, whichever order it was tested in."""
        if (a, b) in self.pairs:
            return self.pairs[(a, b)]
        p = self.pairs.get((b, a))
        return None if p is None else Pair(a, b, 1.0 / p.ratio, 1.0 / p.hi if p.hi else math.inf,
                                            1.0 / p.lo if p.lo else math.inf, p.level)

    def runner_up(self) -> str | None:
        """The second-cheapest framework by the point estimates."""
        return str(self.best.iloc[1]["framework"]) if len(self.best) > 1 else None

    def sentence(self) -> str:
        if self.best.empty:
            return "no configuration measured"
        lead = self.named[0]
        others = [str(f) for f in self.best["framework"].iloc[1:]]
        open_ = [f for f in others if (p := self.pair(lead, f)) is not None and p.tested and not p.resolved]
        untested = [f for f in others if (p := self.pair(lead, f)) is None or not p.tested]
        if self.verdict == INDICATIVE:
            out, rest = f"indicative (no interval): {lead} cheapest by the point estimates", others
        else:
            out, rest = f"cheapest: {lead}", open_ + untested
            if open_:
                out += "; not resolved against " + ", ".join(open_)
            if untested:
                out += f"; not tested against {', '.join(untested)} (no interval)"
        # the pairs among those that are resolved (an overlap with the cheapest says nothing of them)
        below = [f"{a} below {b}" if p.hi < 1.0 else f"{b} below {a}" for i, a in enumerate(rest)
                 for b in rest[i + 1:] if (p := self.pair(a, b)) is not None and p.resolved]
        return out + "".join(f"; {x}" for x in below)


def outcome(conf: pd.DataFrame, job: Job, role: str = "cold") -> Outcome:
    """Each framework's cheapest configuration for the job (by the point estimates), and every
    pair of them tested on the ratio of their costs' draws at 1 - 5%/(pairs): LEADER where the
    cheapest is resolved below every other framework, UNRESOLVED where a pair with it is not,
    INDICATIVE where no pair with it has an interval."""
    g = _cases_of(conf, job)
    rows, draws = [], {}
    for _, r in g.iterrows():
        c = job_cost(r, job.n, role)
        if finite(c.value):
            rows.append({"framework": r["framework"], "configuration": r["configuration"], "cost": c.value,
                         "lo": c.lo, "hi": c.hi, "processes": _processes(r, role), "workload": r["workload"]})
            draws[r["configuration"]] = c.draws
    best = pd.DataFrame(rows, columns=["framework", "configuration", "cost", "lo", "hi", "processes", "workload"])
    if best.empty:
        return Outcome(job, role, best, INDICATIVE, [])
    best = best.sort_values("cost", kind="stable").drop_duplicates("framework").reset_index(drop=True)
    fws = list(best["framework"])
    k = len(fws) * (len(fws) - 1) // 2
    level = 1.0 - stats.ALPHA / k if k else stats.LEVEL
    pairs = {}
    for i in range(len(fws)):
        for j in range(i + 1, len(fws)):
            a, b = best.iloc[i], best.iloc[j]
            da, db = draws[a["configuration"]], draws[b["configuration"]]
            lo, hi = stats.percentile_interval(da / db if da is not None and db is not None else None, level)
            pairs[(fws[i], fws[j])] = Pair(fws[i], fws[j], a["cost"] / b["cost"], lo, hi, level)
    lead = fws[0]
    if len(fws) == 1:
        return Outcome(job, role, best, LEADER if draws[best.iloc[0]["configuration"]] is not None else INDICATIVE,
                       [lead], pairs, level)
    vs = [pairs[(lead, f)] for f in fws[1:]]
    if not any(p.tested for p in vs):
        return Outcome(job, role, best, INDICATIVE, [lead], pairs, level)
    if all(p.resolved and p.hi < 1.0 for p in vs):
        return Outcome(job, role, best, LEADER, [lead], pairs, level)
    return Outcome(job, role, best, UNRESOLVED, [lead, *[p.b for p in vs if not p.resolved]], pairs, level)


def _line(r: pd.Series, role: str) -> tuple[float, float] | None:
    """A configuration's cost as a line in N, (fixed part, per count), where it is one: start-up
    + first call + N x step (per item for the derivatives tasks); a stream from its length on,
    start-up + cold pass - warm pass + N x the warm per-request time."""
    if r["workload"] == STREAMS:
        k = r.get("requests")
        if role != "cold" or not (finite(r.get("stream_cold_s")) and finite(k) and k > 0):
            return None
        return _startup(r) + r["stream_cold_s"] - r["median_s"], r["median_s"] / k
    first = r.get(f"first_call_{role}_s")
    if not finite(first):
        return None
    per = r["items"] if _in_units(r) else 1.0
    return _startup(r) + first, r["median_s"] / per


@dataclass(frozen=True)
class Change:
    """From count `n` on (point estimates) `configuration` is the cheapest; `lo`, `hi` the 95%
    interval of the crossing with the configuration before it; `resolved` False where their
    steps do not differ at 95% (the crossing could lie anywhere), None where it is not tested
    (fewer than 3 processes, or the first change)."""
    n: int
    configuration: str
    lo: float = math.nan
    hi: float = math.nan
    resolved: bool | None = None


def _crossing(a: pd.Series, b: pd.Series, role: str, n: int) -> Change:
    """Where b (cheaper per count) overtakes a: the 95% interval of the count at which their
    lines cross, from draws of both fixed parts and of the steps (b's as a's times their ratio
    where both ran in the same processes, paired; else each its own), or not resolved where
    the two steps' ratio has a 95% interval that contains 1."""
    ea, eb = a.get("est"), b.get("est")
    la, lb = _line(a, role), _line(b, role)
    if not (isinstance(ea, stats.Est) and isinstance(eb, stats.Est)) or la is None or lb is None \
            or any(x["workload"] == STREAMS and n < x["requests"] for x in (a, b)):   # a stream's line: from k on
        return Change(n, b["configuration"])
    r = stats.ratio(eb, ea)
    if not r.tested:
        return Change(n, b["configuration"])
    lo, hi = r.interval()
    if lo <= 1.0 <= hi:
        return Change(n, b["configuration"], resolved=False)
    fixed = []
    for x in (a, b):
        if x["workload"] == STREAMS:
            d = term_draws(proc_est(x, "stream_cold_s"), f"stream cold|{x['case']}")
            w = term_draws(x.get("est"), f"step|{x['case']}")
            fixed.append(None if d is None or w is None else d - w)
        else:
            fixed.append(term_draws(x.get(f"est_first_{role}"), f"first {role}|{x['case']}"))
        s = _startup_draws(x)
        fixed[-1] = None if s is None or fixed[-1] is None else fixed[-1] + s
    sa = term_draws(ea, f"step|{a['case']}")
    if r.kind == "paired":
        d = r.draws(f"crossing|{a['case']}|{b['case']}")
        sb = None if sa is None or d is None else sa * np.exp(d)
    else:
        sb = term_draws(eb, f"step|{b['case']}")
    if any(x is None for x in (*fixed, sa, sb)):
        return Change(n, b["configuration"])
    per_a, per_b = la[1] / a["median_s"], lb[1] / b["median_s"]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        gain = sa * per_a - sb * per_b
        at = np.where(gain <= 0, np.inf, np.maximum(1.0, np.ceil((fixed[1] - fixed[0]) / gain)))
    clo, chi = stats.percentile_interval(at)
    return Change(n, b["configuration"], clo, chi, True)


def leader_changes(conf: pd.DataFrame, job: Job, role: str = "cold") -> list[Change]:
    """[Change(N from which it is cheapest, configuration), ...] over N = 1 .. MAX_N by the
    point estimates: the lower envelope of the lines cost(N) = a + b N of the task's
    configurations (for streams, the piecewise cost of served_cost, walked at its knots and by
    bisection); each change after the first with the interval of its crossing (_crossing)."""
    g = _cases_of(conf, job)
    if g.empty:
        return []
    listed = [r for _, r in g.iterrows()]
    rows = {r["configuration"]: r for r in listed}
    found: dict[int, str | None] = {}
    costs = [(_point_cost(r, role) if r["workload"] != STREAMS else
              (lambda n, r=r: job_cost(r, n, role, draws=False).value), r["configuration"]) for r in listed]
    costs = [(f, c) for f, c in costs if f is not None]

    def cheapest(n: int) -> str | None:       # the rows once, each N once (12,648 calls on a report of 200 tasks)
        if n not in found:
            cs = [(f(n), c) for f, c in costs]
            cs = [x for x in cs if finite(x[0])]
            found[n] = min(cs)[1] if cs else None
        return found[n]
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
    changes = [Change(*out[0])]
    for (_, before), (n, c) in zip(out, out[1:]):
        changes.append(_crossing(rows[before], rows[c], role, n))
    return changes


def changes_text(changes: list[Change]) -> str:
    if not changes:
        return "-"
    if len(changes) == 1:
        return f"{changes[0].configuration} at every N"

    def at(c: Change) -> str:
        if c.resolved is None:
            return f"from N = {c.n:,} (no interval)"
        if not c.resolved:
            return f"from N = {c.n:,} (not resolved: steps not different at 95%)"
        hi = "never" if math.isinf(c.hi) else f"{c.hi:,.0f}"
        return f"from N = {c.n:,} [{c.lo:,.0f}, {hi}]"
    return changes[0].configuration + "".join(f"; {at(c)}: {c.configuration}" for c in changes[1:])


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
    return stats.fmt_time_ci(c, lo, hi) if finite(lo) and finite(hi) else stats.fmt_seconds(c) + " (no interval)"


# The outcomes asked for while a report is rendered (remembering), by frame, role and jobs: the
# Summary, page one, the narrative, the job table and the Pareto figure ask for the same ones (9
# calls, 3 distinct; on a report of 200 tasks 0.6 s each). The frame is kept with them, so its id
# is not reused; outside a rendering nothing is kept (a frame changed in place is computed again).
_remembered: dict[tuple, tuple[pd.DataFrame, list[Outcome]]] | None = None


@contextlib.contextmanager
def remembering() -> Iterator[None]:
    """Outcomes computed once per frame, role and jobs inside the block (a rendering)."""
    global _remembered
    outer, _remembered = _remembered, {} if _remembered is None else _remembered
    try:
        yield
    finally:
        _remembered = outer


def outcomes(df: pd.DataFrame, jobs: list[Job] | None = None, role: str = "cold") -> list[Outcome]:
    """Each job's Outcome (the reader's jobs, else default_jobs), jobs without a measured
    configuration left out."""
    key = (id(df), role, tuple(jobs) if jobs else None)
    if _remembered is not None and key in _remembered:
        return list(_remembered[key][1])
    conf = configurations(df)
    if conf.empty:
        return []
    listed = _with_workload(conf, jobs) if jobs else default_jobs(conf)
    out = [o for o in (outcome(conf, j, role) for j in listed) if not o.best.empty]
    if _remembered is not None:
        _remembered[key] = (df, out)
    return list(out)


def job_table(df: pd.DataFrame, jobs: list[Job] | None = None, role: str = "cold") -> pd.DataFrame:
    """One row per job: its answer, each framework's cheapest configuration with its cost
    [interval], and where the cheapest configuration of the task changes with N."""
    conf = configurations(df)
    if conf.empty:
        return pd.DataFrame()
    fws = framework_order(conf["framework"])
    rows = []
    for o in outcomes(df, jobs, role):
        b = o.best.set_index("framework")
        rows.append({"job": o.job.label(conf), "answer": o.sentence(),
                     **{f: (f"{b.at[f, 'configuration']}: {fmt_cost(b.at[f, 'cost'], b.at[f, 'lo'], b.at[f, 'hi'])}"
                            if f in b.index else "-") for f in fws},
                     "cheapest configuration by N": changes_text(leader_changes(conf, o.job, role))})
    return pd.DataFrame(rows)


def pareto(df: pd.DataFrame, role: str = "cold") -> pd.DataFrame:
    """Per task, the configurations on the front of steady step against first call (role's
    cache, the mode's compiler start-up included: what a fresh process waits for): none other
    has both a shorter (or equal) step and a shorter (or equal) first call, one of them
    strictly. Columns: workload, task, configuration, framework, mode, step, first call."""
    conf = configurations(df)
    if conf.empty or f"first_call_{role}_s" not in conf.columns:
        return pd.DataFrame()
    col = "_first"
    c = conf.assign(_first=conf[f"first_call_{role}_s"] + conf["startup_s"])
    c = c[c[col].notna()]
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


def best_times(df: pd.DataFrame, task: str, workload: str | None = None,
               conf: pd.DataFrame | None = None) -> dict[str, tuple[str, float]]:
    """Each framework's fastest configuration's steady step on a task: {framework:
    (configuration, seconds)}, fastest first (for headlines in absolute terms); `conf`, the
    report's configurations(df) where the caller has them (a task at a time, they are most of
    the cost)."""
    conf = configurations(df) if conf is None else conf
    g = _cases_of(conf, Job(task, 1, workload))
    out: dict[str, tuple[str, float]] = {}
    for _, r in g.sort_values("median_s", kind="stable").drop_duplicates("framework").iterrows():
        out[r["framework"]] = (r["configuration"], float(r["median_s"]))
    return out


def tiny_presets(df: pd.DataFrame) -> bool:
    """The run used the tiny presets (`fwbench run --quick`)."""
    return "preset" in df.columns and (df["preset"] == "tiny").any()

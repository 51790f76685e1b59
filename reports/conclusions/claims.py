"""The claims fwbench tests, answered by name: the seven claims of
../shared/CLAIMS.md, each with who made it (an industry article of 2023 quoting three
practitioners), what this run measured, the verdict and its caveat. One rule per kind of claim
(RULES, printed in the report's Method, written in docs/design/choice.md):

    best case    claim 1, "as high as 40%": supported where some task's speedup reaches the
                 claimed size with its whole interval at its Holm level; not supported where
                 every task's one-sided 95% upper bound lies below it (each task's test of
                 ">= 1.4x" rejects it: an intersection-union test, 5% overall); inconclusive
                 otherwise
    capability   claim 2 (and claim 3's capability half): the programs or transforms that run
                 correctly, compiled and eager, with what the framework itself reports (graph
                 breaks from its own counter); never a mode the framework does not have
    worse than   claims 3 and 4: the tasks on each side (by the verdicts where tested, by the
                 point estimates otherwise) and how many of them beyond the margin; supported
                 where more than half the tasks go the claim's way, not supported where more
                 than half go the other way, inconclusive otherwise
    scale        claim 5: from the scale-out section where it ran (the mechanism measured,
                 its model stated); on CPUs not testable, whatever ran
    serving      claim 6: a "better in another engine" rule over serving records (the
                 framework's development path against its deployable artefacts and another
                 engine); not tested until a run has them
    code size    claim 7: logical lines of the same model in each framework (workloads
                 code_size.json), TensorFlow's against each other's, as a "worse than" count;
                 partly measurable only (learning and adapting are not)

A verdict resting on fewer than 3 processes on a side, or on point estimates, says
"(indicative)"; a claim whose workload did not run reads "not tested in this run".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from reports.conclusions import findings, jobs, replicates
from reports.measures import distributed, scaleout, stats, verdicts
from reports.measures.data import TIMED, finite, framework_order, lacking_modes, not_applicable, unit
from reports.sections import interop, serving
from workloads import code_size
from workloads.base import is_accelerator

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
NOT_RUN, NOT_TESTABLE = "not tested in this run", "not testable on CPUs"
INDICATIVE = " (indicative)"
PARTLY = " (partly measurable)"

ARTICLE = "an industry article (2023) quoting"
ANTIGA = "Luca Antiga, CTO of Lightning AI, PyTorch contributor"
SHIEBLER = "Dan Shiebler, Head of Machine Learning, Abnormal Security"
LUITJENS = "Pieter Luitjens, co-founder and CTO of Private AI"

RULES = {
    "best case": "supported where some task's speedup reaches the claimed size with its whole interval at its "
                 "Holm level; not supported where every task's one-sided 95% upper bound lies below it (each "
                 "task's own test rejects the claimed size: 5% overall); inconclusive otherwise",
    "capability": "counts the programs (or transforms) each framework runs correctly, compiled and eager, with what "
                  "the framework itself reports (graph breaks from its own counter); a mode a framework does not "
                  "have is n/a, never a refusal; supported where the claimed framework's compiler runs every one",
    "worse than": "counts the tasks on each side (by the verdicts where tested, by the point estimates otherwise) "
                  "and how many beyond the margin: supported where more than half go the claim's way, not "
                  "supported where more than half go the other way, inconclusive otherwise",
    "scale": "from the scale-out section where it ran: the data-parallel mechanism measured (weak-scaling "
             "efficiency, exposed communication; across processes: every rank's check, communication apart, the "
             "alpha-beta fit of the link) and the alpha-beta model's prediction at thousands of GPUs stated as a "
             "model; not testable on CPUs",
    "serving": "a framework's deployable artefacts and another engine against its development path, per task: "
               "supported where another engine is faster beyond the margin on more than half the tasks; not tested "
               "until a run has serving records",
    "code size": "logical lines of the same model per framework (counted from the source, workloads/code_size.json), "
                 "TensorFlow's against each other framework's as a 'worse than' count (beyond the margin: more "
                 "than 1 + margin times as many lines); partly measurable: learning and adapting are not",
}


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    said_by: str            # name, role (../shared/CLAIMS.md)
    kind: str               # a key of RULES
    workload: str           # the workload whose cases answer it ("" the model workloads; "*" none)
    measured: str

    @property
    def source(self) -> str:
        return f"{ARTICLE} {self.said_by}"

    @property
    def rule(self) -> str:
        return RULES[self.kind]


CLAIMS = (
    Claim("compile40", "The PyTorch 2 compiler makes training and inference faster, with gains \"as high as 40%\"",
          ANTIGA, "best case", "",
          "torch compiled over torch eager per model task and configuration (the paired speedup; not a serving "
          "path in another engine), its largest"),
    Claim("torch_python", "PyTorch 2 works where earlier PyTorch (and other compilers) needed rewrites around Python, "
          "reporting what it could not optimise", ANTIGA, "capability", "interop",
          "per Python-interop program, the outcome under each framework's compiled (and TF graph) mode, as written: "
          "compiled, graph breaks (the framework's own count), refused, silently wrong"),
    Claim("torch_vmap", "vmap and higher-order derivatives in PyTorch (functorch) are not at the level they are in "
          "JAX", ANTIGA, "worse than", "derivatives",
          "per derivatives task, torch's fastest configuration (transform x mode) against JAX's; which transforms "
          "run, eager and compiled"),
    Claim("tf_dynamic", "TensorFlow's static graphs make variable-length sequences awkward", SHIEBLER, "worse than",
          "dynamic",
          "per GPT stream, each framework's cost of 1,000 variable-length requests over its own cost of the same "
          "work at shapes it has compiled (one compile, then the warm rate), best strategy per framework among its "
          "graph and compiled modes; the strategies' lines and constructs"),
    Claim("scale", "PyTorch can easily scale to thousands of GPUs", LUITJENS, "scale", "*",
          "data-parallel weak scaling and exposed communication (the scale-out section), where it ran"),
    Claim("serving", "Develop in PyTorch, but run production inference in another framework or engine", LUITJENS,
          "serving", "serving",
          "latency of each framework's deployable artefacts and another engine against its development path"),
    Claim("tf_rigid", "TensorFlow is more rigid: harder to learn and to adapt to new applications", SHIEBLER,
          "code size", "",
          "logical lines and framework API names of the same models per framework (counted from fwbench's source), "
          "and of each dynamic-shape strategy"),
)


@dataclass(frozen=True)
class Answer:
    verdict: str
    what: str
    caveat: str = ""


def where(df: pd.DataFrame) -> str:
    """'this CPU (AMD EPYC, 2 threads) at the small presets': the device and size a verdict holds for."""
    runs = df.attrs.get("runs", []) or []
    acc = sorted({str(r.get("gpu_model") or r.get("accelerator")) for r in runs
                  if r.get("gpu_model") or r.get("accelerator")})
    cpu = sorted({str(r.get("cpu")) for r in runs if r.get("cpu")})
    threads = sorted({int(x) for x in df["threads"].dropna()}) if "threads" in df.columns else []
    presets = sorted({str(p) for p in df["preset"].dropna()}) if "preset" in df.columns else []
    dev = (f"this GPU ({', '.join(acc)})" if acc else
           f"this CPU ({', '.join(cpu) or 'not recorded'}" + (f", {'/'.join(map(str, threads))} threads" if threads
                                                              else "") + ")")
    return dev + (f" at the {'/'.join(presets)} preset{'s' if len(presets) > 1 else ''}" if presets else "")


def on_gpu(df: pd.DataFrame) -> bool:
    return "device" in df.columns and df["device"].map(is_accelerator).any()


# ----------------------------------------------------------------------------- claim 1: best case

@dataclass(frozen=True)
class Speedup:
    """One task's speedup (a over b's time, as speed: b / a) with its ratio of times and the
    Holm level its verdict was read at."""
    task: str
    ratio: stats.Ratio        # a's time over b's (compiled over eager)
    level: float

    @property
    def speed(self) -> float:
        return 1.0 / self.ratio.value

    @property
    def tested(self) -> bool:
        return self.ratio.tested

    @property
    def low(self) -> float:
        """The speedup's lower end at its Holm level."""
        return 1.0 / self.ratio.interval(self.level)[1]

    @property
    def high(self) -> float:
        """The speedup's upper end at its Holm level."""
        return 1.0 / self.ratio.interval(self.level)[0]

    @property
    def upper95(self) -> float:
        """The one-sided 95% upper bound of the speedup (the two-sided 90% interval's upper end)."""
        return 1.0 / self.ratio.interval(1.0 - 2.0 * stats.ALPHA)[0]


def best_case(items: list[Speedup], claim: float) -> tuple[str, bool]:
    """(verdict, indicative) of a "best case" claim: supported where some tested task's
    speedup reaches `claim` with its whole interval at its level (an untested one by its point
    estimate: indicative); not supported where every task's one-sided 95% upper bound is below
    it (an untested one: its point estimate); inconclusive otherwise."""
    indicative = any(not s.tested for s in items)
    reach = any((s.low >= claim) if s.tested else (s.speed >= claim) for s in items)
    below = all((s.upper95 < claim) if s.tested else (s.speed < claim) for s in items)
    return (SUPPORTED if reach else NOT_SUPPORTED if below else INCONCLUSIVE), indicative


def _compile40(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    t = jobs.configurations(df)
    c = t[(t["framework"] == findings.CLAIM_FRAMEWORK) & (t["mode"] == "compiled")
          & ~t["workload"].isin(jobs.COUNTED_IN_UNITS + (jobs.STREAMS,))]
    # a serving path in another engine (ONNX Runtime on torch's export) is not the PyTorch 2
    # compiler's speed: claim 6 compares it; torch.compile and AOTInductor's artefact stay
    c = c[np.array([not (r["workload"] == "serving" and serving.kind(r) == serving.OTHER_ENGINE)
                    for _, r in c.iterrows()], dtype=bool)]
    items = []
    for _, r in c.iterrows():
        e = replicates.eager_of(df, r)
        j = findings.speedup_judgement(df, r, fam)
        if e is None or j is None:
            continue
        items.append(Speedup(f"{r['workload']} {r['task']}" + (f" [{r['strategy']}]" if isinstance(r["strategy"], str)
                                                                 else ""),
                             stats.ratio(r["est"], e["est"]), fam.levels.get(j.key, fam.stop_level)))
    if not items:
        return Answer(NOT_RUN, "", "no torch compiled model task with its eager case")
    verdict, indicative = best_case(items, findings.CLAIM)
    top = max(items, key=lambda s: s.speed)
    slower = sum(s.tested and s.high < 1.0 for s in items)
    if indicative:
        what = (f"{len(items)} torch compiled configurations at {min(s.speed for s in items):.2f}-{top.speed:.2f}x "
                f"torch eager's speed (point estimates: fewer than {stats.MIN_TESTED} {unit(df)}); largest {top.task}")
    else:
        worst = max(items, key=lambda s: s.upper95)
        reach = [s for s in items if s.low >= findings.CLAIM]
        what = (f"{len(items)} torch compiled configurations at {min(s.speed for s in items):.2f}-{top.speed:.2f}x "
                f"torch eager's speed; largest {top.task} {top.speed:.2f}x [{stats.fmt_x(top.low)}, "
                f"{stats.fmt_x(top.high)}] ({stats.level_text(top.level)} interval); "
                + (f"{len(reach)} reach 1.4x with the whole interval" if reach else
                   f"the largest one-sided 95% upper bound is {worst.upper95:.2f}x ({worst.task})")
                + (f"; {slower} slower than eager" if slower else ""))
    return Answer(f"{verdict} on {where(df)}" + (INDICATIVE if indicative else ""), what,
                  "torch.compile compiles the model; the fused AdamW runs eagerly in the default train step (Method); "
                  "small models: the claim's gains were reported for larger ones")


# ----------------------------------------------------------------------------- claim 2: capability

RUNS = ("compiled", "graph_breaks")          # an interop outcome that runs correctly
OUTCOME_RANK = {"compiled": 0, "graph_breaks": 1, "refused": 2, "wrong": 3}


def applicable(d: pd.DataFrame, every: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cases a framework could have run: not a mode it lacks (data.lacking_modes) nor
    another framework's API (data.not_applicable): those are n/a, never a refusal."""
    lacking = lacking_modes(every if every is not None else d)
    keep = ~not_applicable(d) & np.array([(f, m) not in lacking for f, m in zip(d["framework"], d["mode"])],
                                          dtype=bool)
    return d[keep]


def best_outcomes(d: pd.DataFrame) -> dict[str, dict[str, str]]:
    """{framework: {program: its best outcome over the non-eager modes it has}}."""
    out: dict[str, dict[str, str]] = {}
    for (f, task), g in d.groupby(["framework", "task"], sort=True):
        out.setdefault(str(f), {})[str(task)] = min((interop.outcome(r) for _, r in g.iterrows()),
                                                    key=lambda o: OUTCOME_RANK.get(o, 9))
    return out


def _torch_python(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    d = df[(df["workload"] == "interop") & (df["mode"] != "eager")]
    d = applicable(d[d["strategy"].isna() | (d["strategy"] == "default")], df)
    mine = d[(d["framework"] == "torch") & (d["mode"] == "compiled")]
    if mine.empty:
        return Answer(NOT_RUN, "", "the interop workload did not run for torch compiled")
    best = best_outcomes(d)
    torch_o = {str(r["task"]): interop.outcome(r) for _, r in mine.iterrows()}
    programs = sorted(torch_o)
    ok = [p for p in programs if torch_o[p] in RUNS]
    breaks = [r for _, r in mine.iterrows() if interop.outcome(r) == "graph_breaks"]
    counted = [int(r["dynamo_graph_breaks"]) for r in breaks if finite(r.get("dynamo_graph_breaks"))]
    refused_else = sorted({p for f, o in best.items() if f != "torch" for p, x in o.items() if x == "refused"})
    wrong_else = sorted({p for f, o in best.items() if f != "torch" for p, x in o.items() if x == "wrong"})
    verdict = SUPPORTED if len(ok) == len(programs) else NOT_SUPPORTED
    others = "; ".join(f"{f} " + ", ".join(f"{n} {k.replace('_', ' ')}" for k in sorted(
        set(o.values()), key=lambda k: (OUTCOME_RANK.get(k, 9), k)) if (n := list(o.values()).count(k)))
        for f, o in best.items() if f != "torch")
    what = (f"torch compiled runs {len(ok)} of {len(programs)} programs correctly: "
            f"{sum(torch_o[p] == 'compiled' for p in programs)} compiled whole, {len(breaks)} with graph breaks "
            + (f"torch itself reports ({_span(counted)} per program, its own counter)" if counted else
               "(no graph-break count recorded)")
            + (f"; of the {len(refused_else)} programs another compiler refuses, torch runs "
               f"{sum(p in ok for p in refused_else)}" if refused_else else "; no other compiler refuses a program")
            + (f"; of the {len(wrong_else)} another runs silently wrong, torch runs "
               f"{sum(p in ok for p in wrong_else)} correctly" if wrong_else else "; none runs silently wrong")
            + f"; the others' best non-eager mode: {others}")
    return Answer(verdict, what, _interop_speed(df, programs))


def _span(v: list[int]) -> str:
    return f"{min(v)}" if min(v) == max(v) else f"{min(v)}-{max(v)}"


def _interop_speed(df: pd.DataFrame, programs: list[str]) -> str:
    """Torch compiled against torch eager on the interop programs as written (a capability
    claim's price): 'slower than eager on 8 of 8 programs (1.8-4.7x)'."""
    t = df[(df["workload"] == "interop") & (df["framework"] == "torch") & df["strategy"].isna()
           & df["status"].isin(TIMED) & df["median_s"].notna()].set_index(["task", "mode"])["median_s"]
    x = [t[(p, "compiled")] / t[(p, "eager")] for p in programs if (p, "compiled") in t and (p, "eager") in t]
    if not x:
        return "graph breaks run the Python eagerly between graphs"
    n = df[(df["workload"] == "interop") & (df["framework"] == "torch")]["n_processes"].max()
    slower = [v for v in x if v > 1]
    return (f"torch compiled is slower than torch eager on {len(slower)} of {len(x)} programs"
            + (f" ({min(slower):.1f}x)" if slower and f"{min(slower):.1f}" == f"{max(slower):.1f}" else
               f" ({min(slower):.1f}-{max(slower):.1f}x)" if slower else "")
            + (f" (point estimates: fewer than {stats.MIN_TESTED} {unit(df)})" if not finite(n) or n < stats.MIN_TESTED
               else "") + "; graph breaks run the Python eagerly between graphs")


# ----------------------------------------------------------------------------- "worse than"

@dataclass(frozen=True)
class Side:
    """One task of a "worse than" claim: `x` is the accused's time (or cost) over the other's
    (above 1: the claim's way); `verdict` the family's (stats.verdict key) where tested, None for
    point estimates; `only` 'accused' or 'other' where only one of them ran the task."""
    task: str
    x: float = math.nan
    verdict: str | None = None
    only: str | None = None


def worse_than(sides: Iterable[Side], margin: float) -> tuple[str, dict[str, int], bool]:
    """(verdict, counts, indicative): counts of tasks the claim's way ('claim', 'claim_m' beyond
    the margin), the other way ('other', 'other_m'), and 'open' (neither by the verdicts)."""
    n = {"claim": 0, "claim_m": 0, "other": 0, "other_m": 0, "open": 0, "total": 0}
    indicative = False
    for s in sides:
        n["total"] += 1
        if s.only is not None:
            side, beyond = ("other" if s.only == "accused" else "claim"), True
        elif s.verdict is not None:
            v = s.verdict
            side = ("claim" if v in (stats.SLOWER, stats.SLOWER_M) else "other" if v in (stats.FASTER, stats.FASTER_M)
                    else None)
            beyond = v in (stats.SLOWER_M, stats.FASTER_M)
        else:
            indicative = True
            side = "claim" if s.x > 1 else "other" if s.x < 1 else None
            beyond = s.x > 1 + margin or s.x < 1 / (1 + margin)
        if side is None:
            n["open"] += 1
            continue
        n[side] += 1
        n[side + "_m"] += beyond
    v = SUPPORTED if 2 * n["claim"] > n["total"] else NOT_SUPPORTED if 2 * n["other"] > n["total"] else INCONCLUSIVE
    return v, n, indicative


def _count_text(n: dict[str, int], accused: str, other: str, unit: str, margin: float) -> str:
    m = f"{100 * margin:.0f}%"
    return (f"{other} ahead on {n['claim']} of {n['total']} {unit} ({n['claim_m']} beyond the {m} margin), "
            f"{accused} on {n['other']} ({n['other_m']} beyond)" + (f", {n['open']} undecided" if n["open"] else ""))


def _torch_vmap(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    d = df[df["workload"] == "derivatives"]
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    sides = []
    for task in sorted(set(d["task"])):
        tried = set(d[d["task"] == task]["framework"])
        if not {"torch", "jax"} <= tried:
            continue
        best = verdicts.fastest_per_framework(t[t["task"] == task])
        have = set(best["framework"])
        if not have & {"torch", "jax"}:
            continue
        if have >= {"torch", "jax"}:
            pair = next((a, b) for a, b in verdicts.pairs(best) if {a["framework"], b["framework"]} == {"torch", "jax"})
            j = verdicts.judge(*pair, fam)
            x = j.ratio if pair[0]["framework"] == "torch" else 1.0 / j.ratio       # torch's time over jax's
            v = None if j.verdict == stats.NOT_TESTED else (j.verdict if pair[0]["framework"] == "torch" else
                                                            _flip(j.verdict))
            sides.append(Side(task, x, v))
        else:
            sides.append(Side(task, only="accused" if "torch" in have else "other"))
    if not sides:
        return Answer(NOT_RUN, "", "the derivatives workload did not run for torch and JAX")
    verdict, n, indicative = worse_than(sides, fam.margin)
    what = (_count_text(n, "torch", "JAX", "tasks", fam.margin) + " (each framework's fastest transform and mode)"
            + "; " + _coverage(applicable(d[d["framework"].isin(("torch", "jax"))], df)))
    return Answer(verdict + (INDICATIVE if indicative else ""), what,
                  f"fewer than {stats.MIN_TESTED} {unit(df)} per case: point estimates" if indicative else "")


def _flip(v: str) -> str:
    return {stats.FASTER: stats.SLOWER, stats.FASTER_M: stats.SLOWER_M, stats.SLOWER: stats.FASTER,
            stats.SLOWER_M: stats.FASTER_M}.get(v, v)


def _coverage(d: pd.DataFrame) -> str:
    """What runs correctly (ok, or fallback: graph breaks the framework reports) of the
    transforms each framework has, eager and accelerated, and each compiler's gaps by
    transform: 'torch 105 of 110 (compiled: autograd refused on 5 tasks, graph breaks on 1)'."""
    parts = []
    for f in framework_order(d["framework"]):
        g = d[d["framework"] == f]
        ok = g["status"].isin(TIMED)
        gaps = g[(g["mode"] != "eager") & (g["status"] != "ok")]
        words = {"unsupported": "refused", "failed": "failed", "fallback": "graph breaks"}
        gap = "; ".join(f"{m} {s}: " + ", ".join(f"{words.get(k, k)} on {v}" for k, v in
                                                  h["status"].value_counts().sort_index().items())
                        for (m, s), h in gaps.groupby(["mode", "strategy"], sort=True))
        parts.append(f"{f} runs {int(ok.sum())} of {len(g)} transform cases" + (f" ({gap})" if gap else ""))
    return "transforms that run, eager and compiled: " + "; ".join(parts)


# ----------------------------------------------------------------------------- claim 4

STREAM_N = jobs.STREAM_REQUESTS


def _first_request(r: pd.Series) -> float:
    v = r.get("stream_cold_request_s")
    vals = [float(x) for x in str(v).split(",") if x.strip()] if isinstance(v, str) else list(v or [])
    return vals[0] if vals and finite(vals[0]) else math.nan


def fixed_cost(r: pd.Series, n: int = STREAM_N) -> float:
    """n requests of a stream's work at shapes already compiled, in a fresh process: start-up,
    the cold pass's first request (its one compile), then n - 1 requests at the warm
    per-request rate."""
    first, k = _first_request(r), r.get("requests")
    if not (finite(first) and finite(k) and k > 0 and finite(r.get("median_s"))):
        return math.nan
    return float(r.get("startup_s") or 0.0) + first + (n - 1) * r["median_s"] / k


def overheads(conf: pd.DataFrame, stream: str, n: int = STREAM_N) -> pd.DataFrame:
    """Per configuration of a stream's graph and compiled modes: its cost of n variable-length
    requests (jobs: start-up, cold pass, the rest at the warm rate) over its framework and
    mode's own cost of the same work at compiled shapes (fixed_cost of its unpadded strategies,
    the lowest): the price of varying shapes, padding included for a bucketed strategy."""
    g = conf[(conf["workload"] == jobs.STREAMS) & (conf["task"] == stream) & (conf["mode"] != "eager")]
    rows = []
    for (f, m), h in g.groupby(["framework", "mode"], sort=False):
        unpadded = h[h["strategy"] != "bucketed"]
        fixed = [(fixed_cost(r, n), r) for _, r in unpadded.iterrows()]
        fixed = [x for x in fixed if finite(x[0])]
        if not fixed:
            continue
        base, base_r = min(fixed, key=lambda x: x[0])
        for _, r in h.iterrows():
            c = jobs.cost(r, n)[0]
            if finite(c):
                rows.append({"framework": f, "mode": m, "strategy": r["strategy"], "configuration": r["configuration"],
                             "cost": c, "fixed": base, "overhead": c / base, "n_processes": r.get("n_processes"),
                             "_row": r, "_base": base_r})
    return pd.DataFrame(rows)


def _overhead_draws(o: pd.Series, n: int = STREAM_N) -> np.ndarray | None:
    """Draws of a configuration's overhead (its cost's draws over its base's fixed cost, the
    base's warm rate drawn, its first request as measured)."""
    r, b = o["_row"], o["_base"]
    c = jobs.job_cost(r, n)
    w = jobs.term_draws(b.get("est"), f"step|{b['case']}")
    if c.draws is None or w is None:
        return None
    return c.draws / (float(b.get("startup_s") or 0.0) + _first_request(b) + (n - 1) * w / b["requests"])


def _tf_dynamic(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    conf = jobs.configurations(df)
    streams = sorted(set(conf[(conf["workload"] == jobs.STREAMS) & (conf["task"] != "ddpm")]["task"]))
    sides, parts = [], []
    table = code_size.load().get("strategies", {})
    for s in streams:
        o = overheads(conf, s)
        if o.empty or "tensorflow" not in set(o["framework"]):
            continue
        best = o.sort_values("overhead", kind="stable").drop_duplicates("framework").set_index("framework")
        others = best.drop(index="tensorflow")
        if others.empty:
            continue
        tf, other = best.loc["tensorflow"], others.iloc[0]          # against the framework that pays least
        x = tf["overhead"] / other["overhead"]
        da, db = _overhead_draws(tf), _overhead_draws(other)
        verdict = None
        if da is not None and db is not None:
            lo, hi = stats.percentile_interval(da / db)
            verdict = stats.verdict(lo, hi, fam.margin)
        sides.append(Side(s, x, verdict))
        parts.append(f"{s}: {tf['configuration']} {tf['overhead']:.2f}x"
                     + _written(table, "tensorflow", tf) + f", the best other {other['configuration']} "
                     f"{other['overhead']:.2f}x" + _written(table, str(others.index[0]), other))
    if not sides:
        return Answer(NOT_RUN, "", "the dynamic workload's GPT streams did not run for TensorFlow and another "
                                   "framework in a graph or compiled mode")
    verdict, n, indicative = worse_than(sides, fam.margin)
    what = ("variable-length cost over the same work at compiled shapes (1,000 requests, each framework's best "
            "graph or compiled strategy): " + _count_text(n, "tensorflow", "the others", "streams", fam.margin)
            + "; " + "; ".join(parts))
    return Answer(verdict + (INDICATIVE if indicative else ""), what,
                  (f"fewer than {stats.MIN_TESTED} {unit(df)}: point estimates; " if indicative else "")
                  + "lines: fwbench's lines naming the strategy (workloads/code_size.py); padding (bucketed) is "
                    "framework-neutral code")


def _written(table: dict, framework: str, o: pd.Series) -> str:
    """' (input_signature: 8 lines, input_signature, tensorflow.TensorSpec)': what the strategy takes."""
    s = o["strategy"] if isinstance(o["strategy"], str) else None
    if s is None:
        return " (the default)"
    e = table.get(framework, {}).get(s)
    if not e:
        return ""
    return f" ({e['lines']} line{'s' if e['lines'] != 1 else ''}" + "".join(f", {c}" for c in e["constructs"]) + ")"


# ----------------------------------------------------------------------------- claim 5: scale

def _scale(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    cpu = not on_gpu(every)
    across = distributed.claim5(every)       # across processes: what was measured, what is modelled
    if not scaleout.has(every):
        if across is not None:
            return Answer(NOT_TESTABLE if cpu else "not tested at this scale", across.measured, across.modelled)
        return Answer(NOT_TESTABLE if cpu else NOT_RUN, "no data-parallel case in this run",
                      "thousands of GPUs are not within one machine's reach; fwbench's scale-out measures the "
                      "mechanism (fwbench run --devices, --processes-per-case)")
    t = scaleout.judged(every, fam.margin)
    eff = [float(x) for x in t["weak-scaling efficiency"] if _float(x)]
    devices = sorted({int(x) for x in t["devices"]})
    c = scaleout.communication(every)
    shares = [str(x) for x in c["exposed communication share"] if str(x) != "n/a"] if len(c) else []
    what = (f"mechanism measured on {', '.join(map(str, devices))} {'simulated CPU ' if cpu else ''}devices: weak-"
            f"scaling efficiency {min(eff):.2f}-{max(eff):.2f} over {len(eff)} configurations" if eff else
            "data parallel ran only oversubscribed: no scaling figure")
    what += (f"; exposed communication share {', '.join(shares[:3])}" if shares else "")
    model = ("model: a ring all-reduce moves 2(N-1)/N of the gradient bytes per device per step, nearly flat in N, so "
             "scaling rests on overlapping it with the backward pass and on the interconnect, neither measured here")
    if across is not None:
        what += "; " + across.measured
        model = across.modelled
    if cpu:
        return Answer(NOT_TESTABLE, what, model + "; " + scaleout.CAVEAT.split(":")[0])
    return Answer(f"not tested at this scale (up to {max(devices)} devices)", what, model)


def _float(x: object) -> bool:
    try:
        return math.isfinite(float(str(x)))
    except ValueError:
        return False


# ----------------------------------------------------------------------------- claim 6: serving

SERVING = "serving"      # the serving workload (reports.sections.serving)


def _serving(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    """Claim 6 from the serving workload's section (reports.sections.serving.claim6): per task
    and measure, the best other engine against torch's own best artefact, by the "worse than"
    rule with the family's margin; not tested without serving records."""
    return Answer(*serving.claim6(df, fam).answer())


# ----------------------------------------------------------------------------- claim 7: code size

def _tf_rigid(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame) -> Answer:
    table = code_size.load()
    models = table.get("models", {})
    ran = sorted({str(w) for w in df[df["status"].isin(TIMED)]["workload"]} & set(code_size.MODELS))
    fws = [f for f in framework_order(df["framework"]) if f in models]
    if not table or not ran or "tensorflow" not in fws or len(fws) < 2:
        return Answer(NOT_RUN, "", "no model workload ran for TensorFlow and another framework"
                      + ("" if table else " (or workloads/code_size.json is missing)"))
    sides, parts = [], []
    for m in ran:
        lines = {f: models[f][m]["lines"] for f in fws if m in models[f]}
        cons = {f: models[f][m]["constructs"] for f in fws if m in models[f]}
        for f in lines:
            if f != "tensorflow" and "tensorflow" in lines:
                sides.append(Side(f"{m} vs {f}", lines["tensorflow"] / lines[f]))
        parts.append(f"{m}: " + ", ".join(f"{f} {lines[f]} lines / {cons[f]} API names" for f in lines))
    verdict, n, _ = worse_than(sides, fam.margin)
    what = (f"TensorFlow longer in {n['claim']} of {n['total']} model x framework pairs ({n['claim_m']} beyond the "
            f"{100 * fam.margin:.0f}% margin), shorter in {n['other']}; " + "; ".join(parts))
    return Answer(verdict + PARTLY, what,
                  "fwbench's own implementations (one plan, one team), not what learning or adapting costs; API names "
                  "count module functions, not tensor methods (torch writes more as methods); lines are exact counts, "
                  "no interval")


ANSWER: dict[str, Callable[[pd.DataFrame, stats.Family, pd.DataFrame], Answer]] = {
    "compile40": _compile40, "torch_python": _torch_python, "torch_vmap": _torch_vmap, "tf_dynamic": _tf_dynamic,
    "scale": _scale, "serving": _serving, "tf_rigid": _tf_rigid}


def table(df: pd.DataFrame, fam: stats.Family, every: pd.DataFrame | None = None) -> pd.DataFrame:
    """# | claim | said by | what was measured | verdict | caveat, one row per claim (CLAIMS).
    `every`: the report's every case (scale-out's data-parallel cases included; df where None)."""
    every = df if every is None else every
    timed = df[df["status"].isin(TIMED) | (df["workload"] == "interop")]
    rows = []
    for i, c in enumerate(CLAIMS, start=1):
        ran = c.workload in ("", "*", SERVING) or (timed["workload"] == c.workload).any()
        a = ANSWER[c.key](df, fam, every) if ran else Answer(NOT_RUN, "", "its workload did not run")
        rows.append({"#": str(i), "claim": c.text, "said by": c.source, "what was measured": a.what or c.measured,
                     "verdict": a.verdict, "caveat": a.caveat})
    return pd.DataFrame(rows)


def rules(unit: str = "processes") -> list[str]:
    """The verdict rules, one per kind of claim, for the method (unit: the run's unit of replication)."""
    kinds: dict[str, list[int]] = {}
    for i, c in enumerate(CLAIMS, start=1):
        kinds.setdefault(c.kind, []).append(i)
    return [f"Claims, {kind} (claim{'s' if len(n) > 1 else ''} {', '.join(map(str, n))}): {RULES[kind]}." for kind, n
            in kinds.items()] + [
        f"A claim's verdict resting on fewer than {stats.MIN_TESTED} {unit} on a side, or on point estimates, says "
        "(indicative); one whose workload did not run reads 'not tested in this run'; the sources are as "
        "../shared/CLAIMS.md cites them: an industry article (2023) quoting Luca Antiga, Dan Shiebler and Pieter "
        "Luitjens, which gives no measurements of its own."]

"""The claims fwbench tests, answered by name (issue 28): claim | source | what was measured |
verdict | caveat, each verdict computed from this run's data by the rule written beside it
(RULES, also printed in the report's method). A claim whose workload did not run is "not
tested in this run"; one whose comparisons rest on cases of one process per side carries
"(indicative)" after its verdict.

    claim 1  "up to 40%" (PyTorch 2.0 announcement): torch.compile over torch eager on the
             model tasks, the report's paired speedups with their verdicts
    claim 2  TensorFlow awkward with variable-length sequences: per GPT stream of the dynamic
             workload, TensorFlow's cheapest configuration against the cheapest other
             framework's for 1,000 requests (analysis.jobs: cold pass, then the warm rate)
    claim 3  torch's vmap and higher-order derivatives not at JAX's level: per derivatives
             task, torch's fastest configuration against JAX's, and tasks only one of them ran
    claim 4  torch.compile works where other compilers refuse Python and reports what it
             could not optimise: per interop program, torch compiled's outcome against JAX's
             and TensorFlow's best non-eager outcome
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from reports.analysis import findings, jobs, stats
from reports.analysis.data import TIMED, finite
from reports.sections import interop

SUPPORTED, NOT_SUPPORTED, MIXED, NOT_RUN = "supported", "not supported", "mixed", "not tested in this run"
INDICATIVE = " (indicative)"

PYTORCH2 = "PyTorch 2.0 announcement, https://pytorch.org/get-started/pytorch-2.0/"
SEED = "fwbench's seed article (the comparison article this suite set out to check)"


@dataclass(frozen=True)
class Claim:
    key: str
    text: str
    source: str
    workload: str           # the workload whose cases answer it
    measured: str
    rule: str


CLAIMS = (
    Claim("compile40", "torch.compile makes training and inference \"up to 40%\" faster than eager", PYTORCH2, "",
          "torch compiled over torch eager per model task (paired speedup, its verdict)",
          "supported where a task reaches 1.4x with its whole interval and no task is slower than eager by the "
          "verdicts; not supported where no task's interval reaches 1.4x; mixed otherwise"),
    Claim("tf_dynamic", "TensorFlow's static graphs make variable-length sequences awkward", SEED, "dynamic",
          "per GPT stream, the cost of 1,000 requests of TensorFlow's cheapest configuration against the cheapest "
          "other framework's (cold pass, then the warm rate; eager included)",
          "supported where TensorFlow's cost interval lies above the cheapest other framework's on every stream; "
          "not supported where it does on none; mixed otherwise"),
    Claim("torch_vmap", "torch's vmap and higher-order derivatives are not at JAX's level", SEED, "derivatives",
          "per derivatives task, torch's fastest configuration (transform x mode) against JAX's, and the tasks "
          "only one of them ran",
          "supported where JAX is faster (intervals apart) or alone to run on every task; not supported where it is "
          "on none; mixed otherwise"),
    Claim("torch_python", "torch.compile keeps working where other compilers refuse Python code, reporting what it "
          "could not optimise", SEED, "interop",
          "per Python-interop program, torch compiled's outcome (compiled, graph breaks, wrong, refused) against "
          "JAX's and TensorFlow's best non-eager outcome",
          "supported where torch runs correctly (compiled, or graph breaks it reports) every program another "
          "compiler refuses and none silently wrong; not supported where it runs fewer programs than another; "
          "mixed otherwise"),
)


def _combine(wins: int, total: int) -> str:
    return SUPPORTED if wins == total else NOT_SUPPORTED if wins == 0 else MIXED


def _compile40(df: pd.DataFrame, fam: stats.Family) -> tuple[str, str, str]:
    t = jobs.configurations(df)
    c = t[(t["framework"] == findings.CLAIM_FRAMEWORK) & (t["mode"] == "compiled") & t["strategy"].isna()
          & ~t["workload"].isin(jobs.COUNTED_IN_UNITS + (jobs.STREAMS,))]
    js = [j for j in (findings.speedup_judgement(df, r, fam) for _, r in c.iterrows()) if j is not None]
    if not js:
        return NOT_RUN, "", "no torch compiled model task with its eager case"
    untested = all(j.verdict == stats.NOT_TESTED for j in js)
    sp = [j.speed() for j in js]
    if untested:        # point estimates only
        reach, slower = sum(x >= findings.CLAIM for x, _, _ in sp), 0
        below = all(x < findings.CLAIM for x, _, _ in sp)
    else:
        reach = sum(j.decided and lo >= findings.CLAIM for j, (_, lo, _) in zip(js, sp))
        slower = sum(stats.coarse(j.verdict) == stats.SLOWER for j in js)
        below = all(finite(hi) and hi < findings.CLAIM for _, _, hi in sp)
    verdict = NOT_SUPPORTED if below else SUPPORTED if reach and not slower else MIXED
    xs = [x for x, _, _ in sp]
    what = (f"{min(xs):.2f}-{max(xs):.2f}x over {len(js)} tasks; {reach} reach 1.4x with the whole interval"
            + (f"; {slower} slower than eager" if slower else ""))
    return verdict + (INDICATIVE if untested else ""), what, ("CPU, small models; torch.compile compiles the model, "
                                                              "the fused AdamW runs eagerly (Method)")


def _apart(a: pd.Series, b: pd.Series) -> str | None:
    """'a' or 'b' when one's cost interval lies wholly below the other's, 'tie' when they
    overlap, None without intervals (then the point estimates decide, indicative)."""
    if not all(finite(x) for x in (a["lo"], a["hi"], b["lo"], b["hi"])):
        return None
    return "a" if a["hi"] < b["lo"] else "b" if b["hi"] < a["lo"] else "tie"


def _tf_dynamic(df: pd.DataFrame, fam: stats.Family) -> tuple[str, str, str]:
    conf = jobs.configurations(df)
    streams = sorted(set(conf[(conf["workload"] == jobs.STREAMS) & (conf["task"] != "ddpm")]["task"]))
    wins = total = 0
    indicative = False
    parts = []
    for s in streams:
        o = jobs.outcome(conf, jobs.Job(s, jobs.STREAM_REQUESTS, jobs.STREAMS))
        b = o.best.set_index("framework")
        others = b.drop(index="tensorflow", errors="ignore")
        if "tensorflow" not in b.index or others.empty:
            continue
        tf, other = b.loc["tensorflow"], others.iloc[0]
        side = _apart(tf, other)
        if side is None:
            indicative = True
            side = "b" if tf["cost"] > other["cost"] else "a"
        total += 1
        wins += side == "b"
        parts.append(f"{s}: tensorflow {stats.fmt_seconds(tf['cost'])} ({tf['configuration']}) vs "
                     f"{other['configuration']} {stats.fmt_seconds(other['cost'])}")
    if not total:
        return NOT_RUN, "", "the dynamic workload's GPT streams did not run for TensorFlow and another framework"
    return (_combine(wins, total) + (INDICATIVE if indicative else ""),
            f"TensorFlow dearer on {wins} of {total} streams: " + "; ".join(parts),
            "a stream's cold pass is its processes' range; TensorFlow's input_signature strategy traces once")


def _torch_vmap(df: pd.DataFrame, fam: stats.Family) -> tuple[str, str, str]:
    conf = jobs.configurations(df)
    d = df[df["workload"] == "derivatives"]
    t = conf[conf["workload"] == "derivatives"]
    wins = total = 0
    indicative = False
    for task in sorted(set(d["task"])):
        g = t[t["task"] == task].sort_values("median_s").drop_duplicates("framework").set_index("framework")
        ran = {f for f in ("torch", "jax") if f in g.index}
        tried = set(d[(d["task"] == task)]["framework"])
        if not {"torch", "jax"} <= tried or not ran:
            continue
        total += 1
        if ran == {"jax"}:
            wins += 1
            continue
        if ran == {"torch"}:
            continue
        a, b = g.loc["torch"], g.loc["jax"]
        ok = all(finite(x) for x in (a["median_lo_s"], a["median_hi_s"], b["median_lo_s"], b["median_hi_s"])) and \
            min(a["n_processes"], b["n_processes"]) >= 2
        if not ok:
            indicative = True
            wins += a["median_s"] > b["median_s"]
        else:
            wins += a["median_lo_s"] > b["median_hi_s"]
    if not total:
        return NOT_RUN, "", "the derivatives workload did not run for torch and JAX"
    return (_combine(wins, total) + (INDICATIVE if indicative else ""),
            f"JAX faster or alone to run on {wins} of {total} tasks (each framework's fastest transform and mode)",
            "one process per case: point estimates" if indicative else "")


def _torch_python(df: pd.DataFrame, fam: stats.Family) -> tuple[str, str, str]:
    d = df[(df["workload"] == "interop") & (df["mode"] != "eager")]
    if d.empty or "torch" not in set(d["framework"]):
        return NOT_RUN, "", "the interop workload did not run for torch"
    d = d[d["strategy"].isna() | (d["strategy"] == "default")]
    good = ("compiled", "graph_breaks")
    rank = {"compiled": 0, "graph_breaks": 1, "refused": 2, "wrong": 3}
    runs: dict[str, int] = {}
    refused_elsewhere = torch_ok_there = wrong = 0
    for _, g in d.groupby("task"):
        best = {f: min((interop.outcome(r) for _, r in h.iterrows()), key=lambda o: rank.get(o, 9))
                for f, h in g.groupby("framework")}
        for f, o in best.items():
            runs[f] = runs.get(f, 0) + (o in good)
        t = g[g["framework"] == "torch"]
        to = min((interop.outcome(r) for _, r in t[t["mode"] == "compiled"].iterrows()), key=lambda o: rank.get(o, 9),
                 default=None)
        wrong += to == "wrong"
        if any(o == "refused" for f, o in best.items() if f != "torch"):
            refused_elsewhere += 1
            torch_ok_there += to in good
    mine = runs.get("torch", 0)
    if any(v > mine for f, v in runs.items() if f != "torch"):
        verdict = NOT_SUPPORTED
    elif torch_ok_there == refused_elsewhere and not wrong:
        verdict = SUPPORTED
    else:
        verdict = MIXED
    return (verdict, "programs run correctly by the best non-eager mode: "
            + ", ".join(f"{f} {v}" for f, v in runs.items()) + f"; torch compiled runs {torch_ok_there} of the "
            f"{refused_elsewhere} another compiler refuses" + (f"; {wrong} silently wrong" if wrong else ""),
            "graph breaks run the Python eagerly between graphs; idiomatic rewrites are scored apart")


ANSWER = {"compile40": _compile40, "tf_dynamic": _tf_dynamic, "torch_vmap": _torch_vmap,
          "torch_python": _torch_python}


def table(df: pd.DataFrame, fam: stats.Family) -> pd.DataFrame:
    """claim | source | what was measured | verdict | caveat, one row per claim (CLAIMS)."""
    timed = df[df["status"].isin(TIMED) | (df["workload"] == "interop")]
    rows = []
    for c in CLAIMS:
        ran = c.workload == "" or (timed["workload"] == c.workload).any()
        verdict, what, caveat = ANSWER[c.key](df, fam) if ran else (NOT_RUN, "", "")
        rows.append({"claim": c.text, "source": c.source, "what was measured": what or c.measured,
                     "verdict": verdict,
                     "caveat": caveat or ("its workload did not run" if verdict == NOT_RUN else "")})
    return pd.DataFrame(rows)


def rules() -> list[str]:
    """The verdict rules, for the method."""
    return [f"Claim \"{c.text}\" ({c.source}): measured as {c.measured}; {c.rule}." for c in CLAIMS]

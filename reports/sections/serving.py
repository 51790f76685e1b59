"""The judging half of the serving section (workloads/serving.py): each framework's deployable
inference artefact, loaded by a process without the model code, against its development path,
and ONNX Runtime as the other engine. Claim 6 of the claims fwbench tests ("PyTorch is
excellent for development, but production inference is best run in a different framework or
engine") is answered by claim6(), which the claims table reads.

    drawing   reports.rendering.sections.serving: the export matrix, the serving table, the
              latency percentiles figure, claim 6's table (the judging half draws nothing)
    findings  per framework and task: its best artefact against its best development path
              (latency p50 at batch 1, best offline throughput), ONNX Runtime against the best
              artefact, and the export matrix's count
    summary   claim 6's verdict in one sentence

A case's path is its record's serve_kind (development, artefact, other engine). Ratios of
per-process scalars (latency percentiles, throughput, cold start) are judged over processes
in the report's family (reports.measures.verdicts: one comparison wherever it is stated).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from reports.measures import stats
from reports.measures.data import TIMED, finite, framework_order
from reports.measures.verdicts import name, proc_est, procs
from reports.sections.common import Lacking, Section

DEVELOPMENT, ARTEFACT, OTHER_ENGINE = "development", "artefact", "other engine"
# the claims table's words (reports.conclusions.claims)
SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE, NOT_RUN = "supported", "not supported", "inconclusive", "not tested in this run"
INDICATIVE = " (indicative)"
CLAIM_FRAMEWORK = "torch"
# (field, words, higher is better): the two measures claim 6 is judged on, per task
MEASURES = (("latency_p50_s", "latency p50 at batch 1", False), ("serve_throughput", "best offline throughput", True))
PER_PROCESS = ("cold_start_s", "latency_p50_s", "latency_p90_s", "latency_p99_s", "serve_throughput",
               "serve_rss_bytes")
RULE = ("per task and measure (latency p50 at batch 1; best offline throughput), the best other engine (ONNX "
        "Runtime on the framework's ONNX export, or another framework's deployable artefact or ONNX path of the same "
        "model) against the framework's own best artefact: the claim's way where the other engine is faster by at "
        "least the margin, the other way where the framework's artefact is as fast or faster (its verdict "
        "equivalent, or faster), undecided otherwise; point estimates where a side has fewer than 3 processes (the "
        "claim's way beyond the margin, else the other way; indicative); supported where more than half the "
        "comparisons go the claim's way, not supported where more than half go the other way, inconclusive "
        "otherwise")
# an own-against-other verdict from the other-against-own one (reports.conclusions.claims' Side reads the former)
FLIPPED = {stats.FASTER_M: stats.SLOWER_M, stats.FASTER: stats.SLOWER, stats.SLOWER: stats.FASTER,
           stats.SLOWER_M: stats.FASTER_M}


def kind(r: pd.Series) -> str:
    """A case's path: its record's serve_kind, else from its strategy (none: development;
    onnx: the other engine; any other: an artefact)."""
    k = r.get("serve_kind")
    if isinstance(k, str):
        return k
    s = r.get("strategy")
    return DEVELOPMENT if not isinstance(s, str) else OTHER_ENGINE if s == "onnx" else ARTEFACT


def served(d: pd.DataFrame) -> pd.DataFrame:
    """The cases that served (timed, with a latency in a process the report keeps: a case timed
    only on a busy machine decides nothing, reports.conclusions.replicates)."""
    if d.empty or "latency_p50_s" not in d.columns:
        return d.iloc[:0]
    kept = [r["status"] in TIMED and r.get("busy") is not True and bool(procs(r, "latency_p50_s"))
            for _, r in d.iterrows()]
    return d[kept]


def best(g: pd.DataFrame, fld: str, higher: bool) -> pd.Series | None:
    """The case of `g` best at `fld` (its value over processes), None when none has it."""
    g = g[g[fld].map(finite)] if fld in g.columns else g.iloc[:0]
    if g.empty:
        return None
    return g.loc[g[fld].idxmax() if higher else g[fld].idxmin()]


def judge(a: pd.Series, b: pd.Series, fld: str, higher: bool, fam: stats.Family) -> stats.Judgement:
    """a against b at a per-process scalar, as a time ratio a/b (a throughput is inverted: the
    time per item), over processes, in the report's family."""
    ea, eb = proc_est(a, fld), proc_est(b, fld)
    if higher:
        ea = stats.Est.of({k: 1.0 / v for k, v in procs(a, fld).items() if v > 0})
        eb = stats.Est.of({k: 1.0 / v for k, v in procs(b, fld).items() if v > 0})
    return fam.judge(f"serving|{fld}|{a['case']}|{b['case']}", ea, eb, (a["case"], b["case"]))


def _speed(j: stats.Judgement) -> tuple[float, float, float]:
    return j.speed() if j.verdict != stats.NOT_TESTED else (1.0 / j.ratio, math.nan, math.nan)


@dataclass(frozen=True)
class Claim6:
    """Claim 6's answer (claim6): the verdict (supported, not supported, inconclusive, not tested
    in this run; "(indicative)" after it where a comparison rests on fewer than 3 processes),
    what was measured in words, a caveat, the device and sizes, `table` (a row per framework and
    task: see claim6) and `sides`: per comparison of the claim's framework, (label, x, verdict)
    as reports.conclusions.claims' Side takes them: x = its best artefact's time over the other
    engine's (above 1 the claim's way), verdict that of its artefact against the other engine
    (stats' verdict key; None for point estimates)."""
    verdict: str
    what: str
    caveat: str
    device: str = ""
    sizes: str = ""
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    sides: tuple[tuple[str, float, str | None], ...] = ()

    def answer(self) -> tuple[str, str, str]:
        """(verdict, what was measured, caveat): a row of reports.conclusions.claims' table."""
        return self.verdict, self.what, self.caveat


@dataclass(frozen=True)
class Compared:
    """One comparison of two served cases at one measure (a time ratio first/second)."""
    framework: str
    task: str
    fld: str
    words: str
    label: str               # artefact/development, onnxruntime/artefact, other/artefact
    first: pd.Series
    second: pd.Series
    j: stats.Judgement


def compared(d: pd.DataFrame, fam: stats.Family) -> tuple[list[dict[str, object]], list[Compared]]:
    """Per framework and task of the served cases `d`: a row of the pieces (claim6's table) and
    the comparisons, judged in the family."""
    rows, out = [], []
    kinds = d.apply(kind, axis=1)
    for (fw, task), g in d.groupby(["framework", "task"], sort=False):
        k = kinds.loc[g.index]
        others = d[(d["task"] == task) & (((d["framework"] == fw) & (kinds == OTHER_ENGINE))
                                          | ((d["framework"] != fw) & (kinds != DEVELOPMENT)))]
        row: dict[str, object] = {"framework": fw, "task": task, "device": ", ".join(sorted(set(g["device"]))),
                                  "preset": ", ".join(sorted(set(g["preset"]))),
                                  "shape": ", ".join(sorted(set(g["shape"])))}
        for fld, words, higher in MEASURES:
            dev, art = best(g[k == DEVELOPMENT], fld, higher), best(g[k == ARTEFACT], fld, higher)
            ort, other = best(g[k == OTHER_ENGINE], fld, higher), best(others, fld, higher)
            for label, r in (("development", dev), ("artefact", art), ("onnxruntime", ort), ("other", other)):
                row[f"{label} {fld}"] = name(r) if r is not None else None
                row[f"{label} {fld} value"] = float(r[fld]) if r is not None else math.nan
            for label, a, b in (("artefact/development", art, dev), ("onnxruntime/artefact", ort, art),
                                ("other/artefact", other, art)):
                if a is None or b is None:
                    continue
                j = judge(a, b, fld, higher, fam)
                s, lo, hi = _speed(j)
                row.update({f"{label} {fld} speed": s, f"{label} {fld} lo": lo, f"{label} {fld} hi": hi,
                            f"{label} {fld} verdict": stats.words(j.verdict, fam.margin)})
                out.append(Compared(fw, task, fld, words, label, a, b, j))
        rows.append(row)
    return rows, out


def _side(verdict: str, speed: float, margin: float) -> str:
    """Which way one comparison of the other engine with the artefact goes: 'claim' (the other
    engine faster by the margin), 'other' (the artefact as fast or faster) or 'open'; without a
    test (a side of fewer than 3 processes) the point estimate decides."""
    if verdict == stats.NOT_TESTED:
        return "claim" if speed > 1.0 + margin else "other"
    return ("claim" if verdict == stats.FASTER_M else
            "other" if verdict in (stats.EQUIVALENT, stats.SLOWER, stats.SLOWER_M) else "open")


def claim6(df: pd.DataFrame, fam: stats.Family, framework: str = CLAIM_FRAMEWORK) -> Claim6:
    """Claim 6, "PyTorch is excellent for development, but production inference is best run in
    a different framework or engine" (Luitjens), from the serving workload's cases (rows of
    reports.conclusions.replicates.cases; other workloads' rows are ignored).

    Pieces (`table`, a row per framework and task): the framework's best development path, its
    best artefact (its own deployable export) and its ONNX export in ONNX Runtime, each as
    "<framework> <mode> (<strategy>)" and its value (columns "<piece> <measure>" and
    "<piece> <measure> value", measure latency_p50_s or serve_throughput, values over
    processes); the best other engine per measure (piece "other": the framework's ONNX Runtime
    path or another framework's artefact or ONNX path of the same model); and the ratios as
    speeds (> 1: the first is faster; columns "<a>/<b> <measure> speed|lo|hi|verdict") with
    their intervals over processes at the family's level and the verdict against the report's
    margin in words: artefact/development, onnxruntime/artefact, other/artefact. Device,
    preset and shape are columns too.

    Verdict, for `framework` (the claim's, torch), by RULE (the claims table's "worse than" kind,
    with the issue's margin): per task and measure, the best other engine against the framework's
    own best artefact; the claim's way where the other engine is faster by at least the margin,
    the other way where the artefact is as fast (equivalent) or faster, undecided otherwise
    (point estimates where a side has fewer than 3 processes: the claim's way beyond the margin,
    else the other way; "(indicative)"); supported where more than half go the claim's way, not
    supported where more than half go the other way, inconclusive otherwise; "not tested in this
    run" without the framework's artefacts or another engine's cases. `what` counts the sides and
    names every comparison with its speed and interval, the device and sizes."""
    d = served(df[df["workload"] == "serving"]) if "workload" in df.columns else df.iloc[:0]
    if d.empty or framework not in set(d["framework"]):
        return Claim6(NOT_RUN, "", f"the serving workload did not serve {framework}'s model")
    rows, comps = compared(d, fam)
    table = pd.DataFrame(rows)
    mine = d[d["framework"] == framework]
    device = ", ".join(sorted(set(mine["device"])))
    sizes = ", ".join(f"{t} {s} ({p})" for (t, s, p), _ in mine.groupby(["task", "shape", "preset"], sort=True))
    n = {"claim": 0, "other": 0, "open": 0}
    indicative = False
    parts, sides = [], []
    for c in comps:
        if c.framework != framework or c.label != "other/artefact":
            continue
        s, lo, hi = _speed(c.j)
        indicative = indicative or c.j.verdict == stats.NOT_TESTED
        n[_side(c.j.verdict, s, fam.margin)] += 1
        sides.append((f"{c.task} {c.words}", s, FLIPPED.get(c.j.verdict, c.j.verdict)
                      if c.j.verdict != stats.NOT_TESTED else None))
        parts.append(f"{c.task} {c.words}: {name(c.first)} against {name(c.second)}, " + c.j.interval_text())
    total = sum(n.values())
    if not total:
        return Claim6(NOT_RUN, "", f"no artefact of {framework} and another engine's case served the same task",
                      device, sizes, table)
    verdict = SUPPORTED if 2 * n["claim"] > total else NOT_SUPPORTED if 2 * n["other"] > total else INCONCLUSIVE
    what = (f"another engine faster than {framework}'s best artefact by at least the {100 * fam.margin:.0f}% margin "
            f"in {n['claim']} of {total} comparisons, {framework}'s artefact as fast or faster in {n['other']}"
            + (f", {n['open']} undecided" if n["open"] else "") + f", on {device} ({sizes}): " + "; ".join(parts))
    caveat = ("one process per case: point estimates" if indicative else
              "CPU serving only; ONNX Runtime's CPU provider at the framework's thread count")
    return Claim6(verdict + (INDICATIVE if indicative else ""), what, caveat, device, sizes, table, tuple(sides))


# ----------------------------------------------------------------------------- findings

def findings(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """Per framework: the export matrix's count; per framework, task and measure: its best
    artefact against its best development path, and ONNX Runtime against its best artefact."""
    out = []
    for fw in framework_order(d["framework"]):
        arts = d[(d["framework"] == fw) & (d.apply(kind, axis=1) != DEVELOPMENT)]
        n_ok, refused = int(arts["status"].isin(TIMED).sum()), int((arts["status"] == "unsupported").sum())
        failed = int((arts["status"] == "failed").sum())
        out.append(f"{fw}: {n_ok} of {len(arts)} artefact cases (path x task) exported, loaded without the model "
                   "code and served" + (f"; {refused} refused by the exporter" if refused else "")
                   + (f"; {failed} failed (load or check)" if failed else "") + ".")
    ran = served(d)
    if ran.empty:
        return out
    for c in compared(ran, fam)[1]:
        if c.label == "other/artefact":
            continue
        out.append(f"{c.task}, {c.words}: " + stats.sentence(c.j, name(c.first), name(c.second), fam.margin,
                                                              flags=fam.key_flags.get(c.j.key, ())) + ".")
    return out


def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """Claim 6's verdict in one sentence."""
    c = claim6(d, fam)
    if c.verdict == NOT_RUN:
        return []
    return [f"Serving (claim 6, production inference best in another engine): {c.verdict} for "
            f"{CLAIM_FRAMEWORK}; {c.what}."]


SECTION = Section(
    name="serving",
    workload="serving",
    findings=findings,
    no_findings="No serving records.",
    summary=summary,
    per_process=PER_PROCESS,
    series=("serve_cold_request_s",),
)

"""The judging half of the interop section (workloads/interop.py): programs that mix tensors
with plain Python (print, branches on values, numpy calls, ...) under each framework's
compiler.

    drawing  reports.rendering.sections.interop: its tables and figures (the judging half
             here imports nothing that draws)
    findings per framework and accelerated mode, the outcomes' counts (no comparison of times:
             the Findings section compares those, generic_findings)
    score    "Python interop": per program, the framework's best accelerated mode's outcome
             (INTEROP_SCORE), a rewrite at REWRITE_CREDIT; the mean over programs
"""
from __future__ import annotations

import math

import pandas as pd

from reports.measures import stats
from reports.measures.bullets import Finding
from reports.measures.data import TIMED, finite, framework_order
from reports.sections.common import Lacking, Section, has_mode

# interop outcomes (workloads/interop.py) and the status each is recorded with; records
# without interop_outcome are read through this table backwards
OUTCOME_OF_STATUS = {"ok": "compiled", "fallback": "graph_breaks", "failed": "wrong", "unsupported": "refused"}


def outcome(r: pd.Series) -> str:
    o = r.get("interop_outcome")
    return o if isinstance(o, str) else OUTCOME_OF_STATUS.get(r["status"], r["status"])


IDIOMATIC = "idiomatic"     # workloads.interop's strategy: the framework's own rewrite of a program


def as_written(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["strategy"].isna()] if "strategy" in d.columns else d


def rewritten_cases(d: pd.DataFrame) -> pd.DataFrame:
    return d[d["strategy"] == IDIOMATIC] if "strategy" in d.columns else d.iloc[:0]


INTEROP_SCORE = {"compiled": 1.0, "graph_breaks": 0.5, "refused": 0.5, "wrong": 0.0}
REWRITE_CREDIT = 0.75      # a program that compiles only once rewritten, in the framework's idiom


def score(d: pd.DataFrame, fws: list[str], lacking: Lacking = frozenset()) -> dict[str, float]:
    """Per program, the framework's best accelerated mode scores INTEROP_SCORE of its outcome
    as written: compiled whole and correct 1, but 0.5 when its call is slower than the same
    framework's eager call (a compile that does not pay is no success); graph breaks
    (correct, partly in Python) 0.5; refused with an error 0.5 (you learn at once and
    rewrite); wrong, silently, 0. Where the framework's idiomatic rewrite (strategy
    `idiomatic`) scores more, it counts at REWRITE_CREDIT of its own score (compiled whole
    after a rewrite 0.75: the program had to change). The mean over the programs."""
    c = d[(d["mode"] != "eager") & has_mode(d, lacking)]
    if c.empty:
        return {}
    eager = as_written(d[(d["mode"] == "eager") & d["status"].isin(TIMED)]).set_index(
        ["framework", "task"])["median_s"]

    def program(r: pd.Series) -> float:
        o = outcome(r)
        x = INTEROP_SCORE.get(o, 0.0)
        e = eager.get((r["framework"], r["task"]))
        if o == "compiled" and finite(e) and finite(r.get("median_s")) and r["median_s"] > e:
            x = 0.5
        return x * (REWRITE_CREDIT if r.get("strategy") == IDIOMATIC else 1.0)
    s = c.assign(score=[program(r) for _, r in c.iterrows()])
    best = s.groupby(["framework", "task"])["score"].max()
    programs = c["task"].nunique()
    return {f: float(best.loc[f].sum()) / programs if f in best.index.get_level_values(0) else math.nan for f in fws}


def _span(x: pd.Series) -> str:
    lo, hi = int(x.min()), int(x.max())
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def findings(d: pd.DataFrame, fam: stats.Family | None = None, lacking: Lacking = frozenset()) -> list[str]:
    """Per framework and accelerated mode: the programs' outcomes as written, and how many
    idiomatic rewrites compile whole and correct (counts, no comparison: `fam` is unused)."""
    c = d[(d["mode"] != "eager") & has_mode(d, lacking)]
    out = []
    w, rw = as_written(c), rewritten_cases(c)
    for (f, m), g in w.groupby(["framework", "mode"], sort=False):
        n = g.assign(o=[outcome(r) for _, r in g.iterrows()])["o"].value_counts()
        n = n.reindex(sorted(n.index, key=lambda o: (list(INTEROP_SCORE).index(o) if o in INTEROP_SCORE else 9, o)))
        line = f"{f} {m}: of {len(g)} programs as written, " + ", ".join(f"{v} {k}" for k, v in n.items())
        h = rw[(rw["framework"] == f) & (rw["mode"] == m)]
        if not h.empty:
            ok = h[[outcome(r) == "compiled" for _, r in h.iterrows()]]
            lines = ok["rewrite_lines"].dropna() if "rewrite_lines" in ok.columns else pd.Series(dtype=float)
            line += (f"; of {len(h)} idiomatic rewrites, {len(ok)} compile whole and correct"
                     + (f" ({_span(lines)} line{'' if lines.max() == 1 else 's'} changed)" if len(lines) else ""))
        out.append(line + ".")
    return out


# ----------------------------------------------------------------------------- summary

def summary(d: pd.DataFrame, fam: stats.Family, lacking: Lacking = frozenset()) -> list[str]:
    """The Summary's sentence: per framework, the outcomes of the programs as written under
    its best accelerated mode (not a mode it lacks), and those compiled once rewritten."""
    c = d[(d["mode"] != "eager") & has_mode(d, lacking)]
    per: list[str] = []
    rows: list[tuple[str, str]] = []
    for f in framework_order(c["framework"]):
        g = c[c["framework"] == f]
        written, rw = _best_outcomes(as_written(g)), rewritten_cases(g)
        text = f"{f} " + ", ".join(f"{n} {k}" for k, n in written.value_counts().items())
        fixed = [t for t, o in _best_outcomes(rw).items() if o == "compiled" and written.get(t) != "compiled"]
        if fixed:
            n = sorted({int(v) for v in rw.loc[rw["task"].isin(fixed), "rewrite_lines"] if finite(v)}
                       if "rewrite_lines" in rw.columns else ())
            rows.append((f, f"{len(fixed)} more compiled once rewritten in its own idiom"
                         + (f", {_span(pd.Series(n))} line{'' if n[-1] == 1 else 's'} each" if n else "")))
        per.append(text)
    return [Finding(f"Python interop, {d['task'].nunique()} programs as written under each framework's best "
                    "accelerated mode: " + "; ".join(per) + (" (rewrites in the table)." if rows else "."),
                    "Python interop: rewritten", rows)]


def _best_outcomes(g: pd.DataFrame) -> pd.Series:
    """Per program (task), the best interop outcome over the rows (compiled before graph
    breaks, refused, wrong)."""
    order = ("compiled", "graph_breaks", "refused", "wrong")
    if g.empty:
        return pd.Series(dtype=object)
    o = [outcome(r) for _, r in g.iterrows()]
    ranked = g.assign(o=o, rank=[order.index(x) if x in order else 9 for x in o]).sort_values("rank", kind="stable")
    return ranked.groupby("task", sort=True)["o"].first()


# ----------------------------------------------------------------------------- registration


SECTION = Section(
    name="interop",
    workload="interop",
    findings=findings,
    no_findings="No non-eager interop records.",
    concern="interop",
    concern_label="Python interop",
    score=score,
    scoring=("Python interop (weight name interop): per program, the outcome of the framework's best accelerated "
             "mode: compiled whole 1 (0.5 when its call is slower than eager's: a compile that does not pay), "
             "graph breaks 0.5, refused 0.5 (an error at once), wrong 0 (a silent wrong result), each as written; "
             "where the framework's idiomatic rewrite scores more, it counts at 0.75 of its own score (compiled "
             "after a rewrite 0.75: the program had to change); the mean over programs."),
    summary=summary,
    generic_findings=True,
)

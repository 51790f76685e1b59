"""One rule for each comparison of two cases that the report words, so the same two cases
are one comparison (one key of the report's stats.Family) wherever it is stated: the
Findings, the Summary and the workload sections (reports.sections) all judge through here.

    judge(a, b, fam)                         case a's steady step against case b's
    versus(a, b, what, fam)                  that verdict in words: "what: jax compiled is faster
                                             than torch compiled by at least the 10% margin (...)"
    judge_scalar(a, b, field, what, fam)     a per-process scalar of a (stream_cold_s,
                                             peak_memory_bytes, ...) against b's, over processes
    name(r)                                  a case as a verdict names it: "jax compiled (strategy)"
    fastest_per_framework(g), pairs(best)    each framework's fastest case, and every pair of them
                                             (the comparisons between frameworks a reader asks for)

Cases are rows of replicates.cases: `est` holds a case's steady step over its processes,
`procs_<field>` every process's value of a per-process scalar.
"""
from __future__ import annotations

import pandas as pd

from reports.measures import stats
from reports.measures.data import finite


def name(r: pd.Series) -> str:
    return f"{r['framework']} {r['mode']}" + (f" ({r['strategy']})" if isinstance(r["strategy"], str) else "")


def fastest_per_framework(g: pd.DataFrame, col: str = "median_s") -> pd.DataFrame:
    """Each framework's fastest case of g by `col` (any mode and strategy), fastest first."""
    return g[g[col].notna()].sort_values(col, kind="stable").drop_duplicates("framework")


def pairs(best: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """Every pair of rows of `best` (fastest first), the faster first: the comparisons a reader
    asks for between frameworks, each a member of the report's family."""
    rows = [r for _, r in best.iterrows()]
    return [(rows[i], rows[j]) for i in range(len(rows)) for j in range(i + 1, len(rows))]


def judge(a: pd.Series, b: pd.Series, fam: stats.Family) -> stats.Judgement:
    """Case a's time against case b's (steady state), by the family: the same two cases are
    one comparison wherever the report states it."""
    return fam.judge(f"step|{a['case']}|{b['case']}", a["est"], b["est"], (a["case"], b["case"]))


def versus(a: pd.Series, b: pd.Series, what: str, fam: stats.Family) -> str:
    """'what: jax compiled is faster than torch compiled by at least the 10% margin (speed
    1.31x [1.20, 1.43], 99.8% interval)', or another verdict (stats.sentence)."""
    j = judge(a, b, fam)
    return f"{what}: " + stats.sentence(j, name(a), name(b), fam.margin, flags=fam.key_flags.get(j.key, ()))


def procs(r: pd.Series, field: str) -> dict[str, float]:
    """{process: value} of a per-process scalar (the sections' per_process fields)."""
    v = r.get(f"procs_{field}")
    if isinstance(v, dict):
        return v
    x = r.get(field)
    return {str(r.get("run_file")): float(x)} if finite(x) else {}


def proc_est(r: pd.Series, field: str) -> stats.Est:
    return stats.Est.of(procs(r, field))


def judge_scalar(a: pd.Series, b: pd.Series, field: str, what: str, fam: stats.Family) -> stats.Judgement:
    """a's per-process scalar `field` against b's, by the report's family."""
    return fam.judge(f"{what}|{field}|{a['case']}|{b['case']}", proc_est(a, field), proc_est(b, field),
                     (a["case"], b["case"]))

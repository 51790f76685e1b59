"""`fwbench compare OLD NEW`: what got faster or slower between two sets of results.

Cases are matched on the record's identifying fields (workload.record.CASE_KEYS: workload,
task, framework, mode, strategy, preset, device); each side's processes of a case are pooled
first (replicates.cases: steady state from warm processes), as in the report. For
each case timed in both:

    ratio = time_new / time_old          (above 1: the new run is slower)

with Welch's t interval over the two sides' processes (stats.ratio). The verdicts are the
report's (stats.verdict against --margin, default 10%): slower or faster by at least the
margin, slower or faster, equivalent within the margin, inconclusive, or "not tested (one
process)" where a side has a single process. All matched cases form one stats.Family, so
the chance of any false "faster"/"slower" in the table is held at 5% (Holm); each interval
is at the level of its Holm step. The process is the unit: the drift between two runs of the
same code on a shared machine is process-to-process variation, which the intervals include.
Cases timed in only one of the two, or whose status changed, are listed as such.
"""
from __future__ import annotations

import math
import os
from typing import Iterable

import pandas as pd

from reports.conclusions import replicates
from reports.measures import stats
from reports.measures.data import TIMED, load

Paths = Iterable[str | os.PathLike] | str | os.PathLike
COLUMNS = ["case", "old_median_s", "new_median_s", "ratio", "ratio_lo", "ratio_hi", "level", "verdict"]


def compare(old: Paths, new: Paths, margin: float = stats.MARGIN) -> pd.DataFrame:
    """One row per case: times, ratio new/old with its interval and level, verdict.
    `attrs["problems"]` collects the input problems of both sides, `attrs["margin"]` the
    margin, `attrs["comparisons"]` how many comparisons share the error rate."""
    a, b = load(old), load(new)
    problems = [f"OLD {p}" for p in a.attrs["problems"]] + [f"NEW {p}" for p in b.attrs["problems"]]
    a, b = replicates.cases(a, salt="old|"), replicates.cases(b, salt="new|")
    a, b = a.set_index("case"), b.set_index("case")
    both = [c for c in a.index if c in b.index and _timed(a.loc[c]) and _timed(b.loc[c])]
    fam = stats.Family(margin=margin)
    for _ in range(2):
        for c in both:
            fam.judge(c, b.loc[c, "est"], a.loc[c, "est"])
        if not fam.closed:
            fam.close()
    rows = []
    for case in list(a.index) + [c for c in b.index if c not in a.index]:
        ra, rb = (a.loc[case] if case in a.index else None), (b.loc[case] if case in b.index else None)
        row = {"case": case, "old_median_s": math.nan, "new_median_s": math.nan, "ratio": math.nan,
               "ratio_lo": math.nan, "ratio_hi": math.nan, "level": math.nan}
        if ra is not None and _timed(ra):
            row["old_median_s"] = ra["median_s"]
        if rb is not None and _timed(rb):
            row["new_median_s"] = rb["median_s"]
        if case in both:
            j = fam.judged[case]
            row.update(ratio=j.ratio, ratio_lo=j.lo, ratio_hi=j.hi, level=j.level if math.isfinite(j.lo) else math.nan,
                       verdict=stats.words(j.verdict, margin))
        elif ra is None:
            row["verdict"] = f"only in NEW ({rb['status']})"
        elif rb is None:
            row["verdict"] = f"only in OLD ({ra['status']})"
        else:
            row["verdict"] = f"status {ra['status']} -> {rb['status']}" if ra["status"] != rb["status"] \
                else f"not timed in either ({ra['status']})"
        rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs["problems"] = problems
    out.attrs["margin"] = margin
    out.attrs["comparisons"] = fam.m
    out.attrs["records"] = {"OLD": len(a), "NEW": len(b)}     # readable records on each side
    return out


def _timed(r: pd.Series) -> bool:
    return r["status"] in TIMED and not math.isnan(r["median_s"])


def slower(t: pd.DataFrame) -> int:
    """Cases the new run is slower on (by the margin or not)."""
    return int(t["verdict"].astype(str).str.startswith("slower").sum())


def format_table(t: pd.DataFrame) -> str:
    """An aligned plain-text table for the terminal."""
    head = ("case", "old", "new", "new/old [interval]", "level", "verdict")
    rows = [(r.case, stats.fmt_seconds(r.old_median_s), stats.fmt_seconds(r.new_median_s),
             stats.fmt_ratio(r.ratio, r.ratio_lo, r.ratio_hi) if not math.isnan(r.ratio) else "",
             stats.level_text(r.level) if not math.isnan(r.level) else "", r.verdict)
            for r in t.itertuples(index=False)]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *rows]]
    counts = t["verdict"].value_counts()
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    m = t.attrs.get("margin")
    rule = (f" (margin {100 * m:.0f}%; {t.attrs.get('comparisons', 0)} comparisons share a 5% chance of any false "
            "faster/slower (Holm), each interval at its Holm level)") if m is not None else ""
    return "\n".join(lines) + f"\n\n{summary}{rule}\n"

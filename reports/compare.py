"""`fwbench compare OLD NEW`: what got faster or slower between two sets of results.

Cases are matched on the record's identifying fields (workload.record.CASE_KEYS: workload,
task, framework, mode, strategy, preset, device); each side's processes of a case are pooled
first (reports.replicates.cases), as in the report. For each case timed in both:

    ratio = median_new / median_old          (above 1: the new run is slower)

with a 95% interval from independent draws of the two cases' bootstraps (hierarchical over
processes, then rounds; a case of one process: its rounds). The verdict is 'slower' when the
whole interval lies above 1 and the ratio is at least 1 + min_effect, 'faster' when the
interval lies below 1 and the ratio is at most 1 / (1 + min_effect), and 'no significant
change' otherwise: the report's rule for findings (stats.decided). The interval guards
against noise within each side; the minimum effect (default stats.MIN_EFFECT, raised to the
spread observed between processes of one case on either side where that is larger) guards
against the drift between runs of the same code on a shared machine, which an interval over
one run's processes cannot see. Cases timed in only one of the two, or whose status
changed, are listed as such.
"""
from __future__ import annotations

import math
import os
from typing import Iterable

import pandas as pd

from reports import replicates, stats
from reports.data import TIMED, load

Paths = Iterable[str | os.PathLike] | str | os.PathLike


def compare(old: Paths, new: Paths, min_effect: float = stats.MIN_EFFECT) -> pd.DataFrame:
    """One row per case: medians, ratio new/old with its interval, verdict. `attrs["problems"]`
    collects the input problems of both sides, `attrs["min_effect"]` the minimum effect used."""
    a, b = load(old), load(new)
    problems = [f"OLD {p}" for p in a.attrs["problems"]] + [f"NEW {p}" for p in b.attrs["problems"]]
    a, b = replicates.cases(a, salt="old|"), replicates.cases(b, salt="new|")
    spread = max((s for s in (a.attrs["observed_spread"], b.attrs["observed_spread"]) if not math.isnan(s)),
                 default=math.nan)
    min_effect = stats.effective_min_effect(spread, min_effect)
    a, b = a.set_index("case"), b.set_index("case")
    rows = []
    for case in list(a.index) + [c for c in b.index if c not in a.index]:
        ra, rb = (a.loc[case] if case in a.index else None), (b.loc[case] if case in b.index else None)
        row = {"case": case, "old_median_s": math.nan, "new_median_s": math.nan, "ratio": math.nan,
               "ratio_lo": math.nan, "ratio_hi": math.nan}
        ta = ra is not None and ra["status"] in TIMED and not math.isnan(ra["median_s"])
        tb = rb is not None and rb["status"] in TIMED and not math.isnan(rb["median_s"])
        if ta:
            row["old_median_s"] = ra["median_s"]
        if tb:
            row["new_median_s"] = rb["median_s"]
        if ta and tb:
            r = rb["median_s"] / ra["median_s"]
            lo, hi = stats.ratio_interval(rb["boot"], ra["boot"])
            row.update(ratio=r, ratio_lo=lo, ratio_hi=hi, verdict=stats.verdict(r, lo, hi, min_effect))
        elif ra is None:
            row["verdict"] = f"only in NEW ({rb['status']})"
        elif rb is None:
            row["verdict"] = f"only in OLD ({ra['status']})"
        else:
            row["verdict"] = f"status {ra['status']} -> {rb['status']}" if ra["status"] != rb["status"] \
                else f"not timed in either ({ra['status']})"
        rows.append(row)
    out = pd.DataFrame(rows, columns=["case", "old_median_s", "new_median_s", "ratio", "ratio_lo", "ratio_hi",
                                      "verdict"])
    out.attrs["problems"] = problems
    out.attrs["min_effect"] = min_effect
    out.attrs["records"] = {"OLD": len(a), "NEW": len(b)}     # readable records on each side
    return out


def format_table(t: pd.DataFrame) -> str:
    """An aligned plain-text table for the terminal."""
    head = ("case", "old", "new", "new/old [95% CI]", "verdict")
    rows = [(r.case, stats.fmt_seconds(r.old_median_s), stats.fmt_seconds(r.new_median_s),
             stats.fmt_ratio(r.ratio, r.ratio_lo, r.ratio_hi) if not math.isnan(r.ratio) else "", r.verdict)
            for r in t.itertuples(index=False)]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *rows]]
    counts = t["verdict"].value_counts()
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    me = t.attrs.get("min_effect")
    rule = f" (a verdict needs the interval to exclude 1 and at least {100 * me:.0f}%)" if me is not None else ""
    return "\n".join(lines) + f"\n\n{summary}{rule}\n"

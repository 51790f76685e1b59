"""`fwbench compare OLD NEW`: what got faster or slower between two sets of results.

Cases are matched on the record's identifying fields (workload.record.CASE_KEYS: workload,
task, framework, mode, strategy, preset, device). For each case timed in both:

    ratio = median_new / median_old          (above 1: the new run is slower)

with a 95% interval from independent bootstraps of the two medians (reports.stats). The
verdict is 'slower' when the whole interval lies above 1 and the ratio is at least
1 + min_effect, 'faster' when the interval lies below 1 and the ratio is at most
1 / (1 + min_effect), and 'no significant change' otherwise. The interval guards against
round-to-round noise within each run; the minimum effect (default 10%) guards against the
drift between two runs of the same code on a shared machine, which no within-run interval
can see. Cases timed in only one of the two, or whose status changed, are listed as such.
"""
from __future__ import annotations

import math
import os
from typing import Iterable

import pandas as pd

from reports import stats
from reports.data import TIMED, latest, load

Paths = Iterable[str | os.PathLike] | str | os.PathLike


def compare(old: Paths, new: Paths, min_effect: float = stats.MIN_EFFECT) -> pd.DataFrame:
    """One row per case: medians, ratio new/old with its interval, verdict. `attrs["problems"]`
    collects the input problems of both sides."""
    a, b = load(old), load(new)
    problems = [f"OLD {p}" for p in a.attrs["problems"]] + [f"NEW {p}" for p in b.attrs["problems"]]
    (a, _), (b, _) = latest(a), latest(b)
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
            lo, hi = stats.ratio_interval(_boot(rb, "new"), _boot(ra, "old"))
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
    out.attrs["records"] = {"OLD": len(a), "NEW": len(b)}     # readable records on each side
    return out


def _boot(r: pd.Series, side: str) -> object:
    # the side goes into the seed: the same file given as OLD and NEW still gets independent resamples
    return stats.boot_medians(r["times"], f"{side}|{r['run_file']}|{r.name}")


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
    return "\n".join(lines) + f"\n\n{summary}\n"

"""The precision section's drawing half (its judging half: reports.sections.precision): every
policy besides fp32 that the run has, in words from workloads/precision.py (its statement and
native instructions), its step time over fp32 per framework and mode, and per case."""
from __future__ import annotations

import pandas as pd

from reports.measures import precision, stats
from reports.rendering.sections.common import Block, Drawing
from workloads.precision import DEFAULT, POLICIES


def blocks(df: pd.DataFrame, fam: stats.Family) -> list[Block]:
    """Each reduced-precision policy against fp32 where a run has both (reports.measures.precision)."""
    t = precision.table(df, fam)
    if t.empty:
        return []
    names = [p for p in precision.others(df) if precision.pairs(df, p)]
    these = " and ".join(names)
    cpu = [precision.cpu_words(df, p) + (", so its ratios are findings" if precision.native(df, p) else "")
           for p in names]
    policies = " ".join(f"{p}: {POLICIES[p].statement} (workloads/precision.py)." for p in names)
    return [("h", 2, f"Precision: {these} against {DEFAULT}"),
            ("p", f"Each policy is one explicit definition in every framework. {policies} Each case's {these} time "
                  f"is over the same case's {DEFAULT} time, paired over the processes that ran both; here "
                  f"{'; '.join(cpu)}. {these} cases stay out of the framework comparisons and the choice, which "
                  f"read {DEFAULT}."),
            ("table", t, f"{these} over {DEFAULT} step time per framework and mode: geometric mean over the tasks "
                         "[interval at the verdict's level] and the verdict (below 1: the policy faster).",
             "precision"),
            ("table", precision.per_task(df), f"{these} and {DEFAULT} step time of every case that ran both.",
             "precision-tasks")]


DRAWING = Drawing(name="precision", blocks=blocks)

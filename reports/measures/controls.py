"""What the side-by-side design measures about itself (reports.commands.sets): the A/A controls and
the position effect.

An A/A control: every set runs one framework's process twice (the control process), so each of
that framework's configurations is timed twice per cycle, in two processes of the same build.
The control's ratio is the control process's time over the primary's, paired by cycle within a
set and by set across sets, a t interval over sets as any comparison's (which of the two is
started first is drawn per set, so a start-order effect shows as spread, not as a ratio; which
of the two stands for the framework in the comparisons, `control_reference`, is drawn too).
Nothing differs but the process, so a control called faster or slower is a false alarm (or a
bias from the set-up, e.g. start order): over many controls the share called different must
match the stated false-claim rate, and a report whose control is called different says so on
page 1. The controls stay out of the report's family: they test the method, not a framework.

The position effect: a block's time by what ran just before it, another configuration of its
own process or one of another process (whose thread pools might still be spinning, or whose
memory traffic might have cooled the caches), paired within (configuration, set).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports.measures import stats
from reports.measures.data import TIMED, finite


def _logs_by_cycle(r: pd.Series) -> dict[int, float]:
    return {b["cycle"]: math.log(b["s"]) for b in r["blocks"] if b["s"] > 0}


def _with_blocks(df: pd.DataFrame) -> pd.DataFrame:
    if "blocks" not in df.columns:
        return df.iloc[0:0]
    ok = df["status"].isin(TIMED) & df["blocks"].map(lambda b: isinstance(b, list) and bool(b)) & df["set"].map(finite)
    return df[ok]


def aa(df: pd.DataFrame, margin: float = stats.MARGIN) -> pd.DataFrame:
    """One row per configuration timed by a control: its ratio control/primary over the sets
    (paired by cycle in a set, t over sets), the interval at 95%, the verdict, the p-value,
    the sets and the per-set SD of the log ratio."""
    d = _with_blocks(df)
    rows = []
    keys = ["workload", "task", "framework", "mode", "strategy", "precision"]
    for key, g in d.groupby(keys, dropna=False, sort=False):
        per_set: dict[str, float] = {}
        for s, h in g.groupby("set"):
            prim = h[h["control"] != True]       # noqa: E712  (None: a file from before controls)
            ctrl = h[h["control"] == True]       # noqa: E712
            if prim.empty or ctrl.empty:
                continue
            a, b = _logs_by_cycle(prim.iloc[0]), _logs_by_cycle(ctrl.iloc[0])
            both = sorted(set(a) & set(b))
            if not both:
                continue
            per_set[f"set {int(s)}"] = float(np.mean([b[c] - a[c] for c in both]))   # control over primary
        if not per_set:
            continue
        est = stats.Est(per_set)
        r = stats.ratio(est)
        lo, hi = r.interval()
        rows.append({**dict(zip(keys, key)), "sets": est.n, "ratio": r.value, "lo": lo, "hi": hi, "p": r.p(),
                     "sd_per_set": est.sd, "verdict": stats.verdict(lo, hi, margin) if r.tested else "not tested"})
    return pd.DataFrame(rows)


def false_alarms(controls: pd.DataFrame) -> tuple[int, int]:
    """(controls called faster or slower at 95%, controls tested)."""
    tested = controls[controls["verdict"] != "not tested"] if not controls.empty else controls
    called = tested["verdict"].map(lambda v: stats.coarse(v) in ("faster", "slower")) if not tested.empty else []
    return int(np.sum(called)), len(tested)


def spread(controls: pd.DataFrame) -> float:
    """The controls' measured spread: the largest difference any tested control showed between
    two processes of the same configuration (its ratio's distance from 1 either way, as a
    fraction; 0 where none was tested). The equivalence margin is never smaller: a difference
    between frameworks that the method itself produces between twins is not a difference. (Not
    the controls' interval ends: those measure how little the run knows, which the intervals of
    every comparison already carry.)"""
    t = controls[controls["verdict"] != "not tested"] if not controls.empty else controls
    if t.empty:
        return 0.0
    return float(max(max(r - 1.0, 1.0 / r - 1.0) for r in t["ratio"]))


def position(df: pd.DataFrame) -> dict[str, Any] | None:
    """The position effect: per (configuration, set), the mean log time of its blocks run right
    after another process's block minus that of its blocks run right after a block of its own
    process; the geometric-mean ratio over those pairs with a t interval, and their count. None
    where no configuration has blocks of both kinds."""
    d = _with_blocks(df)
    diffs = []
    for _, r in d.iterrows():
        me = f"{r['framework']}#{int(r['repeat'])}:" if finite(r.get("repeat")) else None
        if me is None:
            continue
        other = [math.log(b["s"]) for b in r["blocks"] if b["after"] and not b["after"].startswith(me)]
        own = [math.log(b["s"]) for b in r["blocks"] if b["after"] and b["after"].startswith(me)]
        if other and own:
            diffs.append(float(np.mean(other) - np.mean(own)))
    if len(diffs) < 2:
        return None
    r = stats.ratio(stats.Est({str(i): x for i, x in enumerate(diffs)}))
    lo, hi = r.interval()
    return {"ratio": r.value, "lo": lo, "hi": hi, "pairs": len(diffs)}

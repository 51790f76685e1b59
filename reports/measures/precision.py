"""Reduced precision against fp32: per framework and mode, the step time of each
policy other than the default (workloads/precision.py: POLICIES) over the same
case's fp32 time, paired over the processes both ran in (every process runs both), as a
geometric mean over the tasks with its interval and verdict under the report's one error
rate, and per task.

A bf16 number means something only where the CPU multiplies bf16 natively (AVX512-BF16 or
AMX-BF16, from each run's machine_info.cpu_flags; each policy's flags are its `native`):
elsewhere the products are emulated (44-499x slower, pytorch#146508) and no speed finding
for that policy is stated, only the times. Such cases are variants: the framework-comparison
findings, the summary table and the framework choice read fp32 cases only (findings.GROUP
and the scores keep precisions apart).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports.measures import stats
from reports.measures.data import TIMED, framework_order
from workloads.precision import DEFAULT, POLICIES, native_words
from workloads.precision import native as native_on


def has_other(df: pd.DataFrame) -> bool:
    """Whether any case ran at a precision other than fp32."""
    return "precision" in df.columns and bool((df["precision"].fillna(DEFAULT) != DEFAULT).any())


def default_only(df: pd.DataFrame) -> pd.DataFrame:
    """The fp32 cases (files from before precisions count as fp32)."""
    if "precision" not in df.columns:
        return df
    return df[df["precision"].fillna(DEFAULT) == DEFAULT]


def others(df: pd.DataFrame) -> list[str]:
    """The policies other than fp32 the cases ran at, in workloads/precision.py's order."""
    if "precision" not in df.columns:
        return []
    seen = set(df["precision"].dropna()) - {DEFAULT}
    return [p for p in POLICIES if p in seen] + sorted(seen - set(POLICIES))


def _subject(df: pd.DataFrame, precision: str | None) -> str:
    """`precision`, else the first policy besides fp32 the cases ran at (else the first defined)."""
    return precision or (others(df) or [p for p in POLICIES if p != DEFAULT])[0]


def native(df: pd.DataFrame, precision: str | None = None) -> bool | None:
    """True when every run's CPU multiplies `precision` (default: _subject) natively, False
    when one does not (or the run is on an accelerator: not judged here), None when a run did
    not record its flags."""
    runs = df.attrs.get("runs", [])
    if not runs:
        return None
    seen = [native_on(_subject(df, precision), r.get("cpu_flags")) for r in runs]
    if any(s is False for s in seen):
        return False
    return None if any(s is None for s in seen) else True


def pairs(df: pd.DataFrame, precision: str | None = None) -> list[tuple[pd.Series, pd.Series]]:
    """(case, the same case at fp32) for every timed case at `precision` (default: at any
    policy other than fp32) with a timed fp32 twin."""
    t = df[df["status"].isin(TIMED) & df["median_s"].notna()]
    if "precision" not in t.columns:
        return []
    key = ["framework", "workload", "task", "mode", "strategy", "preset", "device"]
    fp = {tuple(r[k] for k in key): r for _, r in t[t["precision"].fillna(DEFAULT) == DEFAULT].iterrows()}
    out = []
    variant = t["precision"].isin(others(t)) if precision is None else t["precision"] == precision
    for _, r in t[variant].iterrows():
        b = fp.get(tuple(r[k] for k in key))
        if b is not None and isinstance(r.get("est"), stats.Est) and isinstance(b.get("est"), stats.Est):
            out.append((r, b))
    return out


def _pooled(ps: list[tuple[pd.Series, pd.Series]]) -> stats.Est | None:
    """Per process, the geometric mean over the tasks of the policy over fp32 (processes that ran
    every pair), as one estimate over processes."""
    common = set.intersection(*(set(a["est"].logs) & set(b["est"].logs) for a, b in ps)) if ps else set()
    if not common:
        return None
    return stats.Est.of({p: math.exp(float(np.mean([a["est"].logs[p] - b["est"].logs[p] for a, b in ps])))
                         for p in sorted(common)})


def table(df: pd.DataFrame, fam: stats.Family | None) -> pd.DataFrame:
    """Per policy, framework and mode: tasks compared, the geometric-mean step-time ratio over
    fp32 over them [interval at its level] and the verdict (faster or slower); no verdict
    where the CPU emulates the policy or did not record whether it does. With one policy
    besides fp32 (bf16) its name heads the ratio column; with several, a precision column
    says whose each row is."""
    policies = [p for p in others(df) if pairs(df, p)]
    rows = []
    for p in policies:
        ps = pairs(df, p)
        speak = native(df, p) is True and fam is not None
        ratio = f"{p} / fp32 step time (geo. mean)" if len(policies) == 1 else "step time / fp32 (geo. mean)"
        for f in framework_order({a["framework"] for a, _ in ps}):
            for mode in dict.fromkeys(a["mode"] for a, _ in ps if a["framework"] == f):
                mine = [(a, b) for a, b in ps if a["framework"] == f and a["mode"] == mode]
                est = _pooled(mine)
                geo = float(np.exp(np.mean([math.log(a["median_s"] / b["median_s"]) for a, b in mine])))
                row: dict[str, Any] = {**({"precision": p} if len(policies) > 1 else {}), "framework": f,
                                       "mode": mode, "tasks": len(mine), ratio: f"{geo:.2f}"}
                if speak and est is not None:
                    j = fam.judge(f"{p} vs fp32|{f}|{mode}", est, None, tuple(a["case"] for a, _ in mine))
                    row[ratio] = j.interval_text(speed=False, label="ratio")
                    row["verdict"] = f"{p} " + stats.words(j.verdict, fam.margin)
                else:
                    row["verdict"] = why_silent(df, p)
                rows.append(row)
    return pd.DataFrame(rows)


def why_silent(df: pd.DataFrame, precision: str | None = None) -> str:
    p = _subject(df, precision)
    n = native(df, p)
    if n is False:
        return f"{p} emulated on this CPU (no {native_words(p)}): no {p} speed finding"
    if n is None:
        return f"not stated: the runs did not record the CPU's {p} instructions"
    return "no verdict"


def cpu_words(df: pd.DataFrame, precision: str) -> str:
    """What the run's CPU does with `precision`'s products, in words: 'the CPU multiplies bf16
    natively (AVX512-BF16 or AMX-BF16)', else why no finding is stated (why_silent)."""
    if native(df, precision) is True:
        return f"the CPU multiplies {precision} natively ({native_words(precision)})"
    return why_silent(df, precision)


def per_task(df: pd.DataFrame) -> pd.DataFrame:
    """Every case at another policy against its fp32 twin: the two step times and their ratio
    (the policy's name in the headers where one policy besides fp32 ran, else a precision column)."""
    policies = others(df)
    one = policies[0] if len(policies) == 1 else None
    rows = [{**({} if one else {"precision": a["precision"]}), "framework": a["framework"], "mode": a["mode"],
             "task": f"{a['workload']} {a['task']}", "fp32 step": stats.fmt_seconds(b["median_s"]),
             f"{one or 'variant'} step": stats.fmt_seconds(a["median_s"]),
             f"{one or 'variant'} / fp32": f"{a['median_s'] / b['median_s']:.2f}"} for a, b in pairs(df)]
    return pd.DataFrame(rows)


def sentence(df: pd.DataFrame, fam: stats.Family | None) -> list[str]:
    """The Summary's lines, one per policy besides fp32: each framework's ratio over fp32, or why none is stated."""
    t = table(df, fam)
    out = []
    for p in (others(df) if not t.empty else []):
        rows = t[t["precision"] == p] if "precision" in t.columns else t
        ratio = [c for c in t.columns if c.endswith("(geo. mean)")][0]
        parts = [f"{r['framework']} {r['mode']} {r[ratio]}" for _, r in rows.iterrows()]
        tail = "" if native(df, p) is True else f" ({why_silent(df, p)})"
        if parts:
            out.append(f"{p} (workloads/precision.py's policy) over fp32 step time, geometric mean over the tasks: "
                       + "; ".join(parts) + tail + ".")
    return out

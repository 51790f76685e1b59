"""bf16 against fp32 (issue 20): per framework and mode, the step time of the bf16 policy
(workloads/precision.py) over the same case's fp32 time, paired over the processes both
ran in (every process runs both), as a geometric mean over the tasks with its interval and
verdict under the report's one error rate, and per task.

A bf16 number means something only where the CPU multiplies bf16 natively (AVX512-BF16 or
AMX-BF16, from each run's machine_info.cpu_flags): elsewhere the products are emulated
(44-499x slower, pytorch#146508) and no bf16 speed finding is stated, only the times.
bf16 cases are variants: the framework-comparison findings, the summary table and the
framework choice read fp32 cases only (findings.GROUP and the scores keep precisions apart).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports.analysis import stats
from reports.analysis.data import TIMED, framework_order
from workloads.precision import native_bf16

DEFAULT = "fp32"


def has_other(df: pd.DataFrame) -> bool:
    """Whether any case ran at a precision other than fp32."""
    return "precision" in df.columns and bool((df["precision"].fillna(DEFAULT) != DEFAULT).any())


def default_only(df: pd.DataFrame) -> pd.DataFrame:
    """The fp32 cases (files from before precisions count as fp32)."""
    if "precision" not in df.columns:
        return df
    return df[df["precision"].fillna(DEFAULT) == DEFAULT]


def native(df: pd.DataFrame) -> bool | None:
    """True when every run's CPU multiplies bf16 natively, False when one does not (or the
    run is on an accelerator: not judged here), None when a run did not record its flags."""
    runs = df.attrs.get("runs", [])
    if not runs:
        return None
    seen = [native_bf16(r.get("cpu_flags")) for r in runs]
    if any(s is False for s in seen):
        return False
    return None if any(s is None for s in seen) else True


def pairs(df: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """(bf16 case, the same case at fp32) for every timed bf16 case with a timed fp32 twin."""
    t = df[df["status"].isin(TIMED) & df["median_s"].notna()]
    if "precision" not in t.columns:
        return []
    key = ["framework", "workload", "task", "mode", "strategy", "preset", "device"]
    fp = {tuple(r[k] for k in key): r for _, r in t[t["precision"].fillna(DEFAULT) == DEFAULT].iterrows()}
    out = []
    for _, r in t[t["precision"] == "bf16"].iterrows():
        b = fp.get(tuple(r[k] for k in key))
        if b is not None and isinstance(r.get("est"), stats.Est) and isinstance(b.get("est"), stats.Est):
            out.append((r, b))
    return out


def _pooled(ps: list[tuple[pd.Series, pd.Series]]) -> stats.Est | None:
    """Per process, the geometric mean over the tasks of bf16 over fp32 (processes that ran
    every pair), as one estimate over processes."""
    common = set.intersection(*(set(a["est"].logs) & set(b["est"].logs) for a, b in ps)) if ps else set()
    if not common:
        return None
    return stats.Est.of({p: math.exp(float(np.mean([a["est"].logs[p] - b["est"].logs[p] for a, b in ps])))
                         for p in sorted(common)})


def table(df: pd.DataFrame, fam: stats.Family | None) -> pd.DataFrame:
    """Per framework and mode: tasks compared, the geometric-mean bf16/fp32 step-time ratio
    over them [interval at its level] and the verdict (bf16 faster or slower); no verdict
    where the CPU emulates bf16 or did not record whether it does."""
    ps = pairs(df)
    if not ps:
        return pd.DataFrame()
    speak = native(df) is True and fam is not None
    rows = []
    for f in framework_order({a["framework"] for a, _ in ps}):
        for mode in dict.fromkeys(a["mode"] for a, _ in ps if a["framework"] == f):
            mine = [(a, b) for a, b in ps if a["framework"] == f and a["mode"] == mode]
            est = _pooled(mine)
            geo = float(np.exp(np.mean([math.log(a["median_s"] / b["median_s"]) for a, b in mine])))
            row: dict[str, Any] = {"framework": f, "mode": mode, "tasks": len(mine),
                                   "bf16 / fp32 step time (geo. mean)": f"{geo:.2f}"}
            if speak and est is not None:
                j = fam.judge(f"bf16 vs fp32|{f}|{mode}", est, None, tuple(a["case"] for a, _ in mine))
                row["bf16 / fp32 step time (geo. mean)"] = j.interval_text(speed=False, label="ratio")
                row["verdict"] = "bf16 " + stats.words(j.verdict, fam.margin)
            else:
                row["verdict"] = why_silent(df)
            rows.append(row)
    return pd.DataFrame(rows)


def why_silent(df: pd.DataFrame) -> str:
    n = native(df)
    if n is False:
        return "bf16 emulated on this CPU (no AVX512-BF16 or AMX-BF16): no bf16 speed finding"
    if n is None:
        return "not stated: the runs did not record the CPU's bf16 instructions"
    return "no verdict"


def per_task(df: pd.DataFrame) -> pd.DataFrame:
    """Every bf16 case against its fp32 twin: the two step times and their ratio."""
    rows = [{"framework": a["framework"], "mode": a["mode"], "task": f"{a['workload']} {a['task']}",
             "fp32 step": stats.fmt_seconds(b["median_s"]), "bf16 step": stats.fmt_seconds(a["median_s"]),
             "bf16 / fp32": f"{a['median_s'] / b['median_s']:.2f}"} for a, b in pairs(df)]
    return pd.DataFrame(rows)


def sentence(df: pd.DataFrame, fam: stats.Family | None) -> list[str]:
    """The Summary's line: each framework's bf16 over fp32 ratio, or why none is stated."""
    t = table(df, fam)
    if t.empty:
        return []
    parts = [f"{r['framework']} {r['mode']} {r['bf16 / fp32 step time (geo. mean)']}" for _, r in t.iterrows()]
    tail = "" if native(df) is True else f" ({why_silent(df)})"
    return ["bf16 (workloads/precision.py's policy) over fp32 step time, geometric mean over the tasks: "
            + "; ".join(parts) + tail + "."]

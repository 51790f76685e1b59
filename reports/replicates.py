"""Per-case aggregation over processes: the report's unit of replication.

reports.load keeps one row per record, that is per process. `cases(df)` gives one row per
case (record.CASE_KEYS), pooling every process of the same run configuration (the case plus
threads, shape, dtype and machine set-up: the `repeat`s of one `fwbench run`, and the files
of several runs of the same configuration). Where one case was measured under several
configurations, the most recent configuration is kept and the others are named in
`attrs["notes"]`.

Columns (besides the record's fields, taken from the case's first process):

    n_processes        timed processes (records) of the case
    median_s           median of the process medians: each process weighs the same whatever
                       its round count (the process is the unit, DESIGN.md), and one odd
                       process cannot move it far, as it would a mean or a pooled median of
                       unequal round counts
    median_lo_s/hi_s   95% interval: hierarchical bootstrap with two processes or more;
                       with one, the order-statistic interval of its rounds (stats)
    interval_note      what the interval covers ("one process: ...")
    process_cv         between-process coefficient of variation of the process medians
    process_spread     largest / smallest process median - 1
    trend_p, step_p    smallest p over the processes of the trend and step tests (stats)
    lag1_autocorr      median over processes of the rounds' lag-1 autocorrelation
    unstable, unstable_why
                       flagged when a process's rounds drift (trend or step change at
                       UNSTABLE_ALPHA, Bonferroni over both tests and the processes) or the
                       processes disagree by more than MIN_EFFECT
    first_call_cold_s  median first call of processes that found the compile cache empty
    first_call_warm_s  the same for processes that found it filled
    first_call_s       the cold one where measured, else the median over all processes
    compile_s          median of the framework's own compile timers
    compile_latency_s  first_call_s - median_s: a mode's first call minus the same mode's
                       median step (DESIGN.md), never eager's first call
    speedup_vs_eager   eager's median / this median, with its interval (_lo, _hi) from the
                       two cases' bootstrap draws
    break_even_steps   first n at which first call + (n-1) x step is below eager's, when the
                       steps differ by the report's rule (interval excludes 1 and the ratio
                       exceeds the minimum effect); inf where the compiled step is slower by
                       that rule ("never pays back"); nan where the steps do not differ
    throughput(_lo/_hi), utilisation, compilations (max), compilations_timed (max),
    recompiled_during_timing (any process)
    boot               the case's bootstrap draws of its median (for ratios; not in CSVs)
    extra record keys  (a workload's own fields: stream_cold_s, interop_outcome, params, ...)
                       from the case's first timed process (its first record if none ran);
                       PER_PROCESS fields are the median over timed processes instead, with
                       every process's value kept in `procs_<field>` (a tuple, not in CSVs)
                       for intervals over processes (stats.process_boot); SERIES fields
                       (comma-separated per-request values) the element-wise median

`attrs["observed_spread"]` is the median process_spread over the cases with two processes
or more (nan without such cases), `attrs["min_effect"]` the minimum effect in force:
stats.effective_min_effect(observed spread).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from reports import data as rdata
from reports import stats
from reports.data import TIMED, _joined, _sort_key, break_even, finite
from workloads.record import CASE_KEYS

# Records of one case that share these ran under the same configuration: their processes pool.
CONFIG_KEYS = ("case", "threads", "shape", "dtype", "cpu", "accelerator", "matmul_precision")
BASELINE = ("framework", "workload", "task", "strategy", "preset", "device")
COLD = ("cold", "empty")
ONE_PROCESS = "one process: interval covers round-to-round noise only"
CARRIED = ("framework_version", "shape", "dtype", "threads", "items", "unit", "flops", "compile_counter",
           "matmul_precision", "cpu", "accelerator", "memory_note", "peak_memory_bytes", "peak_memory_source",
           "compile_s_source")
AGGREGATE = ("n_processes", "median_s", "median_lo_s", "median_hi_s", "interval_note", "process_cv",
             "process_spread", "trend_p", "step_p", "lag1_autocorr", "unstable", "unstable_why",
             "first_call_cold_s", "first_call_warm_s", "first_call_s", "compile_s", "compile_latency_s",
             "speedup_vs_eager", "speedup_lo", "speedup_hi", "break_even_steps", "throughput", "throughput_lo",
             "throughput_hi", "utilisation", "gemm_flops", "compilations", "compilations_timed",
             "recompiled_during_timing", "compile_cache", "run_file", "date")


# Per-process scalars of a workload whose replication matters (one value per process, no
# rounds): the case holds their median and the tuple of process values (procs_<field>).
PER_PROCESS = ("stream_cold_s", "new_shape_latency_s", "seen_shape_latency_s", "compilations_cold",
               "xla_compilations_cold", "peak_memory_bytes")
# Comma-separated per-request series (the dynamic workload's cold pass): element-wise median.
SERIES = ("stream_cold_request_s", "stream_cold_compilations")


Rec = dict[str, Any]     # one record (row) of the frame, as a plain dict: cheap to read in a loop


def _med(values: Any) -> float:
    v = [float(x) for x in values if finite(x)]
    return float(np.median(v)) if v else math.nan


def _process_boot(r: Rec, salt: str) -> np.ndarray | None:
    rep = "" if not finite(r["repeat"]) else f"|r{int(r['repeat'])}"
    return stats.boot_medians(r["times"], f"{salt}{r['run_file']}|{r['case']}{rep}")


def _drift(timed: list[Rec], meds: np.ndarray) -> dict[str, Any]:
    """Trend, step and disagreement flags of one case's timed processes."""
    p = np.array([stats.drift_pvalues(r["times"]) for r in timed], dtype=float).reshape(-1, 2)
    alpha = stats.UNSTABLE_ALPHA / (2 * len(timed))
    trend_p, step_p = (float(np.nanmin(p[:, i])) if np.isfinite(p[:, i]).any() else math.nan for i in (0, 1))
    why = []
    if trend_p < alpha:
        why.append(f"trend over the rounds (p={trend_p:.2g})")
    if step_p < alpha:
        why.append(f"step change within the rounds (p={step_p:.2g})")
    spread = float(meds.max() / meds.min() - 1) if len(meds) > 1 else math.nan
    if spread > stats.MIN_EFFECT:
        why.append(f"processes disagree (medians {100 * spread:.0f}% apart)")
    return {"trend_p": trend_p, "step_p": step_p, "process_spread": spread,
            "process_cv": float(np.std(meds, ddof=1) / np.mean(meds)) if len(meds) > 1 else math.nan,
            "lag1_autocorr": _med(stats.lag1_autocorrelation(r["times"]) for r in timed),
            "unstable": bool(why), "unstable_why": "; ".join(why)}


def _series_median(texts: list[Any]) -> str | None:
    """Element-wise median of comma-separated number series of one length ('0.5,1,1')."""
    rows = []
    for t in texts:
        try:
            rows.append([float(x) for x in str(t).split(",")])
        except ValueError:
            continue
    rows = [r for r in rows if rows and len(r) == len(rows[0])]
    if not rows:
        return None
    return ",".join(f"{v:.4g}" for v in np.median(np.array(rows), axis=0))


def _extras(row: dict[str, Any], g: list[Rec], timed: list[Rec], extra: list[str]) -> None:
    """A workload's own record keys (see the module docstring)."""
    src = timed[0] if timed else g[0]
    for k in extra:
        row[k] = src.get(k)
    for k in PER_PROCESS:
        if k in extra or k in row:
            vals = tuple(float(r[k]) for r in timed if finite(r.get(k)))
            row[f"procs_{k}"] = vals
            row[k] = float(np.median(vals)) if vals else (row.get(k) if not timed else None)
    for k in SERIES:
        if k in extra:
            row[k] = _series_median([r[k] for r in timed if isinstance(r.get(k), str)]) if timed else None


def _one_case(g: list[Rec], salt: str, extra: list[str] = ()) -> dict[str, Any]:
    first = g[0]
    row: dict[str, Any] = {k: first[k] for k in (*CASE_KEYS, "case", *CARRIED) if k in first}
    timed = [r for r in g if r["status"] in TIMED and finite(r["median_s"])]
    _extras(row, g, timed, list(extra))
    row.update(run_file=", ".join(sorted({r["run_file"] for r in g})),
               date=max((r["date"] for r in g if isinstance(r["date"], str)), default=None),
               compile_cache=", ".join(sorted({str(r["compile_cache"]) for r in g if r["compile_cache"] is not None}))
               or None, gemm_flops=max((float(r["gemm_flops"]) for r in g), default=math.nan),
               n_processes=len(timed), boot=None)
    if not timed:
        row.update(status=g[-1]["status"], reason=g[-1]["reason"], median_s=math.nan, unstable=False,
                   unstable_why="", first_call_s=math.nan)
        return row
    row["status"] = "fallback" if any(r["status"] == "fallback" for r in timed) else "ok"
    row["reason"] = next((r["reason"] for r in timed if r["status"] == row["status"] and r["reason"]), None)
    meds = np.array([r["median_s"] for r in timed], dtype=float)
    row["median_s"] = float(np.median(meds))
    boots = [_process_boot(r, salt) for r in timed]
    if len(timed) == 1:
        lo, hi, cov = stats.order_interval(timed[0]["times"])
        row["boot"] = boots[0]
        row["interval_note"] = ONE_PROCESS + ("" if not cov < stats.LEVEL else
                                              f"; {len(timed[0]['times'] or [])} rounds allow no 95% interval: "
                                              f"min-max, {100 * cov:.1f}% coverage")
    else:
        row["boot"] = stats.hier_boot(boots, salt + str(first["case"]))
        lo, hi = stats.interval(row["boot"])
        row["interval_note"] = f"{len(timed)} processes: hierarchical bootstrap (processes, then rounds)"
    row["median_lo_s"], row["median_hi_s"] = lo, hi
    row.update(_drift(timed, meds))
    row["first_call_cold_s"] = _med(r["first_call_s"] for r in timed if r["compile_cache"] in COLD)
    row["first_call_warm_s"] = _med(r["first_call_s"] for r in timed if r["compile_cache"] == "warm")
    row["first_call_s"] = (row["first_call_cold_s"] if finite(row["first_call_cold_s"])
                           else _med(r["first_call_s"] for r in timed))
    row["compile_s"] = _med(r["compile_s"] for r in timed)
    row["compile_latency_s"] = row["first_call_s"] - row["median_s"]
    for c in ("compilations", "compilations_timed"):
        row[c] = max((float(r[c]) for r in timed if finite(r[c])), default=math.nan)
    rec = [bool(r["recompiled_during_timing"]) for r in timed if isinstance(r["recompiled_during_timing"], bool)]
    row["recompiled_during_timing"] = any(rec) if rec else None
    return row


def _pick_configuration(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per case, the records of its most recent configuration; notes on the others."""
    config = pd.Series(_joined(df, CONFIG_KEYS), index=df.index)
    newest = df["date"].fillna("").groupby(config).transform("max")
    keep_cfg = newest.groupby(df["case"]).transform("max") == newest
    notes = [f"case {c} was also measured under another configuration (threads, shape or machine) in "
             f"{', '.join(sorted(set(g['run_file'])))}; using the most recent one"
             for c, g in df[~keep_cfg].groupby("case", sort=True)]
    return df[keep_cfg], notes


class Shared(list):
    """A list in a frame's attrs that pandas does not deep-copy on every operation (it copies
    attrs into each derived frame: with the runs' machine information, that dominated a
    10,000-record report). Read-only by convention."""

    def __deepcopy__(self, memo: dict[int, Any]) -> "Shared":
        return self


def is_cases(df: pd.DataFrame) -> bool:
    return "n_processes" in df.columns


def cases(df: pd.DataFrame, salt: str = "") -> pd.DataFrame:
    """One row per case (see the module docstring); a frame that is already one is returned as is.
    `salt` goes into every bootstrap seed (compare: the same file as OLD and NEW still gets
    independent resamples)."""
    if is_cases(df):
        return df
    attrs = {k: Shared(v) if isinstance(v, list) else v for k, v in df.attrs.items()}
    df = df.copy(deep=False)
    df.attrs = {}
    kept, notes = _pick_configuration(df) if not df.empty else (df, [])
    groups: dict[str, list[Rec]] = {}
    for r in kept.to_dict("records"):
        groups.setdefault(r["case"], []).append(r)
    extra = [c for c in df.columns if c not in known_columns()]
    rows = [_one_case(g, salt, extra) for g in groups.values()]
    procs = [f"procs_{k}" for k in PER_PROCESS if k in extra or k in CARRIED]
    cols = [*CASE_KEYS, "case", "status", "reason", *CARRIED, *AGGREGATE, *extra, "boot", *procs]
    out = pd.DataFrame(rows).reindex(columns=cols)
    out = _speedups(out)
    if not out.empty:
        out = out.sort_values(["workload", "task", "framework", "mode", "strategy", "preset", "device", "status"],
                              key=_sort_key, kind="stable").reset_index(drop=True)
    out.attrs = attrs
    out.attrs["notes"] = Shared(notes)
    multi = out.loc[out["n_processes"] > 1, "process_spread"].dropna() if not out.empty else pd.Series(dtype=float)
    out.attrs["observed_spread"] = float(multi.median()) if len(multi) else math.nan
    out.attrs["min_effect"] = stats.effective_min_effect(out.attrs["observed_spread"])
    out.attrs["max_processes"] = int(out["n_processes"].max()) if not out.empty else 0
    out.attrs["cold_over_warm"] = cold_over_warm(kept)
    return _break_even(out)


def known_columns() -> set[str]:
    """Columns every frame of reports.load has: the rest are a workload's own record keys."""
    return set(rdata.columns())


def process_columns(df: pd.DataFrame) -> list[str]:
    """The per-process tuple columns (procs_<field>, plus boot): kept out of CSV files."""
    return [c for c in df.columns if c == "boot" or c.startswith("procs_")]


def cold_over_warm(df: pd.DataFrame) -> float:
    """Median over cases of (the cold process's median step / the median of the warm
    processes' median steps), over timed cases measured cold and warm (nan without them):
    whether the cold-cache processes (the first of each framework, which also ran first)
    were systematically slower or faster in their steady state than the warm ones."""
    t = df[df["status"].isin(("ok", "fallback")) & df["median_s"].notna()]
    cold = t[t["compile_cache"] == "cold"].groupby("case")["median_s"].median()
    warm = t[t["compile_cache"] == "warm"].groupby("case")["median_s"].median()
    ratio = (cold / warm).dropna()
    return float(ratio.median()) if len(ratio) else math.nan


def _speedups(out: pd.DataFrame) -> pd.DataFrame:
    out = out.copy()
    items, med = out["items"].astype(float), out["median_s"].astype(float)
    out["throughput"] = items / med
    out["throughput_lo"], out["throughput_hi"] = items / out["median_hi_s"], items / out["median_lo_s"]
    out["utilisation"] = out["flops"].astype(float) / med / out["gemm_flops"]
    for c in ("speedup_vs_eager", "speedup_lo", "speedup_hi", "break_even_steps", "_eager"):
        out[c] = math.nan
    if out.empty:
        return out
    key = _joined(out, (*BASELINE, "threads", "shape"))
    eager = {k: i for k, i, m, t in zip(key, out.index, out["mode"], med) if m == "eager" and finite(t)}
    # A variant that eager mode does not have (torch's train-step recipes) is compared with
    # the eager case of the default strategy.
    default_key = _joined(out.assign(strategy=math.nan), (*BASELINE, "threads", "shape"))
    for i, k, dk in zip(out.index, key, default_key):
        j = eager.get(k, eager.get(dk))
        if j is None or not finite(med[i]):
            continue
        out.at[i, "speedup_vs_eager"] = med[j] / med[i]
        out.at[i, "speedup_lo"], out.at[i, "speedup_hi"] = stats.ratio_interval(out.at[j, "boot"], out.at[i, "boot"])
        out.at[i, "_eager"] = j
    return out


def _break_even(out: pd.DataFrame) -> pd.DataFrame:
    """Break-even against eager, by the report's rule (see the module docstring)."""
    me = out.attrs["min_effect"]
    if "_eager" not in out.columns:
        return out
    attrs = dict(out.attrs)
    for i, j in out["_eager"].dropna().items():
        j = int(j)
        r = out.loc[i]
        if i == j or not stats.decided(r["speedup_vs_eager"], r["speedup_lo"], r["speedup_hi"], me):
            continue
        e = out.loc[j]
        if r["speedup_vs_eager"] < 1:
            out.at[i, "break_even_steps"] = math.inf
        elif finite(r["first_call_s"]) and finite(e["first_call_s"]):
            out.at[i, "break_even_steps"] = break_even(r["first_call_s"], r["median_s"], e["first_call_s"],
                                                       e["median_s"])
    out = out.drop(columns="_eager")
    out.attrs = attrs
    return out

"""Per-case aggregation over processes: the report's unit of replication.

reports.load keeps one row per record, that is per process. `cases(df)` gives one row per
case (record.CASE_KEYS), pooling every process of the same run configuration (the case plus
threads, shape, dtype and machine set-up: the processes of one `fwbench run`, and the files
of several runs of the same configuration). Where one case was measured under several
configurations, the most recent configuration is kept and the others are named in
`attrs["notes"]`.

Processes have a role (the record's `compile_cache`): `cold` processes started every case
from empty compile caches and measure first calls; `warm` processes found the run's cache
filled by the cold ones. **Steady state comes from warm processes only** (the cold process
was slower in 39 of 46 cases of the earlier example, +9% in median, and made up most of the
variance between processes); cold processes measure first calls and the cold/warm ratio of
the steady state, a quantity of its own. Caches off (`off`) or unknown: every process
counts for both. Files from before roles (`empty` = cold).

A run of process sets (records with blocks, reports.commands.sets) is different: a case's value
is per set, the geometric mean of its blocks, and every set, cold and warm, enters the steady
state (`_set_est`): its configurations were timed side by side, so the machine's state during a
cycle falls on both sides of a ratio paired by set, and the cold set's steady blocks come after
its first calls like a warm set's. The report words each number for the design
(reports.measures.data: side_by_side, unit, steady_source).

Columns (besides the record's fields, taken from the case's first process):

    n_processes        steady-state processes (warm ones where there are any)
    n_cold, n_warm     processes of each role that timed the case
    steady_from        which processes the steady state comes from, in words
    median_s           geometric mean of the steady-state processes' median round times
                       (the location of stats.Est: its log values are what the intervals use)
    median_lo_s/hi_s   95% t interval over those processes; one process: the order-statistic
                       interval of its rounds (round noise only: interval_note says so)
    interval_note      what the interval covers
    warm_spread        largest / smallest steady-state process median - 1
    warm_sd            SD of the log process medians (about the relative SD between processes)
    cold_over_warm(_lo/_hi)
                       the cold processes' steady state over the warm ones' (Welch t interval;
                       nan unless both roles timed it, the interval needs two of each)
    first_call_cold_s(_lo/_hi), first_call_warm_s(_lo/_hi)
                       geometric mean over the cold (warm) processes' first calls, with a t
                       interval (warm: from MIN_TESTED processes; cold: at the spread pooled
                       over the framework's cases of the mode, `_pool_first_cold`, no wider
                       than hi/lo = MAX_FIRST_RATIO, else none: not tested); a first call the record marks invalid
                       (a compiled mode whose first call compiled nothing: it reused code an
                       earlier case compiled) is left out and counted in first_call_invalid
    n_first_cold       valid cold first calls behind first_call_cold_s
    first_call_s       the cold one where measured, else the warm one
    compile_s          median of the framework's own compile timers over the cold processes
                       (all processes where none is cold)
    compile_latency_s(_lo/_hi)
                       non-eager modes only: the cold first call minus the same mode's steady
                       step (never eager's first call); interval from draws of both t
                       distributions. Eager modes have none (nan)
    speedup_vs_eager(_lo/_hi)
                       eager's time / this case's: paired over the processes both ran in (a
                       t interval on per-process ratios), Welch otherwise
    throughput(_lo/_hi), utilisation (against util_peak_flops, the best GEMM rate at the case's
    precision on its set-up: data.py), compilations (max), compilations_timed (max),
    recompiled_during_timing (any process)
    busy, busy_note    every process that timed the case found the machine busy (other processes'
                       CPU use or steal time above the harness's limits, also after the harness
                       measured it again: record `busy`); such a case has no numbers (median_s
                       nan, its reason says why), so no verdict, first call or choice uses it
    busy_left_out      processes whose busy measurement of the case was left out (each is left
                       out of every estimate; busy_note says which and how busy)
    est, est_first_cold, est_first_warm, est_cold
                       stats.Est objects (not in CSVs) for ratios, verdicts and draws
    extra record keys  (a workload's own fields: stream_cold_s, interop_outcome, params, ...)
                       from the case's first timed process (its first record if none ran);
                       the sections' per-process fields (Section.per_process, e.g. the dynamic
                       workload's stream_cold_s) are the geometric mean over the processes
                       the step time comes from (the warm ones where any timed it: a cold-cache
                       cold start is not pooled with warm-cache ones; a field only the others
                       measured, from those) instead, with each of
                       those processes' values kept in `procs_<field>` ({process:
                       value}, not in CSVs) for intervals over processes; their series
                       (Section.series: comma-separated per-request values) the element-wise
                       median

Break-even and the stability flags depend on the report's comparisons (its error rate over
all of them) and are added by reports.conclusions.findings (break_even, flag columns) when a
report is built.

`attrs`: `warm_spread` (median over cases with two steady-state processes or more of
warm_spread), `warm_sd` (the same of warm_sd), `cold_over_warm` (median over cases),
`max_processes`, `notes`.
"""
from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np
import pandas as pd

from reports import sections
from reports.measures import data as rdata
from reports.measures import stats
from reports.measures.data import TIMED, finite, joined_keys, sort_key
from workloads.record import CASE_KEYS

# Records of one case that share these ran under the same configuration: their processes pool.
CONFIG_KEYS = ("case", "threads", "shape", "param_dtype", "cpu", "accelerator", "matmul_precision")
BASELINE = ("framework", "workload", "task", "strategy", "precision", "preset", "device")
COLD = ("cold", "empty")
WARM = ("warm",)
CARRIED = ("framework_version", "shape", "param_dtype", "compute_dtype", "threads", "items", "unit", "flops",
           "compile_counter",
           "matmul_precision", "cpu", "accelerator", "memory_note", "peak_memory_bytes", "peak_memory_source",
           "compile_s_source", "placement", "global_batch", "device_batch", "threads_per_device", "oversubscribed",
           "pinning",
           "collectives", "collectives_source", "allreduce_bytes", "allreduce_count", "analytic_allreduce_bytes",
           "dp_check_rel", "dp_check_rtol", "dp_check_note", "wire_bytes", "analytic_wire_bytes",
           "dp_check_grad_rel", "dp_check_grad_rtol", "device_state_bytes", "device_state_source", "cpus_available",
           "cores")
AGGREGATE = ("n_processes", "n_cold", "n_warm", "steady_from", "median_s", "median_lo_s", "median_hi_s",
             "interval_note", "warm_spread", "warm_sd", "cold_over_warm", "cold_over_warm_lo", "cold_over_warm_hi",
             "first_call_cold_s", "first_call_cold_lo_s", "first_call_cold_hi_s", "n_first_cold",
             "first_call_warm_s", "first_call_warm_lo_s", "first_call_warm_hi_s", "first_call_invalid",
             "first_call_s", "compile_s", "compile_latency_s", "compile_latency_lo_s", "compile_latency_hi_s",
             "speedup_vs_eager", "speedup_lo", "speedup_hi", "throughput", "throughput_lo", "throughput_hi",
             "utilisation", "util_peak_flops", "gemm_flops", "peak_precision", "peak_flops", "vendor_peak_flops",
             "mfu", "mfu_vendor",
             "compilations", "compilations_timed", "recompiled_during_timing",
             "busy", "busy_note", "busy_left_out", "compile_cache", "run_file", "date")
OBJECTS = ("est", "est_first_cold", "est_first_warm", "est_cold")

# Per-process scalars whose replication matters (one value per process, no rounds: the case
# holds their geometric mean and every process's value, procs_<field>) and comma-separated
# per-request series (element-wise median): what the registered sections name.
PER_PROCESS, SERIES = sections.PER_PROCESS, sections.SERIES


Rec = dict[str, Any]     # one record (row) of the frame, as a plain dict: cheap to read in a loop


def _med(values: Any) -> float:
    v = [float(x) for x in values if finite(x)]
    return float(np.median(v)) if v else math.nan


def proc_key(r: Rec) -> str:
    """The process a record came from: its result file (one JSON per process)."""
    return str(r["run_file"])


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
    # over the processes the case's step time comes from (the warm ones where there are any): a
    # cold-cache process's cold start or cold pass is not pooled with warm-cache ones; a field
    # only other processes measured (memory, in the run's first process only) from those
    steady = roles(timed)[0]
    for k in PER_PROCESS:
        if k in extra or k in row:
            src_k = steady if any(finite(r.get(k)) for r in steady) else timed
            vals = {proc_key(r): float(r[k]) for r in src_k if finite(r.get(k))}
            row[f"procs_{k}"] = vals
            pos = [v for v in vals.values() if v > 0]
            row[k] = (stats.geomean(pos) if len(pos) == len(vals) and vals else _med(vals.values())) if vals \
                else (row.get(k) if not timed else None)
    for k in SERIES:
        if k in extra:
            row[k] = _series_median([r[k] for r in timed if isinstance(r.get(k), str)]) if timed else None


def roles(timed: list[Rec]) -> tuple[list[Rec], list[Rec], list[Rec], str]:
    """(steady-state, cold, warm processes, in words where the steady state comes from)."""
    cold = [r for r in timed if r["compile_cache"] in COLD]
    warm = [r for r in timed if r["compile_cache"] in WARM]
    other = [r for r in timed if r["compile_cache"] not in COLD + WARM]
    if warm:
        return warm, cold, warm, "warm processes"
    if other:
        return other, cold + other, warm, "every process (no cold/warm roles: caches off or not recorded)"
    return cold, cold, warm, "cold processes (no warm process timed it)"


def _est(recs: list[Rec], col: str = "median_s") -> stats.Est:
    """An Est over processes of a record column; for step times also each process's second
    half of rounds (stability) and, with one process, its rounds."""
    values = {proc_key(r): r[col] for r in recs if finite(r.get(col))}
    if col != "median_s":
        return stats.Est.of(values)
    halves = {proc_key(r): stats.second_half_median(r["times"]) for r in recs}
    rounds = recs[0]["times"] if len(recs) == 1 else None
    return stats.Est.of(values, halves if all(finite(v) for v in halves.values()) else None, rounds)


def set_key(r: Rec) -> str:
    """The set a record's process belonged to (reports.commands.sets): the replicate of a case
    timed side by side."""
    return f"set {int(r['set'])}"


def _per_call(r: Rec) -> list[float]:
    return [b["s"] for b in r["blocks"]]


def _set_est(recs: list[Rec]) -> stats.Est | None:
    """An Est over sets of a case timed side by side: per set, the geometric mean of its blocks'
    time per call (its second half of cycles for the stability check; with one set, its blocks
    as the rounds of the indicative interval); None where no record has blocks. Keyed by set, so
    two cases of the same sets compare paired (stats.ratio): their blocks took turns."""
    recs = [r for r in recs if isinstance(r.get("blocks"), list) and r["blocks"] and finite(r.get("set"))]
    if not recs:
        return None
    values = {set_key(r): stats.geomean(_per_call(r)) for r in recs}
    halves = {set_key(r): stats.geomean(_per_call(r)[len(r["blocks"]) // 2:]) for r in recs}
    rounds = _per_call(recs[0]) if len(recs) == 1 else None
    return stats.Est.of(values, halves, rounds, unit="sets")


def _valid_first(r: Rec) -> bool:
    """A first call counts unless its record says it compiled nothing (first_call_valid False);
    records from before that field: a non-eager case whose counter never grew compiled
    nothing in its first call either."""
    v = r.get("first_call_valid")
    if isinstance(v, bool):
        return v
    return r["mode"] == "eager" or not (finite(r.get("compilations")) and r["compilations"] == 0)


def _first_calls(row: dict[str, Any], cold: list[Rec], warm: list[Rec], steady: list[Rec]) -> None:
    """First calls by role, invalid ones left out; compile latency with its interval."""
    first_cold = [r for r in cold if _valid_first(r)]
    row["first_call_invalid"] = sum(not _valid_first(r) for r in {id(r): r for r in cold + warm + steady}.values())
    for name, recs in (("cold", first_cold), ("warm", [r for r in warm if _valid_first(r)])):
        e = _est(recs, "first_call_s")
        row[f"est_first_{name}"] = e
        row[f"first_call_{name}_s"] = e.value
        row[f"first_call_{name}_lo_s"], row[f"first_call_{name}_hi_s"] = e.interval() if e.n >= 2 else (math.nan,) * 2
    row["n_first_cold"] = row["est_first_cold"].n
    row["first_call_s"] = row["first_call_cold_s"] if finite(row["first_call_cold_s"]) else row["first_call_warm_s"]
    row["compile_s"] = _med(r["compile_s"] for r in (first_cold or steady))
    _latency(row)


def _latency(row: dict[str, Any]) -> None:
    """Compile latency (cold first call minus the steady step) with its interval from draws."""
    row["compile_latency_s"] = row["compile_latency_lo_s"] = row["compile_latency_hi_s"] = math.nan
    if row["mode"] == "eager" or not finite(row["first_call_s"]):
        return
    row["compile_latency_s"] = row["first_call_s"] - row["median_s"]
    fe = row["est_first_cold"] if row["est_first_cold"].n else row["est_first_warm"]
    df_, ds = fe.draws(f"first|{row['case']}"), row["est"].draws(f"step|{row['case']}")
    if df_ is not None and ds is not None:
        with np.errstate(over="ignore"):        # a t draw of one degree of freedom can be huge
            row["compile_latency_lo_s"], row["compile_latency_hi_s"] = stats.percentile_interval(
                np.exp(df_) - np.exp(ds))


MAX_FIRST_RATIO = 3.0      # a cold first-call interval wider than hi/lo = 3 is not printed: values, not tested


def _pool_first_cold(rows: list[dict[str, Any]]) -> None:
    """Cold first calls get their interval from a spread pooled over the cases of one framework
    and mode (stats.pooled: the same log-scale spread assumed for all; a case whose own spread
    departs from the others' is left out of the pool and not tested): two cold processes a
    case give a t interval with df summed over the cases. Where the pool has fewer than
    MIN_TESTED - 1 degrees of freedom, or the interval's hi/lo exceeds MAX_FIRST_RATIO, the
    case's cold first call is not tested (its processes' values are shown)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        e = r.get("est_first_cold")
        if isinstance(e, stats.Est) and e.n:
            groups.setdefault((r["framework"], r["mode"], r.get("device"), r.get("preset")), []).append(r)
    for g in groups.values():
        sd, df, out = stats.pooled([r["est_first_cold"] for r in g])
        for i, r in enumerate(g):
            e = r["est_first_cold"]
            p = stats.Est(e.logs, pool=(sd, df, len(g) - len(out)) if i not in out else (math.nan, 0.0, 0))
            lo, hi = p.interval() if p.tested else (math.nan, math.nan)
            if not (finite(lo) and finite(hi) and hi / lo <= MAX_FIRST_RATIO):
                p, lo, hi = stats.Est(e.logs, pool=(math.nan, 0.0, 0)), math.nan, math.nan
            r["est_first_cold"], r["first_call_cold_lo_s"], r["first_call_cold_hi_s"] = p, lo, hi
            _latency(r)


def _one_case(g: list[Rec], extra: list[str] = ()) -> dict[str, Any]:
    first = g[0]
    row: dict[str, Any] = {k: first[k] for k in (*CASE_KEYS, "case", *CARRIED) if k in first}
    # memory measured in some processes only (a framework whose CPU memory needs a process of
    # its own: frameworks.harness.memory): the first process that measured it
    measured = next((r for r in g if finite(r.get("peak_memory_bytes"))), None)
    if measured is not None:
        row.update({k: measured[k] for k in ("peak_memory_bytes", "peak_memory_source", "memory_note")
                    if k in measured})
    # a set's control process (a second process of one framework, reports.commands.sets) is the
    # A/A comparison's only (reports.measures.controls): no case value comes from it
    timed = [r for r in g if r["status"] in TIMED and finite(r["median_s"]) and r.get("control") is not True]
    # a process that timed the case on a busy machine (still busy after the harness measured it
    # again: record `busy`) decides nothing: left out of every estimate, and counted
    busy = [r for r in timed if r.get("busy") is True]
    timed = [r for r in timed if r.get("busy") is not True]
    _extras(row, g, timed, list(extra))
    row.update(busy_left_out=len(busy), busy_note=_busy_note(busy), **_processes(g), n_processes=0,
               **{k: None for k in OBJECTS})
    if not timed:
        row.update(status=g[-1]["status"], reason=g[-1]["reason"], median_s=math.nan, first_call_s=math.nan,
                   busy=True if busy else None)
        if busy:     # timed, but only on a busy machine: no number, verdict, first call or choice from it
            row.update(status=busy[-1]["status"],
                       reason=f"{BUSY_LEFT_OUT} in all {stats.plural(len(busy), 'process')} that timed it")
        return row
    row["status"] = "fallback" if any(r["status"] == "fallback" for r in timed) else "ok"
    row["reason"] = next((r["reason"] for r in timed if r["status"] == row["status"] and r["reason"]), None)
    steady, cold, warm, where = roles(timed)
    side = _set_est(timed)
    if side is not None:      # timed side by side: every set, cold and warm, one value each
        steady, where = timed, "sets, side by side (every set's blocks, cold and warm)"
    e = side or _est(steady)
    row.update(est=e, n_processes=e.n, n_cold=len(cold), n_warm=len(warm), steady_from=where, median_s=e.value,
               interval_note=e.note().replace("process", "set") if side else e.note(), warm_spread=e.spread(),
               warm_sd=e.sd)
    row["median_lo_s"], row["median_hi_s"] = e.interval()
    # cold against warm: the cold sets' blocks against the warm sets' side by side; else the cold
    # processes' medians against the warm ones (the steady state)
    ec = (_set_est(cold) or stats.Est({})) if side is not None else _est(cold)
    ew = (_set_est(warm) or stats.Est({})) if side is not None else e
    row["est_cold"] = ec
    row["cold_over_warm"] = row["cold_over_warm_lo"] = row["cold_over_warm_hi"] = math.nan
    if ec.n and warm and ew.n:
        r = stats.ratio(ec, ew)
        row["cold_over_warm"] = r.value
        row["cold_over_warm_lo"], row["cold_over_warm_hi"] = r.interval()
    _first_calls(row, cold, warm, steady)
    for c in ("compilations", "compilations_timed"):
        row[c] = max((float(r[c]) for r in timed if finite(r[c])), default=math.nan)
    rec = [bool(r["recompiled_during_timing"]) for r in timed if isinstance(r["recompiled_during_timing"], bool)]
    row["recompiled_during_timing"] = any(rec) if rec else None
    row["busy"] = False if busy or any(isinstance(r.get("busy"), bool) for r in timed) else None
    return row


def _busy_note(busy: list[Rec]) -> str | None:
    """Why each process left out as busy was: the other processes' CPUs, steal, load, re-measurements."""
    return "; ".join(
        f"{r['run_file']}: other processes {_fmt(r.get('other_cpu'))} CPUs, steal "
        f"{100 * (r.get('steal_frac') or 0):.1f}%, load {_fmt(r.get('load_avg'))}"
        + (f", after {stats.plural(int(r['busy_retries']), 're-measurement')} and "
           f"{stats.fmt_seconds(r.get('busy_wait_s') or 0)} waiting"
           if finite(r.get("busy_retries")) and r["busy_retries"] else "") for r in busy) or None


def _processes(g: list[Rec]) -> dict[str, Any]:
    """What a case's row says of the processes that ran it: files, date, caches, the machine's peaks."""
    return dict(
        run_file=", ".join(sorted({r["run_file"] for r in g})),
        date=max((r["date"] for r in g if isinstance(r["date"], str)), default=None),
        compile_cache=", ".join(sorted({str(r["compile_cache"]) for r in g if r["compile_cache"] is not None}))
        or None, gemm_flops=max((float(r["gemm_flops"]) for r in g), default=math.nan),
        util_peak_flops=max((float(r["util_peak_flops"]) for r in g if finite(r.get("util_peak_flops"))),
                            default=math.nan),
        # MFU's peaks: the best any process measured (a busy moment only lowers one), the vendor's
        peak_precision=next((r["peak_precision"] for r in g if isinstance(r.get("peak_precision"), str)), None),
        peak_flops=max((float(r["peak_flops"]) for r in g if finite(r.get("peak_flops"))), default=math.nan),
        vendor_peak_flops=next((float(r["vendor_peak_flops"]) for r in g if finite(r.get("vendor_peak_flops"))),
                               math.nan))


# A case's reason where every process that timed it found the machine busy.
BUSY_LEFT_OUT = "left out: the machine was busy during its timed rounds, also when measured again,"


def _fmt(x: Any) -> str:
    return f"{x:.2f}" if finite(x) else "n/a"


def _pick_configuration(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per case, the records of its most recent configuration; notes on the others. A record
    the runner wrote for a case its process never measured (shape "n/a") takes its case's
    measured configuration, so it joins it instead of replacing it as the newest."""
    blank = df["shape"] == "n/a"
    filled = {}
    for k in CONFIG_KEYS[1:]:
        measured = df.loc[~blank].groupby("case")[k].first()
        filled[k] = df[k].where(~blank, df["case"].map(measured)).fillna(df[k])
    config = pd.Series(joined_keys(df.assign(**filled), CONFIG_KEYS), index=df.index)
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


class SharedObject:
    """An object in a frame's attrs (the report's stats.Family) that pandas passes on by
    reference, not by deep copy."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __deepcopy__(self, memo: dict[int, Any]) -> "SharedObject":
        return self


def is_cases(df: pd.DataFrame) -> bool:
    return "n_processes" in df.columns


def first_position(recs: list[Rec]) -> dict[str, tuple[float, int]]:
    """What the compiler start-up (measured apart, before a mode's first case) still leaves in
    the first case a process runs in a compiled mode: per "framework/mode", the geometric
    mean over cases of (the case's cold first calls where it was its process's first case of
    the mode) / (its cold first calls where it came later), over the cases seen in both
    positions, and how many those are. 1.0: the position does not matter."""
    cold = [r for r in recs if r.get("status") in TIMED and r.get("compile_cache") == "cold"
            and r.get("mode") != "eager" and finite(r.get("first_call_s")) and _valid_first(r)
            and finite(r.get("order"))]
    firsts: dict[tuple[str, str], float] = {}
    for r in cold:
        k = (proc_key(r), r["mode"])
        firsts[k] = min(firsts.get(k, math.inf), r["order"])
    by_case: dict[tuple[str, str], tuple[list[float], list[float]]] = {}   # (framework/mode, case)
    for r in cold:
        pos = by_case.setdefault((f"{r['framework']}/{r['mode']}", r["case"]), ([], []))
        pos[0 if r["order"] == firsts[(proc_key(r), r["mode"])] else 1].append(math.log(r["first_call_s"]))
    ratios: dict[str, list[float]] = {}
    for (key, _), (first, later) in by_case.items():
        if first and later:
            ratios.setdefault(key, []).append(float(np.mean(first) - np.mean(later)))
    return {k: (math.exp(float(np.mean(v))), len(v)) for k, v in sorted(ratios.items())}


def cases(df: pd.DataFrame, salt: str = "") -> pd.DataFrame:
    """One row per case (see the module docstring); a frame that is already one is returned
    as is. `salt` prefixes every process key, so the same file read as OLD and NEW (fwbench
    compare) counts as different processes."""
    if is_cases(df):
        return df
    attrs = {k: Shared(v) if isinstance(v, list) else v for k, v in df.attrs.items()}
    df = df.copy(deep=False)
    df.attrs = {}
    if salt and not df.empty:
        df["run_file"] = salt + df["run_file"].astype(str)
    kept, notes = _pick_configuration(df) if not df.empty else (df, [])
    groups: dict[str, list[Rec]] = {}
    for r in kept.to_dict("records"):
        groups.setdefault(r["case"], []).append(r)
    extra = [c for c in df.columns if c not in known_columns() and c not in AGGREGATE]
    rows = [_one_case(g, extra) for g in groups.values()]
    _pool_first_cold(rows)
    procs = [f"procs_{k}" for k in PER_PROCESS if k in extra or k in CARRIED]
    cols = [*CASE_KEYS, "case", "status", "reason", *CARRIED, *AGGREGATE, *extra, *OBJECTS, *procs]
    out = pd.DataFrame(rows).reindex(columns=cols)
    out = _speedups(out)
    if not out.empty:
        out = out.sort_values(["workload", "task", "framework", "mode", "strategy", "preset", "device", "status"],
                              key=sort_key, kind="stable").reset_index(drop=True)
    out.attrs = attrs
    out.attrs["notes"] = Shared(notes)
    out.attrs["first_position"] = first_position(kept.to_dict("records"))
    multi = out[out["n_processes"] > 1] if not out.empty else out
    out.attrs["warm_spread"] = float(multi["warm_spread"].median()) if len(multi) else math.nan
    out.attrs["warm_sd"] = float(multi["warm_sd"].median()) if len(multi) else math.nan
    cw = out["cold_over_warm"].dropna() if not out.empty else pd.Series(dtype=float)
    out.attrs["cold_over_warm"] = float(cw.median()) if len(cw) else math.nan
    out.attrs["max_processes"] = int(out["n_processes"].max()) if not out.empty else 0
    return out


def known_columns() -> set[str]:
    """Columns every frame of reports.load has: the rest are a workload's own record keys."""
    return set(rdata.columns())


def process_columns(df: pd.DataFrame) -> list[str]:
    """The per-process object columns (est*, procs_<field>): kept out of CSV files."""
    return [c for c in df.columns if c in OBJECTS or c.startswith("procs_")]


def _speedups(out: pd.DataFrame) -> pd.DataFrame:
    out = out.copy()
    items, med = out["items"].astype(float), out["median_s"].astype(float)
    out["throughput"] = items / med
    out["throughput_lo"], out["throughput_hi"] = items / out["median_hi_s"], items / out["median_lo_s"]
    out["utilisation"] = out["flops"].astype(float) / med / out["util_peak_flops"]   # at the case's precision
    for col, peak in (("mfu", "peak_flops"), ("mfu_vendor", "vendor_peak_flops")):   # at the case's precision
        out[col] = out["flops"].astype(float) / med / out[peak].astype(float) if peak in out else math.nan
    out["eager_case"] = None
    for c in ("speedup_vs_eager", "speedup_lo", "speedup_hi"):
        out[c] = math.nan
    if out.empty:
        return out
    key = joined_keys(out, (*BASELINE, "threads", "shape"))
    eager = {k: i for k, i, m, t in zip(key, out.index, out["mode"], med) if m == "eager" and finite(t)}
    # A variant that eager mode does not have (torch's train-step recipes) is compared with
    # the eager case of the default strategy.
    default_key = joined_keys(out.assign(strategy=math.nan), (*BASELINE, "threads", "shape"))
    for i, k, dk in zip(out.index, key, default_key):
        j = eager.get(k, eager.get(dk))
        if j is None or not finite(med[i]):
            continue
        r = stats.ratio(out.at[j, "est"], out.at[i, "est"])
        out.at[i, "speedup_vs_eager"] = r.value
        out.at[i, "speedup_lo"], out.at[i, "speedup_hi"] = r.interval()
        out.at[i, "eager_case"] = out.at[j, "case"] if j != i else None
    return out


def eager_of(df: pd.DataFrame, r: pd.Series) -> pd.Series | None:
    """The eager case a case's speedup is over (None for eager cases and cases without one)."""
    c = r.get("eager_case")
    if not isinstance(c, str):
        return None
    at = _positions(df).get(c)
    if at is not None and df["case"].iat[at] != c:        # the frame's rows changed since it was indexed
        at = _positions(df, again=True).get(c)
    return None if at is None else df.iloc[at]


# A frame's first row of each case, by position: eager_of is asked once per case by every
# judgement, sentence and figure (2,500 times in one report), and a boolean mask over the frame
# each time was a tenth of the report's time. Kept per frame while that frame lives.
_INDEXED: dict[int, tuple[weakref.ref, int, dict[str, int]]] = {}


def _positions(df: pd.DataFrame, again: bool = False) -> dict[str, int]:
    hit = _INDEXED.get(id(df))
    if hit is not None and hit[0]() is df and hit[1] == len(df) and not again:
        return hit[2]
    for k in [k for k, (ref, _, _) in _INDEXED.items() if ref() is None]:
        del _INDEXED[k]
    pos: dict[str, int] = {}
    for i, c in enumerate(df["case"].tolist()):
        pos.setdefault(c, i)
    _INDEXED[id(df)] = (weakref.ref(df), len(df), pos)
    return pos

"""Scale-out: data-parallel train steps on N devices against the same step on one.

Weak scaling: an N-device case keeps the preset's batch per device (workloads/parallel.py),
so its ideal step time is its one-device twin's, and the efficiency is t(1) / t(N). A
twin is the same framework, workload, task, mode, strategy, precision, preset, device kind
and threads per device. Each process of the N-device unit is paired with the one-device
process of the same round (`torch-x2-1.json` with `torch-1.json`: they ran back to back in
the run's schedule), and t(N) / t(1) is judged as one estimate over those pairs in a Holm
family of the section's own (reports.measures.stats.Family), so its verdict reads:
N devices "slower" (efficiency below 1 - margin), "equivalent" (perfect weak scaling within
the margin) or "inconclusive". A case with more devices x threads than CPUs
(`oversubscribed`) measures sharing, not scaling: it gets no efficiency.

Collectives: each framework's own account of one step (record `collectives`) against the
analytic all-reduce of every gradient once. Anchors from published results are cited, never
measured here.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from reports.measures import stats
from reports.measures.bullets import Finding
from reports.measures.data import TIMED, framework_order
from workloads.parallel import NO_SYNC, SHARDED, one_device_strategy
from workloads.record import NOT_ITS_API

TWIN = ("framework", "workload", "task", "mode", "strategy", "precision", "preset", "device")

# Published scale-out results, cited (not measured by fwbench) for orientation.
ANCHORS = pd.DataFrame([
    {"result": "MLPerf Training v4.0: GPT-3 175B trained to target", "scale": "11,616 H100",
     "figure": "3.4 minutes", "source": "MLCommons, MLPerf Training v4.0 results (2024)"},
    {"result": "Megatron-LM model FLOPs utilisation", "scale": "96 to 4,608 H100",
     "figure": "MFU 47 % to 42 %", "source": "NVIDIA Megatron-LM README, weak-scaling table"},
    {"result": "MaxText per-chip throughput kept", "scale": "256 to 8,192 chips",
     "figure": "90 %", "source": "Google MaxText README"},
])
CAVEAT = ("Simulated CPU devices exchange gradients through memory (gloo over loopback for torch, "
          "XLA's in-process CPU collectives for JAX, TensorFlow's collective ops between logical "
          "devices): these numbers do not predict NVLink or InfiniBand, where the collectives, their "
          "overlap with the backward pass and the devices' speed all differ. Steps of a few "
          "milliseconds (the tiny preset) are dominated by the synchronisation itself.")


def has(df: pd.DataFrame) -> bool:
    """Whether any case ran on several devices."""
    return not split(df)[1].empty


def split(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one-device cases, data-parallel cases)."""
    if "n_devices" not in df.columns:
        return df, df.iloc[0:0]
    n = pd.to_numeric(df["n_devices"], errors="coerce").fillna(1)
    return df[n <= 1], df[n > 1]


def _round_key(key: str) -> str:
    """A process key (its result file) without the placement: torch-x2-1.json -> torch-1.json."""
    return re.sub(r"-x\d+(?=(-\d+)?\.json$)", "", key)


def _value(r: pd.Series, k: str) -> Any:
    v = r.get(k)
    return None if isinstance(v, float) and math.isnan(v) else v


_OWN = object()


def _twin_key(r: pd.Series, strategy: Any = _OWN) -> tuple[Any, ...]:
    """The keys a case shares with its twins; `strategy`, where given, replaces its own (the
    one-device twin of a data-parallel strategy is the default step:
    workloads.parallel.one_device_strategy)."""
    values = {k: _value(r, k) for k in TWIN}
    if strategy is not _OWN:
        values["strategy"] = strategy
    return (*values.values(), int(r.get("threads_per_device") or r.get("threads") or 0))


def _timed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"].isin(TIMED) & df["median_s"].notna()]


def pairs(df: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """(N-device case, its one-device twin) for every timed data-parallel case that has one;
    the no-sync probe is no training step and has none."""
    one, many = split(_timed(df))
    twins = {_twin_key(r): r for _, r in one.iterrows()}
    keys = [(r, _twin_key(r, one_device_strategy(_value(r, "strategy")))) for _, r in many.iterrows()
            if _value(r, "strategy") != NO_SYNC]
    return [(r, twins[k]) for r, k in keys if k in twins]


def _paired(a: pd.Series, b: pd.Series, key: Any = _round_key) -> stats.Est | None:
    """t(a) / t(b) per round of the run: each N-device process over the one-device process of
    its round (key=_round_key), or over the same process (key=str: two cases of one process)."""
    ea, eb = a.get("est"), b.get("est")
    if not isinstance(ea, stats.Est) or not isinstance(eb, stats.Est):
        return None
    base = {key(k): v for k, v in eb.logs.items()}
    common = {k: v for k, v in ea.logs.items() if key(k) in base}
    if not common:
        return None
    return stats.Est.of({k: math.exp(v - base[key(k)]) for k, v in common.items()})


def weak_scaling(df: pd.DataFrame, fam: stats.Family | None) -> pd.DataFrame:
    """Per data-parallel case: devices, step time on 1 and N devices, the efficiency t(1)/t(N)
    and the verdict on t(N)/t(1) [interval at its level]; none for oversubscribed cases."""
    rows = []
    for a, b in pairs(df):
        over = bool(a.get("oversubscribed"))
        eff = b["median_s"] / a["median_s"]
        row = {"framework": a["framework"], "task": f"{a['workload']} {a['task']}", MODE: _mode(a),
               "devices": int(a["n_devices"]),
               "threads / device": int(a.get("threads_per_device") or 0),
               "global batch": _int(a.get("global_batch")),
               "step, 1 device": stats.fmt_seconds(b["median_s"]),
               "step, N devices": stats.fmt_seconds(a["median_s"])}
        if over:
            row["weak-scaling efficiency"] = "none: oversubscribed (devices x threads > CPUs)"
            row["verdict"] = "not a scaling measurement"
        else:
            row["weak-scaling efficiency"] = f"{eff:.2f}"
            est = _paired(a, b)
            if fam is not None and est is not None and est.n >= 2:
                j = fam.judge(f"scale|{a['case']}", est, None, (a["case"], b["case"]))
                row["t(N) / t(1)"] = j.interval_text(speed=False, label="ratio")
                row["verdict"] = f"{a['n_devices']} devices " + stats.words(j.verdict, fam.margin)
            else:
                row["verdict"] = "inconclusive: fewer than 2 paired processes"
        rows.append(row)
    return _ordered(pd.DataFrame(rows), "task")


def communication(df: pd.DataFrame) -> pd.DataFrame:
    """Per data-parallel step that has its no-sync probe in the same processes: the exposed
    communication share 1 - t(no-sync) / t(data parallel), and the sharded form's step over
    the data-parallel one, each paired within processes [95% t interval over them; with
    one process none]. Oversubscribed cases share cores: their share is not communication
    alone, and says so."""
    _, many = split(_timed(df))
    by = {_twin_key(r): r for _, r in many.iterrows()}
    rows = []
    for _, dp in many.iterrows():
        if _value(dp, "strategy") is not None:
            continue
        probe, sharded = by.get(_twin_key(dp, NO_SYNC)), by.get(_twin_key(dp, SHARDED))
        if probe is None and sharded is None:
            continue
        row = {"framework": dp["framework"], "task": f"{dp['workload']} {dp['task']}", "mode": dp["mode"],
               "devices": int(dp["n_devices"]), "data-parallel step": stats.fmt_seconds(dp["median_s"])}
        if probe is not None:
            est = _paired(probe, dp, key=str)
            share = 1 - probe["median_s"] / dp["median_s"]
            row["step without synchronisation"] = stats.fmt_seconds(probe["median_s"])
            row["exposed communication share"] = f"{share:.2f}" + _interval(est, share=True)
        else:
            row["step without synchronisation"] = row["exposed communication share"] = "n/a"
        if sharded is not None:
            est = _paired(sharded, dp, key=str)
            row["sharded / data parallel"] = f"{sharded['median_s'] / dp['median_s']:.2f}" + _interval(est)
        else:
            row["sharded / data parallel"] = "n/a"
        if bool(dp.get("oversubscribed")):
            row["exposed communication share"] += " (oversubscribed: includes core sharing)"
        rows.append(row)
    return _ordered(pd.DataFrame(rows), "task")


def slowdown_split(df: pd.DataFrame) -> pd.DataFrame:
    """Per data-parallel step that has a one-device twin and its no-sync probe in the same
    processes: the slowdown t(N)/t(1) as the product of the non-communication factor
    t(no-sync)/t(1) (what N devices cost without any gradient synchronisation: core, thread
    pool or memory-bandwidth sharing, the step's own overheads) and the communication factor
    t(data parallel)/t(no-sync) (what the synchronisation adds). Each is paired as the
    weak-scaling ratio and the exposed-communication share are: t(N) and t(no-sync) over the
    one-device process of the same round, t(data parallel)/t(no-sync) within the same
    process [95% t interval over them]. `cores` says how the devices sat on the CPUs."""
    one, many = split(_timed(df))
    twins = {_twin_key(r): r for _, r in one.iterrows()}
    by = {_twin_key(r): r for _, r in many.iterrows()}
    rows = []
    for _, dp in many.iterrows():
        if _value(dp, "strategy") is not None:
            continue
        base, probe = twins.get(_twin_key(dp)), by.get(_twin_key(dp, NO_SYNC))
        if base is None or probe is None:
            continue
        t1, tn, t0 = base["median_s"], dp["median_s"], probe["median_s"]
        rows.append({"framework": dp["framework"], "task": f"{dp['workload']} {dp['task']}", "mode": dp["mode"],
                     "devices": int(dp["n_devices"]),
                     "slowdown t(N) / t(1)": f"{tn / t1:.2f}" + _interval(_paired(dp, base)),
                     "non-communication t(no-sync) / t(1)": f"{t0 / t1:.2f}" + _interval(_paired(probe, base)),
                     "communication t(N) / t(no-sync)": f"{tn / t0:.2f}" + _interval(_paired(dp, probe, key=str)),
                     "cores": cores(dp)})
    return _ordered(pd.DataFrame(rows), "task")


def cores(r: pd.Series) -> str:
    """In words, how a data-parallel case's devices sat on the machine's CPUs: devices x
    threads per device against the CPUs the record's machine had (cpus_available, else
    cores), and whether the devices shared one process's thread pool (its pinning)."""
    n, t = int(r["n_devices"]), int(r.get("threads_per_device") or 1)
    cpus = next((int(v) for v in (_value(r, "cpus_available"), _value(r, "cores")) if _finite(v)), None)
    pool = "share" in str(_value(r, "pinning") or "")
    have = (f"{n} devices x {stats.plural(t, 'thread')} on {cpus} CPUs" if cpus else
            f"{n} devices x {stats.plural(t, 'thread')}, CPUs unknown")
    if cpus and n * t > cpus:
        return f"devices share cores: {have}"
    if pool:
        return f"devices share one process's thread pool (not pinned): {have}"
    if cpus and n * t == cpus:
        return f"one core per device, none spare for the timing process's other threads: {have}"
    return f"own cores: {have}"


def _interval(est: stats.Est | None, share: bool = False) -> str:
    """A ratio's interval over processes; with share=True that of 1 - the ratio (1 - [hi, lo])."""
    if est is None or est.n < 2:
        return " (one process: no interval)"
    lo, hi = est.interval()
    return f" [{1 - hi:.2f}, {1 - lo:.2f}]" if share else f" [{lo:.2f}, {hi:.2f}]"


MODE = "mode, strategy"


def _mode(r: pd.Series) -> str:
    """The mode and the data-parallel strategy in one column: 'compiled, sharded'."""
    return f"{r['mode']}, {_value(r, 'strategy') or 'data parallel'}"


def _ordered(out: pd.DataFrame, by: str) -> pd.DataFrame:
    """Rows in the report's framework order, then by `by`, mode and devices."""
    if out.empty:
        return out
    order = framework_order(out["framework"])
    out["_k"] = [order.index(f) for f in out["framework"]]
    mode = MODE if MODE in out.columns else "mode"
    return out.sort_values(["_k", by, mode, "devices"], kind="stable").drop(columns="_k").reset_index(drop=True)


def judged(df: pd.DataFrame, margin: float) -> pd.DataFrame:
    """weak_scaling with its verdicts, after the family's two passes."""
    fam = stats.Family(margin=margin)
    weak_scaling(df, fam)
    fam.close()
    return weak_scaling(df, fam)


def _int(x: Any) -> str:
    try:
        return str(int(x))
    except (TypeError, ValueError):
        return "n/a"


def collectives(df: pd.DataFrame) -> pd.DataFrame:
    """Per framework, workload, mode and device count: what one step communicates by the
    framework's own account against the analytic gradient all-reduce, and its source."""
    _, many = split(df)
    rows = []
    seen = set()
    for _, r in many.iterrows():
        key = (r["framework"], r["workload"], r["mode"], _value(r, "strategy"), r.get("precision"),
               int(r["n_devices"]))
        if key in seen or not isinstance(r.get("collectives_source"), str):
            continue
        seen.add(key)
        ops = json.loads(r["collectives"]) if isinstance(r.get("collectives"), str) else {}
        wire, analytic = r.get("wire_bytes"), r.get("analytic_wire_bytes")
        rows.append({
            "framework": r["framework"], "workload": r["workload"], MODE: _mode(r), "devices": key[5],
            "collectives per step": ", ".join(f"{op} x{v['count']}: {_mib(v['bytes'])}" for op, v in ops.items())
                                    or ("none" if key[3] == NO_SYNC else "not observable"),
            "on the wire (ring)": _mib(wire),
            "analytic": _mib(analytic) if _finite(analytic) else "none (no-sync)" if key[3] == NO_SYNC else "n/a",
            "measured / analytic": (f"{float(wire) / float(analytic):.3f}" if _finite(wire) and _finite(analytic)
                                    and float(analytic) else "n/a"),
            "source": _short(r["collectives_source"], 90)})
    return _ordered(pd.DataFrame(rows), "workload")


def checks(df: pd.DataFrame) -> pd.DataFrame:
    """Per data-parallel case: the equivalence check against one device before timing."""
    _, many = split(df)
    mine = many[~many["reason"].fillna("").str.match(NOT_ITS_API)]     # another framework's mode: n/a
    rows = [{"framework": r["framework"], "task": f"{r['workload']} {r['task']}", MODE: _mode(r),
             "devices": int(r["n_devices"]), "status": r["status"],
             "max |diff| / max |param|": (f"{r['dp_check_rel']:.1e}" if _finite(r.get("dp_check_rel")) else
                                          "not compared (no-sync probe)" if _value(r, "strategy") == NO_SYNC
                                          else "n/a"),
             "bound": (f"{r['dp_check_rtol']:.0e}" if _finite(r.get("dp_check_rtol")) else "n/a"),
             "first-step gradients, max |diff| / max |grad| (bound)": (
                 f"{r['dp_check_grad_rel']:.1e} ({r['dp_check_grad_rtol']:.0e})" if _finite(r.get("dp_check_grad_rel"))
                 else "not compared (no-sync probe)" if _value(r, "strategy") == NO_SYNC else "n/a"),
             "placement on CPUs, or why not run": _short(r.get("pinning"), 100) or _short(r.get("reason"), 100)}
            for _, r in mine.iterrows()]
    return _ordered(pd.DataFrame(rows), "task")


def memory(df: pd.DataFrame) -> pd.DataFrame:
    """Per data-parallel step that has its sharded form in the results: the parameters and
    optimizer state one device holds between steps (record device_state_bytes: counted from
    the framework's own arrays, see device_state_source), data parallel against sharded."""
    _, many = split(df)
    by = {_twin_key(r): r for _, r in many.iterrows()}
    rows = []
    for _, dp in many.iterrows():
        sharded = by.get(_twin_key(dp, SHARDED))
        if _value(dp, "strategy") is not None or sharded is None or sharded["status"] not in TIMED:
            continue
        a, b = dp.get("device_state_bytes"), sharded.get("device_state_bytes")
        rows.append({"framework": dp["framework"], "task": f"{dp['workload']} {dp['task']}", "mode": dp["mode"],
                     "devices": int(dp["n_devices"]), "data parallel, per device": _mib(a),
                     "sharded, per device": _mib(b),
                     "sharded / data parallel": f"{float(b) / float(a):.2f}" if _finite(a) and _finite(b) and float(a)
                     else "n/a",
                     "instrument": _short(_value(dp, "device_state_source"), 120) or "not recorded"})
    return _ordered(pd.DataFrame(rows), "task")


def _short(text: Any, n: int = 160) -> str:
    """Text cut at a word before n characters; '' for none (NaN included)."""
    t = text if isinstance(text, str) else ""
    return t if len(t) <= n else t[:n - 1].rsplit(" ", 1)[0] + " ..."


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _mib(b: Any) -> str:
    return f"{float(b) / 2 ** 20:.2f} MiB" if _finite(b) else "n/a"


def scope(df: pd.DataFrame) -> str:
    """The scope line's words on placements: '' when every case ran on one device."""
    _, many = split(df)
    if many.empty:
        return ""
    counts = sorted({int(n) for n in many["n_devices"]})
    sim = "simulated " if "placement" in many.columns and many["placement"].fillna("").str.contains(
        "simulated").any() else ""
    per = sorted({int(x) for x in pd.to_numeric(many.get("threads_per_device"), errors="coerce").dropna()})
    return (f"Data parallel: train steps also on {', '.join(map(str, counts))} {sim}devices"
            + (f", {', '.join(map(str, per))} thread{'s' if per != [1] else ''} per device" if per else "")
            + " (Scale-out section; the other sections read one-device cases).")


def _strategy_words(r: pd.Series) -> str:
    strategy = str(r[MODE]).partition(", ")[2]
    return f" ({strategy})" if strategy and strategy != "data parallel" else ""


def _span(values: list[str]) -> str:
    """'0.10-0.75 over 16 configurations': the range of the figures' leading numbers."""
    x = [float(m.group()) for v in values if (m := re.match(r"-?\d+(\.\d+)?", v))]
    n = f"{len(values)} configuration{'' if len(values) == 1 else 's'}"
    return f"{min(x):.2f}-{max(x):.2f} over {n}" if x else n


def sentence(df: pd.DataFrame, margin: float) -> list[str]:
    """The Summary's bullets on scale-out, or nothing when no case ran on several devices:
    each gives its figure's range; every configuration's figure is a row of the table under
    the bullets (analysis.bullets)."""
    t = judged(df, margin)
    if t.empty:
        return []
    effs = [(f"{r['framework']} {r['task']} {str(r[MODE]).partition(', ')[0]}{_strategy_words(r)}",
             str(r["weak-scaling efficiency"]))
            for _, r in t.iterrows() if not str(r["weak-scaling efficiency"]).startswith("none")]
    if not effs:
        return ["Data parallel ran only oversubscribed (more simulated devices x threads than CPUs): "
                "checked for correctness, no scaling figure."]
    judged_rows = t[~t["verdict"].str.startswith(("inconclusive: fewer", "not a scaling"))]
    tail = ("" if len(judged_rows) else
            " Indicative only: fewer than 2 paired processes per case, so no verdict.")
    out = [Finding(f"Weak-scaling efficiency t(1)/t(N) on simulated CPU devices (not evidence about GPU "
                   f"interconnects): {_span([e for _, e in effs])} (each in the table).{tail}",
                   "weak-scaling efficiency t(1)/t(N)", effs)]
    c = communication(df)
    shares = [(f"{r['framework']} {r['task']} {r['mode']}", str(r["exposed communication share"]))
              for _, r in c.iterrows() if r["exposed communication share"] != "n/a"] if len(c) else []
    if shares:
        out.append(Finding("Exposed communication share of the data-parallel step, 1 - t(no-sync)/t(data parallel) "
                           f"[95% interval over processes]: {_span([x for _, x in shares])} (each in the table).",
                           "exposed communication share", shares))
    sp = slowdown_split(df)
    if len(sp):
        lead = [c + (" t(N) / t(1)", " t(no-sync) / t(1)", " t(N) / t(no-sync)")[i]
                for i, c in enumerate(("slowdown", "non-communication", "communication"))]
        parts = [(f"{r['framework']} {r['task']} {r['mode']}",
                  "{} = {} x {}".format(*(r[c].split(" ")[0] for c in lead)) + f" ({r['cores']})")
                 for _, r in sp.iterrows()]
        out.append(Finding("The N-device slowdown t(N)/t(1) splits into the step without synchronisation over one "
                           "device (not communication: devices sharing cores or a thread pool) times the "
                           f"synchronisation's own factor: {_span([x for _, x in parts])} (each split in the table).",
                           "slowdown t(N)/t(1) = without sync x sync", parts))
    return out



"""One validation layer for everything `reports` reads from a result file.

A result file is hostile input until checked: every field is checked for its type (the
record's from workloads.record.FIELDS, so a field added there is checked here too) and its
range (RANGES below; a numeric field without an entry must at least be finite). Checks
return short phrases naming the field; data.py turns them into one line per skipped
record or ignored field, naming the file and the record, and keeps reading the rest.

    record_problems(rec)         the record's type and range problems ([] when valid)
    stats_problems(st)           pytest-benchmark's `stats` of a timed case
    machine(info)                machine_info.fwbench with bad fields dropped, and why
    name_problem(key)            an extra record key that could not become a column

Framework-free and pandas-free.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping

from workloads.record import FIELDS, MODES, STATUSES
from workloads.record import problems as type_problems

MAX_TEXT = 10_000                 # longest string kept from a result file (reasons are cut at 1,000)
MAX_ROUNDS = 10_000_000           # most per-round times a case may carry
INF = math.inf

# field -> (lowest, highest, lowest excluded). Times are seconds, rates FLOP/s.
RANGES: dict[str, tuple[float, float, bool]] = {
    "threads": (1, 1 << 20, False),
    "items": (0, 1e300, False),
    "flops": (0, 1e300, False),
    "first_call_s": (0, 1e9, True),
    "compilations": (0, 1 << 53, False),
    "peak_memory_bytes": (0, 1 << 62, False),
    "schema": (1, 1 << 20, False),
    "bare_loop_median_s": (0, 1e9, True),
    # pytest-benchmark's stats
    "median": (0, 1e9, True), "mean": (0, 1e9, True), "min": (0, 1e9, True), "max": (0, 1e9, True),
    "stddev": (0, 1e9, False), "iqr": (0, 1e9, False), "rounds": (1, MAX_ROUNDS, False),
    "data[]": (0, 1e9, True),
    # machine_info.fwbench
    "gemm_flops": (0, 1e300, True), "cpus_available": (1, 1 << 20, False),
    "cold": (0, 1 << 20, False), "warm": (0, 1 << 20, False), "env_pad_bytes": (0, 1 << 40, False),
    "env_bytes": (0, 1 << 40, False), "set": (0, 1 << 20, False), "start_position": (0, 1 << 20, False),
    "set_wall_s": (0, 1e9, False),
    # host state over a case's timed rounds
    "other_cpu": (0, 1 << 20, False), "steal_frac": (0, 1, False), "load_avg": (0, 1e9, False),
}
CHOICES: dict[str, tuple[str, ...]] = {"mode": MODES, "status": STATUSES}

# machine_info.fwbench: field -> accepted types (None is always accepted: not measured)
MACHINE_TYPES: dict[str, tuple[type, ...]] = {
    "gemm_flops": (int, float), "gemm_note": (str,), "threads": (int,), "cpus_available": (int,),
    "allocator": (str,), "cpu": (str,), "accelerator": (str,), "fwbench_commit": (str,), "date": (str,),
    "preset": (str,), "device": (str,), "matmul_precision": (str,), "frameworks": (dict,), "missing": (dict,),
    "note": (str,), "ended_by": (str,),
    # the run keys (workloads.record.RUN_INFO)
    "run_id": (str,), "repeat": (int,), "repeats": (int,), "case_order": (str,), "compile_cache": (str,),
    "gc": (str,), "compile_cache_dirs": (dict,), "gemm_rates": (dict,), "settings": (dict,),
    "cache_role": (str,), "cold": (int,), "warm": (int,), "env_pad_bytes": (int,), "env_bytes": (int,),
    "cpu_flags": (list,), "numpy": (str,), "workloads": (list,),
    # the machine's fingerprint (frameworks.harness.machine.machine_fingerprint) and placement
    "machine_id": (str,), "host": (str,), "cores": (int,), "isa_flags": (list,), "driver": (str,),
    "gpu_model": (str,), "devices": (int,),
    # the scheduler's job that ran the process (reports.commands.launch.job_info): id, host, start, end
    "job": (dict,),
    # the compiler's start-up per compiled mode: {"framework/mode": seconds}
    "compiler_startup": (dict,),
    # the process's place in its set (reports.commands.sets): set index, cold or warm, start position,
    # whether it is the set's control (a second process of one framework), and which of the two is
    # the control comparison's reference in this set
    "set": (int,), "set_role": (str,), "start_position": (int,), "control": (bool,), "control_reference": (str,),
    "set_wall_s": (int, float),
}
# Mapping fields of machine_info.fwbench: what each value must be.
_MAPPED = {"compile_cache_dirs": "text", "gemm_rates": "rate", "settings": "settings", "job": "text",
           "compiler_startup": "rate"}
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")


def number_problem(name: str, v: Any) -> str | None:
    """Why `v` is not an acceptable value of the numeric field `name` (None when it is)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"field {name!r} is {type(v).__name__} {short_repr(v)}, not a number"
    try:
        x = float(v)
    except OverflowError:
        return f"field {name!r} is an integer too large ({len(str(v))} digits)"
    lo, hi, open_lo = RANGES.get(name, (-INF, INF, False))
    if not math.isfinite(x):
        return f"field {name!r} is {x}, not a finite number"
    if x < lo or (open_lo and x == lo) or x > hi:
        rng = f"{'above' if open_lo else 'at least'} {lo:g}" + (f" and at most {hi:g}" if hi < 1e300 else "")
        return f"field {name!r} is {short_repr(v)}, must be {rng}"
    return None


def text_problem(name: str, v: Any) -> str | None:
    if isinstance(v, str) and len(v) > MAX_TEXT:
        return f"field {name!r} is a string of {len(v)} characters (at most {MAX_TEXT})"
    if name in CHOICES and v is not None and v not in CHOICES[name]:
        return f"field {name!r} is {short_repr(v)}, not one of {', '.join(CHOICES[name])}"
    return None


def record_problems(rec: Any) -> list[str]:
    """Types from workloads.record, then ranges and choices of every field present."""
    out = type_problems(rec)
    if out or not isinstance(rec, Mapping):
        return out
    for k, v in rec.items():
        if not isinstance(k, str):
            out.append(f"key {short_repr(k)} is not a string")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            p = number_problem(k, v)
            if p:
                out.append(p)
        elif k in FIELDS or isinstance(v, str):
            p = text_problem(k, v)
            if p:
                out.append(p)
    return out


def stats_problems(st: Any) -> list[str]:
    """pytest-benchmark's statistics of a timed case: a positive finite median, a round
    count, and per-round times (`data`, optional) that are a list of positive finite numbers."""
    if not isinstance(st, Mapping):
        return [f"'stats' is {type(st).__name__}, not an object"]
    if st.get("median") is None:
        return ["no timing statistics ('stats.median' missing)"]
    out = [p for k in ("median", "rounds") for p in [number_problem(k, st.get(k))] if p]
    if isinstance(st.get("rounds"), float):
        out.append(f"field 'rounds' is float {st['rounds']!r}, not an integer")
    out += [p for k in ("mean", "min", "max", "stddev", "iqr") if st.get(k) is not None
            for p in [number_problem(k, st[k])] if p]
    data = st.get("data")
    if data is not None:
        if not isinstance(data, list) or not data:
            out.append(f"field 'stats.data' is {type(data).__name__} {short_repr(data)}, not a list of round times")
        elif len(data) > MAX_ROUNDS:
            out.append(f"field 'stats.data' has {len(data)} round times (at most {MAX_ROUNDS})")
        else:
            bad = next(((i, p) for i, t in enumerate(data) for p in [number_problem("data[]", t)] if p), None)
            if bad:
                out.append(f"stats.data[{bad[0]}]: {bad[1]}")
    return out


def machine(info: Any) -> tuple[dict[str, Any], list[str]]:
    """machine_info.fwbench with each bad field set to None, and a phrase per dropped field."""
    if not isinstance(info, Mapping):
        return {}, ([] if info is None else [f"machine_info.fwbench is {type(info).__name__}, not an object"])
    out, probs = dict(info), []
    for k, types in MACHINE_TYPES.items():
        v = info.get(k)
        if v is None:
            continue
        p = (f"field {k!r} is {type(v).__name__} {short_repr(v)}"
             if (isinstance(v, bool) and bool not in types) or not isinstance(v, types)
             else None if isinstance(v, bool)
             else number_problem(k, v) if isinstance(v, (int, float))
             else next((f"field {k!r} has {short_repr(x)}, not a flag name" for x in v
                        if not (isinstance(x, str) and _NAME.match(x))), None) if isinstance(v, list)
             else text_problem(k, v))
        if p is None and k == "missing":
            p = next((f"field 'missing' has {short_repr(n)}: {short_repr(w)}, not name: reason" for n, w in v.items()
                      if not isinstance(w, str) or len(w) > MAX_TEXT), None)
        if p is None and k == "frameworks":
            p = next((f"field 'frameworks' has {short_repr(n)}: {short_repr(w)}, not name: object" for n, w in v.items()
                      if not isinstance(w, dict)), None)
        if p is None and k in _MAPPED:
            p = next((f"field {k!r} has {short_repr(n)}: {short_repr(w)}" for n, w in v.items()
                      if not _mapped_ok(_MAPPED[k], n, w)), None)
        if p:
            out[k] = None
            probs.append(p + "; ignored")
    return out, probs


def _mapped_ok(kind: str, name: Any, value: Any) -> bool:
    """A mapping field's entry: a short text key, and a value of the field's kind."""
    if not isinstance(name, str) or len(name) > MAX_TEXT:
        return False
    if kind == "text":
        return value is None or (isinstance(value, str) and len(value) <= MAX_TEXT)
    if kind == "rate":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return isinstance(value, dict) and all(_mapped_ok("text", k, w) for k, w in value.items())


def name_problem(key: Any) -> str | None:
    """An extra record key becomes a column of data.csv: a short lower-case identifier only."""
    if isinstance(key, str) and _NAME.match(key):
        return None
    return f"extra key {short_repr(key)} is not a lower-case identifier; ignored"


def short_repr(v: Any, n: int = 60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


# fwbench.blocks (a set's blocks: reports.commands.sets): field -> accepted types
BLOCK_TYPES: dict[str, tuple[type, ...]] = {
    "set": (int,), "cycle": (int,), "position": (int,), "calls": (int,), "seconds": (int, float),
    "compilations": (int,), "label": (str,), "task": (str,), "workload": (str,), "mode": (str,),
}


def block_problem(b: Any) -> str | None:
    """Why a block row cannot be used (None when it can): its fields' types, a positive whole
    number of calls and a positive finite time."""
    if not isinstance(b, Mapping):
        return f"is {type(b).__name__}, not an object"
    for k, types in BLOCK_TYPES.items():
        v = b.get(k)
        if isinstance(v, bool) or not isinstance(v, types):
            return f"field {k!r} is {type(v).__name__} {short_repr(v)}"
    if b["calls"] < 1 or not math.isfinite(float(b["seconds"])) or b["seconds"] <= 0:
        return f"calls {b['calls']} and seconds {short_repr(b['seconds'])} are not a positive time of calls"
    return None

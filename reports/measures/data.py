"""Result files -> one validated, tidy pandas DataFrame: a row per result record.

    >>> import reports
    >>> df = reports.load(["results/"])            # files or folders of pytest-benchmark JSON
    >>> df[["framework", "task", "mode", "median_s", "speedup_vs_eager"]]
    >>> df.attrs["problems"]                       # one line per file or record that was skipped

Where the records live in a pytest-benchmark JSON written by fwbench:
    benchmarks[i].extra_info   the record of a timed case (status ok or fallback)
    benchmarks[i].stats        pytest-benchmark's statistics; stats.data = per-round seconds
    fwbench.records            records of cases that did not run (unsupported, failed)
    fwbench.missing            frameworks not installed: name -> reason with the pip command
    machine_info.fwbench       gemm_flops, threads, versions, commit, date, preset, device

Derived columns (per row, from the same run file):
    throughput        = items / median_s                        (unit/s)
    utilisation       = flops / median_s / util_peak_flops      (fraction of the machine's GEMM rate
                                                                 at the case's precision)
    util_peak_flops   = the best GEMM rate at the case's precision (peak_precision: fp32, tf32,
                        bf16) measured on the same machine set-up (CPU, accelerator, device,
                        threads, matmul precision) by any run: the records' peak_flops and, at
                        the fp32 kind, the runs' gemm_flops (one instrument, frameworks/harness/
                        gemm.py); one denominator for every framework, not each process's own
                        measurement, which a busy moment on a shared machine lowers. Files
                        from before peak_precision: fp32 rows divide by gemm_flops, others
                        have none (their only rate was fp32's: no utilisation)
    gemm_flops        = the best fp32 GEMM rate (the runs' machine_info gemm_flops) of all runs on
                        the same machine set-up; run_gemm_flops keeps the run's own
    median_lo/hi_s    = order-statistic 95% interval of the process's median (stats.order_interval)
    speedup_vs_eager  = median_s(eager) / median_s              (same framework, workload, task, ...;
                        interval from the two cases' rounds in this process: round noise only)
    compile_latency_s = first_call_s - median_s                 (the same mode's step, the design card: eager's
                        first call is no baseline where eager compiles op by op, as JAX's does)
    break_even_steps  = the first n with first_call + (n-1)*median below eager's; inf if never

A row is one process's measurement of a case; replicates.cases pools the processes
of a case (the unit of replication) and is what the report's tables, figures and findings use.

Nothing here imports a framework: a report renders where none is installed.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from reports.measures import distributed, stats, validate
from workloads.base import FwbenchError
from workloads.case import FRAMEWORKS
from workloads.framework_facts import FACTS
from workloads.precision import peak_kind
from workloads.record import CASE_KEYS, FIELDS, MODES, NOT_ITS_API, STATUSES, machine_key, upgraded

# Display order of the frameworks fwbench knows; others sort after them by name.
FRAMEWORK_ORDER = FRAMEWORKS
# Frameworks whose eager mode dispatches op by op (each op compiled or traced on its own): a
# speedup over it is no speedup over a fast eager mode, and labels say so.
OP_BY_OP_EAGER = tuple(name for name, f in FACTS.items() if f.op_by_op_eager)
# Rows of the same run that share these are one case in different modes (eager is the baseline).
BASELINE_KEYS = ("run_file", "framework", "workload", "task", "preset", "device", "strategy")
# Runs that share these measured the same machine: they share the best GEMM rate among them.
SETUP_KEYS = ("cpu", "accelerator", "device", "threads", "matmul_precision")
TIMING = ("rounds", "median_s", "mean_s", "min_s", "max_s", "stddev_s", "iqr_s", "median_lo_s", "median_hi_s")
DERIVED = ("throughput", "throughput_lo", "throughput_hi", "util_peak_flops", "utilisation", "speedup_vs_eager",
           "speedup_lo", "speedup_hi", "compile_latency_s", "break_even_steps")
MACHINE = ("gemm_flops", "machine_threads", "cpu", "accelerator", "fwbench_commit", "date", "run_id", "machine_id",
           "cpus_available", "cores", "set", "set_role", "control", "control_reference", "set_wall_s")
TIMED = ("ok", "fallback")


def find_files(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[str]]:
    """Expand files and folders (their *.json, not recursive) into a sorted file list."""
    files, probs = [], []
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.glob("*.json") if f.is_file())
            if not found:
                probs.append(f"{p}: folder has no .json result files")
            files += found
            probs += [f"{f}: {_unreadable(f)}; skipped" for f in sorted(p.glob("*.json")) if not f.is_file()]
        elif p.is_file():
            files.append(p)
        else:
            probs.append(f"{p}: {_unreadable(p)}")
    return files, probs


def _unreadable(p: Path) -> str:
    """Why a path given or found is no file: a symbolic-link loop, a dangling link, a folder..."""
    try:
        p.stat()
    except OSError as e:
        if p.is_symlink():
            return f"symbolic link that cannot be followed ({e.strerror or e})"
        return "no such file or folder"
    return "not a regular file"


def _stats_columns(st: dict[str, Any]) -> dict[str, Any]:
    data = st.get("data") or None
    return {"rounds": st.get("rounds"), "median_s": st.get("median"), "mean_s": st.get("mean"),
            "min_s": st.get("min"), "max_s": st.get("max"), "stddev_s": st.get("stddev"),
            "iqr_s": st.get("iqr"), "times": [float(t) for t in data] if data else None}


def _cpu_name(machine_info: dict[str, Any], fw: dict[str, Any]) -> str | None:
    cpu = machine_info.get("cpu")
    if isinstance(cpu, dict) and cpu.get("brand_raw"):
        return str(cpu["brand_raw"])
    return fw.get("cpu") or machine_info.get("processor") or machine_info.get("machine")


def _cpu_detail(machine_info: dict[str, Any]) -> str | None:
    """What the CPU reports beyond its name (py-cpuinfo's fields in machine_info.cpu): 'CPUID family
    25, model 17, stepping 1; 2.60 GHz; L2 2 MiB, L3 1 MiB'; only whole numbers are read, so a file
    can put no text here."""
    cpu = machine_info.get("cpu")
    if not isinstance(cpu, dict):
        return None
    num = {k: cpu.get(k) for k in ("family", "model", "stepping", "l2_cache_size", "l3_cache_size")}
    num = {k: v for k, v in num.items() if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 40}
    hz = cpu.get("hz_advertised")
    hz = hz[0] if isinstance(hz, list) and hz and isinstance(hz[0], int) and 0 < hz[0] < 10 ** 11 else None
    parts = [", ".join(f"{k} {num[k]}" for k in ("family", "model", "stepping") if k in num)]
    parts[0] = f"CPUID {parts[0]}" if parts[0] else ""
    parts.append(f"{hz / 1e9:.2f} GHz" if hz else "")
    parts.append(", ".join(f"{k[:2].upper()} {num[k] / 2 ** 20:g} MiB" for k in ("l2_cache_size", "l3_cache_size")
                           if k in num))
    return "; ".join(p for p in parts if p) or None


def read_run(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[str]]:
    """One result file -> (run info, rows, problems). A bad file gives (None, [], [why]).
    Never raises for what a file holds: whatever is unexpected is one problem line."""
    try:
        return _read_run(path)
    except (RecursionError, MemoryError) as e:
        return None, [], [f"{path}: too deeply nested or too large to read ({type(e).__name__}); skipped"]
    except Exception as e:      # noqa: BLE001 - a structure no check foresaw: one line, not a traceback
        return None, [], [f"{path}: unexpected content ({type(e).__name__}: {str(e)[:200]}); skipped"]


def _read_run(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[str]]:
    doc, why = _parse(path)
    if doc is None:
        return None, [], [why]
    machine_info = doc.get("machine_info") if isinstance(doc.get("machine_info"), dict) else {}
    fw = machine_info.get("fwbench") if isinstance(machine_info.get("fwbench"), dict) else None
    top = doc.get("fwbench") if isinstance(doc.get("fwbench"), dict) else None
    has_records = any(isinstance(b, dict) and isinstance(b.get("extra_info"), dict)
                      and "framework" in b["extra_info"] for b in doc["benchmarks"])
    if fw is None and top is None and not has_records:
        return None, [], [f"{path}: no fwbench records (a pytest-benchmark JSON from another suite? "
                          "fwbench writes machine_info.fwbench and records in extra_info)"]
    run, top, probs = _run_info(path, doc, machine_info, fw, top)
    return run, _rows(path, doc, run, top, probs), probs


def _parse(path: Path) -> tuple[dict[str, Any] | None, str]:
    """The file's JSON document, or None and why it is none: unreadable, not UTF-8, malformed,
    or not a pytest-benchmark JSON."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        return None, f"{path}: cannot read ({e.strerror or e})"
    except UnicodeDecodeError:
        return None, f"{path}: not a text file (not UTF-8), so not a result JSON"
    except json.JSONDecodeError as e:
        return None, f"{path}: malformed JSON ({e.msg} at line {e.lineno}, column {e.colno})"
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        return None, f"{path}: not a pytest-benchmark JSON (no 'benchmarks' list)"
    return doc, ""


def _run_info(path: Path, doc: dict[str, Any], machine_info: dict[str, Any], fw: dict[str, Any] | None,
              top: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The run's information (machine_info.fwbench, validated; the frameworks missing), the
    top-level fwbench key ({} where absent) and the problems found in them."""
    fw, probs = validate.machine(fw)
    probs = [f"{path}: machine_info.fwbench: {p}" for p in probs]
    top = top or {}
    missing = dict(fw.get("missing") or {})
    top_missing, bad = validate.machine({"missing": top.get("missing"), "note": top.get("note")})
    probs += [f"{path}: fwbench: {p}" for p in bad]
    missing.update(top_missing["missing"] or {})
    run = {
        "path": str(path), "run_file": path.name, "gemm_flops": fw.get("gemm_flops"),
        "gemm_note": fw.get("gemm_note"), "machine_threads": fw.get("threads"),
        "cpus_available": fw.get("cpus_available"), "allocator": fw.get("allocator"),
        "cpu": _cpu_name(machine_info, fw), "cpu_detail": _cpu_detail(machine_info),
        "kernel": machine_info.get("release") if isinstance(machine_info.get("release"), str)
        and len(machine_info["release"]) < 100 else None,
        "accelerator": fw.get("accelerator"), "fwbench_commit": fw.get("fwbench_commit"),
        "date": fw.get("date") or (doc.get("datetime") if isinstance(doc.get("datetime"), str) else None),
        "preset": fw.get("preset"),
        "device": fw.get("device"), "matmul_precision": fw.get("matmul_precision"),
        "frameworks": fw.get("frameworks") or {}, "missing": missing,
        "python": machine_info.get("python_version"), "system": machine_info.get("system"),
        "note": top_missing["note"], "ended_by": fw.get("ended_by"), "run_id": fw.get("run_id"),
        **{k: fw.get(k) for k in ("repeat", "repeats", "case_order", "compile_cache", "compile_cache_dirs",
                                  "settings", "gc", "gemm_rates", "cache_role", "cold", "warm", "env_pad_bytes",
                                  "env_bytes", "cpu_flags", "machine_id", "host", "cores", "isa_flags",
                                  "driver", "gpu_model", "job", "compiler_startup", "numpy", "workloads", "set",
                                  "set_role", "start_position", "control", "control_reference", "set_wall_s")},
    }
    if not isinstance(run["cpu"], (str, type(None))) or len(str(run["cpu"])) > validate.MAX_TEXT:
        run["cpu"] = None
    if fw.get("isa_flags") is not None and fw.get("cores") is not None:   # the machine, from its fingerprint
        run["machine_id"] = machine_key(fw)
    return run, top, probs


# One name per kind of device across frameworks: torch calls the accelerator cuda, JAX gpu (a
# ROCm GPU too); records keep each framework's own name, reports key cases by this one so
# that the frameworks' cases on one GPU are compared.
DEVICE_NAMES = {"gpu": "cuda"}


def _rows(path: Path, doc: dict[str, Any], run: dict[str, Any], top: dict[str, Any], probs: list[str]
          ) -> list[dict[str, Any]]:
    """A row per valid record: the timed ones in benchmarks[].extra_info with their
    statistics, the others in fwbench.records; a record that fails validation is one line
    in `probs` and skipped."""
    rows = []
    machine = {k: run[k] for k in MACHINE}
    reserved = set(columns())
    blocks = _blocks(path, top, probs)

    def add(rec: Any, where: str, timing: dict[str, Any]) -> None:
        rec = upgraded(rec)                         # older files' field names (record.RENAMED)
        bad = validate.record_problems(rec)
        if bad:
            probs.append(f"{path}: {where}: {'; '.join(bad)}; record skipped")
            return
        row = {k: rec.get(k) for k in FIELDS}
        row["device"] = DEVICE_NAMES.get(row["device"], row["device"])
        for k, v in rec.items():
            if k in FIELDS or not _scalar(v):
                continue
            why = validate.name_problem(k) or (f"extra key {k!r} names a column fwbench computes; ignored"
                                               if k in reserved else None)
            if why:
                probs.append(f"{path}: {where}: {why}")
            else:
                row[k] = v
        row.update(timing)
        row.update(machine, run_file=path.name)
        row["blocks"] = blocks.get(block_key(row))
        rows.append(row)

    for i, b in enumerate(doc["benchmarks"]):
        name = b.get("name") if isinstance(b, dict) and isinstance(b.get("name"), str) else f"#{i}"
        where = f"benchmark {validate.short_repr(name)}"
        if not isinstance(b, dict):
            probs.append(f"{path}: benchmarks[{i}] is {type(b).__name__}, not an object; skipped")
            continue
        bad = validate.stats_problems(b.get("stats"))
        if bad:
            probs.append(f"{path}: {where}: {'; '.join(bad)}; record skipped")
            continue
        full = b.get("fullname") if isinstance(b.get("fullname"), str) else name
        add(b.get("extra_info"), where, {**_stats_columns(b["stats"]), "name": full[:validate.MAX_TEXT]})
    records = top.get("records")
    if records is not None and not isinstance(records, list):
        probs.append(f"{path}: fwbench.records is {type(records).__name__}, not a list; ignored")
        records = None
    for i, rec in enumerate(records or []):
        where = f"fwbench.records[{i}]"
        if isinstance(rec, dict) and rec.get("status") in TIMED:
            probs.append(f"{path}: {where}: status {rec['status']!r} without timing; record skipped")
            continue
        add(rec, where, {"name": None})
    return rows


def block_key(r: dict[str, Any]) -> tuple[Any, ...]:
    """A case within one process's file: what its blocks and its record share."""
    return tuple(r.get(k) for k in ("workload", "task", "mode", "strategy", "precision"))


def _blocks(path: Path, top: dict[str, Any], probs: list[str]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The file's blocks (a set's side-by-side timings, reports.commands.sets) by case: each
    case's blocks in cycle order, {"cycle", "s" (seconds per call), "seconds" (the block's),
    "position" (in its cycle), "after" (the process and configuration of the block just before,
    None first)}; a bad row is one line and left out."""
    rows = top.get("blocks")
    if rows is None:
        return {}
    if not isinstance(rows, list):
        probs.append(f"{path}: fwbench.blocks is {type(rows).__name__}, not a list; ignored")
        return {}
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for i, b in enumerate(rows):
        why = validate.block_problem(b)
        if why:
            probs.append(f"{path}: fwbench.blocks[{i}] {why}; block skipped")
            continue
        after = b.get("after") if isinstance(b.get("after"), str) else None
        out.setdefault(block_key(b), []).append({"cycle": b["cycle"], "s": float(b["seconds"]) / b["calls"],
                                                 "seconds": float(b["seconds"]), "position": b["position"],
                                                 "after": after})
    return {k: sorted(v, key=lambda x: x["cycle"]) for k, v in out.items()}


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def sort_key(col: pd.Series) -> pd.Series:
    if col.name == "framework":
        rank = {f: i for i, f in enumerate(FRAMEWORK_ORDER)}
        return col.map(lambda f: (rank.get(f, len(rank)), f)).map(lambda t: f"{t[0]:02d}{t[1]}")
    if col.name == "mode":
        return col.map(lambda m: MODES.index(m) if m in MODES else len(MODES))
    if col.name == "status":
        return col.map(lambda s: STATUSES.index(s) if s in STATUSES else len(STATUSES))
    return col.fillna("").astype(str)


def machine_groups(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The frame split by machine (machine_id; files from before fingerprints: by CPU name),
    each part with its own runs in attrs; one entry when every result came from one machine."""
    if df.empty or "machine_id" not in df.columns:
        return {"": df}
    key = df["machine_id"].where(df["machine_id"].notna(), "cpu: " + df["cpu"].fillna("not recorded").astype(str))
    if key.nunique() <= 1:
        return {str(key.iloc[0]): df}
    out = {}
    runs = list(df.attrs.get("runs", []))

    def of(r: dict[str, Any]) -> str:
        return r.get("machine_id") or "cpu: " + str(r.get("cpu") or "not recorded")
    for k in dict.fromkeys(key):
        sub = df[key == k].copy()
        sub.attrs = dict(df.attrs)
        sub.attrs["runs"] = Shared([r for r in runs if of(r) == k])
        out[str(k)] = sub
    return out


_PRECISION_AT = CASE_KEYS.index("precision")
_DEVICES_AT = CASE_KEYS.index("n_devices")


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _case_text(values: Iterable[Any]) -> str:
    """The keys' values joined by '/', '-' for none; the defaults (fp32 precision, one
    device, or none in files from before those axes) are left out, so those cases keep their
    names; N devices read xN."""
    vs = list(values)
    n = vs[_DEVICES_AT]
    vs[_DEVICES_AT] = None if _missing(n) or int(n) == 1 else f"x{int(n)}"
    if vs[_DEVICES_AT] is None:
        del vs[_DEVICES_AT]
    if vs[_PRECISION_AT] in (None, "fp32") or _missing(vs[_PRECISION_AT]):
        del vs[_PRECISION_AT]
    return "/".join("-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in vs)


def joined_keys(df: pd.DataFrame, keys: Iterable[str]) -> list[str]:
    """Each row's values of `keys` as one string, for grouping rows that share them."""
    return ["|".join(map(str, r)) for r in df[list(keys)].itertuples(index=False)]


def util_peaks(df: pd.DataFrame, setup: list[str]) -> pd.Series:
    """Each row's utilisation denominator (util_peak_flops, the module docstring): the best rate
    at its peak kind on its set-up."""
    def col(name: str) -> pd.Series:
        return df[name] if name in df else pd.Series([None] * len(df), index=df.index, dtype=object)
    fp32_kind = [peak_kind("fp32", m, d) for m, d in zip(col("matmul_precision"), col("device"))]
    kind = [k if isinstance(k, str) else (f if p == "fp32" else None)
            for k, p, f in zip(col("peak_precision"), df["precision"], fp32_kind)]
    own = pd.to_numeric(col("peak_flops"), errors="coerce").astype(float)
    machine = df["run_gemm_flops"].where([k is not None and k == f for k, f in zip(kind, fp32_kind)])
    rate = pd.concat([own, machine], axis=1).max(axis=1, skipna=True)
    rate = rate.where([k is not None for k in kind])
    return rate.groupby([f"{s}|{k}" for s, k in zip(setup, kind)]).transform("max")


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """Add the confidence intervals and derived columns (see the module docstring)."""
    df = df.copy()
    if "precision" in df.columns:            # files from before precisions ran fp32
        df["precision"] = df["precision"].where(df["precision"].notna(), "fp32")
    if "n_devices" in df.columns:            # and on one device
        df["n_devices"] = pd.to_numeric(df["n_devices"], errors="coerce").fillna(1).astype(int)
    df["case"] = [_case_text(v) for v in zip(*(df[k] for k in CASE_KEYS))] if len(df) else []
    if df.empty:
        for c in ("median_lo_s", "median_hi_s", "run_gemm_flops", *DERIVED):
            df[c] = pd.Series(dtype=float)
        return df
    # positional arrays throughout: per-row .loc access made 10,000 rows take minutes
    ci = [stats.order_interval(t) for t in df["times"]]
    df["median_lo_s"] = [c[0] for c in ci]
    df["median_hi_s"] = [c[1] for c in ci]
    med = df["median_s"].astype(float)
    df["throughput"] = df["items"].astype(float) / med
    df["throughput_lo"] = df["items"].astype(float) / df["median_hi_s"]
    df["throughput_hi"] = df["items"].astype(float) / df["median_lo_s"]
    df["run_gemm_flops"] = df["gemm_flops"].astype(float)
    setup = joined_keys(df, SETUP_KEYS)
    df["gemm_flops"] = df["run_gemm_flops"].groupby(setup).transform("max")
    df["util_peak_flops"] = util_peaks(df, setup)
    df["utilisation"] = df["flops"].astype(float) / med / df["util_peak_flops"]
    n = len(df)
    out = {c: np.full(n, math.nan) for c in ("speedup_vs_eager", "speedup_lo", "speedup_hi", "break_even_steps")}
    df["compile_latency_s"] = pd.to_numeric(df["first_call_s"], errors="coerce").astype(float) - med
    key = joined_keys(df, BASELINE_KEYS)
    m = med.to_numpy()
    first = pd.to_numeric(df["first_call_s"], errors="coerce").to_numpy(dtype=float)
    eager = {k: q for q, (k, mode, t) in enumerate(zip(key, df["mode"], m)) if mode == "eager" and not math.isnan(t)}
    for p, k in enumerate(key):
        q = eager.get(k)
        if q is None or math.isnan(m[p]):
            continue
        out["speedup_vs_eager"][p] = m[q] / m[p]
        out["speedup_lo"][p], out["speedup_hi"][p] = stats.rounds_ratio(df["times"].iat[q], df["times"].iat[p])
        if p != q and math.isfinite(first[q]) and math.isfinite(first[p]):
            out["break_even_steps"][p] = break_even(first[p], m[p], first[q], m[q])
    for c, v in out.items():
        df[c] = v
    return df


def break_even(first_c: float, step_c: float, first_e: float, step_e: float) -> float:
    """Smallest n >= 1 with first_c + (n-1) step_c < first_e + (n-1) step_e: the step after
    which running compiled has cost less wall time in total than running eager. inf when
    the compiled step is not faster (it never catches up, or only leads from the start)."""
    gain = step_e - step_c                # seconds saved per step after the first
    if gain <= 0:
        return math.inf
    extra = first_c - first_e             # compile latency to pay back
    if extra < 0:
        return 1.0
    return float(math.floor(extra / gain) + 2)


def columns(extra: Iterable[str] = ()) -> list[str]:
    """The frame's column order: record fields, extra record keys, timing, derived, machine."""
    return ([*FIELDS, *sorted(set(extra))] + list(TIMING) + list(DERIVED) + list(MACHINE)
            + ["run_gemm_flops", "run_file", "name", "case", "times", "blocks"])


def load(paths: Iterable[str | os.PathLike] | str | os.PathLike, strict: bool = False) -> pd.DataFrame:
    """Load fwbench result files (or folders of them) into one tidy DataFrame.

    A bad file or record is skipped and described in `df.attrs["problems"]` (one line each,
    naming the file and what is wrong); `strict=True` raises FwbenchError on the first one
    instead. `df.attrs["runs"]` holds each file's machine information and missing frameworks.
    Rows are sorted by workload, task, framework, mode, so the same files give the same frame.
    `df.attrs["distributed"]`: the multi-process documents in each folder's distributed/
    (reports.measures.distributed).
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files, probs = find_files(paths)
    runs, rows = [], []
    for f in files:
        run, r, p = read_run(f)
        probs += p
        if run is not None:
            runs.append(run)
            rows += r
    if strict and probs:
        raise FwbenchError(probs[0])
    extra = {k for r in rows for k in r} - set(columns())
    df = pd.DataFrame(rows, columns=columns(extra))
    df = df.astype({c: float for c in ("items", "flops", "median_s", "mean_s", "min_s", "max_s",
                                        "stddev_s", "iqr_s", "gemm_flops")})
    df = derive(df)
    df = df.sort_values(["workload", "task", "framework", "mode", "strategy", "preset", "device",
                         "status", "run_file"], key=sort_key, kind="stable").reset_index(drop=True)
    df = df[columns(extra)]
    docs, dprobs = distributed.read(paths)
    df.attrs["problems"] = Shared(probs + dprobs)
    df.attrs["runs"] = Shared(runs)
    df.attrs["distributed"] = Shared(docs)
    return df


class Shared(list):
    """A list in DataFrame.attrs that pandas shares instead of deep-copying: pandas copies
    attrs on every operation, which made a report of 10,000 records spend most of its time
    copying the runs' machine information. Read-only by convention."""

    def __deepcopy__(self, memo: dict[int, Any]) -> "Shared":
        return self


def missing_frameworks(df: pd.DataFrame) -> dict[str, str]:
    """Frameworks some run found missing and no run measured: name -> reason."""
    seen = set(df["framework"]) if not df.empty else set()
    out: dict[str, str] = {}
    for run in df.attrs.get("runs", []):
        for name, why in sorted(run["missing"].items()):
            if name not in seen:
                out.setdefault(name, why)
    return out


def finite(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(x)


# ----------------------------------------------------------------------------- frameworks and modes

def framework_order(names: Any) -> list[str]:
    names = set(names)
    return [f for f in FRAMEWORK_ORDER if f in names] + sorted(names - set(FRAMEWORK_ORDER))


def mode_order(names: Any) -> list[str]:
    names = set(names)
    return [m for m in MODES if m in names] + sorted(names - set(MODES))


def lacking_modes(df: pd.DataFrame) -> set[tuple[str, str]]:
    """(framework, mode) pairs where the framework has no such mode (machine_info.fwbench
    .frameworks[f].modes of the runs): shown as n/a, not as an unsupported case."""
    have: dict[str, set[str]] = {}
    for run in df.attrs.get("runs", []):
        for f, info in (run.get("frameworks") or {}).items():
            if isinstance(info, dict) and isinstance(info.get("modes"), list):
                have.setdefault(f, set()).update(info["modes"])
    return {(f, m) for f, m, st in zip(df["framework"], df["mode"], df["status"])
            if st == "unsupported" and f in have and m not in have[f]}


def not_applicable(df: pd.DataFrame) -> pd.Series:
    """Rows that ask a framework for another framework's API (a mode or strategy it does not
    have; workloads.record.not_its_api wrote their reason): n/a, not an unsupported case."""
    if df.empty or "reason" not in df.columns:
        return pd.Series(False, index=df.index)
    return (df["status"] == "unsupported") & df["reason"].astype(str).str.contains(NOT_ITS_API, regex=True)


# The run's design in words (a run of process sets, or lone processes), for every sentence that
# says where a number comes from or what its interval is over.
def side_by_side(df: pd.DataFrame) -> bool:
    """Whether the report's cases were timed side by side in process sets (reports.commands.sets)."""
    return "steady_from" in df.columns and bool(df["steady_from"].map(
        lambda x: isinstance(x, str) and x.startswith("sets")).any())


def unit(df: pd.DataFrame, one: bool = False) -> str:
    """The report's unit of replication, in words: sets, or processes (one: set, or process)."""
    if side_by_side(df):
        return "set" if one else "sets"
    return "process" if one else "processes"


def noise(df: pd.DataFrame) -> str:
    """What a lone replicate's interval covers, in words: the blocks of one set, or the rounds of one process."""
    return "block-to-block" if side_by_side(df) else "round-to-round"


def steady_source(df: pd.DataFrame) -> str:
    """Where a case's steady step comes from, in words that hold for the report's design: in
    sets every set's blocks (cold sets' too, replicates.cases), else the warm processes' medians."""
    if side_by_side(df):
        return "the geometric mean over every set, cold and warm, of each set's blocks' time per call"
    return "the geometric mean of the warm processes' median steps"

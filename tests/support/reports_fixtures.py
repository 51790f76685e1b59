"""Builders of fwbench result files for the report tests: exactly the structure that
pytest-benchmark writes with --benchmark-json (machine_info, commit_info, benchmarks[] with
params, extra_info, options and stats including the per-round data), with fwbench's parts
(machine_info.fwbench, the top-level fwbench.records / fwbench.missing) as
frameworks/pytest_plugin.py adds them. Statistics come from pytest-benchmark's own Stats
class, so they are what it would have computed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from pytest_benchmark import __version__ as PB_VERSION
from pytest_benchmark.stats import Stats

from workloads.record import empty

INSTALL = {"torch": "pip install 'fwbench[torch]'", "jax": "pip install 'fwbench[jax]'",
           "tensorflow": "pip install 'fwbench[tensorflow]'"}
VERSIONS = {"torch": "2.13.0", "jax": "0.10.2", "tensorflow": "2.21.0"}
UNITS = {"forward": ("tokens", 256), "train_step": ("tokens", 256), "generate": ("tokens", 16)}


def record(framework: str, task: str, mode: str, *, workload: str = "gpt", status: str = "ok",
           reason: str | None = None, first_call_s: float | None = 0.05, preset: str = "tiny",
           **kw: Any) -> dict[str, Any]:
    unit, items = UNITS.get(task, ("items", 8))
    rec = empty(framework=framework, framework_version=VERSIONS.get(framework, "1.0"),
                workload=workload, task=task, mode=mode, strategy=None, preset=preset, shape="B=2,T=32",
                param_dtype="float32", device="cpu", threads=2, items=items, unit=unit, flops=1.0e9,
                first_call_s=first_call_s, compile_cache="off", compilations=1 if mode != "eager" else 0,
                compile_counter="counter", peak_memory_bytes=None, matmul_precision="highest",
                status=status, reason=reason)
    if status not in ("ok", "fallback"):
        rec["first_call_s"] = None
    rec.update(kw)
    return rec


def times(median: float, n: int = 30, spread: float = 0.03, seed: int = 0) -> list[float]:
    """n round times scattered log-normally around `median` (seconds)."""
    rng = np.random.default_rng(seed)
    return [float(t) for t in median * np.exp(rng.normal(0.0, spread, n))]


def benchmark_entry(rec: dict[str, Any], data: list[float]) -> dict[str, Any]:
    s = Stats()
    for t in data:
        s.update(t)
    st = s.as_dict()
    st["data"] = list(data)
    st["iterations"] = 1
    param = "-".join([rec["framework"], rec["mode"], rec["task"]])
    name = f"test_{rec['workload']}[{param}]"
    return {"group": None, "name": name, "fullname": f"tests/benchmarks/test_{rec['workload']}.py::{name}",
            "params": {"framework": rec["framework"], "mode": rec["mode"], "task": rec["task"]},
            "param": param, "extra_info": dict(rec),
            "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": 5, "max_time": 1.0,
                        "min_time": 5e-06, "warmup": False},
            "stats": st}


def result_json(timed: Iterable[tuple[dict[str, Any], list[float]]], not_run: Iterable[dict[str, Any]] = (),
                missing: dict[str, str] | None = None, frameworks: Iterable[str] = ("torch",),
                gemm_flops: float = 1.0e11, date: str = "2025-01-01T00:00:00+00:00", **machine: Any) -> dict[str, Any]:
    missing = dict(missing or {})
    fw_info = {"schema": 1, "fwbench_commit": "abc1234", "date": date,
               "frameworks": {f: {"version": VERSIONS.get(f, "1.0"), "devices": ["cpu"], "modes": ["eager", "compiled"],
                                  "compile_counter": "counter", "compile_cache": "off"} for f in frameworks},
               "missing": missing, "threads": 2, "cpus_available": 2, "cpu": "x86_64", "device": "cpu",
               "accelerator": None, "matmul_precision": "highest", "preset": "tiny", "workloads": ["gpt"],
               "compile_cache_dir": "/tmp/cache", "numpy": np.__version__, "gemm_flops": gemm_flops,
               "gemm_note": "numpy float32 2048x2048 matmul, best of 5, at the thread count in force"}
    fw_info.update(machine)
    return {
        "machine_info": {"node": "test", "processor": "x86_64", "machine": "x86_64", "python_compiler": "GCC",
                         "python_implementation": "CPython", "python_implementation_version": "3.11.0",
                         "python_version": "3.11.0", "python_build": ["main", "Jan 1 2025"], "release": "6.0",
                         "system": "Linux", "cpu": {"brand_raw": "Test CPU @ 3.0GHz", "count": 2, "arch": "X86_64"},
                         "fwbench": fw_info},
        "commit_info": {"id": "abc1234", "time": None, "author_time": None, "dirty": False, "project": "fwbench",
                        "branch": "main"},
        "benchmarks": [benchmark_entry(r, d) for r, d in timed],
        "datetime": date,
        "version": PB_VERSION,
        "fwbench": {"schema": 1, "records": list(not_run), "missing": missing},
    }


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) if not isinstance(doc, str) else doc, encoding="utf-8")
    return path


# medians (seconds) of a plausible tiny run: framework -> mode -> task -> (first call, median)
PLAUSIBLE = {
    "torch": {"eager": {"forward": (0.02, 0.004), "train_step": (0.05, 0.012), "generate": (0.1, 0.03)},
              "compiled": {"forward": (6.0, 0.003), "train_step": (15.0, 0.009), "generate": (9.0, 0.05)}},
    "jax": {"eager": {"forward": (0.5, 0.008), "train_step": (1.2, 0.03), "generate": (0.9, 0.2)},
            "compiled": {"forward": (0.4, 0.0015), "train_step": (1.0, 0.006), "generate": (1.5, 0.008)}},
    "tensorflow": {"eager": {"forward": (0.3, 0.009), "train_step": (0.6, 0.025), "generate": (0.5, 0.15)},
                   "graph": {"forward": (1.0, 0.005), "train_step": (2.5, 0.014), "generate": (2.0, 0.05)},
                   "compiled": {"forward": (2.0, 0.0035), "train_step": (4.0, 0.011), "generate": (3.0, 0.04)}},
}


def plausible_run(framework: str, seed: int = 0, slow: float = 1.0, **kw: Any) -> dict[str, Any]:
    """One framework's result file with every case of PLAUSIBLE, medians times `slow`; modes
    the framework lacks are `unsupported` records."""
    timed, not_run = [], []
    for mode in ("eager", "graph", "compiled"):
        for i, task in enumerate(("forward", "train_step", "generate")):
            if mode not in PLAUSIBLE[framework]:
                not_run.append(record(framework, task, mode, status="unsupported",
                                      reason=f"Unsupported: {framework} has no 'graph' mode (it has eager, compiled)"))
                continue
            first, med = PLAUSIBLE[framework][mode][task]
            timed.append((record(framework, task, mode, first_call_s=first),
                          times(med * slow, seed=seed * 100 + i * 10 + len(mode))))
    return result_json(timed, not_run, frameworks=[framework], **kw)


def process_files(folder: Path, framework: str, median: float, offsets: Iterable[float], *,
                  task: str = "forward", mode: str = "compiled", n: int = 30, spread: float = 0.03, seed: int = 0,
                  first_call_s: tuple[float, float] = (5.0, 1.0), run_id: str = "run-1",
                  roles: list[str] | None = None, first_calls: list[float] | None = None, **kw: Any) -> list[Path]:
    """One result file per process (repeat 0, 1, ...) of one case, as `fwbench run` writes
    them: process i's rounds scattered around median x (1 + offsets[i]); its role
    roles[i] (default: the first cold, the later ones warm), its first call first_calls[i]
    (default first_call_s: (cold, warm)). A keyword whose value is a list gives each
    process its own value of that record field."""
    offsets = list(offsets)
    roles = roles or ["cold"] + ["warm"] * (len(offsets) - 1)
    paths = []
    for i, off in enumerate(offsets):
        cache = roles[i]
        own = {k: (v[i] if isinstance(v, list) else v) for k, v in kw.items()}
        first = first_calls[i] if first_calls else first_call_s[0 if cache == "cold" else 1]
        rec = record(framework, task, mode, repeat=i, order=0, compile_cache=cache, first_call_s=first, **own)
        doc = result_json([(rec, times(median * (1 + off), n=n, spread=spread, seed=seed * 1000 + i))],
                          frameworks=[framework], run_id=run_id, repeat=i, repeats=len(offsets),
                          compile_cache=cache)
        paths.append(write(folder / f"{framework}-{task}-{mode}-r{i}.json", doc))
    return paths
# ----------------------------------------------------------------------------- hostile input

def _with(doc: dict[str, Any], change: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    change(doc)
    return doc


def _set(path: str, value: Any) -> Any:
    """A change that sets doc[path...] (dotted, list indices as numbers) to value."""
    def change(doc: dict[str, Any]) -> None:
        *keys, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        node = doc
        for k in keys:
            node = node[k]
        node[last] = value
    return change


# name -> (change to a good two-case file, the field the problem line must name)
BAD_FILES = {
    "data_string": (_set("benchmarks.0.stats.data", "1,2,3"), "stats.data"),
    "gemm_string": (_set("machine_info.fwbench.gemm_flops", "fast"), "gemm_flops"),
    "missing_list": (_set("machine_info.fwbench.missing", ["torch"]), "missing"),
    "median_inf": (_set("benchmarks.0.stats.median", float("inf")), "median"),
    "median_string": (_set("benchmarks.0.stats.median", "0.01"), "median"),
    "huge_int": (_set("benchmarks.0.extra_info.threads", 10 ** 400), "threads"),
    "huge_items": (_set("benchmarks.0.extra_info.items", 10 ** 400), "items"),
    "records_dict": (_set("fwbench.records", {"a": 1}), "fwbench.records"),
    "benchmark_list": (_set("benchmarks.0", [1, 2]), "benchmarks[0]"),
    "extra_info_string": (_set("benchmarks.0.extra_info", "x"), "record is a str"),
    "stats_number": (_set("benchmarks.0.stats", 3), "'stats'"),
    "zero_time": (_set("benchmarks.0.stats.median", 0.0), "median"),
    "negative_time": (_set("benchmarks.0.stats.data.0", -0.01), "stats.data[0]"),
    "nan_time": (_set("benchmarks.0.stats.data.1", float("nan")), "stats.data[1]"),
    "zero_gemm": (_set("machine_info.fwbench.gemm_flops", 0), "gemm_flops"),
    "unknown_mode": (_set("benchmarks.0.extra_info.mode", "turbo"), "mode"),
    "nan_first_call": (_set("benchmarks.0.extra_info.first_call_s", float("nan")), "first_call_s"),
    # the run keys of machine_info.fwbench (workloads.record.RUN_INFO)
    "settings_string": (_set("machine_info.fwbench.settings", "fast"), "settings"),
    "settings_nested": (_set("machine_info.fwbench.settings", {"torch": {"x": {"y": 1}}}), "settings"),
    "gemm_rates_text": (_set("machine_info.fwbench.gemm_rates", {"numpy": "fast"}), "gemm_rates"),
    "gemm_rates_zero": (_set("machine_info.fwbench.gemm_rates", {"numpy": 0}), "gemm_rates"),
    "cache_dirs_list": (_set("machine_info.fwbench.compile_cache_dirs", ["a"]), "compile_cache_dirs"),
    "repeats_text": (_set("machine_info.fwbench.repeats", "3"), "repeats"),
}

# strings that would be markup, commands or formulas if a renderer passed them through
INJECT = {
    "workload": "x}\\input{/etc/passwd}\\iffalse",
    "task": "<script>alert(1)</script>\n# injected heading",
    "reason": "=HYPERLINK(\"http://evil\",\"click\")",
    "framework_version": "<iframe src=javascript:alert(1)>",
    "unit": "$\\frac{1",
    "shape": "[link](http://evil) | cell \r\n- item",
}


def bad_file(kind: str) -> dict[str, Any]:
    change, _ = BAD_FILES[kind]
    small = [(record("torch", "forward", m, first_call_s=f), times(t, seed=i))
             for i, (m, f, t) in enumerate([("eager", 0.1, 0.01), ("compiled", 3.0, 0.006)])]
    return _with(result_json(small), change)


def injected_run() -> dict[str, Any]:
    """A torch run whose record strings are INJECT's (eager and compiled timed, one failed)."""
    strings = {k: v for k, v in INJECT.items() if k not in ("reason", "task")}
    recs = [record("torch", INJECT["task"], m, first_call_s=f, **strings)
            for m, f in (("eager", 0.1), ("compiled", 2.0))]
    failed = record("torch", INJECT["task"], "graph", status="failed", reason=INJECT["reason"], **strings)
    return result_json([(recs[0], times(0.01)), (recs[1], times(0.004, seed=1))], [failed],
                       cpu="$x$ <b>cpu</b>\n# h")


def synthetic_folder(folder: Path, records: int, cases: int, files: int = 10, rounds: int = 30) -> Path:
    """`records` timed records over `cases` distinct cases (tasks of one workload x the
    frameworks' modes), spread over `files` result files: the scale test's input."""
    fws = ("torch", "jax", "tensorflow")
    per_file = -(-records // files)
    rng = np.random.default_rng(0)
    k = 0
    for f in range(files):
        timed = []
        for _ in range(min(per_file, records - k)):
            c = k % cases
            fw, mode = fws[c % 3], ("eager", "compiled")[(c // 3) % 2]
            rec = record(fw, f"task{c // 6:04d}", mode, first_call_s=0.1)
            median = 0.001 * (1 + c % 7)
            timed.append((rec, [float(t) for t in median * np.exp(rng.normal(0, 0.03, rounds))]))
            k += 1
        date = f"2025-01-{f % 28 + 1:02d}T00:00:00+00:00"
        write(folder / f"run{f:03d}.json", result_json(timed, frameworks=fws, date=date))
    return folder


# ----------------------------------------------------------------------------- the three axes

def stream_fields(cold_s: float, new_s: float, seen_s: float, *, compilations: int = 6, shapes: int = 6,
                  requests: int = 8, waste: float = 0.0, limit_hit: bool = False) -> dict[str, Any]:
    """The dynamic workload's record keys of one process (workloads/dynamic.py,
    frameworks/harness/timing.py: time_stream): `shapes` new requests then seen ones, one compilation per new shape."""
    per = [new_s] * shapes + [seen_s] * (requests - shapes)
    counts = [min(i + 1, compilations) for i in range(requests)]
    return {"stream": "gpt-prefill", "requests": requests, "distinct_shapes": shapes,
            "compilations_cold": compilations, "stream_cold_s": cold_s, "new_shape_latency_s": new_s,
            "seen_shape_latency_s": seen_s, "padding_waste": waste, "recompile_limit_hit": limit_hit,
            "stream_cold_request_s": ",".join(f"{t:.4g}" for t in per),
            "stream_cold_compilations": ",".join(map(str, counts))}


def axis_folder(folder: Path, cases: Iterable[tuple[dict[str, Any], float | None]], processes: int = 2) -> Path:
    """One result file per framework and process (repeat) holding `cases`: (record keyword
    arguments incl. framework, task, mode, workload, status, per-process `fields` -- a callable
    of the repeat index or a dict -- ; median seconds, None for a case that did not run)."""
    cases = list(cases)
    for fw in sorted({kw["framework"] for kw, _ in cases}):
        for i in range(processes):
            timed, not_run = [], []
            for kw, med in cases:
                if kw["framework"] != fw:
                    continue
                kw = dict(kw)
                fields = kw.pop("fields", {})
                fields = fields(i) if callable(fields) else fields
                rec = record(kw.pop("framework"), kw.pop("task"), kw.pop("mode"), repeat=i, **kw, **fields)
                if med is None:
                    not_run.append(rec)
                else:
                    timed.append((rec, times(med, n=10, seed=i * 7 + len(timed))))
            write(folder / f"{fw}-{i}.json", result_json(timed, not_run, frameworks=[fw], repeat=i,
                                                          repeats=processes))
    return folder


# ----------------------------------------------------------------------------- simulated runs

# Variance components measured on the 2-core development machine (the earlier 3-process
# example, 46 timed cases): between warm processes 4.3% (SD of log process medians, its
# median over cases), within a process 2.5% per round; cases of one process share about
# 70% of their process effect (r = 0.71 between one framework's eager and compiled cases).
SB, SW, SHARED = 0.043, 0.025, 0.7


def simulated_processes(folder: Path, framework: str, medians: dict[tuple[str, str, str], float], *,
                        cold: int = 2, warm: int = 5, rounds: int = 6, sb: float = SB, sw: float = SW,
                        shared: float = SHARED, cold_shift: float = 0.09, seed: int = 0,
                        run_id: str = "sim", **machine: Any) -> list[Path]:
    """One result file per process, as `fwbench run` writes them: `cold` processes (role
    cold, steady state `cold_shift` slower) then `warm` ones, each holding every case of
    `medians` ({(workload, task, mode[, precision]): seconds}); a process's log effect is
    N(0, shared sb^2) common to its cases plus N(0, (1 - shared) sb^2) per case, its rounds
    log-normal with SD sw. First calls: 100 steps cold, 10 warm, with the same noise."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(cold + warm):
        role = "cold" if i < cold else "warm"
        common = rng.normal(0.0, sb * np.sqrt(shared))
        timed = []
        for k, (key, med) in enumerate(medians.items()):
            workload, task, mode = key[:3]
            extra = {"precision": key[3]} if len(key) > 3 else {}
            eff = common + rng.normal(0.0, sb * np.sqrt(1.0 - shared)) + (cold_shift if role == "cold" else 0.0)
            data = [float(t) for t in med * np.exp(eff + rng.normal(0.0, sw, rounds))]
            first = med * (100 if role == "cold" else 10) * float(np.exp(rng.normal(0.0, sb)))
            rec = record(framework, task, mode, workload=workload, repeat=i, order=k, compile_cache=role,
                         first_call_s=first, first_call_valid=None if mode == "eager" else True,
                         first_call_compilations=0 if mode == "eager" else 1, **extra)
            timed.append((rec, data))
        doc = result_json(timed, frameworks=[framework], run_id=run_id, repeat=i, repeats=cold + warm,
                          compile_cache=role, **machine)
        paths.append(write(folder / f"{framework}-{i}.json", doc))
    return paths


def plausible_processes(folder: Path, framework: str, seed: int = 0, slow: float = 1.0, cold: int = 1,
                        warm: int = 4, **kw: Any) -> Path:
    """simulated_processes over every timed case of PLAUSIBLE (medians times `slow`): one
    file per process, as a `fwbench run` of this framework writes them."""
    medians = {("gpt", task, mode): med * slow for mode, tasks in PLAUSIBLE[framework].items()
               for task, (_, med) in tasks.items()}
    simulated_processes(folder, framework, medians, cold=cold, warm=warm, seed=seed, **kw)
    return folder

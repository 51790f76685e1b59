"""The result record (DESIGN.md, "One result record").

Every benchmark case stores one record in pytest-benchmark's `extra_info`; cases that
did not run (unsupported, failed) store the same record, without timing, in the JSON's
top-level `fwbench.records` list. This module is the single definition of the record,
shared by the harness that writes it and the reports that read it. Framework-free.
"""
from __future__ import annotations

from typing import Any, Mapping

SCHEMA_VERSION = 2      # 2: repeat, compile_s, cache hits, counters split at the timed rounds, gc

STATUSES = ("ok", "fallback", "unsupported", "failed")
MODES = ("eager", "graph", "compiled")

# key -> (accepted python types, required, meaning)
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "framework": ((str,), True, "torch / jax / tensorflow"),
    "framework_version": ((str,), True, "the framework's own version string"),
    "workload": ((str,), True, "gpt, diffusion, ..."),
    "task": ((str,), True, "forward, train_step, generate, sample, ..."),
    "mode": ((str,), True, "eager / graph / compiled"),
    "strategy": ((str, type(None)), False, "case variant declared by the workload (a compile recipe, a "
                 "dynamic-shape strategy, a derivative transform), or null for the default"),
    "repeat": ((int, type(None)), False, "index of the process within its run (0, 1, ...): the unit of replication"),
    "order": ((int, type(None)), False, "position of the case in its process (cases run in a seeded random order)"),
    "preset": ((str,), True, "named configuration"),
    "shape": ((str,), True, "shape of one round's work, e.g. B=8,T=128"),
    "dtype": ((str,), True, "float32"),
    "device": ((str,), True, "cpu, cuda, gpu"),
    "threads": ((int,), True, "intra-op threads the framework was set to"),
    "items": ((int, float), True, "work of one round, in unit"),
    "unit": ((str,), True, "tokens, images, ..."),
    "flops": ((int, float), True, "model FLOPs of one round"),
    "first_call_s": ((int, float, type(None)), True, "wall time of the first call (trace+compile+run)"),
    "compile_cache": ((str, type(None)), False, "the run's compile cache when this process started: cold "
                      "(empty: the first process of its framework), warm (filled by an earlier process of "
                      "the same run), off; older files: empty / warm (folder not empty)"),
    "compile_cache_dir": ((str, type(None)), False, "the cache folder the framework actually used"),
    "compile_s": ((int, float, type(None)), False, "seconds the framework's own timers say it spent compiling "
                  "during the first call (null where it has no timer: see compile_s_source)"),
    "compile_s_source": ((str, type(None)), False, "which timer compile_s reads, or why it is null"),
    "cache_hits": ((int, type(None)), False, "persistent compile-cache hits during the case (null where not counted)"),
    "compilations": ((int, type(None)), True, "compilations/traces counted by the framework's own counters "
                     "over the whole case (first call, warm-up and timed rounds)"),
    "compilations_timed": ((int, type(None)), False, "of those, how many happened during the timed rounds"),
    "recompiled_during_timing": ((bool, type(None)), False, "true when the counter grew during the timed rounds"),
    "compile_counter": ((str, type(None)), False, "which framework counter `compilations` reads"),
    "graph_breaks": ((str, type(None)), False, "every graph break Dynamo reported during the case, those "
                     "torch.optim makes on purpose included (a case is `fallback` only when the model's own "
                     "forward/backward broke)"),
    "peak_memory_bytes": ((int, type(None)), True, "device allocator peak, or null where not measurable"),
    "memory_note": ((str, type(None)), False, "what peak_memory_bytes measures"),
    "peak_memory_source": ((str, type(None)), False, "set when peak_memory_bytes is one call's peak, measured "
                           "outside the timed rounds (TaskSpec.call_memory): what was measured"),
    "matmul_precision": ((str, type(None)), False, "float32 matmul precision set (highest = no TF32)"),
    "status": ((str,), True, "ok / fallback / unsupported / failed"),
    "reason": ((str, type(None)), True, "the framework's own message when status is not ok"),
    "gc_disabled": ((bool, type(None)), False, "Python's garbage collector was off during the timed rounds"),
    "schema": ((int,), False, "record schema version"),
}

REQUIRED = tuple(k for k, (_, req, _) in FIELDS.items() if req)
# Fields that identify a case across runs (used to match records in comparisons).
CASE_KEYS = ("workload", "task", "framework", "mode", "strategy", "preset", "device")
# Fields whose type is bool (a bool is an int in Python: only these accept it).
BOOL_FIELDS = tuple(k for k, (types, _, _) in FIELDS.items() if bool in types)


def empty(**known: Any) -> dict[str, Any]:
    """A record with every field present (None where unknown yet), updated with `known`."""
    rec: dict[str, Any] = {k: None for k in FIELDS}
    rec["schema"] = SCHEMA_VERSION
    rec.update(known)
    return rec


def problems(rec: Any) -> list[str]:
    """What is wrong with a record, as short phrases; empty when it is valid."""
    if not isinstance(rec, Mapping):
        return [f"record is a {type(rec).__name__}, not an object"]
    out = []
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        out.append("missing field(s) " + ", ".join(missing))
    for k, (types, _, _) in FIELDS.items():
        if k in rec and not isinstance(rec[k], types) or (k in rec and isinstance(rec[k], bool)
                                                           and k not in BOOL_FIELDS):
            out.append(f"field {k!r} has {type(rec[k]).__name__} {rec[k]!r}")
    st = rec.get("status")
    if st is not None and st not in STATUSES:
        out.append(f"status {st!r} is not one of {', '.join(STATUSES)}")
    return out


# machine_info.fwbench keys that describe the process and its run (written by the harness;
# reports read them with .get, since older files lack the newer ones).
RUN_INFO: dict[str, str] = {
    "run_id": "identifier shared by every process of one `fwbench run` (null for a direct pytest run)",
    "repeat": "index of this process within the run, for its framework (0 = first, cold cache)",
    "repeats": "how many processes per framework the run asked for",
    "case_order": "'seeded shuffle (seed N)' or 'collection order': the order cases ran in this process",
    "compile_cache": "cold / warm / off: the run's compile cache when this process started",
    "compile_cache_dirs": "{framework: folder the framework's persistent compile cache actually used}",
    "gemm_flops": "best fp32 GEMM rate of the machine at the thread count in force (FLOP/s)",
    "gemm_rates": "{source: best FLOP/s}: numpy and every installed framework, 2048^2 fp32, same threads",
    "settings": "{framework: {setting: value}}: every non-default runtime setting fwbench applies "
                "(allocator, XLA flags, layouts, loop idioms), for the report's set-up table",
    "gc": "what fwbench does with Python's garbage collector during timed rounds",
}

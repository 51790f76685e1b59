"""The result record (DESIGN.md, "One result record").

Every benchmark case stores one record in pytest-benchmark's `extra_info`; cases that
did not run (unsupported, failed) store the same record, without timing, in the JSON's
top-level `fwbench.records` list. This module is the single definition of the record,
shared by the harness that writes it and the reports that read it. Framework-free.
"""
from __future__ import annotations

from typing import Any, Mapping

SCHEMA_VERSION = 1

STATUSES = ("ok", "fallback", "unsupported", "failed")
MODES = ("eager", "graph", "compiled")

# key -> (accepted python types, required, meaning)
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "framework": ((str,), True, "torch / jax / tensorflow"),
    "framework_version": ((str,), True, "the framework's own version string"),
    "workload": ((str,), True, "gpt, diffusion, ..."),
    "task": ((str,), True, "forward, train_step, generate, sample, ..."),
    "mode": ((str,), True, "eager / graph / compiled"),
    "strategy": ((str, type(None)), False, "dynamic-shape strategy, or null"),
    "preset": ((str,), True, "named configuration"),
    "shape": ((str,), True, "shape of one round's work, e.g. B=8,T=128"),
    "dtype": ((str,), True, "float32"),
    "device": ((str,), True, "cpu, cuda, gpu"),
    "threads": ((int,), True, "intra-op threads the framework was set to"),
    "items": ((int, float), True, "work of one round, in unit"),
    "unit": ((str,), True, "tokens, images, ..."),
    "flops": ((int, float), True, "model FLOPs of one round"),
    "first_call_s": ((int, float, type(None)), True, "wall time of the first call (trace+compile+run)"),
    "compile_cache": ((str, type(None)), False, "persistent compile cache before the first call: empty, warm, off"),
    "compilations": ((int, type(None)), True, "compilations/traces counted by the framework's own counters"),
    "compile_counter": ((str, type(None)), False, "which framework counter `compilations` reads"),
    "peak_memory_bytes": ((int, type(None)), True, "device allocator peak, or null where not measurable"),
    "memory_note": ((str, type(None)), False, "what peak_memory_bytes measures"),
    "matmul_precision": ((str, type(None)), False, "float32 matmul precision set (highest = no TF32)"),
    "status": ((str,), True, "ok / fallback / unsupported / failed"),
    "reason": ((str, type(None)), True, "the framework's own message when status is not ok"),
    "schema": ((int,), False, "record schema version"),
}

REQUIRED = tuple(k for k, (_, req, _) in FIELDS.items() if req)
# Fields that identify a case across runs (used to match records in comparisons).
CASE_KEYS = ("workload", "task", "framework", "mode", "strategy", "preset", "device")


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
        if k in rec and not isinstance(rec[k], types) or (k in rec and isinstance(rec[k], bool)):
            out.append(f"field {k!r} has {type(rec[k]).__name__} {rec[k]!r}")
    st = rec.get("status")
    if st is not None and st not in STATUSES:
        out.append(f"status {st!r} is not one of {', '.join(STATUSES)}")
    return out

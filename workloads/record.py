"""The result record (the design card's "one result record"; docs/design/harness.md).

Every benchmark case stores one record in pytest-benchmark's `extra_info`; cases that
did not run (unsupported, failed) store the same record, without timing, in the JSON's
top-level `fwbench.records` list. This module is the single definition of the record,
shared by the harness that writes it and the reports that read it. Framework-free.
"""
from __future__ import annotations

from typing import Any, Mapping

SCHEMA_VERSION = 4      # 2: repeat, compile_s, cache hits, counters split at the timed rounds, gc;
                        # 3: first calls by design (first_call_cache, _compilations, _valid), host state;
                        # 4: dtype split into param_dtype and compute_dtype (RENAMED)

STATUSES = ("ok", "fallback", "unsupported", "failed")


def not_its_api(framework: str, what: str) -> str:
    """The reason of an unsupported case that asks a framework for a mode or strategy it does
    not have (another framework's API name, such as TensorFlow's input_signature under JAX):
    "jax has no dynamic-shape strategy 'input_signature' ...". Reports read it as n/a, not as
    a limitation of the framework (NOT_ITS_API); every such reason is written here."""
    return f"{framework} has no {what}"


def not_reached(framework: str, why: str) -> str:
    """The reason of a case its process never started (the process timed out or was stopped
    before it): reports leave such cases out of coverage (NOT_REACHED), since nothing about
    the framework was learned; every such reason is written here."""
    return f"not run: the {framework} process ended before this case ({why})"


NOT_REACHED = r"^not run: the \S+ process ended before this case"
NOT_ITS_API = r"^\S+ has no (?:'[^']*' mode|dynamic-shape strategy '|'[^']*' strategy for )"
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
    "precision": ((str, type(None)), False, "the case's numeric policy (workloads/precision.py POLICIES: fp32, bf16); "
                  "older files: null, which was fp32"),
    "precision_policy": ((str, type(None)), False, "that policy in one line (workloads/precision.py POLICY)"),
    "placement": ((str, type(None)), False, "where the case ran: device kind and count (workloads.case.Placement)"),
    "n_devices": ((int, type(None)), False, "devices the case ran on (1 unless data parallel); older files: null, "
                  "which was 1"),
    "global_batch": ((int, type(None)), False, "rows of one step's batch over all devices (weak scaling: "
                     "device_batch x n_devices)"),
    "device_batch": ((int, type(None)), False, "rows each device gets: the preset's batch"),
    "threads_per_device": ((int, type(None)), False, "intra-op threads per device (threads is the process's)"),
    "oversubscribed": ((bool, type(None)), False, "more simulated devices x threads than CPUs: times measure "
                       "sharing, never scaling efficiency"),
    "pinning": ((str, type(None)), False, "how a data-parallel case's devices are placed on CPUs"),
    "collectives": ((str, type(None)), False, "JSON {op: {count, bytes}} of one data-parallel step, by the "
                    "framework's own account (collectives_source)"),
    "collectives_source": ((str, type(None)), False, "where `collectives` comes from, or why it is not observable"),
    "allreduce_bytes": ((int, type(None)), False, "bytes one step all-reduces per device (from `collectives`)"),
    "allreduce_count": ((int, type(None)), False, "all-reduce operations (buckets, fused ops) in one step"),
    "analytic_allreduce_bytes": ((int, type(None)), False, "what data parallel must all-reduce: every gradient once"),
    "dp_check_rel": ((int, float, type(None)), False, "max |diff| / max |param| between the data-parallel and the "
                     "one-device parameters after workloads.parallel.CHECK_STEPS AdamW steps, checked before timing"),
    "dp_check_rtol": ((int, float, type(None)), False, "the bound dp_check_rel must stay within"),
    "dp_check_note": ((str, type(None)), False, "why a data-parallel case was not compared with one device"),
    "dp_check_grad_rel": ((int, float, type(None)), False, "max |diff| / max |grad| between the data-parallel step's "
                          "reduced gradients (before clipping) and the one-device gradients on the first global batch"),
    "dp_check_grad_rtol": ((int, float, type(None)), False, "the bound dp_check_grad_rel must stay within"),
    "device_state_bytes": ((int, type(None)), False, "bytes of parameters and optimizer state device 0 holds between "
                           "steps, from the framework's own arrays (device_state_source)"),
    "device_state_source": ((str, type(None)), False, "how device_state_bytes was counted"),
    "wire_bytes": ((int, type(None)), False, "bytes one step's collectives move per device on a ring "
                   "(workloads.parallel.wire_bytes of `collectives`)"),
    "analytic_wire_bytes": ((int, type(None)), False, "what the strategy must move per device on a ring: "
                            "2(N-1)/N x gradients for data parallel, 3(N-1)/N x for the sharded form"),
    "repeat": ((int, type(None)), False, "index of the process within its run (0, 1, ...): the unit of replication"),
    "order": ((int, type(None)), False, "position of the case in its process (cases run in a seeded random order)"),
    "preset": ((str,), True, "named configuration"),
    "shape": ((str,), True, "shape of one round's work, e.g. B=8,T=128"),
    "param_dtype": ((str,), True, "dtype of the parameters, gradients, optimizer state, inputs and outputs: "
                    "float32 under every policy (workloads/precision.py PARAM_DTYPE); older files: `dtype`"),
    "compute_dtype": ((str, type(None)), False, "dtype of the products' and convolutions' inputs: the precision's "
                      "(workloads/precision.py POLICIES: float32 at fp32, bfloat16 at bf16); older files: null"),
    "attention_impl": ((str, type(None)), False, "the attention the model's layers run at this device and "
                       "precision (frameworks/<fw>/precision.py attention_impl): sdpa, written (softmax written "
                       "out in float32; on a GPU with the reason cuDNN was not used), "
                       "jax.nn.dot_product_attention (XLA), jax.nn.dot_product_attention (cuDNN) (with the shapes it "
                       "refused, run written out); "
                       "null for older files"),
    "device": ((str,), True, "cpu, cuda, gpu"),
    "threads": ((int,), True, "intra-op threads the framework was set to"),
    "items": ((int, float), True, "work of one round, in unit"),
    "unit": ((str,), True, "tokens, images, ..."),
    "flops": ((int, float), True, "model FLOPs of one round (the workload's formula, counted once per task: "
              "forward + backward = 3x forward for a train step; the model_flops of MFU)"),
    "items_per_s": ((int, float, type(None)), False, "items (in unit: tokens, images) per second at the median "
                    "round time of this process (null for a stream and a case not timed)"),
    "model_flops_per_s": ((int, float, type(None)), False, "achieved model FLOP/s: flops / the median round time"),
    "peak_precision": ((str, type(None)), False, "the precision MFU's peaks are at: fp32, bf16, or tf32 (fp32 "
                       "cases on an accelerator at matmul precision tf32)"),
    "peak_flops": ((int, float, type(None)), False, "the device's measured peak GEMM rate at peak_precision "
                   "(FLOP/s; frameworks.harness.gemm): MFU's denominator"),
    "peak_source": ((str, type(None)), False, "how peak_flops was measured, or why it was not"),
    "vendor_peak_flops": ((int, float, type(None)), False, "the vendor's dense peak at peak_precision "
                          "(frameworks.harness.gemm.VENDOR_PEAKS; null for a CPU or an unlisted GPU)"),
    "mfu": ((int, float, type(None)), False, "model FLOPs utilisation: model_flops_per_s / peak_flops"),
    "mfu_vendor": ((int, float, type(None)), False, "model_flops_per_s / vendor_peak_flops"),
    "first_call_s": ((int, float, type(None)), True, "wall time of the first call (trace+compile+run)"),
    "first_call_cache": ((str, type(None)), False, "what the case's first call found: every case runs from a "
                         "fresh in-process compile state; on disk an empty folder of its own (cold), the run's "
                         "filled cache (warm), or what the framework allows (TensorFlow)"),
    "first_call_compilations": ((int, type(None)), False, "growth of the framework's compilation counter over "
                                "the first call (a stream: over request 0); JAX's counts persistent-cache loads"),
    "first_call_valid": ((bool, type(None)), False, "null in eager mode; false when a graph/compiled first call "
                         "compiled nothing (it reused programs of earlier cases: no compile latency), else true"),
    "first_call_note": ((str, type(None)), False, "why first_call_valid is false"),
    "compile_cache": ((str, type(None)), False, "the process's compile-cache role: cold (its persistent "
                      "cache started empty: each case compiles into an empty folder of its own), warm (the "
                      "run's cache, filled by its cold processes), off; older files: the folder's state at "
                      "process start (cold = empty, warm = not empty)"),
    "compile_cache_dir": ((str, type(None)), False, "the process's cache folder for the framework (a cold case "
                          "compiled into a folder of its own, merged into this one afterwards)"),
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
    "peak_memory_bytes": ((int, type(None)), True, "one call's peak (peak_memory_source: every one-device CPU "
                          "case, and TaskSpec.call_memory on an accelerator), else the device allocator's peak "
                          "over the case; null where not measurable"),
    "memory_note": ((str, type(None)), False, "what peak_memory_bytes measures"),
    "peak_memory_source": ((str, type(None)), False, "set when peak_memory_bytes is one call's peak, measured "
                           "outside the timed rounds: the instrument (on the CPU the same for every framework: "
                           "frameworks.harness.memory)"),
    "matmul_precision": ((str, type(None)), False, "float32 matmul precision set (highest = no TF32)"),
    "status": ((str,), True, "ok / fallback / unsupported / failed"),
    "reason": ((str, type(None)), True, "the framework's own message when status is not ok"),
    "gc_disabled": ((bool, type(None)), False, "Python's garbage collector was off from the sizing call "
                    "through the warm-up and timed rounds (collected first)"),
    "load_avg": ((int, float, type(None)), False, "the host's 1-minute load average at the end of the timed rounds"),
    "other_cpu": ((int, float, type(None)), False, "CPUs other processes used on average during the timed rounds "
                  "(/proc/stat busy time minus this process's CPU time, over the wall time); null where /proc/stat "
                  "is unreadable or the rounds were too short for its 10 ms ticks"),
    "steal_frac": ((int, float, type(None)), False, "share of CPU time the hypervisor stole during the timed rounds "
                   "(null as other_cpu)"),
    "busy": ((bool, type(None)), False, "the host was busy during the timed rounds: other_cpu above "
             "frameworks.harness.host.BUSY_OTHER_CPU or steal_frac above BUSY_STEAL (null where not measured); "
             "after busy_retries re-measurements, so true means busy every time: reports leave the case out"),
    "busy_retries": ((int, type(None)), False, "times the case was measured again, from its build, because the "
                     "machine was busy during its timed rounds (--busy-retries bounds it); the record is the last "
                     "measurement's"),
    "busy_wait_s": ((int, float, type(None)), False, "seconds spent waiting for a quiet machine before those "
                    "re-measurements (--busy-wait-s bounds each wait)"),
    "schema": ((int,), False, "record schema version"),
}

REQUIRED = tuple(k for k, (_, req, _) in FIELDS.items() if req)
# Fields that identify a case across runs (used to match records in comparisons).
CASE_KEYS = ("workload", "task", "framework", "mode", "strategy", "precision", "preset", "device", "n_devices")
# Fields whose type is bool (a bool is an int in Python: only these accept it).
BOOL_FIELDS = tuple(k for k, (types, _, _) in FIELDS.items() if bool in types)


# Fields older files name otherwise: old name -> name (upgraded() renames them on reading).
RENAMED = {"dtype": "param_dtype"}


def upgraded(rec: Any) -> Any:
    """A record with the old names of RENAMED fields replaced and, where a record from before
    schema 4 ran a case, its compute_dtype stated from its precision's policy (the policy fixes
    it: workloads/precision.py); the record itself when there is nothing to upgrade."""
    if not isinstance(rec, Mapping) or not any(k in rec and v not in rec for k, v in RENAMED.items()):
        return rec
    out = {RENAMED.get(k, k) if RENAMED.get(k) not in rec else k: v for k, v in rec.items()}
    if out.get("compute_dtype") is None and out.get("param_dtype") is not None:
        from workloads.precision import POLICIES
        policy = POLICIES.get(out.get("precision") or "fp32")
        out["compute_dtype"] = policy.compute if policy is not None else None
    return out


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
    rec = upgraded(rec)
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


def machine_key(parts: Mapping[str, Any]) -> str:
    """A machine's id: the hash of its fingerprint fields (cpu, isa_flags, cores, GPU model,
    driver; frameworks.harness.machine.machine_fingerprint records them). The reports recompute it
    from those fields, so every file of one machine lands in one group."""
    import hashlib
    import json
    keep = {k: parts.get(k) for k in ("cpu", "isa_flags", "cores", "driver")}
    # the GPU model every process of the machine records alike (older files: the framework's name)
    keep["accelerator"] = parts["gpu_model"] if "gpu_model" in parts else parts.get("accelerator")
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]


# machine_info.fwbench keys that describe the process and its run (written by the harness;
# reports read them with .get, since older files lack the newer ones).
RUN_INFO: dict[str, str] = {
    "machine_id": "hash of the machine's CPU model and instruction-set flags, cores, GPU model and driver "
                  "(frameworks.harness.machine.machine_fingerprint): reports compare numbers only within one",
    "host": "the host name the process ran on",
    "cores": "CPUs the machine has (os.cpu_count)",
    "isa_flags": "the CPU's instruction-set flags of frameworks.harness.machine.ISA_FLAGS it has",
    "driver": "the NVIDIA driver version, where nvidia-smi answers",
    "gpu_model": "the GPU as nvidia-smi names it (else the framework's name for the accelerator; null on a CPU): "
                 "the same in every framework's process, so it keys the machine",
    "devices": "devices of this process's placement (data parallel over them when more than 1)",
    "simulated_devices": "true when those devices are simulated on the CPU",
    "job": "{host, start, end, job_id} of a process run as a submitit job (reports.commands.launch)",
    "cpu_flags": "the CPU's instruction flags that decide its numeric policies' speed, of "
                 "workloads.precision.cpu_flags() (each policy's native ones and context; null: unread)",
    "run_id": "identifier shared by every process of one `fwbench run` (null for a direct pytest run)",
    "repeat": "index of this process among its framework's in the run, in execution order (0 = first, cold)",
    "repeats": "how many processes per framework the run has (cold + warm)",
    "cold": "of those, how many are cold (each from an empty cache folder of its own)",
    "warm": "and how many are warm (the run's cache, filled by its cold processes)",
    "cache_role": "cold / warm: this process's role as `fwbench run` assigned it (null in a direct run, "
                  "where compile_cache follows the cache folder)",
    "case_order": "'seeded shuffle (seed N)' or 'collection order': the order cases ran in this process",
    "compile_cache": "cold / warm / off: this process's compile-cache role",
    "compile_cache_dirs": "{framework: folder the framework's persistent compile cache actually used}",
    "gemm_flops": "best fp32 GEMM rate of the machine at the thread count in force (FLOP/s)",
    "gemm_rates": "{source: best FLOP/s}: numpy and every installed framework, 2048^2 fp32, same threads",
    "settings": "{framework: {setting: value}}: every non-default runtime setting fwbench applies "
                "(allocator, XLA flags, layouts, loop idioms), for the report's set-up table",
    "gc": "what fwbench does with Python's garbage collector around the warm-up and timed rounds",
    "env_pad_bytes": "length of FWBENCH_ENV_PAD, the random padding `fwbench run` gives each process's "
                     "environment (0 in a direct run)",
    "env_bytes": "bytes of the process's environment (NAME=value plus a terminator per variable)",
    "compiler_startup": "{'framework/mode': seconds}: the process's compiler start-up in each compiled mode it "
                        "ran, a throw-away program compiled before the mode's first case "
                        "(frameworks.harness.timing.compiler_startup), so no case's first call carries it",
    # written by fwbench run's coordinator after the process ended (reports.commands.sets)
    "set": "index of the process set this process belonged to (its configurations were timed side by side with "
           "the set's other processes'); absent in a lone process",
    "set_role": "cold / warm: the set's caches started empty or as the run's filled folder",
    "start_position": "this process's place in its set's start order (drawn per set)",
    "control": "true for the set's second process of one framework (the A/A control): its blocks feed the "
               "control comparison only",
    "control_reference": "primary / control: which of the two is the control comparison's reference in this set "
                         "(drawn per set)",
    "set_wall_s": "seconds the whole set took, from its processes' start to their end",
}

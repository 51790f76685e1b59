"""One case, from the model's build to its record: run_case (what a benchmark module's test
calls), the record it starts from (new_record) and the measurement inside the adapter's
case_caches (measure_case).

It is generic over workloads: everything workload-specific comes from the workload's
`task_spec` (inputs, items, FLOPs) and its model's methods.
"""
from __future__ import annotations

import gc
from typing import Any

import frameworks
import workloads
from frameworks.base import FrameworkUnavailable, Unsupported, available_cpus, process_threads
from frameworks.harness.gemm import gemm_n, measure_gemm_rates, measure_peak, mfu_fields, vendor_peak
from frameworks.harness.host import wait_quiet
from frameworks.harness.memory import cpu_call_peak
from frameworks.harness.options import Options, parse_presets, resolve_device
from frameworks.harness.scaleout import collectives_record, parallel_check
from frameworks.harness.serving import time_serving
from frameworks.harness.session import Session
from frameworks.harness.sidebyside import Kept
from frameworks.harness.timing import bare_loop, compiler_startup, reset_benchmark, time_steady, time_stream
from workloads import record as rec_mod
from workloads.base import FwbenchError, WrongResult, error_line
from workloads.case import Case
from workloads.precision import PARAM_DTYPE, POLICIES, POLICY, peak_kind


def run_case(benchmark: Any, session: Session, case: Case) -> dict[str, Any]:
    """Time one case (workloads.case.Case) with `benchmark.pedantic` and store its record in
    extra_info.

    Raises pytest's skip for missing frameworks and unsupported modes (after recording
    them) and re-raises failures (after recording them), so pytest reports each honestly.

    The whole case (model build to the last timed round) runs inside the adapter's
    case_caches(role): a fresh in-process compile state, and by the process's role an empty
    persistent cache of the case's own (cold) or the run's filled one (warm), so a first
    call never reuses what an earlier case of the process compiled (first_call_cache says
    what it found). The order of events, and what each measures:
      first call        on a fresh model: trace + compile + run (first_call_s; compile_s from
                        the framework's own timers over the same call; first_call_compilations,
                        the compilation counter's growth over it: a non-eager first call that
                        compiled nothing is not a compile latency, first_call_valid false);
                        its output must pass the task's check (TaskSpec.check), else the case
                        is `failed`, untimed
      sizing call       one more call, which sizes the round count to the time budget; from
                        here on Python's GC is off (collected first)
      warm-up rounds    untimed; the compilation counter is read after them
      timed rounds      benchmark.pedantic; a counter that grew during them is recorded
                        (compilations_timed, recompiled_during_timing), and the host's state
                        over them (load_avg, other_cpu, steal_frac, busy)
    Every call waits for its result and, for a call that updates the model, for the
    model's state() too (TaskSpec.mutates). A stream case (TaskSpec.stream) is timed
    request by request instead (time_stream). The model's record_extra(method), or the
    FwbenchError that stops a case, adds keys to the record (workloads.base.Model).
    WrongResult (ran, but not as eager) is recorded failed, never timed, and the pytest
    case xfails.
    """
    import pytest

    framework = case.framework
    p, spec, record = new_record(session, case)
    try:
        adapter = frameworks.load(framework)
    except FrameworkUnavailable as e:
        session.missing[framework] = str(e)
        pytest.skip(str(e))
    return run_configured(benchmark, session, case, adapter, p, spec, record)


def run_configured(benchmark: Any, session: Session, case: Case, adapter: frameworks.Adapter, p: Any, spec: Any,
                   record: dict[str, Any]) -> dict[str, Any]:
    """run_case's work once the framework is loaded: configure it, then build, check and time
    the case into `record`."""
    import pytest

    opts = session.options
    framework, mode = case.framework, case.mode
    n_dev = case.placement.devices
    cfg = adapter.configure(process_threads(opts.threads, n_dev), opts.matmul_precision)
    with adapter.own_precision():   # fwbench's float32 precision for the case; the process's own after it
        if opts.device == "cpu" and not session.gemm_samples:
            session.gemm_samples.append(measure_gemm_rates(cfg["threads"], [adapter]))
        role = adapter.compile_cache()            # cold / warm / off: the process's role
        record.update(framework_version=adapter.version(), threads=cfg["threads"],
                      threads_per_device=cfg["threads"] if n_dev == 1 else opts.threads,
                      oversubscribed=n_dev > 1 and n_dev * (opts.threads or 1) > available_cpus(),
                      matmul_precision=cfg["matmul_precision"], compile_counter=adapter.compile_counter,
                      compile_cache=role)         # in every record, cases not run too

        def not_run(status: str, e: BaseException) -> dict[str, Any]:
            record.update(e.record_extra if isinstance(e, FwbenchError) else {})
            record.update(status=status, reason=str(e) if isinstance(e, FwbenchError) else error_line(e))
            session.records.append(record)
            return record

        try:
            case = case.on(resolve_device(adapter, case.device))      # the framework's own name for it
            record["device"] = case.device
            record["attention_impl"] = adapter.attention_impl(case.device, case.precision)
            record.update(case_peak(session, adapter, case.device, case.precision, cfg["matmul_precision"]))
            if mode not in adapter.modes:
                raise Unsupported(rec_mod.not_its_api(framework, f"{mode!r} mode (it has {', '.join(adapter.modes)})"))
            # the process's folder (a cold case compiles into a folder of its own, merged into it)
            record.update(compile_cache_dir=adapter.cache_dir_in_use(), compile_s_source=adapter.compile_timer)
            started(session, adapter, mode, case.device)      # the compiler's one-off start-up, apart
            if case.placement.devices > 1:     # checked first, in a compile state of its own
                with adapter.case_caches(role):
                    record.update(parallel_check(adapter, case, p, spec, opts.seed))
            default = record["attention_impl"]
            kept = measured(benchmark, adapter, case, p, spec, record, opts, role)
            # again, after the case's programs were traced: a shape the backend refused there (JAX's
            # cuDNN attention) is named in it, unless the model named its own (measure_case)
            if record["attention_impl"] == default:
                record["attention_impl"] = adapter.attention_impl(case.device, case.precision)
        except Unsupported as e:
            not_run("unsupported", e)
            pytest.skip(record["reason"])
        except WrongResult as e:   # ran, but not as eager does: recorded failed, never timed
            not_run("failed", e)
            pytest.xfail(record["reason"])
        except Exception as e:
            not_run("failed", e)
            raise
        after_rounds(benchmark, session, case, adapter, spec, record, kept)
        return record


def after_rounds(benchmark: Any, session: Session, case: Case, adapter: frameworks.Adapter, spec: Any,
                 record: dict[str, Any], kept: tuple[Any, list[tuple[Any, ...]]] | None) -> None:
    """After a case's rounds: its utilisation from their median, its steady calls kept for the
    set's side-by-side blocks, and the record in pytest-benchmark's extra_info."""
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    if spec.stream is None and stats is not None:      # a stream's rounds are requests of differing work
        record.update(mfu_fields(record["flops"], record["items"], record["unit"], stats.median,
                                 record["peak_flops"], record["vendor_peak_flops"]))
        if session.sides is not None and kept is not None and record["status"] in ("ok", "fallback"):
            call, pool = kept        # its blocks beside the set's other configurations of the task
            session.sides.keep(Kept(case.id, call, pool, adapter, float(stats.median), case.fields()))
    benchmark.extra_info.update(record)


def started(session: Session, adapter: frameworks.Adapter, mode: str, device: str) -> None:
    """The process's compiler start-up in `mode` (timing.compiler_startup), measured once per
    process before the first case of the mode and kept in session.compiler_startup (machine_info's
    compiler_startup: "framework/mode" -> seconds); a later Session in the same process (tests)
    gets the measurement made first, since the compiler started only once (the adapter, one per
    process, keeps it: Adapter.startup_s)."""
    if (mode, device) not in adapter.startup_s:
        started = compiler_startup(adapter, mode, device)
        adapter.startup_s[(mode, device)] = None if started is None else started[0]
        # What is alive now (the framework, its compiler started, the harness) lives as long as the
        # process: out of the collector's reach (gc.freeze), the collection before each case
        # (timing.gc_off) scans what the cases made. With the UNet's framework loaded a full one
        # took 0.67 s, 28 of them 19 s of a 6-minute torch benchmark process.
        gc.collect()
        gc.freeze()
    if adapter.startup_s[(mode, device)] is not None:
        session.compiler_startup.setdefault(f"{adapter.name}/{mode}", adapter.startup_s[(mode, device)])


def measured(benchmark: Any, adapter: frameworks.Adapter, case: Case, p: Any, spec: Any, record: dict[str, Any],
             opts: Options, role: str) -> tuple[Any, list[tuple[Any, ...]]] | None:
    """measure_case inside the adapter's case_caches(role), measured again from the build (a
    fresh compile state, first call included) while its timed rounds found the machine busy:
    at most opts.busy_retries times, each after waiting up to opts.busy_wait_s for a quiet
    machine (host.wait_quiet). `record` ends as the last measurement's, with busy_retries and
    busy_wait_s; pytest-benchmark keeps the last timed rounds only (timing.reset_benchmark).
    Returns the last measurement's (call, input pool), for a set's blocks (sidebyside)."""
    base, retries, waited = dict(record), 0, 0.0
    while True:
        with adapter.case_caches(role) as found:
            record["first_call_cache"] = found
            kept = measure_case(benchmark, adapter, case, p, spec, record, opts)
        if record.get("busy") is not True or retries >= opts.busy_retries:
            break
        retries += 1
        waited += wait_quiet(opts.busy_wait_s)[0]
        reset_benchmark(benchmark)
        record.clear()
        record.update(base)
    record.update(busy_retries=retries, busy_wait_s=round(waited, 3))
    return kept


def case_peak(session: Session, adapter: frameworks.Adapter, device: str, precision: str,
              matmul_precision: str) -> dict[str, Any]:
    """The record's MFU denominators for a case: the measured peak GEMM rate at the case's
    precision (bf16, fp32, or TF32 on an accelerator), measured once per process before the
    first case that needs it (on the CPU at fp32: the GEMM rate sampled before the first case,
    the best of numpy's and the framework's), and the vendor's peak where VENDOR_PEAKS knows the GPU."""
    kind = peak_kind(precision, matmul_precision, device)
    key = (adapter.name, device, kind)
    if key not in session.peaks:
        rates = session.gemm_samples[0] if session.gemm_samples else {}
        if device == "cpu" and kind == "fp32" and rates:
            best = max(rates, key=rates.get)
            session.peaks[key] = (rates[best], f"{best} float32 {gemm_n()}x{gemm_n()} matmul on cpu, best of 5 "
                                               f"(the fastest of {', '.join(rates)}), before the first case")
        else:
            try:
                session.peaks[key] = measure_peak(adapter, device, precision)
            except Exception as e:  # noqa: BLE001  no peak: the record says why, MFU stays null
                session.peaks[key] = (None, f"not measured: {error_line(e)}")
    peak, source = session.peaks[key]
    gpu = None if device == "cpu" else adapter.device_name(device)
    return {"peak_precision": kind, "peak_flops": peak, "peak_source": source,
            "vendor_peak_flops": vendor_peak(gpu, kind)}


def new_record(session: Session, case: Case) -> tuple[Any, Any, dict[str, Any]]:
    """The case's preset, task spec and record (the case's fields, its work and sizes; status
    ok until something says otherwise), counted as the next case of the process."""
    opts = session.options
    preset = opts.presets.get(case.workload) or parse_presets(opts.preset, (case.workload,))[case.workload]
    p, spec = case_work(opts, case)
    batch = p.batch * case.placement.devices      # weak scaling: the preset's batch per device
    record = rec_mod.empty(**case.fields(), precision_policy=POLICY[case.precision], preset=preset,
                           global_batch=batch, device_batch=p.batch,
                           shape=spec.shape, param_dtype=PARAM_DTYPE, compute_dtype=POLICIES[case.precision].compute,
                           items=spec.items, unit=spec.unit, flops=float(spec.flops),
                           status="ok", repeat=opts.repeat, order=session.cases_started)
    session.cases_started += 1
    clash = sorted(set(spec.sizes) & set(rec_mod.FIELDS))
    if clash:
        raise FwbenchError(f"{case.workload} task {case.task}: size keys {clash} are record fields; rename them")
    record.update(spec.sizes)
    return p, spec, record


def case_work(opts: Options, case: Case) -> tuple[Any, Any]:
    """The case's preset and task spec (weak scaling: the preset's batch per device)."""
    W = workloads.get(case.workload)
    p = W.preset(opts.presets.get(case.workload) or parse_presets(opts.preset, (case.workload,))[case.workload])
    spec = W.task_spec(p.config, p.batch * case.placement.devices, case.task, seed=opts.seed, strategy=case.strategy)
    return p, spec


def case_model(adapter: frameworks.Adapter, case: Case, p: Any, opts: Options) -> tuple[Any, Any]:
    """The case's model built from the workload's parameters, and those parameters (numpy)."""
    params = workloads.get(case.workload).init_params(p.config, seed=opts.seed)
    return adapter.build(case, p.config, params), params


def case_call(adapter: frameworks.Adapter, case: Case, p: Any, spec: Any, opts: Options
              ) -> tuple[Any, dict[str, Any], Any, list[tuple[Any, ...]], Any]:
    """The case's model built, its inputs as the framework's arrays, and the call the harness
    times: (model, its numpy parameters, the model's method, the input pool, call(*inputs)
    that waits for the result and, for a call that updates the model, its state)."""
    W = workloads.get(case.workload)
    model, params = case_model(adapter, case, p, opts)
    device = case.device
    # the inputs' rules run here, where they are made (a model's calls check no array), then the
    # arrays become the framework's; a Python scalar (prefill_int's length) is passed as it is
    for inp in spec.inputs:
        W.check_inputs(p.config, spec.method, *inp, **spec.kwargs)
    pool = [tuple(a if type(a) in (int, float, bool) else adapter.asarray(a, device) for a in inp)
            for inp in spec.inputs]
    if model.place_inputs is not None:                # a data-parallel model splits each batch
        pool = [model.place_inputs(*inp) for inp in pool]
    fn = getattr(model, spec.method)
    kwargs = dict(spec.kwargs)
    state = model.state if spec.mutates else None

    def call(*args: Any) -> Any:
        out = fn(*args, **kwargs)
        return adapter.sync(out if state is None else (out, state()))
    return model, params, fn, pool, call


def case_memory(adapter: frameworks.Adapter, case: Case, spec: Any, call: Any, pool: list[tuple[Any, ...]],
                opts: Options) -> dict[str, Any]:
    """The case's peak memory: the device's peak over its rounds, or one more call outside them
    (on a CPU by one instrument for every framework), or none with --memory off."""
    device = case.device
    out: dict[str, Any] = {"peak_memory_bytes": adapter.peak_memory(device),
                           "memory_note": None if device != "cpu" else adapter.cpu_memory_note}
    if device == "cpu" and case.placement.devices == 1 and opts.memory == "off":
        out.update(peak_memory_bytes=None, memory_note="not measured (--memory off)")
    elif device == "cpu" and case.placement.devices == 1:
        peak, source = cpu_call_peak(adapter, call, pool[0], case, opts)
        out.update(peak_memory_bytes=peak, peak_memory_source=source, memory_note=source)
    elif spec.call_memory:   # the device allocator's peak
        peak, source = adapter.call_peak_memory(call, pool[0], device)
        out.update(peak_memory_bytes=peak, peak_memory_source=source, memory_note=source)
    return out


def measure_case(benchmark: Any, adapter: frameworks.Adapter, case: Case, p: Any, spec: Any,
                 record: dict[str, Any], opts: Options) -> tuple[Any, list[tuple[Any, ...]]] | None:
    """Build the case's model, time it (time_steady, or time_stream for a stream) and fill
    `record` with what the framework's counters saw over the case: run_case's body, inside
    the adapter's case_caches. Returns a steady case's (call, input pool), None for a stream."""
    mode, device = case.mode, case.device
    if spec.serve is not None:    # exported here, then loaded and timed in a serving process of its own
        time_serving(benchmark, spec.serve, case_model(adapter, case, p, opts)[0], case, record, opts, adapter.threads)
        record.update(first_call_validity("eager", None), gc_disabled=True)
        return
    model, params, fn, pool, call = case_call(adapter, case, p, spec, opts)
    record.update(model.record_extra(spec.method))     # keys a case adds (workloads.interop)
    # a GPT method whose program runs another attention than the framework's default for the
    # device and precision says so (workloads.base.Model.attention_impls)
    own = model.attention_impls.get(spec.method)
    if own:
        record["attention_impl"] = own

    adapter.reset_peak_memory(device)
    k0 = adapter.counters()
    c0, h0 = adapter.compilations(), adapter.cache_hits()
    f0, m0 = len(adapter.fallbacks()), len(adapter.model_fallbacks())

    def check_first(first: Any) -> str | None:
        """What differs between the first call's output and the workload's reference."""
        if spec.check is None:
            return None
        # a call that updates the model returned (its output, its state): case_call
        return spec.check(adapter.to_numpy(first[0] if spec.mutates else first))

    if spec.stream is None:
        c1, rounds = time_steady(benchmark, pool, call, adapter, record, opts, check_first)
    else:                                 # every request timed in arrival order, cold then warm
        c1, rounds = time_stream(benchmark, spec.stream, pool, call, adapter, record, opts)
    record.update(first_call_validity(mode, record["first_call_compilations"]))
    c2, h2 = adapter.compilations(), adapter.cache_hits()
    k2 = adapter.counters()
    record.update({k: k2[k] - k0[k] for k in k0 if k in k2})
    record.update(compilations=c2 - c0, compilations_timed=c2 - c1, recompiled_during_timing=c2 > c1,
                  cache_hits=None if h0 is None or h2 is None else h2 - h0, gc_disabled=True)
    record.update(case_memory(adapter, case, spec, call, pool, opts))
    breaks = adapter.fallbacks()[f0:]
    if breaks:   # every graph break, those torch.optim makes on purpose included
        record["graph_breaks"] = "; ".join(dict.fromkeys(b.split(" Explanation:")[0] for b in breaks))[:1000]
    own = adapter.model_fallbacks()[m0:]
    if own:      # the model's own forward/backward did not compile as one graph
        record.update(status="fallback", reason="; ".join(dict.fromkeys(own))[:1000])
    if opts.bare_loop and spec.stream is None:
        record["bare_loop_median_s"] = bare_loop(call, pool, rounds)
    if case.placement.devices > 1:
        record.update(collectives_record(model, pool, params, case))
    return (call, pool) if spec.stream is None else None


def first_call_validity(mode: str, compilations: int | None) -> dict[str, Any]:
    """Whether a first call measured a compile (records' first_call_valid and first_call_note):
    None for eager mode (it compiles no program of its own; its first call is a first call,
    not a compile latency); False for a graph or compiled mode whose first call grew the
    framework's compilation counter by 0: it ran programs compiled before it in the process,
    so its time is no compile latency (the report leaves it out); True otherwise (JAX's
    counter counts programs loaded from the persistent cache too: a warm first call is valid)."""
    if mode == "eager" or compilations is None:
        return {"first_call_valid": None, "first_call_note": None}
    if compilations > 0:
        return {"first_call_valid": True, "first_call_note": None}
    return {"first_call_valid": False,
            "first_call_note": f"the {mode} first call compiled nothing (the compilation counter did not grow): "
                               "it ran programs compiled earlier in this process, so it measures no compile"}


def memory_child() -> None:
    """The memory-only process (frameworks.harness.memory.child_peak): the case's call built as
    the harness builds it, one warm-up call, then call_peak_rss of the next; prints the bytes
    (JSON) as its last line. The case and options arrive pickled on stdin."""
    import json
    import pickle
    import sys

    from frameworks.base import call_peak_rss, prepare_placement
    case, opts = pickle.load(sys.stdin.buffer)
    threads = prepare_placement(1, False, "cpu", opts.threads)
    adapter = frameworks.load(case.framework)
    adapter.configure(process_threads(threads, 1), opts.matmul_precision)
    p, spec = case_work(opts, case)
    with adapter.own_precision(), adapter.case_caches(adapter.compile_cache()):
        *_, pool, call = case_call(adapter, case, p, spec, opts)
        call(*pool[0])
        peak = call_peak_rss(call, pool[0])
    print(json.dumps(peak), flush=True)

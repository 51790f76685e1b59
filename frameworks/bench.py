"""The benchmark harness: one function times one case (framework x workload x task x mode)
with pytest-benchmark and fills the record (workloads/record.py); a pytest plugin part adds the options,
the machine information and the records of cases that did not run.

It is generic over workloads: everything workload-specific comes from the workload's
`task_spec` (inputs, items, FLOPs) and its model's methods.
"""
from __future__ import annotations

import contextlib
import datetime
import gc
import json
import math
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

import frameworks
import workloads
from frameworks.base import (
    FrameworkUnavailable,
    Unsupported,
    available_cpus,
    configure_allocator,
    default_cache_dir,
    process_threads,
)
from workloads import parallel
from workloads import record as rec_mod
from workloads.base import FwbenchError, Stream, WrongResult, choose, error_line, git_commit, rel_err, split_presets
from workloads.case import Case, Placement
from workloads.precision import PARAM_DTYPE, POLICIES, POLICY

DEVICE_ALIASES = ("cpu", "cuda", "gpu")  # 'gpu' and 'cuda' name the same accelerator


def parse_presets(text: str, selected: tuple[str, ...]) -> dict[str, str]:
    """`--preset small` (every workload) or `--preset gpt=gpt2,diffusion=ddpm-cifar` (per
    workload; a bare name is the default for the others) -> {workload: preset}, each checked."""
    default, per = split_presets(text)
    for wl in per:
        choose("workload", wl, workloads.WORKLOADS)
    out = {}
    for wl in selected:
        name = per.get(wl, default)
        try:
            workloads.get(wl).preset(name)
        except FwbenchError as e:
            raise FwbenchError(f"{e} (per-workload presets: --preset gpt=gpt2,diffusion=ddpm-cifar)") from None
        out[wl] = name
    return out


@dataclass
class Options:
    frameworks: tuple[str, ...]
    workloads: tuple[str, ...]
    preset: str = "small"          # as given; presets[workload] is what runs
    device: str = "cpu"
    threads: int | None = None
    matmul_precision: str = "highest"
    budget_s: float = 3.0          # timed seconds per case, to choose the round count
    min_rounds: int = 7
    max_rounds: int = 100
    warmup_rounds: int = 2
    rounds: int | None = None      # fixed round count (overrides the budget)
    bare_loop: bool = False        # also time a bare loop over the same callable
    seed: int = 0
    presets: dict[str, str] = field(default_factory=dict)
    # Replication (set by `fwbench run` for each process it starts; None in a direct run).
    run_id: str | None = None      # shared by the processes of one run
    repeat: int | None = None      # this process's index among its framework's processes
    repeats: int | None = None     # processes per framework in the run (cold + warm)
    cold: int | None = None        # of those, how many start from empty caches
    warm: int | None = None        # and how many from the run's filled cache
    cache_role: str | None = None  # "cold" / "warm" by design (None: from the cache folder)
    case_order_seed: int | None = None   # shuffle the cases with this seed (None: collection order)
    variants: str = "all"          # "default": only each case's default strategy
    precision: str = "fp32"        # comma list of numeric policies (workloads.case.PRECISIONS)
    devices: str = "1"             # this process's device count (one: the plugin checks)
    simulated_devices: bool = False

    def __post_init__(self) -> None:
        if not self.presets:
            self.presets = parse_presets(self.preset, self.workloads)

    @property
    def n_devices(self) -> int:
        return int(str(self.devices).split(",")[0])

    @property
    def placement(self) -> Placement:
        return Placement(self.device, self.n_devices, self.simulated_devices and self.n_devices > 1)


@dataclass
class Session:
    """Records of cases that ran no timing (unsupported / failed) and missing frameworks."""
    options: Options
    records: list[dict[str, Any]] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)
    # GEMM rates ({source: FLOP/s}) measured before the first case; machine_info adds a
    # measurement after the last.
    gemm_samples: list[dict[str, float]] = field(default_factory=list)
    cases_started: int = 0         # position of the next case in this process (records' `order`)


def resolve_device(adapter: frameworks.Adapter, device: str) -> str:
    """Map the user's device name onto the framework's ('cuda' and 'gpu' are one accelerator)."""
    choose("device", device, DEVICE_ALIASES)
    devs = adapter.devices()
    own = adapter.own_device(device)
    if own in devs:
        return own
    if device in ("cuda", "gpu"):
        raise Unsupported(f"{adapter.name} sees no GPU here (devices: {', '.join(devs)})")
    raise Unsupported(f"{adapter.name} has no device {device!r} (devices: {', '.join(devs)})")


def choose_rounds(step_s: float, opts: Options) -> int:
    if opts.rounds:
        return opts.rounds
    n = math.ceil(opts.budget_s / max(step_s, 1e-6))
    return int(min(max(n, opts.min_rounds), opts.max_rounds))


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
    request by request instead (time_stream). A timed callable, or the exception that
    stops a case, may carry `record_extra`: keys added to the record. WrongResult (ran, but
    not as eager) is recorded failed, never timed, and the pytest case xfails.
    """
    import pytest

    opts = session.options
    framework, mode = case.framework, case.mode
    p, spec, record = new_record(session, case)
    try:
        adapter = frameworks.load(framework)
    except FrameworkUnavailable as e:
        session.missing[framework] = str(e)
        pytest.skip(str(e))
    n_dev = case.placement.devices
    cfg = adapter.configure(process_threads(opts.threads, n_dev), opts.matmul_precision)
    if opts.device == "cpu" and not session.gemm_samples:
        session.gemm_samples.append(measure_gemm_rates(cfg["threads"], [adapter]))
    role = adapter.compile_cache()            # cold / warm / off: the process's role
    record.update(framework_version=adapter.version(), threads=cfg["threads"],
                  threads_per_device=cfg["threads"] if n_dev == 1 else opts.threads,
                  oversubscribed=n_dev > 1 and n_dev * (opts.threads or 1) > available_cpus(),
                  matmul_precision=cfg["matmul_precision"], compile_counter=adapter.compile_counter,
                  compile_cache=role)         # in every record, cases not run too

    def not_run(status: str, e: BaseException) -> dict[str, Any]:
        record.update(getattr(e, "record_extra", None) or {})
        record.update(status=status, reason=str(e) if isinstance(e, FwbenchError) else error_line(e))
        session.records.append(record)
        return record

    try:
        case = case.on(resolve_device(adapter, case.device))      # the framework's own name for it
        record["device"] = case.device
        if mode not in adapter.modes:
            raise Unsupported(rec_mod.not_its_api(framework, f"{mode!r} mode (it has {', '.join(adapter.modes)})"))
        # the process's folder (a cold case compiles into a folder of its own, merged into it)
        record.update(compile_cache_dir=adapter.cache_dir_in_use(), compile_s_source=adapter.compile_timer)
        if case.placement.devices > 1:     # checked first, in a compile state of its own
            with adapter.case_caches(role):
                record.update(parallel_check(adapter, case, p, spec, opts.seed))
        with adapter.case_caches(role) as found:
            record["first_call_cache"] = found
            measure_case(benchmark, adapter, case, p, spec, record, opts)
    except Unsupported as e:
        not_run("unsupported", e)
        pytest.skip(record["reason"])
    except WrongResult as e:   # ran, but not as eager does: recorded failed, never timed
        not_run("failed", e)
        pytest.xfail(record["reason"])
    except Exception as e:
        not_run("failed", e)
        raise
    benchmark.extra_info.update(record)
    return record


def new_record(session: Session, case: Case) -> tuple[Any, Any, dict[str, Any]]:
    """The case's preset, task spec and record (the case's fields, its work and sizes; status
    ok until something says otherwise), counted as the next case of the process."""
    opts = session.options
    W = workloads.get(case.workload)
    preset = opts.presets.get(case.workload) or parse_presets(opts.preset, (case.workload,))[case.workload]
    p = W.preset(preset)
    batch = p.batch * case.placement.devices      # weak scaling: the preset's batch per device
    spec = W.task_spec(p.config, batch, case.task, seed=opts.seed, strategy=case.strategy)
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


def measure_case(benchmark: Any, adapter: frameworks.Adapter, case: Case, p: Any, spec: Any,
                 record: dict[str, Any], opts: Options) -> None:
    """Build the case's model, time it (time_steady, or time_stream for a stream) and fill
    `record` with what the framework's counters saw over the case: run_case's body, inside
    the adapter's case_caches."""
    params = workloads.get(case.workload).init_params(p.config, seed=opts.seed)
    model = adapter.build(case, p.config, params)
    mode, device = case.mode, case.device
    # arrays become the framework's; a Python scalar (prefill_int's length) is passed as it is
    pool = [tuple(a if type(a) in (int, float, bool) else adapter.asarray(a, device) for a in inp)
            for inp in spec.inputs]
    place = getattr(model, "place_inputs", None)      # a data-parallel model splits each batch
    if place is not None:
        pool = [place(*inp) for inp in pool]
    fn = getattr(model, spec.method)
    record.update(getattr(fn, "record_extra", None) or {})   # keys a case adds (workloads.interop)
    kwargs = dict(spec.kwargs)
    state = getattr(model, "state", None) if spec.mutates else None

    def call(*args: Any) -> Any:
        out = fn(*args, **kwargs)
        return adapter.sync(out if state is None else (out, state()))

    adapter.reset_peak_memory(device)
    k0 = adapter.counters()
    c0, h0 = adapter.compilations(), adapter.cache_hits()
    f0, m0 = len(adapter.fallbacks()), len(adapter.model_fallbacks())

    def check_first(first: Any) -> str | None:
        """What differs between the first call's output and the workload's reference."""
        if spec.check is None:
            return None
        return spec.check(adapter.to_numpy(first if state is None else first[0]))

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
    record["peak_memory_bytes"] = adapter.peak_memory(device)
    record["memory_note"] = None if device != "cpu" else adapter.cpu_memory_note
    if spec.call_memory:     # one more call, outside the timed rounds
        record["peak_memory_bytes"], record["peak_memory_source"] = adapter.call_peak_memory(call, pool[0], device)
        record["memory_note"] = record["peak_memory_source"]
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


def collectives_record(model: Any, pool: list[tuple[Any, ...]], params: dict[str, np.ndarray],
                       case: Case) -> dict[str, Any]:
    """What one data-parallel step communicates, by the framework's own account
    (model.collectives, one more step after the timed rounds), beside the analytic gradient
    bytes (workloads.parallel.gradient_bytes) and both as bytes on a ring per device
    (workloads.parallel.wire_bytes, analytic_wire_bytes)."""
    coll = dict(model.collectives(*pool[0]))
    source, why = coll.pop("source"), coll.pop("reason", None)
    n = case.placement.devices
    wire = parallel.wire_bytes(coll, n)
    analytic = parallel.analytic_wire_bytes(params, n, case.strategy)
    return {"pinning": model.pinning, "collectives": json.dumps(coll, sort_keys=True) if coll else None,
            "collectives_source": source or why,
            "allreduce_bytes": coll.get("all-reduce", {}).get("bytes"),
            "allreduce_count": coll.get("all-reduce", {}).get("count"),
            "analytic_allreduce_bytes": parallel.gradient_bytes(params),
            "wire_bytes": None if wire is None else int(round(wire)),
            "analytic_wire_bytes": None if analytic is None else int(round(analytic))}


def against_one_device(adapter: frameworks.Adapter, case: Case, config: Any, params: dict[str, np.ndarray],
                       inputs: Any) -> tuple[float, Any]:
    """A fresh one-device model and a fresh data-parallel one of `case`, from the same
    parameters, stepped on the same global batches (workloads.parallel.check); returns the
    difference and the data-parallel model."""
    single = adapter.build(case.but(placement=Placement(case.placement.kind),
                                    strategy=parallel.one_device_strategy(case.strategy)), config, params)
    dp = adapter.build(case, config, params)
    batches = [tuple(adapter.asarray(a, case.device) for a in inp) for inp in inputs]
    return parallel.check(single, dp, batches, dp.place_inputs), dp


def parallel_check(adapter: frameworks.Adapter, case: Case, p: Any, spec: Any, seed: int) -> dict[str, Any]:
    """Before a data-parallel case is timed: a fresh data-parallel model against a fresh
    one-device model after workloads.parallel.CHECK_STEPS AdamW steps on the same global
    batches. WrongResult past CHECK_RTOL (the case is recorded failed and never timed)."""
    if case.strategy == parallel.NO_SYNC:
        return {"dp_check_note": "not compared with one device: the no-sync step leaves its gradients "
                                 "unsynchronised by design (a timing probe, not a training step)"}
    params = workloads.get(case.workload).init_params(p.config, seed=seed)
    rel, _ = against_one_device(adapter, case, p.config, params, spec.inputs)
    rtol = parallel.CHECK_RTOL[case.workload]
    out = {"dp_check_rel": rel, "dp_check_rtol": rtol}
    if not out["dp_check_rel"] <= rtol:
        e = WrongResult(f"data parallel on {case.placement.devices} devices differs from one device after "
                        f"{parallel.CHECK_STEPS} AdamW steps: max |diff| / max |param| {out['dp_check_rel']:.2g} "
                        f"> {rtol:g}")
        e.record_extra = out
        raise e
    return out


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


def time_steady(benchmark: Any, pool: list[tuple[Any, ...]], call: Callable[..., Any], adapter: frameworks.Adapter,
                record: dict[str, Any], opts: Options,
                check: Callable[[Any], str | None] | None = None) -> tuple[int, int]:
    """Steady state, for fixed shapes: the first call (first_call_s, compile_s and
    first_call_compilations), checked against the workload's reference (`check` returns what
    differs: WrongResult, never timed), then with Python's GC collected and off a sizing
    call, warm-up rounds and the timed rounds rotating the inputs. Returns the compilation
    counter after the warm-up, and the round count."""
    s0, n0 = adapter.compile_seconds(), adapter.compilations()
    t0 = time.perf_counter()
    first = call(*pool[0])
    record["first_call_s"] = time.perf_counter() - t0
    record["first_call_compilations"] = adapter.compilations() - n0
    differs = check(first) if check is not None else None
    if differs:   # a wrong result is a failure, never a timing
        raise WrongResult(differs)
    s1 = adapter.compile_seconds()
    record["compile_s"] = None if s0 is None or s1 is None else s1 - s0
    del first
    turn = iter(range(1, 1 << 62))

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return pool[next(turn) % len(pool)], {}

    # GC off from the sizing call on, through the warm-up: with GC on until the timed rounds,
    # the first timed round was the slowest of its process in 57 of 138 processes of the
    # committed example (about 10 expected; issue 17)
    with gc_off():
        t0 = time.perf_counter()
        call(*setup()[0])                 # second call: a warm-up that also sizes the rounds
        rounds = choose_rounds(time.perf_counter() - t0, opts)
        for _ in range(opts.warmup_rounds):   # warm-up here, so the counter can be read after it
            call(*setup()[0])
        c1 = adapter.compilations()
        record.update(timed_rounds(benchmark, call, rounds, setup))
    return c1, rounds


@contextlib.contextmanager
def gc_off() -> Iterator[None]:
    """Python's GC collected, then off for the block: no collection pause lands in a timed
    call or in the warm-up before it (records' gc_disabled)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def timed_rounds(benchmark: Any, fn: Callable[..., Any], rounds: int, setup: Any = None) -> dict[str, Any]:
    """benchmark.pedantic over `rounds` rounds of one call each (callers run it, with the
    warm-up before it, inside gc_off); returns the host's state over them (host_window)."""
    with host_window() as host:
        benchmark.pedantic(fn, setup=setup, rounds=rounds, warmup_rounds=0, iterations=1)
    return host


# A case is flagged `busy` when, over its timed rounds, other processes used more than
# BUSY_OTHER_CPU CPUs on average or the hypervisor stole more than BUSY_STEAL of the CPU
# time: either takes time from the timed process or from the memory bandwidth and caches it
# shares, so its times are not those of a quiet machine (pyperf warns likewise when the
# system is busy). Measured on the idle 2-core development machine (nothing else running;
# 30 windows of a one-second busy loop in this process): other_cpu 0.00 to 0.022, median
# 0.00 (a `ps` sampling every 5 s included), steal 0. Half a CPU is far above that noise and
# half of one other busy thread.
BUSY_OTHER_CPU = 0.5
BUSY_STEAL = 0.02


def cpu_jiffies(line: str) -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of every CPU together from /proc/stat's first line
    ("cpu  user nice system idle iowait irq softirq steal guest guest_nice"): busy is
    user + nice + system + irq + softirq, total the first eight (guest time is already in
    user)."""
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in line.split()[1:9])
    return user + nice + system + irq + softirq, steal, user + nice + system + idle + iowait + irq + softirq + steal


def _proc_stat_line() -> str | None:
    try:
        with open("/proc/stat") as f:
            return f.readline()
    except OSError:
        return None


def host_state(before: str | None, after: str | None, own_cpu_s: float, wall_s: float, clk_tck: float,
               load_avg: float | None, cpus: int) -> dict[str, Any]:
    """The host over a window, from /proc/stat's first line at its start and end: other_cpu,
    the CPUs other processes used on average (all CPUs' busy time minus this process's own
    CPU time, over the wall time; at least 0), steal_frac (steal over all CPU time) and busy
    (either above its threshold); load_avg as given. None where /proc/stat was not read, or
    where the window is too short for its ticks (1/clk_tck s per CPU, counted at both ends:
    2 * cpus / clk_tck / wall_s CPUs of error) to tell half of BUSY_OTHER_CPU (seen: one 2 ms
    timed round of torch's tiny train step read 1.39 other CPUs); 0.16 s on 2 CPUs."""
    out: dict[str, Any] = {"load_avg": load_avg, "other_cpu": None, "steal_frac": None, "busy": None}
    if before is None or after is None or wall_s <= 0 or 2 * cpus / clk_tck / wall_s > BUSY_OTHER_CPU / 2:
        return out
    (b0, s0, t0), (b1, s1, t1) = cpu_jiffies(before), cpu_jiffies(after)
    out["other_cpu"] = max(0.0, ((b1 - b0) / clk_tck - own_cpu_s) / wall_s)
    out["steal_frac"] = (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0
    out["busy"] = out["other_cpu"] > BUSY_OTHER_CPU or out["steal_frac"] > BUSY_STEAL
    return out


@contextlib.contextmanager
def host_window(read: Callable[[], str | None] = _proc_stat_line) -> Iterator[dict[str, Any]]:
    """A block over which the host's state is measured (host_state): yields a dict filled when
    the block ends. `read` returns /proc/stat's first line (None where it cannot)."""
    state: dict[str, Any] = {}
    before, cpu0, t0 = read(), time.process_time(), time.perf_counter()
    yield state
    after, cpu1, t1 = read(), time.process_time(), time.perf_counter()
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    state.update(host_state(before, after, cpu1 - cpu0, t1 - t0, os.sysconf("SC_CLK_TCK"), load,
                            os.cpu_count() or 1))


def time_stream(benchmark: Any, stream: Stream, pool: list[tuple[Any, ...]], call: Callable[..., Any],
                adapter: frameworks.Adapter, record: dict[str, Any], opts: Options) -> tuple[int, int]:
    """A stream of requests whose shapes vary (workloads.base.Stream), on a fresh model:

      cold pass    every request once, in arrival order, each timed alone, inside the
                   adapter's fresh_caches() (empty compile caches as far as the framework
                   allows: stream_cold_cache says what), the compilation counter read after
                   each: stream_cold_s (sum), first_call_s and first_call_compilations (request 0),
                   compile_s (the framework's timer over the pass), new_shape_latency_s and
                   seen_shape_latency_s (median of requests whose shape is new / was seen
                   before), per-request times and cumulative compilations as text
      check        every cold output (its first stream.rows[i] rows where a batch was
                   padded) against stream.check and stream.expected (WrongResult if one differs:
                   recorded failed, and no warm pass is timed)
      warm passes  with GC off, one untimed pass (every shape now seen; it sizes the round
                   count), then timed rounds of one whole pass each: stream_warm_s is their
                   median; the host's state over them as for a steady case
    Returns the compilation counter after the untimed warm pass, and the round count."""
    keys = stream.keys
    assert len(keys) == len(pool), "a stream names the shape of every request"
    s0, c0, l0 = adapter.compile_seconds(), adapter.compilations(), adapter.recompile_limit_hits()
    k0 = adapter.counters()
    times, counts, outs = [], [], []
    # the cold pass compiles from empty caches; GC off, as in every timed round
    with adapter.fresh_caches() as cold_cache, gc_off():
        for args in pool:
            t0 = time.perf_counter()
            outs.append(call(*args))
            times.append(time.perf_counter() - t0)
            counts.append(adapter.compilations() - c0)
    s1, k1 = adapter.compile_seconds(), adapter.counters()
    record.update({f"{k}_cold": k1[k] - k0[k] for k in k0 if k in k1})
    record["stream_cold_cache"] = cold_cache
    if stream.check is not None:
        for i, out in enumerate(outs):
            differs = stream.check(i, adapter.to_numpy(out))
            if differs:
                raise WrongResult(f"request {i} ({keys[i]}): {differs}")
    if stream.expected is not None:
        for i, out in enumerate(outs):
            got = adapter.to_numpy(out)
            if stream.rows is not None:      # a padded batch: its real rows only
                got = got[:stream.rows[i]]
            err = rel_err(got, stream.expected(i))
            if not err <= stream.tolerance:
                raise WrongResult(f"request {i} ({keys[i]}): output differs from the unpadded eager reference "
                                  f"(relative error {err:.2g} > {stream.tolerance:g})")
    del outs
    first = [keys.index(k) == i for i, k in enumerate(keys)]
    new = [t for t, f in zip(times, first) if f]
    seen = [t for t, f in zip(times, first) if not f]
    record.update(first_call_s=times[0], first_call_compilations=counts[0],
                  compile_s=None if s0 is None or s1 is None else s1 - s0,
                  stream_cold_s=float(sum(times)), distinct_shapes=len(set(keys)), compilations_cold=counts[-1],
                  new_shape_latency_s=float(np.median(new)),
                  seen_shape_latency_s=float(np.median(seen)) if seen else None,
                  stream_cold_request_s=",".join(f"{t:.4g}" for t in times),
                  stream_cold_compilations=",".join(map(str, counts)), **stream.record)

    def one_pass() -> None:
        for args in pool:
            call(*args)

    with gc_off():                        # the warm passes as a steady case's rounds: GC off from the warm-up on
        t0 = time.perf_counter()
        one_pass()                        # warm-up: every shape has been seen
        rounds = choose_rounds(time.perf_counter() - t0, opts)
        c1 = adapter.compilations()
        record.update(timed_rounds(benchmark, one_pass, rounds))
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    record["stream_warm_s"] = float(stats.median) if stats is not None else None
    l1 = adapter.recompile_limit_hits()
    record["recompile_limit_hit"] = None if l0 is None or l1 is None else l1 > l0
    return c1, rounds


def bare_loop(call: Callable[..., Any], pool: list[tuple[Any, ...]], rounds: int) -> float:
    """Median seconds of `call` in a plain loop with the same input rotation: the check
    that the harness adds nothing measurable to what it reports."""
    times = []
    for i in range(rounds):
        args = pool[(i + 1) % len(pool)]
        t0 = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


# ----------------------------------------------------------------------------- machine info

GEMM_N = 2048


def measure_gemm_flops(n: int = GEMM_N, repeats: int = 5, threads: int | None = None) -> float:
    """numpy's fp32 matrix-multiply rate on the CPU: the best of `repeats` n x n float32
    products (BLAS), after one warm-up, with BLAS limited to `threads` (threadpoolctl: numpy's
    BLAS sizes its pool when numpy is imported, usually before fwbench sets the count)."""
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads or int(os.environ.get("FWBENCH_THREADS", 0)) or available_cpus(),
                           user_api="blas"):
        return 2.0 * n ** 3 / _best_time(lambda: a @ b, repeats)


def _best_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_gemm_rates(threads: int, adapters: list[frameworks.Adapter], n: int = GEMM_N,
                       repeats: int = 5) -> dict[str, float]:
    """The CPU's fp32 GEMM rate at `threads` threads by every library at hand: numpy's BLAS
    and each adapter's own matmul (MKL/oneDNN for PyTorch, XLA for JAX and TensorFlow), n x n,
    best of `repeats`. Utilisation divides by the best of them (no library's rate understates
    what the machine can do), and every rate is recorded."""
    rates = {"numpy": measure_gemm_flops(n, repeats, threads)}
    x = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    for a in adapters:
        try:
            xa, mm = a.asarray(x, "cpu"), a.matmul_fn()
            rates[a.name] = 2.0 * n ** 3 / _best_time(lambda: a.sync(mm(xa, xa)), repeats)
        except Exception:  # noqa: BLE001  a framework that cannot multiply here: numpy's rate remains
            continue
    return rates


def cpu_name() -> str:
    """The CPU model ("model name" in /proc/cpuinfo on Linux, else platform's answer)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The CPU's instructions that decide what a bf16 (or low-precision) number means on it: without
# AVX512-BF16 or AMX-BF16 a bf16 matmul is emulated and can run 44-499x slower than fp32
# (pytorch#146508); AVX512F and AVX-VNNI for context.
BF16_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "avx_vnni", "avx512_fp16")


def cpu_flags(names: tuple[str, ...] = BF16_FLAGS) -> list[str] | None:
    """Which of `names` the CPU has (/proc/cpuinfo's flags), None where they cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [n for n in names if n in have]
    except OSError:
        pass
    return None


ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", *BF16_FLAGS[1:])


def _nvidia_smi(field: str) -> str | None:
    """The first GPU's `field` (nvidia-smi --query-gpu) where nvidia-smi answers, else None."""
    import shutil
    import subprocess
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.splitlines()
        return out[0].strip() or None if out else None
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_driver() -> str | None:
    """The NVIDIA driver version where nvidia-smi answers, else None."""
    return _nvidia_smi("driver_version")


def machine_fingerprint(accelerator: str | None) -> dict[str, Any]:
    """What makes a machine's numbers its own (issue 21): CPU model and instruction-set flags,
    cores, accelerator and driver; `machine_id` is a hash of them (two identical nodes share
    it: the same machine type), `host` the name it ran on. The framework versions, also part
    of what a number depends on, are in every file's `frameworks` (each process records its
    own framework's, so they cannot key a machine). Reports never state a ratio between
    numbers of different machines (reports.analysis.data.machine_groups)."""
    import socket
    # the GPU as nvidia-smi names it, the same in every framework's process (the frameworks'
    # own names differ, and one that failed to start its GPU client names none)
    gpu = _nvidia_smi("name") or accelerator
    parts = {"cpu": cpu_name(), "isa_flags": cpu_flags(ISA_FLAGS), "cores": os.cpu_count(),
             "gpu_model": gpu, "driver": gpu_driver()}
    return {"machine_id": rec_mod.machine_key(parts), "host": socket.gethostname(), "cores": parts["cores"],
            "isa_flags": parts["isa_flags"], "driver": parts["driver"], "gpu_model": gpu}


def machine_info(opts: Options, gemm_samples: list[dict[str, float]] = ()) -> dict[str, Any]:
    """fwbench's part of pytest-benchmark's machine_info (the JSON's `machine_info.fwbench`;
    workloads.record.RUN_INFO describes the run keys).

    On the CPU, `gemm_flops` is the best of the GEMM rates measured before the first case
    (gemm_samples) and now, after the last, by numpy and by every framework loaded: on a
    shared machine a busy neighbour can only lower a measurement, so the best is the
    machine's rate, and one unlucky moment does not inflate every utilisation of the run.
    Every sample is kept (`gemm_samples`), and each source's best (`gemm_rates`)."""
    fws: dict[str, Any] = {}
    missing: dict[str, str] = {}
    accel = None
    adapters = []
    for name, a in frameworks.status(opts.frameworks).items():
        if isinstance(a, str):
            missing[name] = a
            continue
        a.configure(process_threads(opts.threads, opts.n_devices), opts.matmul_precision)
        adapters.append(a)
        fws[name] = {"version": a.version(), "devices": a.devices(), "modes": list(a.modes),
                     "compile_counter": a.compile_counter, "compile_cache": a.compile_cache(),
                     "compile_timer": a.compile_timer}
        if opts.device != "cpu" and accel is None:
            try:
                accel = a.device_name(resolve_device(a, opts.device))
            except FwbenchError:
                pass
    threads = int(os.environ.get("FWBENCH_THREADS", 0)) or available_cpus()
    info = {
        "schema": rec_mod.SCHEMA_VERSION,
        "fwbench_commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "frameworks": fws,
        "missing": missing,
        "threads": threads,
        "cpus_available": available_cpus(),
        "allocator": configure_allocator(),
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "device": opts.device,
        "accelerator": accel,
        "matmul_precision": opts.matmul_precision,
        "preset": ",".join(f"{w}={p}" for w, p in opts.presets.items()),
        "workloads": list(opts.workloads),
        "compile_cache_dir": default_cache_dir(),
        "compile_cache": _one_state({n: a.compile_cache() for n, a in zip(fws, adapters)}),
        "compile_cache_dirs": {n: a.cache_dir_in_use() for n, a in zip(fws, adapters)},
        "run_id": opts.run_id,
        "repeat": opts.repeat,
        "repeats": opts.repeats,
        "cold": opts.cold,
        "warm": opts.warm,
        "cache_role": opts.cache_role,
        "case_order": (f"seeded shuffle (seed {opts.case_order_seed})" if opts.case_order_seed is not None
                       else "collection order"),
        "gc": "gc.collect(), then the collector disabled from each case's sizing call through its warm-up and "
              "timed rounds, and during a stream's cold pass and through its warm passes",
        "env_pad_bytes": len(os.environ.get("FWBENCH_ENV_PAD", "")),
        "env_bytes": env_bytes(),
        "settings": {n: {"threads": str(threads), "C heap (malloc)": configure_allocator(), **a.settings()}
                     for n, a in zip(fws, adapters)},
        "numpy": np.__version__,
        "gemm_flops": None,
        "gemm_note": None,
        "gemm_samples": None,
        "gemm_rates": None,
        "devices": opts.n_devices,
        "simulated_devices": opts.simulated_devices and opts.n_devices > 1,
        **machine_fingerprint(accel),
    }
    if opts.device == "cpu":
        info.update(cpu_gemm(threads, adapters, gemm_samples))
    else:
        info["gemm_flops"], info["gemm_note"] = accelerator_gemm(opts, fws)
    return info


def cpu_gemm(threads: int, adapters: list[frameworks.Adapter], before: list[dict[str, float]]) -> dict[str, Any]:
    """machine_info's GEMM keys on the CPU: every sample (those taken before the first case
    and one now), each source's best, the best of all and how it was measured."""
    samples = [*before, measure_gemm_rates(threads, adapters)]
    rates: dict[str, float] = {}
    for sample in samples:
        for src, r in sample.items():
            rates[src] = max(rates.get(src, 0.0), r)
    best = max(rates, key=rates.get)
    when = "before the first case and after the last" if len(samples) > 1 else "after the run"
    return {"gemm_rates": rates, "gemm_samples": samples, "gemm_flops": max(rates.values()),
            "gemm_note": (f"float32 {GEMM_N}x{GEMM_N} matmul at the thread count in force, best of 5, by "
                          f"{', '.join(rates)}; best of {len(samples)} such measurements ({when}); "
                          f"fastest: {best}")}


def env_bytes() -> int:
    """Bytes the process's environment takes ("NAME=value\\0" per variable): its size moves
    the stack, and with it the alignment of everything on it, which changed measured times by
    several percent in Mytkowicz et al. (2009); `fwbench run` pads it by a random length per
    process (FWBENCH_ENV_PAD), so that no framework's processes sit at one layout."""
    return sum(len(k) + len(v) + 2 for k, v in os.environb.items())


def _one_state(states: dict[str, str]) -> str | None:
    """The process's compile-cache state: the frameworks' common state, else each one's."""
    vals = set(states.values())
    if not vals:
        return None
    return vals.pop() if len(vals) == 1 else ", ".join(f"{n} {v}" for n, v in states.items())


def host_info(framework: str, device: str = "cpu") -> dict[str, Any]:
    """The machine part of machine_info for a result file that `fwbench run` rebuilds after
    its benchmark process ended early (reports.runner runs this in a fresh process, after
    set_threads, at the same thread count): CPU, C heap policy, CPUs, commit, the GEMM rate
    on the CPU, and the framework's modes (so modes it lacks become `unsupported`)."""
    info: dict[str, Any] = {"cpu": cpu_name(), "allocator": configure_allocator(),
                            "cpus_available": available_cpus(), "fwbench_commit": git_commit(),
                            "gemm_flops": None, "gemm_note": None, "modes": None}
    if device == "cpu":
        info["gemm_flops"] = measure_gemm_flops()
        info["gemm_rates"] = {"numpy": info["gemm_flops"]}
        info["gemm_samples"] = [dict(info["gemm_rates"])]
        info["gemm_note"] = (f"numpy float32 {GEMM_N}x{GEMM_N} matmul, best of 5, at the thread count in force; "
                             "measured by fwbench run after the benchmark process ended early")
    accel = None
    try:
        a = frameworks.load(framework)
        info["modes"] = list(a.modes)
        accel = None if device == "cpu" else a.device_name(resolve_device(a, device))
    except FwbenchError:
        pass
    info.update(machine_fingerprint(accel))
    return info


def accelerator_gemm(opts: Options, fws: dict[str, Any]) -> tuple[float | None, str | None]:
    """fp32 GEMM rate on the accelerator, measured with the first framework that sees it
    (no framework-neutral GEMM exists on a GPU), at the matmul precision in force."""
    for name in fws:
        a = frameworks.load(name)
        try:
            device = resolve_device(a, opts.device)
        except FwbenchError:
            continue
        n = 8192
        x = a.asarray(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), device)
        mm = a.matmul_fn()
        a.sync(mm(x, x))
        best = math.inf
        for _ in range(10):
            t0 = time.perf_counter()
            a.sync(mm(x, x))
            best = min(best, time.perf_counter() - t0)
        return 2.0 * n ** 3 / best, (f"{name} float32 {n}x{n} matmul on {device}, best of 10, "
                                     f"precision {opts.matmul_precision}")
    return None, "no framework sees the accelerator"

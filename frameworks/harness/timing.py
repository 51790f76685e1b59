"""Timing (pytest-benchmark's fixture part): a steady case's first call, sizing call, warm-up
and timed rounds (time_steady), a stream's cold pass and warm passes (time_stream), with
Python's GC off and the host's state over the timed rounds; the round count from the time
budget, and the bare-loop check."""
from __future__ import annotations

import contextlib
import gc
import math
import time
from typing import Any, Callable, Iterator

import numpy as np

import frameworks
from frameworks.harness.host import host_window
from frameworks.harness.options import Options
from workloads.base import Stream, WrongResult, rel_err


def compiler_startup(adapter: frameworks.Adapter, mode: str, device: str) -> tuple[float, int] | None:
    """Seconds the process's first compile in `mode` took: its adapter's throw-away program
    (Adapter.startup_program) made, compiled and run once, inside the adapter's fresh_caches()
    (empty compile caches for the block, none of it kept where a case could find it: torch's
    Inductor folder is a temporary one, JAX's persistent cache is off, TensorFlow's XLA entries
    are keyed by the throw-away tf.function's own name and program). The one-off cost of the
    compiler stack (its imports, first compile, code generator and toolchain) lands here, not
    in the first call of whichever case the shuffle put first (torch's first compiled
    case of a cold process paid about 8 s more). Returns the seconds and the growth of the
    framework's compilation counter over them (read while the program lives: TensorFlow counts
    the traces of live tf.functions); None where the mode compiles nothing."""
    make = adapter.startup_program(mode, device)
    if make is None:
        return None
    with adapter.fresh_caches():
        n0, t0 = adapter.compilations(), time.perf_counter()
        adapter.sync(make())
        return time.perf_counter() - t0, adapter.compilations() - n0


def choose_rounds(step_s: float, opts: Options) -> int:
    if opts.rounds:
        return opts.rounds
    n = math.ceil(opts.budget_s / max(step_s, 1e-6))
    return int(min(max(n, opts.min_rounds), opts.max_rounds))


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
    # committed example (about 10 expected)
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


def timed_rounds(benchmark: Any, fn: Callable[..., Any], rounds: int, setup: Any = None,
                 own_cpu: Callable[[], float] = time.process_time) -> dict[str, Any]:
    """benchmark.pedantic over `rounds` rounds of one call each (callers run it, with the
    warm-up before it, inside gc_off); returns the host's state over them (host_window, with
    `own_cpu` the case's own CPU seconds)."""
    with host_window(own_cpu=own_cpu) as host:
        benchmark.pedantic(fn, setup=setup, rounds=rounds, warmup_rounds=0, iterations=1)
    return host


def reset_benchmark(benchmark: Any) -> None:
    """Make pytest-benchmark's fixture usable once more, for a case measured again
    (run.measured): its earlier timed rounds are taken out of the session's results (the
    fixture appended them there, through its add_stats, list.append) and the fixture forgets it
    was used, so the results file holds the last measurement only. pytest-benchmark has no
    public way to do this (pedantic may be called once per fixture); a stand-in fixture without
    these attributes is left as it is."""
    stats = getattr(benchmark, "stats", None)
    results = getattr(getattr(benchmark, "_add_stats", None), "__self__", None)
    if stats is not None and isinstance(results, list) and stats in results:
        results.remove(stats)
    if hasattr(benchmark, "_mode"):
        benchmark._mode = None
        benchmark.stats = None


def cold_pass(keys: list[Any], times: list[float], counts: list[int]) -> dict[str, Any]:
    """A stream's cold pass in its record: per-request times and cumulative compilations, and the
    median of the requests whose shape was new against those whose shape was seen before."""
    first = [keys.index(k) == i for i, k in enumerate(keys)]
    new = [t for t, f in zip(times, first) if f]
    seen = [t for t, f in zip(times, first) if not f]
    return dict(first_call_s=times[0], first_call_compilations=counts[0], stream_cold_s=float(sum(times)),
                distinct_shapes=len(set(keys)), compilations_cold=counts[-1],
                new_shape_latency_s=float(np.median(new)),
                seen_shape_latency_s=float(np.median(seen)) if seen else None,
                stream_cold_request_s=",".join(f"{t:.4g}" for t in times),
                stream_cold_compilations=",".join(map(str, counts)))


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
    check_stream(stream, outs, adapter)
    del outs
    record.update(cold_pass(keys, times, counts), compile_s=None if s0 is None or s1 is None else s1 - s0,
                  **stream.record)

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


def check_stream(stream: Stream, outs: list[Any], adapter: frameworks.Adapter) -> None:
    """A stream's cold outputs against stream.check and stream.expected (the first
    stream.rows[i] rows of a padded batch): WrongResult naming the first request that differs."""
    keys = stream.keys
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

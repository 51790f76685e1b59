"""fwbench's derivatives cases against what a user of the framework writes instead (issue 19:
each case at most 1.02x its cookbook version): a benchmark that compares, not a timed test.

    python -m tests.measure.measure_cookbook                          # tiny preset, every framework
    python -m tests.measure.measure_cookbook small torch,jax --rounds 31 --task 'jacobian|hessian'
    python -m tests.measure.measure_cookbook small --csv cookbook.csv --threads 1

Per framework, mode, derivatives task and strategy: fwbench's model
(`frameworks.load(fw).build("derivatives", cfg, params, mode, "cpu", strategy=s)`) and the
cookbook version of the same case (tests/cookbook/<fw>.py: make(...)), on the same inputs
(the task spec's pool, each converted once by adapter.asarray, Python ints as they are) and
weights. Each is called once (its first call: tracing and compiling) and their outputs
compared: the relative error of the whole output (every array of a dict, concatenated)
must be within the problem's tolerance (workloads.derivatives.TOL), else the row says so and
nothing is timed. Then both are warmed up and timed interleaved in one process: round r
calls fwbench then the cookbook when r is even, the other order when odd (so neither always
runs second, after the other warmed the caches), each call synced with adapter.sync, inputs
rotated through the pool, Python's GC off as in the harness (frameworks.harness.timing.gc_off).

A row: median fwbench seconds, median cookbook seconds, the ratio fwbench/cookbook as the
geometric mean of the per-round ratios with its 95% t interval (over the per-round log
ratios: rounds in one process pair the two calls under the same machine state), the rounds,
and the agreement error. A case fwbench does not run (unsupported, failed) or without a
cookbook form is a row with the reason. Every case starts from a fresh in-process compile
state (adapter.case_caches("warm"), as the harness runs a case). Threads: --threads (1 by
default, as the issue's measurement), set before any framework starts.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import math
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import frameworks
from workloads import derivatives as D
from workloads.base import error_line, rel_err

COLUMNS = ("framework", "mode", "task", "strategy", "fwbench_s", "cookbook_s", "ratio", "ratio_lo", "ratio_hi",
           "rounds", "error", "note")


def cookbook(framework: str) -> Any | None:
    """tests/cookbook/<framework>.py, or None where it does not exist (yet)."""
    try:
        return importlib.import_module(f"tests.cookbook.{framework}")
    except ModuleNotFoundError as e:
        if e.name == f"tests.cookbook.{framework}":
            return None
        raise


@dataclass
class Pair:
    """One case's two callables on the same converted inputs."""
    fwbench: Callable[..., Any]
    cookbook: Callable[..., Any]
    pool: list[tuple[Any, ...]]
    kwargs: dict[str, Any]
    tol: float


def pair(adapter: Any, framework: str, mode: str, cfg: D.DerivativesConfig, params: dict[str, np.ndarray],
         task: str, strategy: str) -> Pair | str:
    """fwbench's model method and the cookbook's callable for one case, or why there is no
    pair (the cookbook module missing, no cookbook form of the strategy)."""
    book = cookbook(framework)
    if book is None:
        return f"no tests/cookbook/{framework}.py"
    spec = D.task_spec(cfg, 1, task, seed=0, strategy=strategy)
    pool = [tuple(adapter.asarray(a, "cpu") if isinstance(a, np.ndarray) else a for a in inputs)
            for inputs in spec.inputs]
    model = adapter.build("derivatives", cfg, params, mode, "cpu", strategy=strategy)
    made = book.make(task, strategy, mode, cfg, pool[0], dict(spec.kwargs), params)
    if made is None:
        return "no cookbook form of this strategy (tests/cookbook says why)"
    return Pair(getattr(model, spec.method), made, pool, dict(spec.kwargs), D.TOL[spec.check.tol_key])


def flat(adapter: Any, out: Any) -> np.ndarray:
    """An output (array or dict of arrays, sorted by key) as one float64 vector."""
    out = adapter.to_numpy(out)
    if isinstance(out, dict):
        return np.concatenate([np.asarray(out[k], np.float64).ravel() for k in sorted(out)])
    return np.asarray(out, np.float64).ravel()


def agreement(adapter: Any, p: Pair) -> tuple[float | str, Any, Any]:
    """(relative error of the cookbook's first output against fwbench's, or what differs in
    structure; fwbench's output; the cookbook's), from each one's first call."""
    a = p.fwbench(*p.pool[0], **p.kwargs)
    b = p.cookbook(*p.pool[0], **p.kwargs)
    na, nb = adapter.to_numpy(a), adapter.to_numpy(b)
    if isinstance(na, dict) != isinstance(nb, dict) or (isinstance(na, dict) and set(na) != set(nb)):
        return f"structure differs: {sorted(na) if isinstance(na, dict) else 'an array'} against " \
               f"{sorted(nb) if isinstance(nb, dict) else 'an array'}", a, b
    fa, fb = flat(adapter, na), flat(adapter, nb)
    if fa.shape != fb.shape:
        return f"shape differs: {fa.shape} against {fb.shape}", a, b
    return rel_err(fb, fa), a, b


def interleaved(adapter: Any, p: Pair, rounds: int, warmup: int = 2) -> tuple[list[float], list[float]]:
    """Seconds of `rounds` calls of each, interleaved (even rounds fwbench first, odd rounds
    the cookbook first), inputs rotated through the pool, GC off, each call synced."""
    from frameworks.harness.timing import gc_off
    calls = (p.fwbench, p.cookbook)
    times: tuple[list[float], list[float]] = ([], [])
    with gc_off():
        for r in range(warmup):
            for fn in calls:
                adapter.sync(fn(*p.pool[r % len(p.pool)], **p.kwargs))
        for r in range(rounds):
            inputs = p.pool[r % len(p.pool)]
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                adapter.sync(calls[i](*inputs, **p.kwargs))
                times[i].append(time.perf_counter() - t0)
    return times


def ratio_interval(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Geometric mean of a_r / b_r and its 95% t interval over the per-round log ratios."""
    from scipy import stats
    logs = np.log(np.asarray(a) / np.asarray(b))
    n, m = len(logs), float(logs.mean())
    half = float(stats.t.ppf(0.975, n - 1) * logs.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def measure(adapter: Any, framework: str, mode: str, cfg: D.DerivativesConfig, params: dict[str, np.ndarray],
            task: str, strategy: str, rounds: int) -> dict[str, Any]:
    """One row (COLUMNS) for one case."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(framework=framework, mode=mode, task=task, strategy=strategy)
    with adapter.case_caches("warm"):
        try:
            p = pair(adapter, framework, mode, cfg, params, task, strategy)
            if isinstance(p, str):
                return {**row, "note": p}
            err, _, _ = agreement(adapter, p)
        except Exception as e:  # noqa: BLE001  a case fwbench refuses (unsupported) or that fails: the row says
            return {**row, "note": error_line(e)}
        row["error"] = err if isinstance(err, str) else float(err)
        if isinstance(err, str) or not err <= p.tol:
            return {**row, "note": f"outputs disagree (tolerance {p.tol:g}): not timed"}
        fw, cb = interleaved(adapter, p, rounds)
    ratio, lo, hi = ratio_interval(fw, cb)
    return {**row, "fwbench_s": float(np.median(fw)), "cookbook_s": float(np.median(cb)), "ratio": ratio,
            "ratio_lo": lo, "ratio_hi": hi, "rounds": rounds}


def fmt(row: dict[str, Any]) -> str:
    head = f"{row['framework']:10s} {row['mode']:8s} {row['task']:26s} {row['strategy']:15s}"
    if row["ratio"] is None:
        return f"{head} {row['note']}"
    return (f"{head} {row['fwbench_s'] * 1e3:10.4f} ms {row['cookbook_s'] * 1e3:10.4f} ms  "
            f"{row['ratio']:.3f} [{row['ratio_lo']:.3f}, {row['ratio_hi']:.3f}]  n={row['rounds']}  "
            f"err {row['error']:.1e}" + ("  OVER 1.02" if row["ratio"] > 1.02 else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.measure.measure_cookbook", description=__doc__.split("\n\n")[0])
    ap.add_argument("preset", nargs="?", default="tiny", choices=tuple(D.PRESETS))
    ap.add_argument("frameworks", nargs="?", default=None, help="comma list (default: every installed one)")
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--task", default="", help="regular expression the task name must contain a match of")
    ap.add_argument("--strategy", default="", help="regular expression the strategy must match")
    ap.add_argument("--mode", default="", help="comma list of modes (default: every mode)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    args = ap.parse_args(argv)
    frameworks.base.set_threads(args.threads)         # before any framework starts its pools
    cfg = D.preset(args.preset).config
    params = D.init_params(cfg)
    names = tuple(args.frameworks.split(",")) if args.frameworks else None
    rows = []
    print(f"{'framework':10s} {'mode':8s} {'task':26s} {'strategy':15s} {'fwbench':>13s} {'cookbook':>13s}  "
          f"ratio [95% t interval]  (preset {args.preset}, {args.threads} thread(s))", flush=True)
    for fw, adapter in frameworks.status(names).items():
        if isinstance(adapter, str):
            print(fw, "missing:", adapter)
            continue
        adapter.configure(threads=args.threads)
        if cookbook(fw) is None:
            print(fw, f"skipped: no tests/cookbook/{fw}.py")
            continue
        for mode in adapter.modes:
            if args.mode and mode not in args.mode.split(","):
                continue
            for task in (t for t in D.tasks(cfg) if re.search(args.task, t)):
                for strategy in D.strategies(fw, mode, task):
                    if re.search(args.strategy, strategy):
                        rows.append(measure(adapter, fw, mode, cfg, params, task, strategy, args.rounds))
                        print(fmt(rows[-1]), flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, COLUMNS)
            w.writeheader()
            w.writerows(rows)
    over = [r for r in rows if r["ratio"] is not None and r["ratio"] > 1.02]
    print(f"{len(rows)} cases, {sum(r['ratio'] is not None for r in rows)} timed, {len(over)} over 1.02x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

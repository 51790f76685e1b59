"""Where the spread between processes comes from (issue 30): one case timed in blocks spread
over a minute of one process, in several processes. A block is what the harness times for a
case in one process (its timed rounds, one call each, back to back); between blocks the case
keeps running untimed, so the machine stays busy as it does while other cases run.

    python -m tests.measure.measure_regimes                       # the three cases below, 3 processes each
    python -m tests.measure.measure_regimes --processes 4 --blocks 12 --gap-s 4 \\
        --case torch/diffusion/forward/eager

Per case: each process's block medians (ms); the spread of single blocks (what one
process's value of the case varies by when each process times it once), split into the
spread between blocks of one process and between the processes' means (log scale, SD in %);
and the spread of one process's mean over all its blocks. If the blocks of one process
spread as much as single blocks of different processes, the "between-process" component
the report estimates is the machine's state over seconds, not the process: averaging
within a process over time would remove it, a process's own identity (heap layout,
environment size) would not.
A child process per (case, process): `--child CASE` runs one and prints its blocks as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

CASES = ("torch/diffusion/forward/eager", "tensorflow/diffusion/sample/graph", "jax/gpt/forward/compiled")


def child(name: str, blocks: int, rounds: int, gap_s: float, preset: str, threads: int) -> list[float]:
    """One process: the case built as the harness builds it, 3 untimed calls, then `blocks`
    blocks of `rounds` timed calls with `gap_s` of untimed calls after each."""
    import frameworks
    from frameworks.harness.options import Options
    from frameworks.harness.run import case_call, case_work
    from workloads.case import Case

    fw, wl, task, mode = name.split("/")
    adapter = frameworks.load(fw)
    adapter.configure(threads)
    opts = Options(frameworks=(fw,), workloads=(wl,), preset=preset, threads=threads)
    case = Case(fw, wl, task, mode)
    p, spec = case_work(opts, case)
    with adapter.own_precision(), adapter.case_caches("warm"):
        _, _, _, pool, call = case_call(adapter, case, p, spec, opts)
        for i in range(3):
            call(*pool[i % len(pool)])
        out = []
        for _ in range(blocks):
            ts = []
            for r in range(rounds):
                t0 = time.perf_counter()
                call(*pool[r % len(pool)])
                ts.append(time.perf_counter() - t0)
            out.append(statistics.median(ts))
            t1 = time.perf_counter()
            while time.perf_counter() - t1 < gap_s:
                call(*pool[0])
    return out


def split(per_process: list[list[float]]) -> dict[str, float]:
    """SDs in % (log scale): one block across everything; blocks within a process (pooled);
    the processes' mean log block; one process's mean over its blocks as the spread of those."""
    logs = [[math.log(x) for x in p] for p in per_process]
    flat = [x for p in logs for x in p]
    within = math.sqrt(sum(sum((x - statistics.fmean(p)) ** 2 for x in p) for p in logs)
                       / sum(len(p) - 1 for p in logs))
    means = [statistics.fmean(p) for p in logs]
    pct = lambda s: 100 * (math.exp(s) - 1)   # noqa: E731
    return {"one_block": pct(statistics.stdev(flat)), "within_process": pct(within),
            "process_means": pct(statistics.stdev(means)) if len(means) > 1 else float("nan")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default=",".join(CASES), help="framework/workload/task/mode, comma-separated")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=4, help="timed calls per block (the full run's rounds: 4)")
    ap.add_argument("--gap-s", type=float, default=4.0)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.blocks, a.rounds, a.gap_s, a.preset, a.threads)))
        return 0
    for name in a.case.split(","):
        runs = []
        for _ in range(a.processes):
            cmd = [sys.executable, "-m", "tests.measure.measure_regimes", "--child", name, "--blocks", str(a.blocks),
                   "--rounds", str(a.rounds), "--gap-s", str(a.gap_s), "--preset", a.preset,
                   "--threads", str(a.threads)]
            r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if r.returncode:
                print(f"{name}: {(r.stderr.strip().splitlines() or ['failed'])[-1]}")
                break
            runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(f"{name} process {len(runs)}: " + " ".join(f"{1e3 * x:.1f}" for x in runs[-1]) + " ms", flush=True)
        if len(runs) > 1:
            s = split(runs)
            print(f"{name}: SD of one block {s['one_block']:.1f}%, of blocks within a process "
                  f"{s['within_process']:.1f}%, of the processes' means over {a.blocks} blocks "
                  f"{s['process_means']:.1f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

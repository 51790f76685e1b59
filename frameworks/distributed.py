"""One rank of a multi-process data-parallel run, started once per device:

    srun --ntasks=2 python -m frameworks.distributed torch gpt --out run/distributed/torch-p2.json
    fwbench run --processes-per-case 2 ...       (the same program, by fwbench's launcher)

Each process finds its rank, the world's size and its peers in the launcher's environment
(workloads.distributed.world: Slurm's, or fwbench's local launcher's), joins them with its
framework's distributed runtime, checks the data-parallel train step against one device on
every rank, times it, its no-sync probe and its collectives alone, then sweeps all-reduce
sizes for the alpha-beta fit (frameworks/harness/distributed.py). Rank 0 writes the document
--out (workloads.distributed.KIND), after every case. --mutate breaks the step on purpose
(workloads.parallel.MUTATIONS: "sum", or "skip": the last rank keeps its own gradients); the
check must then fail the case. --check-only stops after the check.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not text.strip():
        return ()
    if not sizes or min(sizes) < 4:
        raise argparse.ArgumentTypeError(f"a comma list of byte counts of at least 4, got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> int:
    from frameworks.harness.distributed import SWEEP, Plan, run
    ap = argparse.ArgumentParser(prog="python -m frameworks.distributed")
    ap.add_argument("framework")
    ap.add_argument("workload")
    ap.add_argument("--out", required=True, type=Path, help="the document rank 0 writes (JSON)")
    ap.add_argument("--mode", default=None, help="default: the framework's data-parallel mode (its "
                    "frameworks/<fw>/distributed.py MODE: torch eager, JAX compiled, TensorFlow graph)")
    ap.add_argument("--strategies", default="default", help="comma list of the cases: default (data parallel), "
                    "sharded (FSDP2 / JAX sharded parameters)")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="threads per process (default 1)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sweep", type=_sizes, default=SWEEP, help="all-reduce sizes in bytes for the alpha-beta fit "
                    "(comma list; empty: none)")
    ap.add_argument("--sweep-repeats", type=int, default=10)
    ap.add_argument("--check-only", action="store_true", help="the check on every rank, nothing timed")
    ap.add_argument("--mutate", choices=("sum", "skip"), default=None,
                    help="a mutation the check must catch (workloads.parallel.MUTATIONS)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run", default="{}", help="the launcher's keys for the document (JSON: run_id, repeat, role)")
    args = ap.parse_args(argv)
    if args.mutate:          # before any model is built
        os.environ["FWBENCH_DP_MUTATION"] = args.mutate
    strategies = tuple(None if s.strip() == "default" else s.strip() for s in args.strategies.split(",") if s.strip())
    plan = Plan(args.framework, args.workload, args.out.resolve(), args.mode,
                strategies or (None,), args.preset, args.device, args.threads, args.rounds, args.warmup,
                args.check_only, args.sweep, args.sweep_repeats, args.seed, json.loads(args.run))
    return run(plan)


if __name__ == "__main__":
    raise SystemExit(main())

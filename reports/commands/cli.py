"""The `fwbench` command line (also `python -m reports`).

    fwbench run --quick                       every installed framework, tiny preset, report in ./fwbench-out
    fwbench run --framework torch,jax --preset small --out results/cpu
    fwbench report results/cpu -o report/ --weights throughput=2,compile=1
    fwbench compare results/before results/after
    fwbench env

Errors in what the user typed are one line on stderr and exit code 2, never a traceback.
Exit codes: 0 done; 2 a usage error, nothing readable to report, or a file that cannot be
written; 3 (compare) OLD or NEW has no readable record; 4 (compare --fail-on-slower) a case
got slower; 128+N the run was ended by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from reports.commands.flags import (
    EXIT_NO_RECORDS,
    EXIT_SLOWER,
    EXIT_USAGE,
    QUICK_BUDGET_S,
    QUICK_COLD,
    QUICK_CYCLES,
    QUICK_MIN_ROUNDS,
    QUICK_TIMEOUT_S,
    QUICK_WARM,
    QUICK_WORKLOADS,
    make_parser,
)
from workloads import options
from workloads.base import FwbenchError


def _frameworks_arg(values: list[str] | None) -> tuple[str, ...] | None:
    from workloads.case import FRAMEWORKS
    if not values:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if not names:
        raise FwbenchError(f"--framework names no framework: choose from {', '.join(FRAMEWORKS)}")
    for n in names:
        if n not in FRAMEWORKS:
            raise FwbenchError(f"unknown framework {n!r}: choose from {', '.join(FRAMEWORKS)}")
    return tuple(dict.fromkeys(names))


# Harness options whose run default --quick changes (cmd_run sets them).
QUICK_SETS = ("workload", "preset", "budget_s", "rounds", "variants", "memory")


def main(argv: Sequence[str] | None = None) -> int:
    from reports.util import signals
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        with signals.handled():
            return {"run": cmd_run, "report": cmd_report, "compare": cmd_compare, "env": cmd_env}[args.command](args)
    except FwbenchError as e:
        print(f"fwbench {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:      # SIGINT, SIGTERM or SIGHUP (reports.util.signals)
        sig = signals.of(e)
        print(f"fwbench {args.command}: interrupted by {sig.name}", file=sys.stderr)
        return sig.exit_code


def _warn(cmd: str, problems: list[str]) -> None:
    for p in problems:
        print(f"fwbench {cmd}: warning: {p}", file=sys.stderr)


def _render(results: list[Path], out: Path, weights_text: str | None, cmd: str,
            margin: float | None = None, job_texts: list[str] | None = None, meta: Any = None) -> int:
    from reports.conclusions import findings, jobs, replicates
    from reports.measures import data
    from reports.rendering import document
    from reports.util.atomic import safe_write
    weights = findings.parse_weights(weights_text)      # before the slow part: a typo fails fast
    job_list = [jobs.parse_job(j) for j in job_texts or []] or None
    df = data.load(results)
    if df.empty and not any(r["missing"] for r in df.attrs["runs"]):
        raise FwbenchError("nothing to report: " + ("; ".join(df.attrs["problems"]) or
                                                     "no fwbench records in " + ", ".join(map(str, results))))
    _warn(cmd, df.attrs["problems"])
    if job_list:
        jobs.check_jobs(replicates.cases(df), job_list)
    with safe_write(out, "the report into"):
        paths = document.render(df, out, weights, margin, jobs=job_list, meta=meta)
    _warn(cmd, [f"paper: {p}" for p in paths.get("paper_problems", [])])
    _warn(cmd, [f"figure {k}: {p}" for k, ps in paths.get("figure_problems", {}).items() for p in ps])
    pages = paths.get("paper_pages") or {}
    paper = f"{paths.get('pdf', paths['paper'])}" + (f" ({pages['total']} pages, {pages['main']} of main text)"
                                                    if {"total", "main"} <= set(pages) else "")
    print(f"report: {paths['md']}  {paths['html']}  {paths['tex']}  {paths['csv']}  {paper}  "
          f"({len(df)} records)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from reports.rendering.paper import Meta
    return _render(args.results, args.out, args.weights, "report", args.margin, args.job,
                   Meta(args.title, args.author, args.date))


def cmd_run(args: argparse.Namespace) -> int:
    from reports.commands import checkout, results, sets
    from reports.conclusions import findings
    from workloads.case import FRAMEWORKS
    findings.parse_weights(args.weights)
    chosen = _frameworks_arg(args.framework)
    fws = chosen or FRAMEWORKS
    wanted = [f for f in fws if checkout.installed(f)]
    absent = [f for f in fws if f not in wanted]
    if not wanted:
        raise FwbenchError("no framework to run: " + "; ".join(checkout.absent_reason(f) for f in absent))
    opts = _run_options(args, tuple(wanted))
    t0 = time.monotonic()
    progress = results.Progress()
    if args.processes_per_case:     # one process per device, N per job step: documents of their own
        from reports.commands import distributed
        distributed.run(opts, args.out, progress)
        return distributed.finish(args.out, progress, time.monotonic() - t0)
    written = sets.run(opts, args.out, progress)
    nothing = results.unrecorded(written, args.out)
    written += [results.write_absent(f, opts, args.out) for f in absent]
    progress.line(f"benchmarks done in {time.monotonic() - t0:.0f} s: {', '.join(str(p) for p in written)}")
    if nothing:                 # the processes ran but left nothing to report: say where to look
        raise FwbenchError(nothing)
    if args.no_report:
        return 0
    rc = _render(written, args.out, args.weights, "run", args.margin)
    progress.line(f"total {time.monotonic() - t0:.0f} s")
    return rc


def _run_options(args: argparse.Namespace, wanted: tuple[str, ...]) -> Any:
    """RunOptions from `fwbench run`'s arguments: what the user gave, else --quick's values, else
    the defaults of the run's design (sets; --cycles 0 and --processes-per-case: lone processes)."""
    from reports.commands import plan
    # the harness options --quick has no say in pass as given (a new one needs only its HARNESS entry)
    given = {o.name: getattr(args, o.name) for o in options.HARNESS
             if o.cli and o.name not in QUICK_SETS and getattr(args, o.name) is not None}
    by_device = options.device_defaults(args.device or "cpu", args.quick)   # a GPU: its presets, rounds by budget
    quick = args.quick
    # --cycles 0 (lone processes) and --processes-per-case (job steps: commands.distributed) keep their own defaults
    lone = args.cycles == 0 or bool(args.processes_per_case)
    cold = QUICK_COLD if quick else options.RUN_COLD if lone else options.SETS_COLD
    warm = QUICK_WARM if quick else options.RUN_WARM if lone else options.SETS_WARM
    rounds = None if by_device["rounds_by_budget"] or args.budget_s else options.RUN_ROUNDS
    return plan.RunOptions(
        frameworks=wanted, **given,
        workloads=args.workload or (QUICK_WORKLOADS if quick else None),
        preset=args.preset or by_device["preset"],
        budget_s=args.budget_s if args.budget_s else (QUICK_BUDGET_S if quick else None),
        rounds=args.rounds or rounds,
        min_rounds=QUICK_MIN_ROUNDS if quick else None,
        warmup_rounds=1 if quick else None,
        timeout_s=args.timeout_s or (QUICK_TIMEOUT_S if quick else 3600.0),
        cold=args.cold or cold,
        warm=args.warm if args.warm is not None else warm,
        seed=args.seed, keep_cache=args.keep_cache, launcher=args.launcher,
        slurm=_slurm_options(args),
        # sets: no optional variants unless --variants all (torch's train-step recipes cost
        # minutes of compiling in every cold process: docs/design/statistics.md)
        variants=args.variants or ("default" if quick or not lone else None),
        memory=args.memory or ("off" if quick else None),
        cycles=args.cycles if args.cycles is not None else (QUICK_CYCLES if quick else options.RUN_CYCLES),
        block_s=args.block_s or options.RUN_BLOCK_S, control=args.control,
        processes_per_case=args.processes_per_case)


def _slurm_options(args: argparse.Namespace) -> Any:
    """The Slurm options of `fwbench run` (reports.commands.launch.SlurmOptions); refused with the
    local launcher, whose processes are no jobs."""
    from reports.commands import launch
    opts = launch.SlurmOptions(partition=args.partition, account=args.account, qos=args.qos, time=args.time,
                               gpus_per_node=args.gpus_per_node, mem=args.mem, sbatch=args.sbatch)
    launch.sbatch_extra(opts.sbatch)            # a malformed pass-through fails before anything runs
    if args.launcher in ("local", "submitit-local") and opts.given():
        raise FwbenchError(f"{', '.join(opts.given())} set what a Slurm job asks for: they need --launcher slurm "
                           f"(or submitit on a cluster), not {args.launcher}")
    return opts


def cmd_compare(args: argparse.Namespace) -> int:
    from reports.conclusions import compare
    from reports.measures import stats
    from reports.util import escape
    from reports.util.atomic import safe_write
    t = compare.compare(args.old, args.new, stats.MARGIN if args.margin is None else args.margin)
    empty = [side for side, n in t.attrs["records"].items() if n == 0]
    if empty:       # one line: what each empty side's problems were
        paths = {"OLD": args.old, "NEW": args.new}
        why = [p for p in t.attrs["problems"] if p.split(" ", 1)[0] in empty]
        print(f"fwbench compare: error: nothing to compare: no readable fwbench record in "
              f"{' and '.join(f'{s} ({paths[s]})' for s in empty)}" + (f" ({'; '.join(why)})" if why else ""),
              file=sys.stderr)
        return EXIT_NO_RECORDS
    _warn("compare", t.attrs["problems"])
    sys.stdout.write(escape.terminal(compare.format_table(t)))
    if args.csv:
        with safe_write(args.csv, "--csv"):
            escape.csv_frame(t).to_csv(args.csv, index=False, float_format="%.9g", lineterminator="\n")
    slower = compare.slower(t)
    if args.fail_on_slower and slower:
        print(f"fwbench compare: {stats.plural(slower, 'case')} slower (--fail-on-slower, exit {EXIT_SLOWER})",
              file=sys.stderr)
        return EXIT_SLOWER
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    """What fwbench's framework registry finds: frameworks/env.py, in a process of its own,
    so that reports imports neither a framework nor the frameworks package."""
    import subprocess

    from reports.commands.checkout import CHECKOUT
    rc = subprocess.run([sys.executable, "-m", "frameworks.env"], cwd=CHECKOUT).returncode
    return rc if rc >= 0 else 128 - rc          # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    raise SystemExit(main())

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
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from workloads import options
from workloads.base import FwbenchError

QUICK_MIN_ROUNDS = 5          # fewest rounds that still give a bootstrap interval
QUICK_BUDGET_S = 0.2          # timed seconds per case in --quick (pytest plugin's --budget-s)
QUICK_TIMEOUT_S = 600.0
# Processes per framework and timed rounds per case of a full run: workloads/options.py (issue 30,
# chosen by simulation with the committed example's components); --quick: one of each, as fast as before.
RUN_COLD, RUN_WARM, RUN_ROUNDS = options.RUN_COLD, options.RUN_WARM, options.RUN_ROUNDS
RUN_CYCLES, RUN_BLOCK_S = options.RUN_CYCLES, options.RUN_BLOCK_S
SETS_COLD, SETS_WARM = options.SETS_COLD, options.SETS_WARM
QUICK_COLD, QUICK_WARM, QUICK_CYCLES = 1, 0, 3
QUICK_WORKLOADS = "gpt,diffusion"   # --quick: the model comparison; the sections' workloads need a full run
EXIT_USAGE, EXIT_NO_RECORDS, EXIT_SLOWER = 2, 3, 4


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line ('fwbench run: error: ...') and exit code 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --weights' help names the concerns (reports.conclusions.findings.CONCERNS: the model workloads'
# three, then one per section of reports.sections), filled in only when help is printed
# (HelpFormatter): the sections import pandas and matplotlib, which a command need not wait for.
WEIGHTS_HELP = ("framework-choice weights, e.g. throughput=2,compile=1 (an unnamed concern weighs 1); concerns: "
                "{concerns}")


def concerns_text() -> str:
    """'throughput, compile, ..., dynamic, ... (dynamic: dynamic shapes, ...)': every concern
    --weights takes, and what each section's concern is called in the report."""
    from reports import sections
    from reports.conclusions.findings import CONCERNS
    return (", ".join(CONCERNS) + " (" + ", ".join(f"{s.concern}: {s.concern_label}" for s in sections.SECTIONS
                                                                    if s.concern)
            + ")")


class HelpFormatter(argparse.HelpFormatter):
    """argparse's, with the concerns filled into --weights' help (concerns_text)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return text.replace("{concerns}", concerns_text()) if text and "{concerns}" in text else text

def _frameworks_arg(values: list[str] | None) -> tuple[str, ...] | None:
    from reports.commands.runner import FRAMEWORKS
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
# What `fwbench run` does with a harness option beyond what the option says (its own defaults).
RUN_NOTES = {
    "workload": f"; with --quick: {QUICK_WORKLOADS}",
    "preset": "; tiny with --quick on the CPU (a GPU keeps its presets)",
    "budget_s": f"; without it and --rounds a full run times {RUN_ROUNDS} rounds per case",
    "rounds": f"; a full run's default on the CPU is {RUN_ROUNDS}, after 2 warm-up rounds; --quick and a GPU "
              "run size them by the budget",
    "variants": "; fwbench run: default with sets and --quick, all with --cycles 0",
    "memory": "; off with --quick",
}


def _option(o: options.Option) -> Any:
    """An argparse type for a harness option: its own parsing and checks, one line on error."""
    def parse(text: str) -> Any:
        try:
            return o.parse(text)
        except FwbenchError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def _path(text: str) -> Path:
    """A path argument, made absolute against the working directory at start (the run's
    processes and jobs run elsewhere)."""
    from reports.util.atomic import absolute
    return absolute(text)


def _positive(kind: type, zero: bool = False) -> Any:
    """An argparse type: a finite number above 0 (or at least 0 with zero=True)."""
    what = f"{'non-negative' if zero else 'positive'} {'finite number' if kind is float else 'integer'}"

    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {what}, got {text!r}") from None
        if not (math.isfinite(v) and (v >= 0 if zero else v > 0)):
            raise argparse.ArgumentTypeError(f"expected a {what}, got {text!r}")
        return v
    return parse


MARGIN_HELP = ("equivalence margin of the verdicts, as a fraction (default 0.10 = 10%%): a ratio whose interval lies "
               "inside [1/(1+m), 1+m] is 'equivalent within +-m', one beyond it 'faster/slower by at least the "
               "margin'")


def _margin(text: str) -> float:
    """--margin: a fraction above 0 and below 1 (0.10 = 10%)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction above 0 and below 1 (0.10 = 10%), "
                                         f"got {text!r}") from None
    if not (math.isfinite(v) and 0 < v < 1):
        raise argparse.ArgumentTypeError(f"expected a fraction above 0 and below 1 (0.10 = 10%), got {text!r}")
    return v


def make_parser() -> Parser:
    from reports.commands import launch
    p = Parser(prog="fwbench", description="Equal-work benchmarks of PyTorch, JAX and TensorFlow, and their reports.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")

    r = sub.add_parser("run", help="run the benchmarks (process sets, side by side) and render the report",
                       description="Run `pytest --benchmark-only` on the checkout's tests/benchmarks in process sets: "
                                   "each set one process per framework and a second one of one framework (the A/A "
                                   "control), all alive together; task by task each process measures its cases in "
                                   "turn (first calls, warm-up), then the task's configurations take turns in cycles "
                                   "of blocks, one block at a time (docs/design/statistics.md). Cold sets start from "
                                   "empty compile caches, warm ones find the run's cache filled. Then render the "
                                   "report into --out.")
    r.add_argument("--framework", action="append", metavar="NAMES",
                   help="frameworks, comma separated or repeated (default: every installed one)")
    for o in options.HARNESS:          # the options each framework process takes, declared once
        if o.cli and o.type is None:
            r.add_argument(o.flag, action="store_true", default=None, help=o.help + RUN_NOTES.get(o.name, ""))
        elif o.cli:
            r.add_argument(o.flag, type=_option(o), help=o.help + RUN_NOTES.get(o.name, ""))
    r.add_argument("--out", default="fwbench-out", type=_path, help="folder for the JSON and the report "
                                                                   "(default: ./fwbench-out)")
    r.add_argument("--quick", action="store_true",
                   help=f"tiny preset (on a GPU: the GPU presets), {QUICK_BUDGET_S:g} s per case "
                        f"(at least {QUICK_MIN_ROUNDS} rounds, 1 warm-up), "
                        f"one cold set ({QUICK_CYCLES} cycles per task), each case's default strategy "
                        "only (no torch train-step recipe variants), the gpt and diffusion workloads unless "
                        "--workload names others: its numbers are indicative (one set: no interval over sets)")
    r.add_argument("--timeout-s", type=_positive(float), help="limit per framework process in seconds "
                   f"(default 3600, {QUICK_TIMEOUT_S:g} with --quick); past it the framework is recorded failed")
    r.add_argument("--cold", type=_positive(int), help=f"cold sets (default {SETS_COLD}; {QUICK_COLD} with --quick): "
                   "each set's processes start from empty compile-cache folders of their own and each of their cases "
                   "compiles from empty caches; they measure cold first calls (compile latency). With --cycles 0: "
                   f"cold processes per framework (default {RUN_COLD})")
    r.add_argument("--warm", type=_positive(int, zero=True), help=f"warm sets (default {SETS_WARM}; {QUICK_WARM} with "
                   "--quick): their processes find the run's cache filled by the cold ones. Every set, cold or warm, "
                   "gives steady times; the first set is cold, the others follow in a seeded random order. With "
                   f"--cycles 0: warm processes per framework (default {RUN_WARM}), in rounds of one per framework")
    r.add_argument("--cycles", type=_positive(int, zero=True),
                   help=f"side by side: cycles per task in each set (default {RUN_CYCLES}; {QUICK_CYCLES} with "
                        "--quick); a cycle times one block of every configuration of the task, one block at a "
                        "time, in a random order; 0 runs each process alone, one after another, as before sets")
    r.add_argument("--block-s", type=_positive(float), help=f"seconds one block of calls lasts (default {RUN_BLOCK_S})")
    r.add_argument("--control", help="the framework whose process each set runs twice, an A/A control (default: "
                                     "tensorflow where it runs, else jax, else torch; none: no control)")
    r.add_argument("--launcher", choices=launch.LAUNCHERS, default="local",
                   help="where each process runs: local (default: here, one at a time); slurm (a Slurm job per "
                        "process, a whole node each, through submitit); submitit-local (submitit's local executor, "
                        "one job at a time); submitit (slurm where sbatch and srun are on the PATH, else "
                        "submitit-local)")
    r.add_argument("--processes-per-case", metavar="N[,M]", help="data parallel across processes (one process "
                   "per device, each framework's distributed idiom): per framework, a job step of N processes runs "
                   "the train step's data-parallel cases (srun --ntasks=N with --launcher slurm, else N processes "
                   "here), checked on every rank, communication measured apart; writes <out>/distributed/ and "
                   "prints the processes x frameworks table, the alpha-beta fit and the model at scale")
    s = r.add_argument_group("Slurm jobs (--launcher slurm, or submitit on a cluster)",
                             "Each job asks for one whole node (--exclusive, one task) and these sbatch options; "
                             "the run folder and the compile-cache folder (FWBENCH_CACHE_DIR) must be on a filesystem "
                             "the nodes share.")
    s.add_argument("--partition", help="sbatch --partition (default: the cluster's default partition)")
    s.add_argument("--account", help="sbatch --account")
    s.add_argument("--qos", help="sbatch --qos")
    s.add_argument("--time", help="sbatch --time, in any form sbatch takes (default: the process limit "
                   "--timeout-s plus 10%% and 5 minutes, in minutes)")
    s.add_argument("--gpus-per-node", type=_positive(int), help="sbatch --gpus-per-node")
    s.add_argument("--mem", default="0", help="sbatch --mem (default 0: all the node's memory, as --exclusive "
                   "gives the whole node)")
    s.add_argument("--sbatch", action="append", default=[], metavar="--NAME=VALUE",
                   help="any other sbatch option, passed through; one per --sbatch, written with '=' "
                        "(e.g. --sbatch=--constraint=a100 --sbatch=--reservation=bench)")
    r.add_argument("--seed", type=int, default=0, help="seed of the process order, each process's case order and "
                   "its environment padding")
    r.add_argument("--keep-cache", action="store_true", help="keep the run's compile-cache folder afterwards")
    r.add_argument("--weights", help=WEIGHTS_HELP)
    r.add_argument("--margin", type=_margin, default=None, help=MARGIN_HELP)
    r.add_argument("--no-report", action="store_true", help="only write the JSON")

    rep = sub.add_parser("report", help="render figures, tables and the document from result JSON",
                         description="Files or folders of fwbench JSON in; report.md, report.html, tables.tex, "
                                     "data.csv and figures/ out.")
    rep.add_argument("results", nargs="+", type=_path, metavar="RESULTS", help="result JSON files or folders")
    rep.add_argument("-o", "--out", type=_path, default="fwbench-out/report",
                     help="output folder (default: ./fwbench-out/report)")
    rep.add_argument("--weights", help=WEIGHTS_HELP)
    rep.add_argument("--margin", type=_margin, default=None, help=MARGIN_HELP)
    rep.add_argument("--job", action="append", metavar="TASK:N",
                     help="a job of your own for the choice per job, TASK:N or WORKLOAD/TASK:N (train_step:5000: "
                          "5,000 train steps; dynamic/prefill:1000: 1,000 requests; derivatives tasks count "
                          "examples); repeat for several; default: 100 and 100,000 per task, 1,000 per stream")
    rep.add_argument("--title", help="paper.tex's title (default: one naming the frameworks and the device)")
    rep.add_argument("--author", action="append", metavar="NAME",
                     help="an author of paper.tex; repeat for several (default: pyproject.toml's [project] authors)")
    rep.add_argument("--date", help="paper.tex's date (default: the day the runs' last process started)")

    c = sub.add_parser("compare", help="per case, what got faster or slower between two runs",
                       description="Match cases of OLD and NEW on workload, task, framework, mode, strategy, "
                                   "preset and device; print new/old time ratios (warm processes, Welch t "
                                   "intervals at each comparison's Holm level, so the chance of any false "
                                   "faster/slower in the table is 5%) and a verdict: faster or slower (by at "
                                   "least the margin or not), equivalent within the margin, inconclusive, or not "
                                   "tested (one process).",
                       epilog=f"exit codes: 0 compared; {EXIT_USAGE} a usage error or an unwritable --csv; "
                              f"{EXIT_NO_RECORDS} OLD or NEW has no readable record (missing, empty or "
                              f"unreadable); {EXIT_SLOWER} with --fail-on-slower, some case got slower")
    c.add_argument("old", type=_path, metavar="OLD", help="result JSON file or folder")
    c.add_argument("new", type=_path, metavar="NEW", help="result JSON file or folder")
    c.add_argument("--margin", type=_margin, default=None, help=MARGIN_HELP)
    c.add_argument("--csv", type=_path, help="also write the comparison as CSV")
    c.add_argument("--fail-on-slower", action="store_true",
                   help=f"exit {EXIT_SLOWER} when any case got slower (a CI gate)")

    sub.add_parser("env", help="frameworks found (version, devices) and missing ones (install command)",
                   description="Import each framework through fwbench's registry and list what it sees.")
    return p


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
    from reports.commands import runner, sets
    from reports.conclusions import findings
    findings.parse_weights(args.weights)
    chosen = _frameworks_arg(args.framework)
    fws = chosen or runner.FRAMEWORKS
    wanted = [f for f in fws if runner.installed(f)]
    absent = [f for f in fws if f not in wanted]
    if not wanted:
        raise FwbenchError("no framework to run: " + "; ".join(runner.absent_reason(f) for f in absent))
    # the harness options --quick has no say in pass as given (a new one needs a RunOptions field only)
    given = {o.name: getattr(args, o.name) for o in options.HARNESS
             if o.cli and o.name not in QUICK_SETS and getattr(args, o.name) is not None}
    by_device = options.device_defaults(args.device or "cpu", args.quick)   # a GPU: its presets, rounds by budget
    # --cycles 0 (lone processes) and --processes-per-case (job steps: running.distributed) keep their own defaults
    lone = args.cycles == 0 or bool(args.processes_per_case)
    opts = runner.RunOptions(frameworks=tuple(wanted), **given,
                             workloads=args.workload or (QUICK_WORKLOADS if args.quick else None),
                             preset=args.preset or by_device["preset"],
                             budget_s=args.budget_s if args.budget_s else (QUICK_BUDGET_S if args.quick else None),
                             rounds=args.rounds or (None if by_device["rounds_by_budget"] or args.budget_s
                                                    else RUN_ROUNDS),
                             min_rounds=QUICK_MIN_ROUNDS if args.quick else None,
                             warmup_rounds=1 if args.quick else None,
                             timeout_s=args.timeout_s or (QUICK_TIMEOUT_S if args.quick else 3600.0),
                             cold=args.cold or (QUICK_COLD if args.quick else RUN_COLD if lone else SETS_COLD),
                             warm=args.warm if args.warm is not None else (QUICK_WARM if args.quick else RUN_WARM
                                                                           if lone else SETS_WARM),
                             seed=args.seed, keep_cache=args.keep_cache, launcher=args.launcher,
                             # sets: each case's default strategy unless --variants all (torch's train-step
                             # recipes cost minutes of compiling in every cold process: docs/design/statistics.md)
                             slurm=_slurm_options(args),
                             variants=args.variants or ("default" if args.quick or not lone else None),
                             memory=args.memory or ("off" if args.quick else None),
                             cycles=args.cycles if args.cycles is not None else (QUICK_CYCLES if args.quick
                                                                                 else RUN_CYCLES),
                             block_s=args.block_s or RUN_BLOCK_S, control=args.control,
                             processes_per_case=args.processes_per_case)
    t0 = time.monotonic()
    progress = runner.Progress()
    if args.processes_per_case:     # one process per device, N per job step: documents of their own (issue 43)
        from reports.commands import distributed
        distributed.run(opts, args.out, progress)
        return distributed.finish(args.out, progress, time.monotonic() - t0)
    written = sets.run(opts, args.out, progress)
    nothing = runner.unrecorded(written, args.out)
    written += [runner.write_absent(f, opts, args.out) for f in absent]
    progress.line(f"benchmarks done in {time.monotonic() - t0:.0f} s: {', '.join(str(p) for p in written)}")
    if nothing:                 # the processes ran but left nothing to report: say where to look
        raise FwbenchError(nothing)
    if args.no_report:
        return 0
    rc = _render(written, args.out, args.weights, "run", args.margin)
    progress.line(f"total {time.monotonic() - t0:.0f} s")
    return rc


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

    from reports.commands.runner import CHECKOUT
    rc = subprocess.run([sys.executable, "-m", "frameworks.env"], cwd=CHECKOUT).returncode
    return rc if rc >= 0 else 128 - rc          # killed by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    raise SystemExit(main())

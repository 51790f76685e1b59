"""The `fwbench` command line's options as tables (RUN, SLURM, REPORT, COMPARE, COMMANDS),
from which make_parser builds the parser: a new flag is one row. The harness options every
framework process takes come from workloads/options.py: HARNESS (the row HARNESS_OPTIONS
places them), with what `fwbench run` does beyond them in RUN_NOTES. Errors in what the user
typed are one line and exit code 2 (Parser)."""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.commands.launch import LAUNCHERS
from workloads import options
from workloads.base import FwbenchError

QUICK_MIN_ROUNDS = 5          # fewest rounds that still give a bootstrap interval
QUICK_BUDGET_S = 0.2          # timed seconds per case in --quick (pytest plugin's --budget-s)
QUICK_TIMEOUT_S = 600.0
# A full run's processes, sets, cycles and rounds are workloads/options.py's (chosen by simulation
# with the committed example's components, docs/design/statistics.md); --quick's are these.
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

# What `fwbench run` does with a harness option beyond what the option says (its own defaults).
RUN_NOTES = {
    "workload": f"; with --quick: {QUICK_WORKLOADS}",
    "preset": "; tiny with --quick on the CPU (a GPU keeps its presets)",
    "budget_s": f"; without it and --rounds a full run times {options.RUN_ROUNDS} rounds per case",
    "rounds": f"; a full run's default on the CPU is {options.RUN_ROUNDS}, after 2 warm-up rounds; --quick and a GPU "
              "run size them by the budget",
    "variants": "; fwbench run: default with sets and --quick (the other workloads keep every strategy), all "
                "with --cycles 0",
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


@dataclass(frozen=True)
class Flag:
    """One row: argparse's add_argument(*names, **kw)."""
    names: tuple[str, ...]
    kw: dict[str, Any]


def flag(*names: str, **kw: Any) -> Flag:
    return Flag(names, kw)


HARNESS_OPTIONS = flag("HARNESS")    # where a command's table takes workloads.options.HARNESS (cli=True)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    description: str
    flags: tuple[Flag, ...]
    groups: tuple[tuple[str, str, tuple[Flag, ...]], ...] = field(default=())   # (title, description, flags)
    epilog: str | None = None


RUN = (
    flag("--framework", action="append", metavar="NAMES",
         help="frameworks, comma separated or repeated (default: every installed one)"),
    HARNESS_OPTIONS,
    flag("--out", default="fwbench-out", type=_path,
         help="folder for the JSON and the report (default: ./fwbench-out)"),
    flag("--quick", action="store_true",
         help=f"tiny preset (on a GPU: the GPU presets), {QUICK_BUDGET_S:g} s per case "
              f"(at least {QUICK_MIN_ROUNDS} rounds, 1 warm-up), "
              f"one cold set ({QUICK_CYCLES} cycles per task), no optional variants (torch's "
              "train-step recipes), the gpt and diffusion workloads unless "
              "--workload names others: its numbers are indicative (one set: no interval over sets)"),
    flag("--timeout-s", type=_positive(float), help="limit per framework process in seconds "
         f"(default 3600, {QUICK_TIMEOUT_S:g} with --quick); past it the framework is recorded failed"),
    flag("--cold", type=_positive(int), help=f"cold sets (default {options.SETS_COLD}; {QUICK_COLD} with --quick): "
         "each set's processes start from empty compile-cache folders of their own and each of their cases "
         "compiles from empty caches; they measure cold first calls (compile latency). With --cycles 0: "
         f"cold processes per framework (default {options.RUN_COLD})"),
    flag("--warm", type=_positive(int, zero=True), help=f"warm sets (default {options.SETS_WARM}; {QUICK_WARM} with "
         "--quick): their processes find the run's cache filled by the cold ones. Every set, cold or warm, "
         "gives steady times; the first set is cold, the others follow in a seeded random order. With "
         f"--cycles 0: warm processes per framework (default {options.RUN_WARM}), in rounds of one per framework"),
    flag("--cycles", type=_positive(int, zero=True),
         help=f"side by side: cycles per task in each set (default {options.RUN_CYCLES}; {QUICK_CYCLES} with "
              "--quick); a cycle times one block of every configuration of the task, one block at a "
              "time, in a random order; 0 runs each process alone, one after another, as before sets"),
    flag("--block-s", type=_positive(float),
         help=f"seconds one block of calls lasts (default {options.RUN_BLOCK_S})"),
    flag("--control", help="the framework whose process each set runs twice, an A/A control (default: "
                           "tensorflow where it runs, else jax, else torch; none: no control)"),
    flag("--launcher", choices=LAUNCHERS, default="local",
         help="where each process runs: local (default: here, one at a time); slurm (a Slurm job per "
              "process, a whole node each, through submitit); submitit-local (submitit's local executor, "
              "one job at a time); submitit (slurm where sbatch and srun are on the PATH, else "
              "submitit-local)"),
    flag("--processes-per-case", metavar="N[,M]", help="data parallel across processes (one process "
         "per device, each framework's distributed idiom): per framework, a job step of N processes runs "
         "the train step's data-parallel cases (srun --ntasks=N with --launcher slurm, else N processes "
         "here), checked on every rank, communication measured apart; writes <out>/distributed/ and "
         "prints the processes x frameworks table, the alpha-beta fit and the model at scale"),
    flag("--seed", type=int, default=0, help="seed of the process order, each process's case order and "
         "its environment padding"),
    flag("--keep-cache", action="store_true", help="keep the run's compile-cache folder afterwards"),
    flag("--weights", help=WEIGHTS_HELP),
    flag("--margin", type=_margin, default=None, help=MARGIN_HELP),
    flag("--no-report", action="store_true", help="only write the JSON"),
)

SLURM = (
    flag("--partition", help="sbatch --partition (default: the cluster's default partition)"),
    flag("--account", help="sbatch --account"),
    flag("--qos", help="sbatch --qos"),
    flag("--time", help="sbatch --time, in any form sbatch takes (default: the process limit "
         "--timeout-s plus 10%% and 5 minutes, in minutes)"),
    flag("--gpus-per-node", type=_positive(int), help="sbatch --gpus-per-node"),
    flag("--mem", default="0", help="sbatch --mem (default 0: all the node's memory, as --exclusive "
         "gives the whole node)"),
    flag("--sbatch", action="append", default=[], metavar="--NAME=VALUE",
         help="any other sbatch option, passed through; one per --sbatch, written with '=' "
              "(e.g. --sbatch=--constraint=a100 --sbatch=--reservation=bench)"),
)

REPORT = (
    flag("results", nargs="+", type=_path, metavar="RESULTS", help="result JSON files or folders"),
    flag("-o", "--out", type=_path, default="fwbench-out/report", help="output folder (default: ./fwbench-out/report)"),
    flag("--weights", help=WEIGHTS_HELP),
    flag("--margin", type=_margin, default=None, help=MARGIN_HELP),
    flag("--job", action="append", metavar="TASK:N",
         help="a job of your own for the choice per job, TASK:N or WORKLOAD/TASK:N (train_step:5000: "
              "5,000 train steps; dynamic/prefill:1000: 1,000 requests; derivatives tasks count "
              "examples); repeat for several; default: 100 and 100,000 per task, 1,000 per stream"),
    flag("--title", help="paper.tex's title (default: one naming the frameworks and the device)"),
    flag("--author", action="append", metavar="NAME",
         help="an author of paper.tex; repeat for several (default: pyproject.toml's [project] authors)"),
    flag("--date", help="paper.tex's date (default: the day the runs' last process started)"),
)

COMPARE = (
    flag("old", type=_path, metavar="OLD", help="result JSON file or folder"),
    flag("new", type=_path, metavar="NEW", help="result JSON file or folder"),
    flag("--margin", type=_margin, default=None, help=MARGIN_HELP),
    flag("--csv", type=_path, help="also write the comparison as CSV"),
    flag("--fail-on-slower", action="store_true", help=f"exit {EXIT_SLOWER} when any case got slower (a CI gate)"),
)

COMMANDS = (
    Command("run", "run the benchmarks (process sets, side by side) and render the report",
            "Run `pytest --benchmark-only` on the checkout's tests/benchmarks in process sets: "
            "each set one process per framework and a second one of one framework (the A/A "
            "control), all alive together; task by task each process measures its cases in "
            "turn (first calls, warm-up), then the task's configurations take turns in cycles "
            "of blocks, one block at a time (docs/design/statistics.md). Cold sets start from "
            "empty compile caches, warm ones find the run's cache filled. Then render the "
            "report into --out.", RUN,
            (("Slurm jobs (--launcher slurm, or submitit on a cluster)",
              "Each job asks for one whole node (--exclusive, one task) and these sbatch options; "
              "the run folder and the compile-cache folder (FWBENCH_CACHE_DIR) must be on a filesystem "
              "the nodes share.", SLURM),)),
    Command("report", "render figures, tables and the document from result JSON",
            "Files or folders of fwbench JSON in; report.md, report.html, tables.tex, data.csv and figures/ out.",
            REPORT),
    Command("compare", "per case, what got faster or slower between two runs",
            "Match cases of OLD and NEW on workload, task, framework, mode, strategy, "
            "preset and device; print new/old time ratios (warm processes, Welch t "
            "intervals at each comparison's Holm level, so the chance of any false "
            "faster/slower in the table is 5%) and a verdict: faster or slower (by at "
            "least the margin or not), equivalent within the margin, inconclusive, or not "
            "tested (one process).", COMPARE,
            epilog=f"exit codes: 0 compared; {EXIT_USAGE} a usage error or an unwritable --csv; "
                   f"{EXIT_NO_RECORDS} OLD or NEW has no readable record (missing, empty or "
                   f"unreadable); {EXIT_SLOWER} with --fail-on-slower, some case got slower"),
    Command("env", "frameworks found (version, devices) and missing ones (install command)",
            "Import each framework through fwbench's registry and list what it sees.", ()),
)


def _add(target: Any, rows: tuple[Flag, ...]) -> None:
    for row in rows:
        if row is not HARNESS_OPTIONS:
            target.add_argument(*row.names, **row.kw)
            continue
        for o in options.HARNESS:          # the options each framework process takes, declared once
            help_ = o.help + RUN_NOTES.get(o.name, "")
            if o.cli and o.type is None:
                target.add_argument(o.flag, action="store_true", default=None, help=help_)
            elif o.cli:
                target.add_argument(o.flag, type=_option(o), help=help_)


def make_parser() -> Parser:
    """The `fwbench` parser, built from COMMANDS."""
    p = Parser(prog="fwbench", description="Equal-work benchmarks of PyTorch, JAX and TensorFlow, and their reports.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for c in COMMANDS:
        sp = sub.add_parser(c.name, help=c.help, description=c.description, epilog=c.epilog)
        _add(sp, c.flags)
        for title, text, rows in c.groups:
            _add(sp.add_argument_group(title, text), rows)
    return p

"""`fwbench run`: the benchmark matrix, one framework per process, then the report.

Replication: each framework runs `cold` + `warm` times, each time in a fresh process, and
the processes are interleaved in rounds (round r runs every framework once, in an order
drawn for that round), so slow drift of the machine falls on every framework alike. Round
0 is every framework's first cold process; the other rounds (the other cold ones and the
warm ones) follow in a seeded random order, so a second cold process is not always next to
the first in time. Each process writes its own JSON (`<framework>-<i>.json`, i its index
among its framework's processes in execution order) and runs its cases in an order of its
own (--case-order-seed).

Compile caches by design: the run owns a folder (under ~/.cache/fwbench/runs/<run id>,
removed at the end unless keep_cache). Cold process k of each framework gets the empty
folder `cold-<k>` (FWBENCH_CACHE_DIR, `--cache-role cold`; inside it each case compiles into
a folder of its own, merged into cold-<k>); when it ends, whatever way, its folder is merged
into `shared`, which every warm process uses (`--cache-role warm`). Each process's
environment is padded by a seeded random length (FWBENCH_ENV_PAD), so that the environment's
size, which embeds the framework's name in paths, does not differ systematically by
framework (Mytkowicz et al. 2009).

For each process it runs

    python -m pytest <checkout>/tests/benchmarks --benchmark-only --framework X \
        --benchmark-json <tmp> --benchmark-save-data -p reports.util.pytest_events ...

in its own process group (three runtimes' thread pools in one process disturb each other),
shows progress from the plugin's event stream, and moves the finished JSON into place with
os.replace, so a reader never sees half a file. A process that crashes, exits abnormally
or runs past --timeout-s leaves a JSON rebuilt from the stream: the cases that finished
keep their timings, the case that was running and those never reached are `failed`
records with the reason. The other frameworks' results are unaffected.

Imports no framework, nor the frameworks package: a framework is found with
importlib.util.find_spec of its own module, its adapter as a file of the checkout.
"""
from __future__ import annotations

import datetime
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from reports.commands import checkout, launch
from reports.commands.plan import SHARED_CACHE, RunOptions, merge_cache, process_names, schedule, units
from reports.commands.process import run_framework
from reports.commands.results import Progress, Watch, read_json, write_absent, write_failed
from reports.util import atomic, signals
from workloads.base import FwbenchError, available_cpus
from workloads.parallel import device_counts


def job(unit: str, opts: RunOptions, out: Path, repeat: int, role: str, cache: Path) -> str:
    """One process of the run inside a submitit job: run as the local launcher would, then
    stamp its result with the host and the job's start and end."""
    start = launch.now()
    path = run_framework(unit, opts, out, Progress(), repeat, role, cache)
    launch.stamp(path, launch.job_info(start))
    return str(path)


class _JobRun:
    """The jobs of one run on a launcher (reports.commands.launch): each submitted, followed from
    its event stream while it runs (the run folder is shared) and collected into a result file;
    `stop` cancels the rest."""

    def __init__(self, opts: RunOptions, out: Path, progress: Progress, kind: str, jobs: launch.Jobs) -> None:
        self.opts, self.out, self.progress, self.kind, self.jobs = opts, out, progress, kind, jobs
        self.done: dict[launch.Item, Path] = {}
        self.watches: dict[launch.Item, Watch] = {}

    def who(self, unit: str, repeat: int) -> str:
        return process_names(unit, repeat, self.opts.repeats)[1]

    def follow(self, item: launch.Item) -> None:
        name, label = process_names(item[0], item[1], self.opts.repeats)
        self.watches.setdefault(item, Watch(label, self.progress)).read(self.out / f".{name}.events.jsonl")

    def submit(self, item: launch.Item) -> Any:
        unit, repeat, role, folder = item
        cache = self.opts.cache_dir / folder
        cache.mkdir(parents=True, exist_ok=True)
        j = self.jobs.submit(item, job, unit, self.opts, self.out, repeat, role, cache)
        self.progress.line(f"{self.who(unit, repeat)}: submitted as {self.kind} job {j.job_id} ({role})")
        return j

    def collect(self, j: Any, item: launch.Item, fate: str | None) -> None:
        unit, repeat, role, folder = item
        why = f"{self.kind} job {j.job_id} ended {fate} without a result" if fate is not None else None
        try:
            if why is None:
                self.done[item] = Path(j.result())
                info = (read_json(self.done[item]) or {}).get("machine_info") or {}
                ended = info.get("fwbench", {}).get("ended_by")
                self.progress.line(f"{self.who(unit, repeat)}: {self.kind} job {j.job_id} "
                                   + (f"ended early: {ended}" if ended else "done"))
        except Exception as e:   # submitit's FailedJobError / UncompletedJobError: killed, cancelled, timed out
            last = (str(e).strip().splitlines() or [""])[-1][:300]
            why = f"{self.kind} job {j.job_id} ended without a result ({type(e).__name__}: {last})"
        if why is not None:
            self.done[item] = write_failed(unit, self.opts, self.out, why, repeat, role)
            self.progress.line(f"{self.who(unit, repeat)}: {why}")
        if role == "cold":
            merge_cache(self.opts.cache_dir / folder, self.opts.cache_dir / SHARED_CACHE)

    def stop(self, e: BaseException, order: list[launch.Item]) -> None:
        """Cancel every job; a running one's file rebuilt from its stream, the rest "not run"."""
        stopped = f"interrupted by {signals.of(e).name}" if isinstance(e, KeyboardInterrupt) else "stopped"
        with signals.held():
            live = dict(self.jobs.live)
            for jid, (_, item) in live.items():   # what the running jobs did up to now, before they go
                if self.jobs.ran(jid):
                    self.follow(item)
            cancelled = self.jobs.cancel()
            for jid, (_, item) in live.items():
                if self.jobs.ran(jid):
                    unit, repeat, role, _ = item
                    why = f"{stopped} (fwbench run was stopped; {self.kind} job {jid} cancelled)"
                    self.done[item] = write_failed(unit, self.opts, self.out, why, repeat, role, self.watches[item])
            rest = [item for item in order if item not in self.done]
            for item in rest:
                unit, repeat, role, _ = item
                why = f"not run: fwbench run was {stopped} before {unit} started"
                self.done[item] = write_absent(unit, self.opts, self.out, why, repeat, role)
        self.progress.line(f"{stopped}: cancelled {self.kind} job(s) {', '.join(cancelled) or 'none'}; results so "
                           f"far are in {self.out}; not run: "
                           f"{', '.join(self.who(u, r) for u, r, _, _ in rest) or 'none'}")
        if isinstance(e, KeyboardInterrupt):
            raise signals.of(e) from None
        raise FwbenchError(f"{e}; cancelled the run's jobs, results so far in {self.out}") from None


def run_jobs(opts: RunOptions, out: Path, progress: Progress, order: list[launch.Item]) -> list[Path]:
    """`fwbench run --launcher slurm|submitit-local|submitit`: each process a job
    (reports.commands.launch), round by round; a job that dies leaves a result file rebuilt
    from its event stream. Ctrl-C, SIGTERM or SIGHUP, or a job that cannot start, cancels
    every job of the run and writes the same "not run" files as the local launcher."""
    kind = launch.kind_of(opts.launcher)
    if opts.launcher == "submitit":
        where = "Slurm (sbatch found)" if kind == "slurm" else "this machine (no sbatch)"
        progress.line(f"launcher: submitit on {where} (--launcher slurm or submitit-local chooses)")
    jobs = launch.Jobs(launch.executor(out / "submitit", kind, opts.timeout_s, opts.slurm), kind, progress.line)
    if kind == "slurm":
        asked = (opts.slurm and opts.slurm.time) or (f"{launch.time_limit(opts.timeout_s)} (minutes: the process's "
                                                     f"--timeout-s {opts.timeout_s:g} s with a margin)")
        progress.line(f"slurm: a whole node per job, --time={asked}; job logs in {out / 'submitit'}")
    state = _JobRun(opts, out, progress, kind, jobs)
    try:
        for r in sorted({item[1] for item in order}):
            batch = [item for item in order if item[1] == r]
            # on one machine one job at a time; on Slurm a round's jobs at once, a node each
            groups = [[item] for item in batch] if kind == "local" else [batch]
            for group in groups:
                for j, item, fate in jobs.wait([(state.submit(item), item) for item in group], state.follow):
                    state.collect(j, item, fate)
    except (KeyboardInterrupt, launch.Unstartable, FwbenchError) as e:
        if isinstance(e, FwbenchError) and not jobs.t0:
            raise                           # refused before any job was submitted: nothing to cancel
        state.stop(e, order)
    return [state.done[item] for item in order if item in state.done]


def run(opts: RunOptions, out: Path, progress: Progress | None = None,
        sets: Callable[[RunOptions, Path, Progress], list[Path]] | None = None) -> list[Path]:
    """Run every selected framework `opts.cold` + `opts.warm` times, each time in a fresh
    process, in the order of `schedule`; merge each cold process's cache folder into the
    run's shared one when it ends; return the JSON files written (one per process). With
    `sets` (reports.commands.sets.run_sets), the run's folders and caches are set up the same
    and `sets` runs its processes instead."""
    progress = progress or Progress()
    out = atomic.absolute(out)           # the processes run elsewhere (the checkout, a node)
    out.mkdir(parents=True, exist_ok=True)
    opts.suite = atomic.absolute(opts.suite or checkout.benchmarks_dir())
    if opts.run_id is None:
        opts.run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    own_cache = opts.cache_dir is None
    if own_cache:
        root = Path(os.environ.get("FWBENCH_CACHE_DIR") or Path.home() / ".cache" / "fwbench")
        opts.cache_dir = root / "runs" / opts.run_id
    opts.cache_dir = atomic.absolute(opts.cache_dir)
    opts.cache_dir.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        counts = device_counts(opts.devices)
        if opts.threads is None and max(counts) > 1:   # the same threads per device in every process
            opts.threads = max(1, available_cpus() // max(counts))
        if sets is not None:                  # side by side (reports.commands.sets)
            return sets(opts, out, progress)
        order = schedule(units(opts.frameworks, opts.devices), opts.cold, opts.warm, opts.seed)
        if opts.launcher != "local":          # jobs, round by round (reports.commands.launch)
            return run_jobs(opts, out, progress, order)
        for i, (fw, repeat, role, folder) in enumerate(order):
            who = process_names(fw, repeat, opts.repeats)[1]
            progress.line(f"{who}: starting ({role}), process {i + 1} of {len(order)} ({progress.elapsed()} elapsed)")
            cache = opts.cache_dir / folder
            cache.mkdir(parents=True, exist_ok=True)
            try:
                written.append(run_framework(fw, opts, out, progress, repeat, role, cache))
            except KeyboardInterrupt as e:      # the finished cases are kept; the rest is said, not run
                sig = signals.of(e)
                rest = order[i + 1:]
                with signals.held():
                    for f, r, rl, _ in rest:
                        write_absent(f, opts, out, f"not run: fwbench run was interrupted by {sig.name} "
                                                   f"before {f} started", repeat=r, role=rl)
                progress.line(f"interrupted by {sig.name}: results so far are in {out}; not run: "
                              f"{', '.join(process_names(f, r, opts.repeats)[1] for f, r, _, _ in rest) or 'none'}")
                raise sig from None
            finally:                            # a cold process's programs serve the warm ones
                if role == "cold":
                    merge_cache(cache, opts.cache_dir / SHARED_CACHE)
    finally:
        if own_cache and not opts.keep_cache:
            shutil.rmtree(opts.cache_dir, ignore_errors=True)
    return written


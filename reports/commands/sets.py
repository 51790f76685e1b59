"""`fwbench run`'s process sets: one process per framework (and a control: a second process of
one framework), all alive together, walking the tasks together at a coordinator's word, so that
the configurations of a task are timed side by side, block by block, seconds apart
(docs/design/statistics.md).

Why: on a shared machine the speed drifts over seconds (docs/measurements/regimes.txt: blocks
inside one process swing as much as processes differ), and processes of different frameworks
run minutes apart, so every ratio between frameworks carried two independent draws of that
drift. In a set, a ratio is paired by cycle: each cycle times one block of every configuration
of the task, in a random order, one block at a time.

The protocol of one set is reports.commands.coordinator's; this module plans the sets (who
is in each, in which start order, which process is the control) and runs them one after
another, on this machine or each as a scheduler's job on a node of its own.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from reports.commands import launch, plan, results, runner
from reports.commands.coordinator import Coordinator, SetSpec
from reports.util import signals
from workloads.base import FwbenchError


def plan_sets(units: tuple[str, ...], cold: int, warm: int, seed: int, control: str | None) -> list[SetSpec]:
    """The run's sets: the first cold (its caches start empty), then the other cold ones and the
    warm ones (the run's filled cache) in a seeded order, as the lone processes' rounds were; in
    each, a process per unit and, where `control` names a unit, a second process of it (the A/A
    control, its reference drawn per set); the start order drawn per set. A process's repeat is
    its index among its unit's processes (its result file's name)."""
    rng = random.Random(seed)
    later = ["cold"] * (cold - 1) + ["warm"] * warm
    rng.shuffle(later)
    sets, colds, count = [], 0, {u: 0 for u in units}
    for k, role in enumerate(["cold", *later]):
        members = []
        for u in [*units, *([control] if control in units else [])]:
            members.append((u, count[u], len(members) >= len(units)))
            count[u] += 1
        rng.shuffle(members)
        folder = f"cold-{colds}" if role == "cold" else plan.SHARED_CACHE
        colds += role == "cold"
        sets.append(SetSpec(k, role, members, folder, rng.randrange(1 << 30), rng.choice(("primary", "control"))))
    return sets


def run_set(spec: SetSpec, opts: plan.RunOptions, out: Path, progress: results.Progress, cycles: int,
            block_s: float) -> list[Path]:
    """One set on this machine (module docstring); the result files of its processes."""
    cache = opts.cache_dir / spec.folder
    cache.mkdir(parents=True, exist_ok=True)
    who = ", ".join(f"{u}#{r}" + (" (control)" if c else "") for u, r, c in spec.members)
    progress.line(f"set {spec.index} ({spec.role}): starting {who} ({progress.elapsed()} elapsed)")
    co = Coordinator(spec, opts, out, progress, cycles, block_s)
    try:
        co.start(cache)
        co.run()
        return co.finish()
    except KeyboardInterrupt as e:      # what finished is kept (rebuilt from the event streams)
        with signals.held():
            co.stop(f"interrupted by {signals.of(e).name} (fwbench run was stopped)")
            co.finish()
        raise
    except BaseException:
        co.stop("fwbench run failed")
        raise
    finally:
        if spec.role == "cold":
            plan.merge_cache(cache, opts.cache_dir / plan.SHARED_CACHE)


# The framework whose process a set runs twice by default (the A/A control), the first of these
# that runs, the cheapest process to build twice first: measured in a cold set of the tiny presets
# (fwbench run --quick, 2-core AMD EPYC), TensorFlow's first calls took 39 s in all (its memory is
# measured in the run's first TensorFlow process only), JAX's 73 s (its eager mode compiles every
# primitive), torch's 107 s plus a 12 s compiler start-up (Inductor's C++ toolchain).
CONTROL_ORDER = ("tensorflow", "jax", "torch")


def control_unit(opts: plan.RunOptions, run_units: tuple[str, ...]) -> str | None:
    """The unit whose process each set runs twice: --control's framework, else the first of
    CONTROL_ORDER that runs, else the first unit; none with --control none."""
    if opts.control == "none":
        return None
    if opts.control is not None:
        if opts.control not in run_units:
            raise FwbenchError(f"--control {opts.control}: not a framework of this run (it runs "
                               f"{', '.join(run_units)}; or none)")
        return opts.control
    return next((u for u in CONTROL_ORDER if u in run_units), run_units[0] if run_units else None)


def run_sets(opts: plan.RunOptions, out: Path, progress: results.Progress) -> list[Path]:
    """The run as process sets, one after another on this machine (reports.commands.sets)."""
    run_units = plan.units(opts.frameworks, opts.devices)
    written: list[Path] = []
    sets_ = plan_sets(run_units, opts.cold, opts.warm, opts.seed, control_unit(opts, run_units))
    if opts.launcher != "local":
        return run_set_jobs(opts, out, progress, sets_)
    for i, spec in enumerate(sets_):
        try:
            written += run_set(spec, opts, out, progress, opts.cycles, opts.block_s)
        except KeyboardInterrupt as e:      # the finished sets are kept; the rest is said, not run
            sig = signals.of(e)
            with signals.held():
                for later in sets_[i + 1:]:
                    for u, r, _ in later.members:
                        results.write_absent(u, opts, out, f"not run: fwbench run was interrupted by {sig.name} "
                                                   f"before set {later.index} started", repeat=r, role=later.role)
            progress.line(f"interrupted by {sig.name}: results so far are in {out}")
            raise sig from None
    return written


def run(opts: plan.RunOptions, out: Path, progress: results.Progress | None = None) -> list[Path]:
    """`fwbench run`'s processes: process sets (--cycles > 0) or lone processes (runner.run)."""
    if opts.cycles <= 0:
        return runner.run(opts, out, progress)
    return runner.run(opts, out, progress, sets=run_sets)


def set_job(spec: SetSpec, opts: plan.RunOptions, out: Path) -> list[str]:
    """One set inside a scheduler's job (a whole node, reports.commands.launch): run there as on
    this machine, each result stamped with the node and the job's start and end."""
    start = launch.now()
    paths = run_set(spec, opts, out, results.Progress(), opts.cycles, opts.block_s)
    for p in paths:
        launch.stamp(p, launch.job_info(start))
    return [str(p) for p in paths]


def _say_where(opts: plan.RunOptions, kind: str, limit: float, out: Path, progress: results.Progress) -> None:
    """The launcher's line: where submitit runs, and on Slurm the time each set's job asks for."""
    if opts.launcher == "submitit":
        where = "Slurm (sbatch found)" if kind == "slurm" else "this machine (no sbatch)"
        progress.line(f"launcher: submitit on {where} (--launcher slurm or submitit-local chooses)")
    if kind == "slurm":
        asked = (opts.slurm and opts.slurm.time) or (f"{launch.time_limit(limit)} (minutes: a set's processes' "
                                                     f"--timeout-s {opts.timeout_s:g} s each, with a margin)")
        progress.line(f"slurm: a whole node per set, --time={asked}; job logs in {out / 'submitit'}")


def run_set_jobs(opts: plan.RunOptions, out: Path, progress: results.Progress, sets_: list[SetSpec]) -> list[Path]:
    """`fwbench run --launcher slurm|submitit...` with sets: each set a job on a node of its own,
    one set at a time (the first cold set fills the cache the warm ones find); a set's job that
    dies leaves its processes' result files rebuilt from their event streams; Ctrl-C, SIGTERM or
    SIGHUP cancels the running job and writes the rest as not run."""
    kind = launch.kind_of(opts.launcher)
    limit = opts.timeout_s * max(len(s.members) for s in sets_)     # a set's processes take turns
    _say_where(opts, kind, limit, out, progress)
    jobs = launch.Jobs(launch.executor(out / "submitit", kind, limit, opts.slurm), kind, progress.line)
    written: list[Path] = []
    for i, spec in enumerate(sets_):
        item = (f"set-{spec.index}", spec.index, spec.role, spec.folder)
        watches = {(u, r): results.Watch(plan.process_names(u, r, opts.repeats)[1], progress)
                   for u, r, _ in spec.members}

        def follow(_: Any) -> None:
            """The set's processes' cases as they finish, from their event streams (a shared folder)."""
            for (u, r), w in watches.items():
                w.read(out / f".{plan.process_names(u, r, opts.repeats)[0]}.events.jsonl")
        try:
            j = jobs.submit(item, set_job, spec, opts, out)
            progress.line(f"set {spec.index} ({spec.role}): submitted as {kind} job {j.job_id}")
            for j, _, fate in jobs.wait([(j, item)], follow):
                try:
                    if fate is None:
                        written += [Path(p) for p in j.result()]
                        progress.line(f"set {spec.index}: {kind} job {j.job_id} done")
                        continue
                    why = f"{kind} job {j.job_id} ended {fate} without a result"
                except Exception as e:   # submitit's FailedJobError / UncompletedJobError
                    why = f"{kind} job {j.job_id} ended without a result ({type(e).__name__})"
                progress.line(f"set {spec.index}: {why}")
                written += [results.write_failed(u, opts, out, why, r, spec.role) for u, r, _ in spec.members]
            if spec.role == "cold":
                plan.merge_cache(opts.cache_dir / spec.folder, opts.cache_dir / plan.SHARED_CACHE)
        except (KeyboardInterrupt, launch.Unstartable) as e:
            stopped = f"interrupted by {signals.of(e).name}" if isinstance(e, KeyboardInterrupt) else "stopped"
            with signals.held():
                live = dict(jobs.live)
                follow(None)                 # what the running set's processes finished, before they go
                cancelled = jobs.cancel()
                if any(jobs.ran(jid) for jid in live):    # the running set: its finished cases kept
                    for u, r, _ in spec.members:
                        written.append(results.write_failed(
                            u, opts, out, f"{stopped} (fwbench run was stopped; {kind} job cancelled)", r, spec.role,
                            watches[u, r]))
                for later in sets_[i + 1 if any(jobs.ran(jid) for jid in live) else i:]:
                    for u, r, _ in later.members:
                        written.append(results.write_absent(u, opts, out, f"not run: fwbench run was {stopped} "
                                                                         f"before set {later.index} started", r,
                                                           later.role))
            progress.line(f"{stopped}: cancelled {kind} job(s) {', '.join(cancelled) or 'none'}; results so far "
                          f"are in {out}")
            if isinstance(e, KeyboardInterrupt):
                raise signals.of(e) from None
            raise FwbenchError(f"{e}; cancelled the run's jobs, results so far in {out}") from None
    return written


__all__ = ["SetSpec", "plan", "run_set", "run_set_jobs", "FwbenchError"]

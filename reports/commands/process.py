"""One framework process of `fwbench run` on this machine: its pytest command and environment
(`pytest_command`, `process_env`), started in its own process group, followed through its event
stream, killed with its group at --timeout-s or with its parent, and its result file kept
(`run_framework`)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from reports.commands import checkout
from reports.commands.plan import RunOptions, case_order_seed, env_pad, log_file, process_names, split_unit
from reports.commands.results import Progress, Watch, keep
from reports.util import signals
from workloads import options
from workloads.case import FRAMEWORKS  # noqa: F401  (fwbench's frameworks, in report order; the CLI reads it here)
from workloads.framework_facts import FACTS


def pytest_command(fw: str, opts: RunOptions, json_path: Path, repeat: int | None = None,
                   role: str | None = None, task_order_seed: int | None = None) -> list[str]:
    """The command line of one framework process: pytest-benchmark on the checkout's cases
    with the event plugin (reports.util.pytest_events) and the run's options, written by
    the options' one declaration (workloads.options); in a set, its task-order seed."""
    values = {o.name: getattr(opts, o.name) for o in options.HARNESS if hasattr(opts, o.name)}
    fw, n = split_unit(fw)
    values.update(framework=fw, devices=str(n), workload=opts.workloads, cache_role=role, run_id=opts.run_id,
                  task_order_seed=task_order_seed)
    if repeat is not None:
        values.update(repeat=repeat, repeats=opts.repeats, cold=opts.cold, warm=opts.warm,
                      case_order_seed=case_order_seed(opts.seed, fw, repeat))
    return [sys.executable, "-m", "pytest", str(opts.suite or checkout.benchmarks_dir()), "--benchmark-only",
            "-p", "reports.util.pytest_events", "-p", "no:cacheprovider", "-q",
            "--benchmark-json", str(json_path), "--benchmark-save-data", *options.argv(values), *opts.extra]


def process_env(fw: str, opts: RunOptions, events_path: Path, repeat: int | None = None,
                cache: Path | None = None) -> dict[str, str]:
    """The environment of one framework process: its event stream, its padding, and the
    run's compile caches (`cache`, default the run's folder) rather than any the caller set."""
    env = dict(os.environ, FWBENCH_EVENTS=str(events_path), PYTHONUNBUFFERED="1",
               FWBENCH_ENV_PAD=env_pad(opts.seed, fw, repeat or 0))
    cache = cache or opts.cache_dir
    if cache is not None:            # the run's caches, not a location inherited from the caller
        env["FWBENCH_CACHE_DIR"] = str(cache)
        for f in FACTS.values():     # each framework's own cache variable or flag (workloads.framework_facts)
            if f.cache_env is not None:
                env.pop(f.cache_env, None)
            if f.cache_flag is not None:
                var, name = f.cache_flag
                env[var] = " ".join(x for x in env.get(var, "").split() if not x.startswith(name + "="))
    return env


def run_framework(fw: str, opts: RunOptions, out: Path, progress: Progress, repeat: int | None = None,
                  role: str | None = None, cache: Path | None = None) -> Path:
    """Run one framework's benchmark process; return the JSON it leaves in `out`. With a
    `repeat` index, the process is that one of the run (its own JSON, case order and
    environment padding); `role` (cold / warm) and `cache` (its FWBENCH_CACHE_DIR, default the
    run's folder) are its compile-cache role and folder."""
    name, label = process_names(fw, repeat, opts.repeats)
    log_path = log_file(out, name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{name}.benchmark.json.tmp"
    events_path = out / f".{name}.events.jsonl"
    for p in (tmp, events_path):
        p.unlink(missing_ok=True)
    cmd = pytest_command(fw, opts, tmp, repeat, role)
    env = process_env(fw, opts, events_path, repeat, cache)
    t_start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        # its own session: Ctrl-C at the terminal reaches only us, and we end the whole group;
        # the parent-death signal ends pytest if we die without a chance to (kill -9)
        proc = subprocess.Popen(cmd, cwd=checkout.CHECKOUT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=die_with_parent)
        state = Watch(label, progress)
        ended: str | None = None            # what ended the process from outside, if anything
        interrupted: signals.Interrupted | None = None
        try:
            while proc.poll() is None:
                time.sleep(0.25)
                state.read(events_path)
                if time.monotonic() - t_start > opts.timeout_s:
                    ended = f"timed out after {opts.timeout_s:g} s (--timeout-s)"
                    _kill_group(proc)
        except KeyboardInterrupt as e:      # SIGINT, SIGTERM, SIGHUP (reports.util.signals)
            interrupted = signals.of(e)
            ended = f"interrupted by {interrupted.name} (fwbench run was stopped)"
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)
            raise
        state.read(events_path)
    with signals.held():                    # a second Ctrl-C waits until the results are kept
        path = keep(fw, opts, out, proc.returncode, ended, state, progress, tmp, log_path, repeat, role)
        events_path.unlink(missing_ok=True)
    if interrupted is not None:
        raise interrupted
    return path


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent (fwbench run) dies (Linux prctl)."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    """End the process group we started (pytest and any children it made)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


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
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import Field, field, make_dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

from reports.commands import launch
from reports.measures import stats
from reports.util import atomic, signals
from workloads import options
from workloads.base import FwbenchError, available_cpus, git_commit, merge_tree, split_presets
from workloads.case import FRAMEWORKS  # noqa: F401  (fwbench's frameworks, in report order; the CLI reads it here)
from workloads.framework_facts import FACTS, facts
from workloads.parallel import device_counts
from workloads.record import SCHEMA_VERSION, empty, not_its_api, not_reached

CHECKOUT = Path(__file__).resolve().parents[2]
# The harness's reason for a mode a framework does not have (frameworks/harness/run.py: run_case).
NO_SUCH_MODE = re.compile(r"has no '\w+' mode \(it has ")


def adapter_file(name: str) -> Path:
    """Where this checkout keeps the framework's fwbench adapter (frameworks/<name>/__init__.py)."""
    return CHECKOUT / "frameworks" / name / "__init__.py"


def installed(name: str) -> bool:
    """Is the framework importable and its fwbench adapter present? Imports neither: the
    adapter is looked for as a file (find_spec of frameworks.<name> would import the
    frameworks package), the framework with find_spec of its top-level module (which finds
    it without importing it)."""
    return importlib.util.find_spec(facts(name).module) is not None and adapter_file(name).is_file()


def absent_reason(name: str) -> str:
    """Why `installed(name)` is False, with what to do about it."""
    if importlib.util.find_spec(facts(name).module) is None:
        return f"{name} is not installed: pip install 'fwbench[{name}]'"
    return f"{name} is installed but this checkout has no fwbench adapter for it (frameworks/{name}/__init__.py)"


def version_of(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def benchmarks_dir() -> Path:
    d = CHECKOUT / "tests" / "benchmarks"
    if not d.is_dir():
        raise FwbenchError(f"fwbench run needs the benchmark cases of a source checkout ({d} is missing): "
                           "clone the repository and pip install -e . there")
    return d


class _RunOptions:
    """What RunOptions adds to its fields: the check of the process counts, and repeats."""
    cold: int
    warm: int
    device: str
    preset: str | None

    def __post_init__(self) -> None:
        # not given: the device's default (a precision not given is left to each process, which
        # takes the same default: workloads.options.device_defaults)
        self.preset = self.preset or options.device_defaults(self.device)["preset"]
        if self.cold < 1 or self.warm < 0:
            raise FwbenchError(f"a run needs at least one cold process and no negative number of warm ones "
                               f"(got cold {self.cold}, warm {self.warm})")

    @property
    def repeats(self) -> int:
        """Processes per framework: cold + warm (run side by side with a control, twice that at
        most: the control framework's second process per set; result files are then indexed)."""
        n = self.cold + self.warm
        return 2 * n if getattr(self, "cycles", 0) > 0 and getattr(self, "control", None) != "none" else n


# The run's own fields, beside the harness options: (name, type, default).
RUN_FIELDS: tuple[tuple[str, Any, Any], ...] = (
    ("timeout_s", float, 3600.0),
    ("extra", list[str], field(default_factory=list)),   # further pytest arguments
    ("cold", int, 1),                  # cold processes per framework (each from an empty cache folder)
    ("warm", int, 0),                  # warm processes per framework (the run's filled cache)
    ("seed", int, 0),                  # draws the process order, each process's case order and padding
    ("run_id", str | None, None),      # set by run(): names the run's cache folder, in every JSON
    ("cache_dir", Path | None, None),  # the run's compile caches (default: ~/.cache/fwbench/runs/<run id>)
    ("keep_cache", bool, False),       # leave the run's cache folder in place afterwards
    ("launcher", str, "local"),        # where processes run (reports.commands.launch.LAUNCHERS)
    ("slurm", launch.SlurmOptions | None, None),   # what each Slurm job asks for (--launcher slurm)
    ("suite", Path | None, None),      # the benchmark cases (default: the checkout's tests/benchmarks)
    # side by side (reports.commands.sets): cycles of blocks per task in each set; 0 runs each process
    # alone, one after another (the lone design: no pairing)
    ("cycles", int, 0),
    ("block_s", float, 0.25),          # seconds a block of calls lasts (sized from each case's own rounds)
    ("control", str | None, None),     # the framework whose process a set runs twice (the A/A control)
    ("processes_per_case", str | None, None),   # "1,2": a job step of N processes per case set (running.distributed)
)
# `fwbench run`'s options: the frameworks, every harness option a user may set (those of
# workloads.options.HARNESS not set per process, --workload's comma list as `workloads`), each
# with its declared default (a default is not passed on: the process takes the same), then the
# run's own fields. Repeat, role, run id and case order reach each process by pytest_command.
RunOptions = make_dataclass("RunOptions", [
    ("frameworks", tuple[str, ...]),
    *options.fields(lambda o: not o.process and o.name != "framework", rename={"workload": "workloads"}),
    *((n, t, d if isinstance(d, Field) else field(default=d)) for n, t, d in RUN_FIELDS),
], bases=(_RunOptions,))
RunOptions.__module__ = __name__      # where pickle finds it (Python 3.12's module=)


SHARED_CACHE = "shared"     # the run's cache folder every warm process uses


def schedule(frameworks: tuple[str, ...], cold: int, warm: int, seed: int) -> list[tuple[str, int, str, str]]:
    """(framework, process index, role, cache folder) in the order the processes run, in
    rounds of one process per framework, the frameworks in an order drawn per round with
    `seed`. Round 0 is every framework's first cold process (folder cold-0); the other cold
    rounds (cold-1, ...) and the warm rounds (folder `shared`) follow in a seeded random order.
    A process's index is its round: its position among its framework's processes."""
    rng = random.Random(seed)
    later = ["cold"] * (cold - 1) + ["warm"] * warm
    rng.shuffle(later)
    order, colds = [], 0
    for r, role in enumerate(["cold", *later]):
        folder = f"cold-{colds}" if role == "cold" else SHARED_CACHE
        colds += role == "cold"
        fws = list(frameworks)
        rng.shuffle(fws)
        order += [(f, r, role, folder) for f in fws]
    return order


def _seeded(seed: int, fw: str, repeat: int, what: str = "") -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}|{fw}|{repeat}{what}".encode()).digest()[:4], "little")


def case_order_seed(seed: int, fw: str, repeat: int) -> int:
    """The seed of one process's case order: fixed by the run's seed, different per process."""
    return _seeded(seed, fw, repeat)


ENV_PAD_MAX = 4096


def env_pad(seed: int, fw: str, repeat: int) -> str:
    """FWBENCH_ENV_PAD of one process: a string of a random length in 0..ENV_PAD_MAX-1, drawn
    from the run's seed, the framework and the process index. The environment sits at the top
    of the process's stack, so its size moves everything below it; measured times can change
    by several percent with it (Mytkowicz et al., "Producing wrong data without doing anything
    obviously wrong!", ASPLOS 2009). Paths in the environment embed the framework's name, so
    without padding each framework's processes would sit at sizes of their own."""
    return "x" * (_seeded(seed, fw, repeat, "|env") % ENV_PAD_MAX)


def merge_cache(src: Path, dst: Path) -> None:
    """Add a cold process's cache folder to the run's shared one (workloads.base.merge_tree:
    content-addressed entries, hard-linked). Never fails the run: a cache that could not be
    merged only makes a later warm process compile more."""
    try:
        merge_tree(src, dst)
    except (OSError, shutil.Error):
        pass


def unit_name(fw: str, devices: int) -> str:
    """A process's framework and placement as one name: `torch`, or `torch-x2` on 2 devices."""
    return fw if devices == 1 else f"{fw}-x{devices}"


def split_unit(unit: str) -> tuple[str, int]:
    """unit_name's inverse: 'torch-x2' -> ('torch', 2), 'jax' -> ('jax', 1)."""
    fw, sep, n = unit.rpartition("-x")
    return (fw, int(n)) if sep and fw and n.isdigit() else (unit, 1)


def units(frameworks: tuple[str, ...], devices: str) -> tuple[str, ...]:
    """Every (framework, device count) of a run as unit names; a placement is fixed per
    process, so each is a process of its own (and its own replicates)."""
    return tuple(unit_name(f, n) for n in device_counts(devices) for f in frameworks)


def process_names(fw: str, repeat: int | None, repeats: int) -> tuple[str, str]:
    """(result file name, progress label) of one process: `<fw>.json` / `fw` when the run
    has one process per framework, `<fw>-<repeat>.json` / `fw#repeat` when it has several."""
    if repeat is None or repeats <= 1:
        return f"{fw}.json", fw
    return f"{fw}-{repeat}.json", f"{fw}#{repeat}"


def preset_for(workload: str, text: str) -> str:
    """The preset a workload ran at, from --preset as given (workloads.base.split_presets)."""
    default, per = split_presets(text)
    return per.get(workload, default)


write_json_atomic = atomic.write_json


class Progress:
    """One line per finished case; on a terminal, also a live line for the running case."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.out = stream or sys.stderr
        self.live = self.out.isatty()
        self.t0 = time.monotonic()
        self._pending = False

    def line(self, text: str) -> None:
        if self._pending:
            self.out.write("\r\033[K")
            self._pending = False
        self.out.write(text + "\n")
        self.out.flush()

    def running(self, text: str) -> None:
        if self.live:
            self.out.write("\r\033[K" + text[:150])
            self.out.flush()
            self._pending = True

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.t0:.0f} s"


def _describe(case: dict[str, Any]) -> str:
    keys = [k for k in ("workload", "task", "mode", "strategy") if case.get(k)]
    return " ".join(str(case[k]) for k in keys) or case.get("nodeid", "?")


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
    return [sys.executable, "-m", "pytest", str(opts.suite or benchmarks_dir()), "--benchmark-only",
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
        proc = subprocess.Popen(cmd, cwd=CHECKOUT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_die_with_parent)
        state = _Watch(label, progress)
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
        path = _keep(fw, opts, out, proc.returncode, ended, state, progress, tmp, log_path, repeat, role)
        events_path.unlink(missing_ok=True)
    if interrupted is not None:
        raise interrupted
    return path


def log_file(out: Path, name: str) -> Path:
    """Where a process's output goes: logs/<fw>[-<repeat>].log beside its result file `name`."""
    return out / "logs" / f"{Path(name).stem}.log"


def unrecorded(paths: list[Path], out: Path) -> str | None:
    """None when some result file of the run holds a record; else one line saying so and
    where the first process's log is (with its last telling line), for the CLI to exit on."""
    if not paths or any(_records(p) for p in paths):
        return None
    log = log_file(out, paths[0].name)
    if not log.is_file() and (out / "submitit").is_dir():     # a job that died before its process started
        log = out / "submitit"
    tail = _tail(log) if log.is_file() else ""
    return (f"no process of the run wrote a record ({len(paths)} result file(s) in {out}, none with a case): "
            f"the first process's log is {log}" + (f" (it ends: {tail})" if tail else ""))


def _records(path: Path) -> int:
    """How many cases a result file records (timed ones and fwbench.records)."""
    doc = _read_json(path) or {}
    top = doc.get("fwbench") if isinstance(doc.get("fwbench"), dict) else {}
    return len(doc.get("benchmarks") or []) + len(top.get("records") or [])


def _die_with_parent() -> None:
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


def _keep(fw: str, opts: RunOptions, out: Path, rc: int, ended: str | None, state: "_Watch",
          progress: Progress, tmp: Path, log_path: Path, repeat: int | None = None, role: str | None = None) -> Path:
    """Turn what the process left into `<fw>.json` (`<fw>-<repeat>.json` in a run of several
    processes per framework): its own JSON when it wrote a whole one, else one rebuilt from
    the event stream; say what ended it."""
    name, label = process_names(fw, repeat, opts.repeats)
    final = out / name
    log_tail = _tail(log_path)
    if rc == 4 and ended is None:       # pytest usage error: a bad option value, not a framework failure
        tmp.unlink(missing_ok=True)
        raise FwbenchError(f"pytest refused the options: {_usage_error(log_path) or log_tail} (log: {log_path})")
    doc = _read_json(tmp)
    if doc is not None:
        # pytest-benchmark wrote its JSON at the end of the session: every case finished.
        if rc in (0, 1) and ended is None:
            os.replace(tmp, final)
            progress.line(f"{label}: done, {state.summary()} ({progress.elapsed()} total)")
            return final
        why = ended or f"the {fw} process exited with code {rc}"
        doc.setdefault("fwbench", {})["note"] = f"{why} after writing its results"
        doc.setdefault("machine_info", {}).setdefault("fwbench", {})["ended_by"] = f"{why} after writing its results"
        path = save_json(final, doc, progress)
        tmp.unlink(missing_ok=True)
        progress.line(f"{label}: done, {state.summary()}, but then {why}")
        return path
    if ended:
        why = ended
    elif rc in (0, 1) and state.counts["passed"]:
        why = f"pytest-benchmark wrote no result JSON ({log_tail or 'see the log'})"
    elif rc in (0, 1, 5):
        why = "produced no timed case" if rc != 5 else "collected no benchmark case"
    elif rc < 0:
        why = f"process killed by {signal.Signals(-rc).name}"
    else:
        why = f"process exited with code {rc}"
    if log_tail and not ended and rc not in (0, 1, 5):
        why += f": {log_tail}"
    tmp.unlink(missing_ok=True)
    doc = state.rebuild(fw, opts, why, repeat, role)
    path = save_json(final, doc, progress)
    progress.line(f"{label}: {why}; {state.summary()} (log: {log_path})")
    return path


def save_json(path: Path, doc: dict[str, Any], progress: Progress) -> Path:
    """Write a result JSON; when its folder cannot take it (a full disk, a read-only folder),
    write it to the system's temporary folder instead and say where, so no result is lost."""
    try:
        write_json_atomic(path, doc)
        return path
    except OSError as e:
        first = atomic.describe(e, path, "the results")
    try:
        fd, spare = tempfile.mkstemp(prefix=f"fwbench-{path.stem}-", suffix=".json")
        os.close(fd)
        write_json_atomic(Path(spare), doc)
    except OSError as e2:
        raise FwbenchError(f"{first}; nor in the temporary folder ({e2.strerror or e2}): "
                           "these results are lost") from None
    progress.line(f"{first}; kept them in {spare} instead: move it next to the other results")
    return Path(spare)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def _tail(path: Path) -> str:
    """The last line of a log that says what went wrong."""
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    # pytest -q prints a character per case (. s F E x) before whatever the process says next
    lines = [_PROGRESS.sub("", ln).strip() for ln in lines if ln and not ln.startswith("$ ")]
    lines = [ln for ln in lines if ln and not _PROGRESS_ONLY.match(ln)]
    errs = [ln for ln in lines if "Error" in ln or ln.startswith(("E ", "ERROR", "Fatal", "Segmentation"))]
    return (errs[-1] if errs else lines[-1] if lines else "")[:300]


_PROGRESS = re.compile(r"^[.sFExX]+(?=[A-Z])")
_PROGRESS_ONLY = re.compile(r"^[.sFExX]+(\s+\[\s*\d+%\])?$")


def _usage_error(path: Path) -> str:
    """pytest's own words for a usage error: the last 'error: ...' that is not the usage line."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    found = [m.group(1).strip() for m in (re.search(r"error:\s*(.*)", ln, re.IGNORECASE) for ln in lines)
             if m and not m.group(1).startswith("usage:")]
    return found[-1] if found else ""


class _Watch:
    """Follows one process's event stream: progress lines and what is needed to rebuild
    its JSON if it never writes one."""

    def __init__(self, fw: str, progress: Progress) -> None:
        self.fw, self.progress = fw, progress
        self.offset = 0
        self.cases: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.done: dict[str, dict[str, Any]] = {}
        self.current: str | None = None
        self.missing: dict[str, str] = {}
        self.machine: dict[str, Any] = {}      # the process's own machine event (node_info)
        self.startup: dict[str, float] = {}    # its compiler start-ups ("framework/mode": s), from its done events
        self.counts = {"passed": 0, "skipped": 0, "failed": 0}

    def read(self, path: Path) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        complete, _, _ = chunk.rpartition("\n")      # only whole lines; the rest next time
        self.offset += len(complete.encode("utf-8")) + (1 if complete else 0)
        for line in complete.splitlines():
            try:
                self.on(json.loads(line))
            except json.JSONDecodeError:
                continue
        if self.current:
            self.progress.running(f"[{self.fw} {len(self.done) + 1}/{len(self.cases)}] "
                                  f"{_describe(self.by_id.get(self.current, {}))} ... {self.progress.elapsed()}")

    def on(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "collected":
            self.cases = ev["cases"]
            self.by_id = {c["nodeid"]: c for c in self.cases}
            self.progress.line(f"{self.fw}: {len(self.cases)} cases")
        elif kind == "start":
            self.current = ev["nodeid"]
        elif kind == "done":
            self.done[ev["nodeid"]] = ev
            self.current = None
            self.startup.update(ev.get("compiler_startup") or {})
            if ev["outcome"] == "skipped" and NO_SUCH_MODE.search(ev.get("reason") or ""):
                self.counts["n/a"] = self.counts.get("n/a", 0) + 1   # a mode the framework does not have:
                return                                                # recorded, not worth a line
            self.counts[ev["outcome"]] = self.counts.get(ev["outcome"], 0) + 1
            self.progress.line(f"[{self.fw} {len(self.done)}/{len(self.cases)}] "
                               f"{_describe(self.by_id.get(ev['nodeid'], {}))}: {self._result(ev)}"
                               f"  ({self.progress.elapsed()})")
        elif kind == "machine":
            self.machine = ev.get("machine") or {}
        elif kind == "finish":
            self.missing = ev.get("missing") or {}

    @staticmethod
    def _result(ev: dict[str, Any]) -> str:
        b = ev.get("benchmark")
        if ev["outcome"] == "passed" and b:
            st = b["stats"]
            return f"median {stats.fmt_seconds(st['median'])} over {st['rounds']} rounds"
        return f"{ev['outcome']}" + (f": {ev['reason'][:100]}" if ev.get("reason") else "")

    def _host(self, fw: str, threads: int, device: str) -> dict[str, Any]:
        """host_info measured here, unless the process said it ran on another machine (a
        Slurm job on a node): then that machine's own facts, and no GEMM rate (this host's
        would be the wrong denominator, and the node is gone), saying so."""
        host = host_info(fw, threads, device)
        node = self.machine
        if node.get("host") and host and node["host"] != host.get("host"):
            for k in ("gemm_rates", "gemm_samples"):
                host.pop(k, None)
            host.update(node, gemm_flops=None,
                        gemm_note=f"not measured: the process ran on {node['host']} and ended early; "
                                  f"fwbench run rebuilt its result on {host.get('host')}")
        return host

    def summary(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)

    def rebuild(self, fw: str, opts: RunOptions, why: str, repeat: int | None = None,
                role: str | None = None) -> dict[str, Any]:
        """The JSON pytest-benchmark would have written, from the cases that finished, plus
        `failed` records for the case that was running and those never reached (process
        `repeat` of the run, in compile-cache `role`)."""
        unit, (fw, n_devices) = fw, split_unit(fw)
        benchmarks, records = [], []
        for ev in self.done.values():
            if ev.get("benchmark"):
                benchmarks.append(ev["benchmark"])
            records += ev.get("records") or []
        threads = opts.threads or available_cpus()
        host = self._host(fw, int(threads), opts.device) if self.done else {}
        modes = host.get("modes")
        for c in self.cases:
            if c["nodeid"] in self.done:
                continue
            status, reason = "failed", (f"{why} during this case" if c["nodeid"] == self.current
                                        else not_reached(fw, why))
            if modes and c.get("mode") and c["mode"] not in modes:   # as the harness records it
                status, reason = "unsupported", not_its_api(fw, f"{c['mode']!r} mode (it has {', '.join(modes)})")
            records.append(empty(
                framework=fw, framework_version=version_of(fw), workload=c.get("workload") or "unknown",
                task=c.get("task", "unknown"), mode=c.get("mode", "unknown"), strategy=c.get("strategy"),
                preset=preset_for(c.get("workload") or "", opts.preset), shape="n/a", param_dtype="float32",
                device=opts.device, threads=int(threads), n_devices=n_devices,
                items=0, unit="", flops=0.0, status=status, reason=reason, repeat=repeat, compile_cache=role))
        missing = dict(self.missing)
        if not self.cases and not records and fw not in missing:
            missing[fw] = f"{why} before any case was collected"
        date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        info = {"schema": SCHEMA_VERSION, "fwbench_commit": git_commit(), "date": date,
                "frameworks": {fw: {"version": version_of(fw)}}, "missing": missing,
                "threads": int(threads), "device": opts.device, "preset": opts.preset,
                "gemm_flops": None, "gemm_note": None, "ended_by": why, "run_id": opts.run_id,
                "repeat": repeat, "repeats": opts.repeats, "cold": opts.cold, "warm": opts.warm,
                "cache_role": role, "compile_cache": role,
                **{k: v for k, v in host.items() if k != "modes"}}
        if self.startup:
            info["compiler_startup"] = dict(self.startup)
        return {"machine_info": {"fwbench": info}, "commit_info": {}, "benchmarks": benchmarks,
                "datetime": date, "version": _pytest_benchmark_version(),
                "fwbench": {"schema": SCHEMA_VERSION, "records": records, "missing": missing,
                            "note": f"rebuilt by fwbench run from the event stream: {unit} {why}"}}


def host_info(fw: str, threads: int, device: str) -> dict[str, Any]:
    """The harness's machine information (frameworks.harness.machine.host_info: CPU name, C
    heap policy, GEMM rate, the framework's modes) for a result file rebuilt after its process
    ended early, measured in a fresh process at the same thread count, so utilisation keeps
    the same denominator and the set-up matches the other runs'. {} if that fails."""
    code = ("import json; from frameworks.base import set_threads; set_threads(%d); from frameworks.harness.machine "
            "import host_info; print(json.dumps(host_info(%r, %r)))" % (threads, fw, device))
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd=CHECKOUT, capture_output=True, text=True, timeout=180)
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return {}


def _pytest_benchmark_version() -> str:
    return version_of("pytest-benchmark")


def job(unit: str, opts: RunOptions, out: Path, repeat: int, role: str, cache: Path) -> str:
    """One process of the run inside a submitit job: run as the local launcher would, then
    stamp its result with the host and the job's start and end."""
    start = launch.now()
    path = run_framework(unit, opts, out, Progress(), repeat, role, cache)
    launch.stamp(path, launch.job_info(start))
    return str(path)


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
    done: dict[launch.Item, Path] = {}
    watches: dict[launch.Item, _Watch] = {}

    def follow(item: launch.Item) -> None:
        """A running job's cases as they finish, from its event stream (the run folder is shared)."""
        name, label = process_names(item[0], item[1], opts.repeats)
        watches.setdefault(item, _Watch(label, progress)).read(out / f".{name}.events.jsonl")

    def submit(item: launch.Item) -> Any:
        unit, repeat, role, folder = item
        cache = opts.cache_dir / folder
        cache.mkdir(parents=True, exist_ok=True)
        j = jobs.submit(item, job, unit, opts, out, repeat, role, cache)
        progress.line(f"{process_names(unit, repeat, opts.repeats)[1]}: submitted as {kind} job {j.job_id} ({role})")
        return j

    def collect(j: Any, item: launch.Item, fate: str | None) -> None:
        unit, repeat, role, folder = item
        who = process_names(unit, repeat, opts.repeats)[1]
        why = f"{kind} job {j.job_id} ended {fate} without a result" if fate is not None else None
        try:
            if why is None:
                done[item] = Path(j.result())
                ended = ((_read_json(done[item]) or {}).get("machine_info") or {}).get("fwbench", {}).get("ended_by")
                progress.line(f"{who}: {kind} job {j.job_id} " + (f"ended early: {ended}" if ended else "done"))
        except Exception as e:   # submitit's FailedJobError / UncompletedJobError: killed, cancelled, timed out
            last = (str(e).strip().splitlines() or [""])[-1][:300]
            why = f"{kind} job {j.job_id} ended without a result ({type(e).__name__}: {last})"
        if why is not None:
            done[item] = write_failed(unit, opts, out, why, repeat, role)
            progress.line(f"{who}: {why}")
        if role == "cold":
            merge_cache(opts.cache_dir / folder, opts.cache_dir / SHARED_CACHE)

    try:
        for r in sorted({item[1] for item in order}):
            batch = [item for item in order if item[1] == r]
            # on one machine one job at a time; on Slurm a round's jobs at once, a node each
            groups = [[item] for item in batch] if kind == "local" else [batch]
            for group in groups:
                for j, item, fate in jobs.wait([(submit(item), item) for item in group], follow):
                    collect(j, item, fate)
    except (KeyboardInterrupt, launch.Unstartable, FwbenchError) as e:
        if isinstance(e, FwbenchError) and not jobs.t0:
            raise                           # refused before any job was submitted: nothing to cancel
        stopped = f"interrupted by {signals.of(e).name}" if isinstance(e, KeyboardInterrupt) else "stopped"
        with signals.held():
            live = dict(jobs.live)
            for jid, (_, item) in live.items():   # what the running jobs did up to now, before they go
                if jobs.ran(jid):
                    follow(item)
            cancelled = jobs.cancel()
            for jid, (j, item) in live.items():
                if jobs.ran(jid):
                    unit, repeat, role, _ = item
                    done[item] = write_failed(unit, opts, out, f"{stopped} (fwbench run was stopped; {kind} job {jid} "
                                              "cancelled)", repeat, role, watches[item])
            rest = [item for item in order if item not in done]
            for unit, repeat, role, _ in rest:
                done[(unit, repeat, role, _)] = write_absent(
                    unit, opts, out, f"not run: fwbench run was {stopped} before {unit} started", repeat, role)
        progress.line(f"{stopped}: cancelled {kind} job(s) {', '.join(cancelled) or 'none'}; results so far are "
                      f"in {out}; not run: "
                      f"{', '.join(process_names(u, r, opts.repeats)[1] for u, r, _, _ in rest) or 'none'}")
        if isinstance(e, KeyboardInterrupt):
            raise signals.of(e) from None
        raise FwbenchError(f"{e}; cancelled the run's jobs, results so far in {out}") from None
    return [done[item] for item in order if item in done]


def write_failed(unit: str, opts: RunOptions, out: Path, why: str, repeat: int | None = None,
                 role: str | None = None, state: "_Watch | None" = None) -> Path:
    """The result file of a process that died without writing one and without its runner
    (a submitit job killed or out of time): rebuilt from its event stream, the case it was
    running and those it never reached `failed` with `why`. With `state` (the stream as
    followed so far, for a job fwbench run itself cancelled), always this rebuild: the job's
    runner may have written its own on the way down, blaming the SIGTERM Slurm sent."""
    name, label = process_names(unit, repeat, opts.repeats)
    events = out / f".{name}.events.jsonl"
    own = _read_json(out / name) if not events.exists() and state is None else None
    if own and (own.get("machine_info") or {}).get("fwbench", {}).get("run_id") == opts.run_id:
        return out / name           # the job's own runner kept its results before the job ended
    if state is None:
        state = _Watch(label, Progress(io.StringIO()))     # its cases were said as they finished
    state.read(events)
    doc = state.rebuild(unit, opts, why, repeat, role)
    for p in (events, out / f".{name}.benchmark.json.tmp"):
        p.unlink(missing_ok=True)
    return save_json(out / name, doc, Progress())


def write_absent(fw: str, opts: RunOptions, out: Path, reason: str | None = None,
                 repeat: int | None = None, role: str | None = None) -> Path:
    """A result file that says only that `fw` (its process `repeat`, of compile-cache `role`,
    in a run of several) did not run (by default: it is missing), so the report names it."""
    out.mkdir(parents=True, exist_ok=True)
    reason = reason or absent_reason(split_unit(fw)[0])
    state = _Watch(fw, Progress())
    state.missing = {split_unit(fw)[0]: reason}
    doc = state.rebuild(fw, opts, "not run", repeat, role)
    doc["machine_info"]["fwbench"].update(frameworks={}, gemm_note=None, ended_by=None)
    doc["fwbench"]["note"] = f"written by fwbench run: {reason}"
    return save_json(out / process_names(fw, repeat, opts.repeats)[0], doc, Progress())


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
    opts.suite = atomic.absolute(opts.suite or benchmarks_dir())
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

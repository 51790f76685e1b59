"""Each process's result file: Progress (a line per finished case), Watch (a process's event
stream followed as it is written, and the result file rebuilt from it when the process ends
early: finished cases keep their timings, the rest are `failed` with the reason), `keep` (a
process's own file or that rebuild, moved into place atomically), `write_failed` and
`write_absent` (the file of a process that died with its runner, or never ran)."""
from __future__ import annotations

import datetime
import io
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from reports.commands import checkout
from reports.commands.checkout import NO_SUCH_MODE, absent_reason, pytest_benchmark_version, version_of
from reports.commands.plan import RunOptions, log_file, preset_for, process_names, split_unit
from reports.measures import stats
from reports.util import atomic
from workloads.base import FwbenchError, available_cpus, git_commit
from workloads.case import FRAMEWORKS  # noqa: F401  (fwbench's frameworks, in report order; the CLI reads it here)
from workloads.record import SCHEMA_VERSION, empty, not_its_api, not_reached

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


def unrecorded(paths: list[Path], out: Path) -> str | None:
    """None when some result file of the run holds a record; else one line saying so and
    where the first process's log is (with its last telling line), for the CLI to exit on."""
    if not paths or any(_records(p) for p in paths):
        return None
    log = log_file(out, paths[0].name)
    if not log.is_file() and (out / "submitit").is_dir():     # a job that died before its process started
        log = out / "submitit"
    last = log_tail(log) if log.is_file() else ""
    return (f"no process of the run wrote a record ({len(paths)} result file(s) in {out}, none with a case): "
            f"the first process's log is {log}" + (f" (it ends: {last})" if last else ""))


def _records(path: Path) -> int:
    """How many cases a result file records (timed ones and fwbench.records)."""
    doc = read_json(path) or {}
    top = doc.get("fwbench") if isinstance(doc.get("fwbench"), dict) else {}
    return len(doc.get("benchmarks") or []) + len(top.get("records") or [])


def keep(fw: str, opts: RunOptions, out: Path, rc: int, ended: str | None, state: "Watch",
          progress: Progress, tmp: Path, log_path: Path, repeat: int | None = None, role: str | None = None) -> Path:
    """Turn what the process left into `<fw>.json` (`<fw>-<repeat>.json` in a run of several
    processes per framework): its own JSON when it wrote a whole one, else one rebuilt from
    the event stream; say what ended it."""
    name, label = process_names(fw, repeat, opts.repeats)
    final = out / name
    last = log_tail(log_path)
    if rc == 4 and ended is None:       # pytest usage error: a bad option value, not a framework failure
        tmp.unlink(missing_ok=True)
        raise FwbenchError(f"pytest refused the options: {_usage_error(log_path) or last} (log: {log_path})")
    doc = read_json(tmp)
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
        why = f"pytest-benchmark wrote no result JSON ({last or 'see the log'})"
    elif rc in (0, 1, 5):
        why = "produced no timed case" if rc != 5 else "collected no benchmark case"
    elif rc < 0:
        why = f"process killed by {signal.Signals(-rc).name}"
    else:
        why = f"process exited with code {rc}"
    if last and not ended and rc not in (0, 1, 5):
        why += f": {last}"
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


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def log_tail(path: Path) -> str:
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


class Watch:
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
        host = checkout.host_info(fw, threads, device)
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
                "datetime": date, "version": pytest_benchmark_version(),
                "fwbench": {"schema": SCHEMA_VERSION, "records": records, "missing": missing,
                            "note": f"rebuilt by fwbench run from the event stream: {unit} {why}"}}


def write_failed(unit: str, opts: RunOptions, out: Path, why: str, repeat: int | None = None,
                 role: str | None = None, state: "Watch | None" = None) -> Path:
    """The result file of a process that died without writing one and without its runner
    (a submitit job killed or out of time): rebuilt from its event stream, the case it was
    running and those it never reached `failed` with `why`. With `state` (the stream as
    followed so far, for a job fwbench run itself cancelled), always this rebuild: the job's
    runner may have written its own on the way down, blaming the SIGTERM Slurm sent."""
    name, label = process_names(unit, repeat, opts.repeats)
    events = out / f".{name}.events.jsonl"
    own = read_json(out / name) if not events.exists() and state is None else None
    if own and (own.get("machine_info") or {}).get("fwbench", {}).get("run_id") == opts.run_id:
        return out / name           # the job's own runner kept its results before the job ended
    if state is None:
        state = Watch(label, Progress(io.StringIO()))     # its cases were said as they finished
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
    state = Watch(fw, Progress())
    state.missing = {split_unit(fw)[0]: reason}
    doc = state.rebuild(fw, opts, "not run", repeat, role)
    doc["machine_info"]["fwbench"].update(frameworks={}, gemm_note=None, ended_by=None)
    doc["fwbench"]["note"] = f"written by fwbench run: {reason}"
    return save_json(out / process_names(fw, repeat, opts.repeats)[0], doc, Progress())


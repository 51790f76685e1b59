"""Where the processes of a run execute: `fwbench run --launcher ...`.

local           (default) the runner starts each process itself, one at a time, on this machine.
slurm           each process (framework unit, repeat) is a Slurm job submitted through submitit,
                asking for a whole node (--exclusive --mem=0, one task): no two timed processes
                ever share a machine. `SlurmOptions` adds what sites need: partition, account,
                QoS, time limit (default: --timeout-s with a margin, `time_limit`), GPUs per
                node, memory, and any other sbatch option passed through.
submitit-local  the same jobs through submitit's local executor, one at a time (a local
                machine is one machine: jobs in parallel would time each other).
submitit        slurm where `sbatch` is on the PATH, else submitit-local (the choice is said
                on stderr; name slurm or submitit-local to choose).

The schedule's rounds are kept: a round's jobs are submitted together (on Slurm they run on
different nodes at once), and the next round starts when they have ended, so every warm
process finds the cache its cold ones filled (the run folder and the compile-cache folder
must then be on a filesystem the nodes share: the hand-over happens on the submitting host).
Each job writes its JSON into the run's folder, with the machine it ran on and its start and
end (machine_info.fwbench.job); a job that dies (killed, cancelled, out of time) leaves a
result file rebuilt from its event stream, its unfinished cases `failed` with the job's fate,
and the other jobs' results stand.

`Jobs` watches a run's jobs from the submitting host: their state from squeue (never sacct,
which needs Slurm's accounting database), a line per change and a summary a minute on stderr;
a job pending on a reason that cannot resolve (`UNRESOLVABLE`) stops the run (`Unstartable`);
`cancel` ends every job of the run (scancel), which fwbench run does on Ctrl-C, SIGTERM or
SIGHUP. sbatch's refusal is one line with sbatch's own words; submitit's own log lines go to
<run>/submitit/submitit.log, not the terminal. Why submitit and Slurm: docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import json
import logging
import math
import os
import re
import shutil
import socket
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

from workloads.base import FwbenchError

LAUNCHERS = ("local", "slurm", "submitit-local", "submitit")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def job_info(start: str) -> dict[str, Any]:
    """Where and when a job ran: its host, start and end, and the scheduler's job id."""
    return {"host": socket.gethostname(), "start": start, "end": now(),
            "job_id": os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID")}


def stamp(path: Path, info: dict[str, Any]) -> None:
    """Add `info` to a result file as machine_info.fwbench.job."""
    doc = json.loads(Path(path).read_text())
    doc.setdefault("machine_info", {}).setdefault("fwbench", {})["job"] = info
    Path(path).write_text(json.dumps(doc))


def kind_of(launcher: str) -> str:
    """Where a submitit launcher's jobs run: 'slurm' or 'local' (see the module's docstring)."""
    if launcher == "submitit":
        return "slurm" if shutil.which("sbatch") and shutil.which("srun") else "local"
    if launcher == "slurm" and not (shutil.which("sbatch") and shutil.which("srun")):
        raise FwbenchError("--launcher slurm needs Slurm's sbatch and srun on the PATH (a login node of the "
                           "cluster); --launcher submitit-local runs the jobs on this machine")
    return "slurm" if launcher == "slurm" else "local"


@dataclasses.dataclass
class SlurmOptions:
    """What a Slurm job asks for beyond one whole node: sbatch's options of the same names."""
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None              # sbatch --time as given (default: time_limit of the run)
    gpus_per_node: int | None = None
    mem: str = "0"                       # with --exclusive: all the node's memory
    sbatch: list[str] = dataclasses.field(default_factory=list)   # any other option: --name=value, --flag

    def given(self) -> list[str]:
        """The options set away from their defaults, as the CLI spells them."""
        d = SlurmOptions()
        return [f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(d, f.name)]


def sbatch_extra(options: list[str]) -> dict[str, Any]:
    """--sbatch pass-through options as submitit's additional parameters: '--constraint=a100'
    -> {'constraint': 'a100'}, '--requeue' -> {'requeue': True}."""
    extra: dict[str, Any] = {}
    for opt in options:
        m = re.fullmatch(r"--([A-Za-z][\w-]*)(?:=(.*))?", opt.strip(), re.DOTALL)
        if not m:
            raise FwbenchError(f"--sbatch takes sbatch's long options as --name=value or --flag, one per --sbatch "
                               f"(e.g. --sbatch=--constraint=a100), got {opt!r}")
        extra[m.group(1)] = True if m.group(2) is None else m.group(2)
    return extra


def time_limit(timeout_s: float) -> int:
    """A job's time limit in minutes: its process may run --timeout-s, plus 10% and 5 minutes
    for the job's start, imports and a result rebuilt after a crash (host_info: up to 3 minutes)."""
    return math.ceil(timeout_s * 11 / 600) + 5      # 11/600, not 1.1/60: 3600 s is 66 minutes, not 67


def executor(folder: Path, kind: str, timeout_s: float, slurm: SlurmOptions | None = None) -> Any:
    """A submitit executor for `kind` ('slurm': one whole node per job; 'local')."""
    try:
        import submitit
    except ImportError:
        raise FwbenchError("--launcher slurm/submitit needs submitit: pip install -e '.[cluster]'") from None
    quiet_submitit(folder)
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm" if kind == "slurm" else "local")
    params: dict[str, Any] = {"timeout_min": time_limit(timeout_s), "nodes": 1, "tasks_per_node": 1}
    if kind == "slurm":
        s = slurm or SlurmOptions()
        extra = {"mem": s.mem, **({"time": s.time} if s.time else {}), **sbatch_extra(s.sbatch)}
        params.update(slurm_exclusive=True, slurm_job_name="fwbench", slurm_additional_parameters=extra,
                      **{f"slurm_{k}": v for k, v in (("partition", s.partition), ("account", s.account),
                                                       ("qos", s.qos)) if v},
                      **({"gpus_per_node": s.gpus_per_node} if s.gpus_per_node else {}))
    ex.update_parameters(**params)
    return ex


def quiet_submitit(folder: Path) -> None:
    """submitit's log lines into <folder>/submitit.log instead of the terminal: fwbench run
    says itself what the user needs (submissions, states, failures)."""
    folder.mkdir(parents=True, exist_ok=True)
    log = logging.getLogger("submitit")
    for h in list(log.handlers):
        log.removeHandler(h)
    handler = logging.FileHandler(folder / "submitit.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.propagate = False


def sbatch_message(text: str) -> str:
    """sbatch's own words, one line: its error lines, without 'Try sbatch --help'."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("Try ")]
    errs = [ln for ln in lines if ln.startswith("sbatch:")]
    return "; ".join(errs or lines[-2:]) or "no message"


Item = tuple[str, int, str, str]     # (unit, repeat, role, cache folder): one process of the schedule


class State(NamedTuple):
    """A Slurm job as squeue shows it."""
    job_id: str
    state: str            # PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, ...
    elapsed: str
    reason: str
    nodes: str
    partition: str
    time_limit: str


ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING",
          "STAGE_OUT", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD")
# Pending reasons that do not resolve by waiting: the job asks what its partition, account or
# QoS never grants, or a node that is not there (squeue's %r; Slurm's "Job Reason Codes"). A
# run stops on one that holds for SETTLE_S (the controller may name a passing reason first:
# PartitionConfig for a few seconds before PartitionTimeLimit, seen on Slurm 22.05).
SETTLE_S = 10.0
UNRESOLVABLE = re.compile(r"(Partition(TimeLimit|NodeLimit)|ReqNodeNotAvail|BadConstraints|"
                          r"Invalid(Account|QOS)|DependencyNeverSatisfied|(QOS|Assoc)Max\w*PerJob\w*)")


class Unstartable(Exception):
    """A job of the run pends on a reason that cannot resolve; the message says which and what to do."""


def squeue(ids: list[str]) -> dict[str, State] | None:
    """The jobs' states from squeue (finished ones too, while the controller keeps them); None
    when squeue cannot answer. A job it no longer knows is absent from the answer."""
    if not ids:
        return {}
    try:
        r = subprocess.run(["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", "%i|%T|%M|%r|%N|%P|%l"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return {} if "Invalid job id" in r.stderr else None
    out = {}
    for ln in r.stdout.splitlines():
        f = ln.split("|")
        if len(f) == 7:
            out[f[0]] = State(*f)
    return out


def partition_limit(partition: str) -> str:
    """A partition's MaxTime as sinfo says it ('' when it cannot)."""
    try:
        r = subprocess.run(["sinfo", "-h", "-p", partition, "-o", "%l"], capture_output=True, text=True, timeout=60)
        return r.stdout.split()[0] if r.returncode == 0 and r.stdout.split() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def unstartable(st: State) -> str:
    """What to say of a job pending on an unresolvable reason."""
    text = f"slurm job {st.job_id} cannot start: it is pending on {st.reason}"
    if st.reason.startswith("PartitionTimeLimit"):
        limit = partition_limit(st.partition)
        text += (f" (it asks --time={st.time_limit}, partition {st.partition} allows "
                 f"{limit or 'less'}: pass a shorter --time or --timeout-s, or another --partition)")
    elif st.reason.startswith(("PartitionNodeLimit", "ReqNodeNotAvail", "BadConstraints")):
        text += f" (partition {st.partition} cannot give it the node it asks for: check --partition and --sbatch)"
    return text


class Jobs:
    """A run's jobs of one kind ('slurm' or 'local'): submit, wait (progress on `line`), cancel."""

    def __init__(self, ex: Any, kind: str, line: Callable[[str], None], poll_s: float = 2.0,
                 report_s: float = 60.0, grace_s: float = 15.0) -> None:
        self.ex, self.kind, self.line = ex, kind, line
        self.poll_s, self.report_s, self.grace_s = poll_s, report_s, grace_s
        self.live: dict[str, tuple[Any, Item]] = {}      # job id -> (job, item): submitted, not yet ended
        self.started: set[str] = set()                   # ids seen running
        self.said: dict[str, str] = {}                   # id -> the state last said
        self.t_report = time.monotonic()
        self.t0: dict[str, float] = {}

    def submit(self, item: Item, fn: Callable[..., Any], *args: Any) -> Any:
        """Submit fn(*args) as a job; sbatch's refusal as one line (FwbenchError)."""
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():   # submitit prints sbatch's
            warnings.simplefilter("ignore")                                            # stderr: ours says it once
            try:
                j = self.ex.submit(fn, *args)
            except Exception as e:       # submitit's FailedJobError: sbatch exited non-zero
                if self.kind != "slurm":
                    raise
                raise FwbenchError(f"sbatch refused the job: {sbatch_message(str(e))}") from None
        self.live[str(j.job_id)] = (j, item)
        self.t0[str(j.job_id)] = time.monotonic()
        if self.kind == "local":
            self.started.add(str(j.job_id))              # the local executor starts it at once
        return j

    def ran(self, job_id: str) -> bool:
        return job_id in self.started

    def wait(self, batch: list[tuple[Any, Item]], tick: Callable[[Item], None] = lambda item: None
             ) -> Iterator[tuple[Any, Item, str | None]]:
        """Yield (job, item, fate) as each job of `batch` ends: fate None when it left submitit's
        result (job.result() returns or raises the job's error), else how it ended without one
        (Slurm's final state); `tick(item)` each poll while its job runs (the runner follows its
        cases). Raises Unstartable for a job pending on a reason that cannot resolve."""
        waiting = list(batch)
        gone: dict[str, float] = {}           # id -> when squeue first showed it ended without a result
        stuck: dict[str, tuple[str, float]] = {}   # id -> (unresolvable reason, since when)
        while waiting:
            states = squeue([str(j.job_id) for j, _ in waiting]) if self.kind == "slurm" else None
            for j, item in list(waiting):
                jid = str(j.job_id)
                if self.kind == "local":
                    ended = j.done()
                    fate = None
                else:
                    st = (states or {}).get(jid)
                    if st is not None:
                        self._say(st)
                        if st.state not in ("PENDING", "CONFIGURING"):
                            self.started.add(jid)
                        if st.state == "PENDING" and UNRESOLVABLE.match(st.reason):
                            if stuck.get(jid, ("",))[0] != st.reason:
                                stuck[jid] = (st.reason, time.monotonic())
                            if time.monotonic() - stuck[jid][1] >= SETTLE_S:
                                raise Unstartable(unstartable(st))
                        else:
                            stuck.pop(jid, None)
                    ended = j.paths.result_pickle.exists()
                    fate = None
                    if not ended and states is not None and (st is None or st.state not in ACTIVE):
                        gone.setdefault(jid, time.monotonic())      # the result file may lag on a shared disk
                        ended = time.monotonic() - gone[jid] > self.grace_s
                        fate = st.state if st is not None else "ended (no longer known to squeue)"
                if ended:
                    waiting.remove((j, item))
                    self.live.pop(jid, None)
                    yield j, item, fate
            for j, item in waiting:
                if str(j.job_id) in self.started:
                    tick(item)
            if waiting:
                self._summary(states)
                time.sleep(self.poll_s)

    def _say(self, st: State) -> None:
        """A line when a job's state changes: pending (why), running (where), ended."""
        what = st.state + (f" ({st.reason})" if st.state == "PENDING" and st.reason not in ("None", "") else "")
        if self.said.get(st.job_id) != what:
            self.said[st.job_id] = what
            where = f" on {st.nodes}" if st.nodes and st.state != "PENDING" else ""
            self.line(f"slurm job {st.job_id}: {what}{where}, elapsed {st.elapsed}")

    def _summary(self, states: dict[str, State] | None) -> None:
        """Every report_s, one line on the jobs still going (state and elapsed time)."""
        if time.monotonic() - self.t_report < self.report_s:
            return
        self.t_report = time.monotonic()
        if self.kind == "slurm" and states is None:
            self.line("slurm: squeue does not answer; still waiting for the jobs' results")
            return
        parts = []
        for jid in self.live:
            st = (states or {}).get(jid)
            parts.append(f"job {jid} {st.state} {st.elapsed}" if st else
                         f"job {jid} running {time.monotonic() - self.t0[jid]:.0f} s")
        if parts:
            self.line(f"{self.kind}: " + "; ".join(parts))

    def cancel(self, wait_s: float = 120.0) -> list[str]:
        """End every job of the run still going (scancel on Slurm; SIGINT to a local job's
        process), and wait up to wait_s for them to end; the ids cancelled."""
        ids = list(self.live)
        if not ids:
            return []
        if self.kind == "slurm":       # Slurm sends SIGTERM, then SIGKILL after its KillWait
            subprocess.run(["scancel", *ids], capture_output=True, timeout=60)
        else:
            for j, _ in self.live.values():
                j.cancel(check=False)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.kind == "slurm":
                states = squeue(ids)
                if states is None or all(st.state not in ACTIVE for st in states.values()):
                    break
            elif all(j.done() for j, _ in self.live.values()):
                break
            time.sleep(0.5)
        return ids

"""The ranks of one data-parallel job step (reports.commands.distributed): started here as N
processes with fwbench's FWBENCH_DIST_* variables, or as one Slurm job step (srun); either
way one line says which rank ended the step badly and how, and the others are ended."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from reports.commands import checkout, launch
from workloads import distributed as wd
from workloads.base import FwbenchError

POLL_S = 0.1
GRACE_S = 5.0          # after a rank failed, what the others get between SIGTERM and SIGKILL
# srun's line for a task that ended badly: "srun: error: vm: task 1: Killed",
# "srun: error: vm: tasks 0-1: Exited with exit code 1"
SRUN_TASK = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.+)")



def free_ports(n: int) -> int:
    """A port p with p .. p+n-1 free here (TensorFlow's workers take port + rank)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = int(s.getsockname()[1])
        if p + n < 65536 and all(_free(p + i) for i in range(1, n)):
            return p
    raise FwbenchError(f"found no {n} free consecutive ports on this machine")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def rank_command(framework: str, workload: str, doc: Path, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "frameworks.distributed", framework, workload, "--out", str(doc), *args]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWBENCH_DIST_")
           and k not in ("XLA_FLAGS", "FWBENCH_SIMULATED_DEVICES", "TF_CONFIG")}
    env["PYTHONPATH"] = str(checkout.CHECKOUT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def _rank_error(parts: Path, rank: int) -> str | None:
    try:
        return (parts / f"rank{rank}.error").read_text().strip().splitlines()[0] or None
    except (OSError, IndexError):
        return None


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def _end(procs: list[subprocess.Popen[Any]]) -> None:
    """SIGTERM every rank still running (its process group), SIGKILL after GRACE_S."""
    for p in procs:
        if p.poll() is None:
            _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for p in procs:
        if p.poll() is None:
            _signal(p, signal.SIGKILL)
        p.wait()


def _signal(p: subprocess.Popen[Any], sig: int) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def launch_local(cmd: list[str], n: int, env: dict[str, str], timeout_s: float, parts: Path, log: Path) -> str | None:
    """The N ranks as processes of this machine; None when every rank ended normally, else
    the one line: which rank ended first and how (its own error line where it wrote one)."""
    from reports.commands.process import die_with_parent
    port = free_ports(n)
    hosts = ",".join(["127.0.0.1"] * n)
    procs = []
    with open(log, "w", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}  (x{n}, local, port {port})\n")
        out.flush()
        for r in range(n):
            e = _env({**env, wd.RANK: str(r), wd.SIZE: str(n), wd.HOSTS: hosts, wd.PORT: str(port)})
            procs.append(subprocess.Popen(cmd, cwd=checkout.CHECKOUT, env=e, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True, preexec_fn=die_with_parent))
        t0 = time.monotonic()
        failed: list[tuple[int, int]] = []         # (rank, rc) of the ranks that ended badly, in the order seen
        try:
            while True:
                codes = [p.poll() for p in procs]         # every rank, each time: none left unread
                bad = [(r, rc) for r, rc in enumerate(codes) if rc not in (None, 0)
                       and r not in {f for f, _ in failed}]
                # a signal from outside first (the cause; its peers then fail on a reset connection)
                failed += sorted(bad, key=lambda x: (x[1] >= 0, x[1] == -signal.SIGTERM, x[0]))
                if failed or all(rc is not None for rc in codes):
                    break
                if time.monotonic() - t0 > timeout_s:
                    left = [str(r) for r, p in enumerate(procs) if p.poll() is None]
                    _end(procs)
                    return f"timed out after {timeout_s:g} s (--timeout-s): rank(s) {', '.join(left)} still running"
                time.sleep(POLL_S)
        except BaseException:
            _end(procs)
            raise
        _end(procs)
    failed += [(r, p.returncode) for r, p in enumerate(procs) if p.returncode not in (None, 0)
               and r not in {f for f, _ in failed}]
    if not failed:
        return None
    rank, rc = failed[0]
    if rc < 0:
        return f"rank {rank} (127.0.0.1) was killed by {_signal_name(rc)}"
    return _rank_error(parts, rank) or f"rank {rank} (127.0.0.1) exited with code {rc}"


def srun_command(cmd: list[str], n: int, threads: int, timeout_s: float, label: str,
                 slurm: launch.SlurmOptions | None) -> list[str]:
    """srun's line for one job step: N tasks, one CPU-thread set each, the others killed when
    one ends badly, the step's time limit from --timeout-s (launch.time_limit), the run's
    Slurm options."""
    s = slurm or launch.SlurmOptions()
    opts = [f"--ntasks={n}", f"--cpus-per-task={threads}", "--kill-on-bad-exit=1", f"--job-name=fwbench-{label}",
            f"--time={s.time or launch.time_limit(timeout_s)}"]
    opts += [f"--{k}={v}" for k, v in (("partition", s.partition), ("account", s.account), ("qos", s.qos)) if v]
    if s.gpus_per_node:
        opts.append(f"--gpus-per-node={s.gpus_per_node}")
    opts += [o for o in s.sbatch]
    return ["srun", *opts, *cmd]


def srun_cause(text: str, parts: Path) -> str | None:
    """The first task srun says ended badly, as one line: the rank's own error line where it
    wrote one and srun saw it exit, else srun's words ('rank 1 (vm) ended: Killed, as srun
    reports it'); None when srun names no task."""
    lines = [m.groups() for m in SRUN_TASK.finditer(text)]
    if not lines:
        return None
    # The cause first: a task a signal ended from outside ("Killed", "Segmentation fault"; srun's
    # own ending of the others with --kill-on-bad-exit reads "Terminated"), then a task that exited
    # with an error (its peers' errors follow it: a connection reset), srun's order within each.
    rank_of = {"exit": 1, "Terminated": 2}
    host, tasks, what = min(lines, key=lambda g: rank_of.get("exit" if g[2].startswith("Exited") else g[2], 0))
    rank = int(re.split(r"[,\-]", tasks)[0])
    if what.startswith("Exited"):
        return _rank_error(parts, rank) or f"rank {rank} ({host}): {what} (srun)"
    return f"rank {rank} ({host}) ended: {what}, as srun reports it"


def launch_srun(cmd: list[str], n: int, env: dict[str, str], timeout_s: float, parts: Path, log: Path,
                threads: int, label: str, slurm: launch.SlurmOptions | None) -> str | None:
    """The N ranks as one Slurm job step (srun); None when it ended normally, else one line."""
    line = srun_command(cmd, n, threads, timeout_s, label, slurm)
    e = _env({**env, wd.PORT: str(free_ports(n))})
    with open(log, "w", encoding="utf-8") as out:
        out.write("$ " + " ".join(line) + "\n")
        out.flush()
        proc = subprocess.Popen(line, cwd=checkout.CHECKOUT, env=e, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:
            _end([proc])
            raise
        if timed_out:
            _end([proc])          # srun forwards SIGTERM to the tasks, then ends the step
    text = log.read_text(encoding="utf-8", errors="replace")
    if timed_out:
        return f"timed out after {timeout_s:g} s (--timeout-s)"
    if proc.returncode == 0:
        return None
    cause = srun_cause(text, parts)
    if cause:
        return cause
    said = [ln.strip() for ln in text.splitlines() if ln.startswith("srun: error:")]
    return f"srun exited with code {proc.returncode}" + (f": {said[0][len('srun: error:'):].strip()}" if said else "")

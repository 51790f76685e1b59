"""Where the processes of a run execute (issue 21): `fwbench run --launcher local|submitit`.

local      (default) the runner starts each process itself, one at a time, on this machine.
submitit   each process (framework unit, repeat) is a job submitted through submitit
           (https://github.com/facebookincubator/submitit): on Slurm when `srun` is on the
           PATH, each job asks for a whole node (--exclusive, one task), so no two timed
           processes ever share a machine; elsewhere submitit's local executor, one job at a
           time (a local machine is one machine: jobs in parallel would time each other).
           The schedule's rounds are kept: a round's jobs are submitted together (on Slurm
           they run on different nodes at once), and the next round starts when they have
           ended, so every warm process finds the cache its cold ones filled (the run's
           folder must then be on a filesystem the nodes share). Each job writes its JSON
           into the run's folder, with the machine it ran on and its start and end
           (machine_info.fwbench.job); a job that dies (killed, cancelled, out of time)
           leaves a result file rebuilt from its event stream, its unfinished cases
           `failed` with the job's fate, and the other jobs' results stand.

Why submitit and Slurm, and not Ray, Dask or pytest-xdist: docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import shutil
import socket
from pathlib import Path
from typing import Any, Callable

from workloads.base import FwbenchError

LAUNCHERS = ("local", "submitit")


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


def executor(folder: Path, timeout_s: float) -> tuple[Any, str]:
    """A submitit executor and its kind: Slurm where `srun` exists (whole nodes), else local."""
    try:
        import submitit
    except ImportError:
        raise FwbenchError("--launcher submitit needs submitit: pip install -e '.[cluster]'") from None
    slurm = shutil.which("srun") is not None
    ex = submitit.AutoExecutor(folder=folder, cluster=None if slurm else "local")
    params: dict[str, Any] = {"timeout_min": math.ceil(timeout_s / 60) + 5, "nodes": 1, "tasks_per_node": 1}
    if slurm:
        params.update(slurm_exclusive=True, slurm_job_name="fwbench")
    ex.update_parameters(**params)
    return ex, "slurm" if slurm else "local"


Item = tuple[str, int, str, str]     # (unit, repeat, role, cache folder): one process of the schedule


def run_rounds(order: list[Item], kind: str, submit: Callable[[Item], Any],
               collect: Callable[[Any, Item], Path]) -> list[Path]:
    """Every process of `order` as a job, round by round: on one machine one job at a time,
    on Slurm a round's jobs at once (each on a node of its own); `collect` waits for a job
    and returns its result file."""
    written: list[Path] = []
    for r in sorted({item[1] for item in order}):
        batch = [item for item in order if item[1] == r]
        if kind == "local":
            for item in batch:
                written.append(collect(submit(item), item))
        else:
            jobs = [(submit(item), item) for item in batch]
            written += [collect(j, item) for j, item in jobs]
    return written

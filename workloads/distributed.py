"""Data parallel across processes, framework-free: where a process stands in a
multi-process run (its rank, the world's size, every rank's host, the port its runtime joins
on) from the launcher's environment, and the result document the run's rank 0 writes.

One process per device, as a user who outgrows one machine runs it: started by the cluster
(`srun --ntasks=N`, Slurm's environment) or, on one machine, by fwbench's own launcher
(reports/commands/distributed.py, FWBENCH_DIST_* variables), then joined by each
framework's own distributed runtime (frameworks/<fw>/distributed.py: torch.distributed from
the environment, jax.distributed.initialize, MultiWorkerMirroredStrategy from TF_CONFIG).
The program every rank runs is frameworks/harness/distributed.py (`python -m
frameworks.distributed`); the report reads the documents (reports/measures/distributed.py).

Ports: the runtime's coordinator listens on `port` at rank 0's host (torch's store, JAX's
coordination service); TensorFlow's workers each listen on `port + rank` (ranks sharing a
host need ports of their own).
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from workloads.base import FwbenchError

KIND = "fwbench-distributed"      # a distributed result document's `kind`
SCHEMA = 1
FOLDER = "distributed"            # the run folder's sub-folder of distributed documents
# The variables fwbench's local launcher sets (reports/commands/distributed.py).
RANK, SIZE, HOSTS, PORT = "FWBENCH_DIST_RANK", "FWBENCH_DIST_SIZE", "FWBENCH_DIST_HOSTS", "FWBENCH_DIST_PORT"
# Seconds a runtime waits for its peers (to join, and inside a collective) before it fails;
# FWBENCH_DIST_TIMEOUT_S sets another (peer_timeout_s).
PEER_TIMEOUT_S = 120.0


def peer_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """FWBENCH_DIST_TIMEOUT_S, else PEER_TIMEOUT_S; one line for a value that is no positive number."""
    text = (os.environ if env is None else env).get("FWBENCH_DIST_TIMEOUT_S")
    if not text:
        return PEER_TIMEOUT_S
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0:
        raise FwbenchError(f"FWBENCH_DIST_TIMEOUT_S must be a positive number of seconds, got {text!r}")
    return v


@dataclass(frozen=True)
class World:
    """This process's place in the run: rank r of `size`, every rank's host (rank order),
    the coordinator's port, who started it ('srun' or 'local') and Slurm's job and step."""
    rank: int
    size: int
    hosts: tuple[str, ...]
    port: int
    launcher: str
    job: str | None = None

    @property
    def coordinator(self) -> str:
        """rank 0's host: where torch's store and JAX's coordination service listen."""
        return self.hosts[0]

    @property
    def local_rank(self) -> int:
        """This rank's index among the ranks on its host."""
        return self.hosts[:self.rank].count(self.hosts[self.rank])

    def worker(self, rank: int) -> str:
        """host:port of a rank's own server (TensorFlow's workers): port + rank."""
        return f"{self.hosts[rank]}:{self.port + rank}"


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list -> host names: 'vm' -> ['vm'], 'n[01-03,7],gpu5' ->
    ['n01', 'n02', 'n03', 'n7', 'gpu5'] (a range keeps its zero padding), what `scontrol
    show hostnames` prints."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text.strip()):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        head, ranges, tail = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise FwbenchError(f"cannot read Slurm's host list {text!r} (range {r!r})")
            for i in range(int(lo), int(hi or lo) + 1):
                out += expand_hostlist(f"{head}{str(i).zfill(len(lo))}{tail}")
    return out


def tasks_per_node(text: str) -> list[int]:
    """SLURM_STEP_TASKS_PER_NODE -> tasks per node in node order: '2(x3),1' -> [2, 2, 2, 1]."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise FwbenchError(f"cannot read SLURM_STEP_TASKS_PER_NODE {text!r}")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise FwbenchError(f"{name} must be an integer, got {env.get(name)!r}") from None


def slurm_port(job: str, step: str) -> int:
    """A port every rank of a job step agrees on without talking: 29500 + a number from the
    job and step ids (FWBENCH_DIST_PORT, which fwbench's srun launch passes, wins over it)."""
    return 29500 + (int(job) * 97 + int(step) * 13) % 20000


def world(env: Mapping[str, str] | None = None) -> World:
    """This process's World from its environment: fwbench's local launcher (FWBENCH_DIST_*)
    or Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST and
    SLURM_STEP_TASKS_PER_NODE, tasks placed block-wise as srun does by default). One line
    saying how to start it otherwise."""
    env = os.environ if env is None else env
    if RANK in env:
        hosts = tuple(h for h in env.get(HOSTS, "").split(",") if h)
        w = World(_int(env, RANK), _int(env, SIZE), hosts, _int(env, PORT), "local")
    elif "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST", "")
        try:
            names = expand_hostlist(nodes)
        except FwbenchError:            # a form the parser does not know: Slurm's own tool
            names = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True,
                                   timeout=60).stdout.split()
        counts = tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE", str(_int(env, "SLURM_NTASKS"))))
        hosts = tuple(h for h, k in zip(names, counts) for _ in range(k))
        job, step = env.get("SLURM_JOB_ID", "0"), env.get("SLURM_STEP_ID", "0")
        port = _int(env, PORT) if PORT in env else slurm_port(job, step)
        w = World(_int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS"), hosts, port, "srun", f"{job}.{step}")
    else:
        raise FwbenchError("not started as one of several processes: run it under Slurm (srun --ntasks=N python -m "
                           "frameworks.distributed ...) or through fwbench run --processes-per-case N")
    if not 0 <= w.rank < w.size or len(w.hosts) != w.size:
        raise FwbenchError(f"inconsistent world: rank {w.rank} of {w.size} with {len(w.hosts)} host(s) "
                           f"({','.join(w.hosts)})")
    return w


def parts_dir(doc: "os.PathLike[str] | str") -> "Path":
    """Beside a document, the folder of its ranks' part files, pid files and error lines:
    .<name>.ranks/ (the launcher reads the errors; rank 0 merges the parts)."""
    doc = Path(doc)
    return doc.parent / f".{doc.stem}.ranks"


def document_name(framework: str, processes: int, repeat: int | None) -> str:
    """A distributed document's file name: torch-p2-0.json (framework, processes, repeat)."""
    return f"{framework}-p{processes}" + (f"-{repeat}" if repeat is not None else "") + ".json"

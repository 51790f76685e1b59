"""The program every rank of a multi-process data-parallel run executes, as
`python -m frameworks.distributed` (frameworks/distributed.py parses its options), started
once per device by srun or by fwbench's local launcher (reports/commands/distributed.py).

Every rank, in step with the others (the framework's own barrier between phases):

1. joins the run with its framework's distributed runtime (frameworks/<fw>/distributed.py:
   torch.distributed from the environment, jax.distributed.initialize with gloo
   collectives, MultiWorkerMirroredStrategy), one CPU device per process, its threads
   pinned to CPUs of its own where the launcher did not pin it;
2. per case (a data-parallel strategy of the train step): builds a one-device model and its
   data-parallel form from the same numpy parameters and checks them on the same global
   batches (workloads.parallel.check: the reduced gradients before clipping on the first
   batch, then the parameters after CHECK_STEPS AdamW steps), on every rank, since a rank
   whose replica drifts may be any rank (the "skip" mutation: the last one); a case whose
   check fails on some rank is `failed`, never timed;
3. times the step (`rounds` after `warmup`), the same step without its synchronisation
   (the no-sync probe: the compute-only reference), and the step's collectives alone (its
   all-reduce bytes in its number of operations, each framework's own all-reduce);
4. after the cases, a sweep of all-reduces of growing size, for the alpha-beta fit
   (workloads.commmodel).

Each rank writes what it measured to a part file beside the document; rank 0 merges the
parts into the document after every case (`cases` grows, `running` names the case under
way), so a rank that dies leaves every finished case recorded. A rank that fails writes one
line (`rank<k>.error`) before it exits, which the launcher reports.
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workloads import distributed as wd
from workloads import parallel
from workloads.base import Unsupported, error_line, git_commit
from workloads.case import Case, Placement

# All-reduce sizes of the alpha-beta sweep, bytes: 4 B to 4 MiB in steps of 4x (float32).
SWEEP = (4, 64, 1024, 16 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024)


@dataclass
class Plan:
    framework: str
    workload: str
    out: Path                        # the document rank 0 writes
    mode: str | None                 # None: the framework's data-parallel mode (frameworks/<fw>/distributed.py MODE)
    strategies: tuple[str | None, ...] = (None,)
    preset: str = "tiny"
    device: str = "cpu"
    threads: int = 1                 # per process
    rounds: int = 10
    warmup: int = 2
    check_only: bool = False
    sweep: tuple[int, ...] = SWEEP
    sweep_repeats: int = 10
    seed: int = 0
    run: dict[str, Any] = field(default_factory=dict)   # the launcher's: run_id, repeat, role


def write_json(path: Path, doc: Any) -> None:
    """A JSON file a reader never sees half of (a temporary file in its folder, renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, default=_plain))
    os.replace(tmp, path)


def _plain(x: Any) -> Any:
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"{type(x).__name__} is not JSON")


def pin(world: wd.World, threads: int) -> str:
    """This process's threads on CPUs of its own: set_threads (which pins to the first CPUs
    allowed), then CPUs [local_rank x threads, ...) of those the process may use, unless the
    launcher already bound the task to fewer CPUs than the machine has, or FWBENCH_CPUS named
    fewer (workloads.base.restrict_cpus): then they are its."""
    from frameworks.base import restrict_cpus, set_threads
    restrict_cpus()
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    set_threads(threads)
    if not allowed:
        return f"{threads} thread(s), not pinned (no CPU affinity on this system)"
    if len(allowed) < (os.cpu_count() or len(allowed)):
        return f"{threads} thread(s) on CPUs {sorted(os.sched_getaffinity(0))} of the {len(allowed)} the launcher gave"
    mine = sorted({allowed[(world.local_rank * threads + i) % len(allowed)] for i in range(threads)})
    os.sched_setaffinity(0, mine)
    shared = world.hosts.count(world.hosts[world.rank]) * threads > len(allowed)
    return (f"{threads} thread(s) pinned to CPU(s) {mine} (local rank {world.local_rank})"
            + (", sharing cores with other ranks of this host" if shared else ""))


class Rank:
    """One rank's run: its runtime, its part files, and (rank 0) the document."""

    def __init__(self, plan: Plan, world: wd.World) -> None:
        self.plan, self.world = plan, world
        self.parts = wd.parts_dir(plan.out)
        self.parts.mkdir(parents=True, exist_ok=True)
        write_json(self.parts / f"rank{world.rank}.pid", {"pid": os.getpid(), "host": socket.gethostname()})
        self.pinning = pin(world, plan.threads)
        import frameworks
        self.adapter = frameworks.load(plan.framework)
        self.adapter.configure(plan.threads)
        module = importlib.import_module(f"frameworks.{plan.framework}.distributed")
        plan.mode = plan.mode or module.MODE
        self.rt = module.start(world, plan.device)
        self.build = importlib.import_module(f"frameworks.{plan.framework}.{plan.workload}").build
        import workloads
        self.W = workloads.get(plan.workload)
        self.p = self.W.preset(plan.preset)
        self.doc = self._header() if world.rank == 0 else None

    # -- the document (rank 0) ----------------------------------------------------------------

    def _header(self) -> dict[str, Any]:
        from frameworks.harness.machine import cpu_name, machine_fingerprint
        fp = machine_fingerprint(None)
        p, w = self.plan, self.world
        return {"kind": wd.KIND, "schema": wd.SCHEMA, "framework": p.framework,
                "framework_version": self.adapter.version(), "workload": p.workload, "task": "train_step",
                "mode": p.mode, "preset": p.preset, "device": p.device, "processes": w.size,
                "threads_per_process": p.threads, "global_batch": self.p.batch * w.size, "device_batch": self.p.batch,
                "launcher": w.launcher, "job": w.job, "hosts": list(w.hosts), "joined": self.rt.joined,
                "pinning": self.pinning, "cpu": cpu_name(), "cpus": os.cpu_count(),
                "machine_id": fp["machine_id"], "fwbench_commit": git_commit(),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "rounds": p.rounds, "warmup": p.warmup, "check_only": p.check_only,
                "mutation": parallel.mutation(), "planned": [s for s in p.strategies], "cases": [],
                "running": None, "sweep": None, "complete": False, **p.run}

    def _merge(self, key: str) -> list[dict[str, Any]]:
        """Every rank's part `key`, in rank order (after a barrier: every rank wrote its own)."""
        return [json.loads((self.parts / f"{key}.rank{r}.json").read_text()) for r in range(self.world.size)]

    def _share(self, key: str, mine: dict[str, Any]) -> list[dict[str, Any]]:
        """Write this rank's part, wait for every rank's, and read them all."""
        write_json(self.parts / f"{key}.rank{self.world.rank}.json", mine)
        self.rt.barrier()
        return self._merge(key)

    def _save(self) -> None:
        if self.doc is not None:
            write_json(self.plan.out, self.doc)

    # -- a case ---------------------------------------------------------------------------------

    def case(self, i: int, strategy: str | None) -> None:
        plan, w = self.plan, self.world
        if self.doc is not None:
            self.doc["running"] = i
            self._save()
        case = Case(plan.framework, plan.workload, "train_step", plan.mode, strategy,
                    placement=Placement(plan.device, w.size))
        try:
            with self.adapter.own_precision():     # fwbench's float32 precision, as around a harness case
                mine = self._measure(case)
        except Unsupported as e:          # the same on every rank: a form this framework does not build
            mine = {"status": "unsupported", "reason": str(e)}
        mine.update(rank=w.rank, host=w.hosts[w.rank])
        ranks = self._share(f"case{i}", mine)
        if self.doc is not None:
            self.doc["cases"].append(summarise(case, ranks, self.W.init_params(self.p.config, seed=plan.seed)))
            self.doc["running"] = None
            self._save()

    def _measure(self, case: Case) -> dict[str, Any]:
        plan, w, rt = self.plan, self.world, self.rt
        cfg = self.p.config
        params = self.W.init_params(cfg, seed=plan.seed)
        spec = self.W.task_spec(cfg, self.p.batch * w.size, "train_step", seed=plan.seed)
        batches = [tuple(self.adapter.asarray(a, plan.device) for a in inp) for inp in spec.inputs]
        single = self.adapter.build(case.but(placement=Placement(plan.device),
                                             strategy=parallel.one_device_strategy(case.strategy)), cfg, params)
        dp = rt.data_parallel(self.adapter, self.build, cfg, params, case)
        t0 = time.perf_counter()
        eq = parallel.check(single, dp, batches, dp.place_inputs)
        why = parallel.failure(plan.workload, w.size, eq)
        out: dict[str, Any] = {"grad_rel": eq.grad_rel, "rel": eq.rel, "check_s": time.perf_counter() - t0,
                               "failure": why}
        # every rank's check, before anything is timed: a rank that failed fails the case on all
        checks = self._share(f"check-{case.strategy}", {"failure": why})
        failed = [f"rank {r}: {c['failure']}" for r, c in enumerate(checks) if c["failure"]]
        if failed:
            return {**out, "status": "failed", "reason": "; ".join(failed)}
        if plan.check_only:
            return {**out, "status": "checked"}
        placed = dp.place_inputs(*batches[0])
        out["step_s"] = self._time(dp, placed)
        coll = dp.collectives(*placed)
        out["collectives_source"] = coll.pop("source", None) or coll.pop("reason", None)
        out["collectives"] = coll
        if case.strategy is None:          # the compute-only reference, and the collectives alone
            probe = rt.data_parallel(self.adapter, self.build, cfg, params, case.but(strategy=parallel.NO_SYNC))
            out["nosync_s"] = self._time(probe, probe.place_inputs(*batches[0]))
            sizes = list(getattr(dp, "allreduce_sizes", None) or [])
            if sizes and w.size > 1:
                out["comm_tensors"] = len(sizes)
                out["comm_s"] = self._repeat(lambda: rt.allreduce_s(sizes), plan.rounds)
        return {**out, "status": "ok"}

    def _time(self, model: Any, placed: tuple[Any, ...]) -> list[float]:
        """Seconds of each of `rounds` steps after `warmup`, every rank starting together."""
        def step() -> float:
            t0 = time.perf_counter()
            self.rt.wait(model, model.train_step(*placed))
            return time.perf_counter() - t0
        for _ in range(self.plan.warmup):
            step()
        self.rt.barrier()
        return [step() for _ in range(self.plan.rounds)]

    def _repeat(self, fn: Any, n: int) -> list[float]:
        fn()                                  # compiles or connects what the first call needs
        self.rt.barrier()
        return [fn() for _ in range(n)]

    # -- the alpha-beta sweep ---------------------------------------------------------------------

    def sweep(self) -> None:
        if self.world.size < 2 or not self.plan.sweep:
            return
        mine = {"rank": self.world.rank,
                "points": [{"bytes": s, "s": statistics.median(self._repeat(lambda s=s: self.rt.allreduce_s([s]),
                                                                            self.plan.sweep_repeats))}
                           for s in self.plan.sweep]}
        ranks = self._share("sweep", mine)
        if self.doc is not None:
            # an all-reduce is done when its slowest rank has it: per size, the largest rank median
            self.doc["sweep"] = {"repeats": self.plan.sweep_repeats, "ranks": ranks,
                                 "points": [{"bytes": s, "s": max(r["points"][j]["s"] for r in ranks)}
                                            for j, s in enumerate(self.plan.sweep)],
                                 "how": "per size: each rank's median over the repeats of one all-reduce (mean) of "
                                        "float32 with the framework's own collective, after one untimed call and a "
                                        "barrier; the point is the slowest rank's median"}

    def finish(self, wait_s: float = 60.0) -> None:
        """The document complete, then the ranks leave in an order that loses nothing: every
        rank passes a last barrier; rank 0, through it (its last collective done), says so;
        the others, once it has (TensorFlow's ring pulls a buffer from its peer's server, so a
        rank that left first fails its peer's last collective), say they leave; rank 0, which
        hosts the coordinator (torch's store, JAX's service), leaves last."""
        if self.doc is not None:
            self.doc["complete"] = True
            self._save()
        self.rt.barrier()
        done, deadline = self.parts / "done", time.monotonic() + wait_s
        if self.world.rank == 0:
            done.write_text("")
            while (time.monotonic() < deadline
                   and any(not (self.parts / f"left{r}").exists() for r in range(1, self.world.size))):
                time.sleep(0.05)
        else:
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            (self.parts / f"left{self.world.rank}").write_text("")


def _median(xs: Any) -> float | None:
    return statistics.median(xs) if xs else None


def summarise(case: Case, ranks: list[dict[str, Any]], params: dict[str, np.ndarray]) -> dict[str, Any]:
    """A case's entry in the document from every rank's part: the status (failed when a rank
    failed its check), the check's worst error over the ranks, rank 0's step, no-sync step and
    collectives (medians over rounds), and every rank's figures under `ranks`."""
    n = len(ranks)
    worst = {k: max((r[k] for r in ranks if r.get(k) is not None), default=None) for k in ("grad_rel", "rel")}
    status = "failed" if any(r.get("status") == "failed" for r in ranks) else ranks[0].get("status", "failed")
    r0 = ranks[0]
    coll = r0.get("collectives") or {}
    ops = {k: v for k, v in coll.items() if isinstance(v, dict)}
    wire = parallel.wire_bytes(ops, n)
    analytic = parallel.analytic_wire_bytes(params, n, case.strategy) if n > 1 else None
    step, nosync, comm = (_median(r0.get(k)) for k in ("step_s", "nosync_s", "comm_s"))
    return {"strategy": case.strategy, "status": status,
            "reason": next((r["reason"] for r in ranks if r.get("reason")), None),
            "check": {**worst, "grad_rtol": parallel.GRAD_RTOL[case.workload],
                      "rtol": parallel.CHECK_RTOL[case.workload], "steps": parallel.CHECK_STEPS},
            "step_s": step, "nosync_s": nosync, "comm_s": comm, "comm_tensors": r0.get("comm_tensors"),
            "collectives": ops, "collectives_source": r0.get("collectives_source"),
            "allreduce_bytes": ops.get("all-reduce", {}).get("bytes"),
            "allreduce_count": ops.get("all-reduce", {}).get("count"),
            "analytic_allreduce_bytes": parallel.gradient_bytes(params),
            "wire_bytes": None if wire is None else int(round(wire)),
            "analytic_wire_bytes": None if analytic is None else int(round(analytic)),
            "ranks": [{k: r.get(k) for k in ("rank", "host", "status", "grad_rel", "rel", "failure", "step_s",
                                             "nosync_s", "comm_s", "collectives")} for r in ranks]}


def run(plan: Plan) -> int:
    """A rank's whole run (the module's docstring); the process exits 0 when it ended
    normally. On an error it writes its one line to rank<k>.error beside the parts and exits
    1 (the launcher says it)."""
    world = wd.world()
    host = world.hosts[world.rank]
    try:
        rank = Rank(plan, world)
        for i, strategy in enumerate(plan.strategies):
            rank.case(i, strategy)
        if not plan.check_only:
            rank.sweep()
        rank.finish()
    except BaseException as e:       # noqa: BLE001 - said in one line, for the launcher
        if isinstance(e, SystemExit) and not e.code:
            raise
        line = f"rank {world.rank} ({host}): {error_line(e) if not isinstance(e, KeyboardInterrupt) else 'interrupted'}"
        try:
            d = wd.parts_dir(plan.out)
            d.mkdir(parents=True, exist_ok=True)
            (d / f"rank{world.rank}.error").write_text(line + "\n")
        except OSError:
            pass
        print(line, file=sys.stderr, flush=True)
        os._exit(1)                  # the runtime's threads (a collective waiting for a dead peer) die with it
    sys.stdout.flush()
    sys.stderr.flush()
    # Done, the document written: leave without the interpreter's teardown, where a runtime's
    # threads still alive may abort the process (seen under srun: gloo's, "terminate called
    # without an active exception"), which would fail a step whose every case finished.
    os._exit(0)

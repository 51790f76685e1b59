"""Side by side: a benchmark process of a set (`fwbench run`'s design, docs/design/statistics.md)
whose configurations of each task take turns with those of the other processes of its set, one
block of calls at a time, at the word of the set's coordinator (reports.commands.sets). Without a
coordinator (`pytest --benchmark-only` alone) nothing here runs and a case is timed as before.

In a set, the process runs its cases task by task, in the task order every process of the set
shares (the plugin's --task-order-seed). For each task it

  1. waits for its turn (`go`): only one process of the set measures at a time;
  2. runs the task's cases as pytest items, each exactly as alone (a fresh compile state, first
     call, warm-up, its own timed rounds: frameworks.harness.run), keeping each steady case's
     call, inputs and record alive (`keep`);
  3. says it has built them (`built`, with each configuration's time per call from its own
     rounds) and serves the coordinator's requests until it releases the task: `warm` (one
     untimed call: a case built before the task's last one may have lost its compiled code to
     the next case's fresh compile state, and compiles again here, not in a block) and `block`
     (`calls` calls of one configuration, rotating its inputs, GC collected before and off
     during, each call waiting for its result and the state it changed, timed as one block;
     what was alive when the task was built is frozen out of the collector's reach meanwhile);
  4. drops the task's configurations (`release`) and goes on to the next task.

While another process's block runs, this one waits in a blocking read of its pipe: no work,
no spinning of its own (its frameworks' thread pools go idle: the coordinator leaves a gap
between blocks, and the position effect is measured and reported).

The messages are JSON objects, one per line, over two pipes the coordinator made and passed
down (FWBENCH_COORD="read_fd,write_fd"):
    process -> coordinator   {"hello": unit, "pid": ...}, {"ready": task}, {"built": task,
                             "configs": [{"label", "per_call_s", "case"}]}, {"warmed": label,
                             "compilations": n}, {"ran": label, "seconds": s, "calls": k,
                             "compilations": n}
    coordinator -> process   {"go": task}, {"warm": label}, {"block": label, "calls": k},
                             {"release": task}
"""
from __future__ import annotations

import gc
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

ENV = "FWBENCH_COORD"


class Link:
    """The process's two pipes to its coordinator: one JSON object per line each way."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r = os.fdopen(read_fd, "r", buffering=1, encoding="utf-8")
        self._w = os.fdopen(write_fd, "w", buffering=1, encoding="utf-8")

    def send(self, **message: Any) -> None:
        self._w.write(json.dumps(message) + "\n")
        self._w.flush()

    def receive(self) -> dict[str, Any]:
        """The next message; EOFError when the coordinator has gone (the set ends)."""
        line = self._r.readline()          # a blocking read: the process waits without work
        if not line:
            raise EOFError("the set's coordinator closed the pipe")
        return json.loads(line)


def link_from_env() -> Link | None:
    """The coordinator's pipes where fwbench run passed them down, else None (standalone)."""
    fds = os.environ.get(ENV)
    if not fds:
        return None
    r, w = (int(x) for x in fds.split(","))
    return Link(r, w)


def slowdown(label: str) -> float:
    """A factor by which this process's blocks of `label` are made slower, for the tests of the
    method (an injected difference it must find): FWBENCH_SLOWDOWN="label=1.05" in the set's
    control process (FWBENCH_SET_CONTROL=1); 1 otherwise."""
    spec = os.environ.get("FWBENCH_SLOWDOWN", "")
    if os.environ.get("FWBENCH_SET_CONTROL") != "1" or "=" not in spec:
        return 1.0
    name, factor = spec.rsplit("=", 1)
    return float(factor) if name == label else 1.0


@dataclass
class Kept:
    """One configuration of the current task, alive for its blocks: its call (which waits for
    the result and the state it changed), its input pool and where its turn is, its adapter
    (for the compilation counter and the precision block) and its record."""
    label: str
    call: Callable[..., Any]
    pool: list[tuple[Any, ...]]
    adapter: Any
    per_call_s: float
    case: dict[str, Any]
    turn: int = 0

    def run(self, calls: int) -> tuple[float, int]:
        """`calls` calls, GC collected before and off during; (seconds, compilations over them)."""
        gc.collect()
        gc.disable()
        try:
            c0 = self.adapter.compilations()
            t0 = time.perf_counter()
            for _ in range(calls):
                self.turn += 1
                self.call(*self.pool[self.turn % len(self.pool)])
            slower = slowdown(self.label)
            if slower != 1.0:                   # a test's injected difference, inside the timed block
                time.sleep((slower - 1.0) * (time.perf_counter() - t0))
            seconds = time.perf_counter() - t0
            return seconds, self.adapter.compilations() - c0
        finally:
            gc.enable()


@dataclass
class SideBySide:
    """A process's part of its set: begin(task) waits for the task's turn, keep() holds each
    steady case of it, serve(task) hands them to the coordinator's blocks until it releases
    the task."""
    link: Link
    unit: str
    task: str | None = None
    kept: dict[str, Kept] = field(default_factory=dict)

    def hello(self, tasks: list[str]) -> None:
        """Say who this process is and its tasks, in the order it will run them."""
        self.link.send(hello=self.unit, pid=os.getpid(), tasks=tasks)

    def begin(self, task: str) -> None:
        """Wait for the coordinator's `go` for `task` (only one process of the set measures at
        a time)."""
        self.task = task
        self.link.send(ready=task)
        while True:
            msg = self.link.receive()
            if msg.get("go") == task:
                return

    def keep(self, kept: Kept) -> None:
        self.kept[kept.label] = kept

    def serve(self, task: str) -> None:
        """Say the task's configurations are built; run the coordinator's warm calls and blocks
        (each inside its adapter's precision block, as the case ran) until `release`."""
        configs = [{"label": k.label, "per_call_s": k.per_call_s, "case": k.case} for k in self.kept.values()]
        # What is alive now (the frameworks, pytest, the kept cases) stays alive until release: out
        # of the collector's reach (gc.freeze), a block's gc.collect() scans only what was made
        # since. With JAX and pytest loaded a full collection took 70-95 ms (120k objects), paid
        # before every block, more than the block itself at the tests' 50 ms; frozen, microseconds.
        gc.collect()
        gc.freeze()
        try:
            self.link.send(built=task, configs=configs)
            while True:
                msg = self.link.receive()
                if "release" in msg:
                    return
                k = self.kept.get(msg.get("warm") or msg.get("block"))
                if k is None:        # a label this process does not hold: say so, the set goes on
                    self.link.send(unknown=msg.get("warm") or msg.get("block"))
                    continue
                with k.adapter.own_precision():
                    if "warm" in msg:
                        c0 = k.adapter.compilations()
                        k.call(*k.pool[0])
                        self.link.send(warmed=k.label, compilations=k.adapter.compilations() - c0)
                    else:
                        seconds, compiles = k.run(int(msg["calls"]))
                        self.link.send(ran=k.label, seconds=seconds, calls=int(msg["calls"]), compilations=compiles)
        finally:
            self.kept.clear()
            self.task = None
            gc.unfreeze()
            gc.collect()

"""The coordinator of one process set on this machine (reports.commands.sets plans the sets and
launches them, here or as a scheduler's jobs): its processes, their turns and blocks, and
their result files.

A set, run by `Coordinator` (through sets.run_set):
  1. its processes start together (each a pytest process of one framework, as alone, with the
     set's task-order seed and its own case order), in a start order drawn per set; each says
     hello with its tasks;
  2. for each task, in the set's order: each process in turn, in an order drawn per task, gets
     `go`, runs the task's cases exactly as alone (first calls, warm-up, its own rounds; only one
     process measures at a time) and says it has built them; then every configuration gets one
     untimed call (`warm`: torch's and JAX's fresh compile state per case has dropped an earlier
     case's compiled code), then `cycles` cycles, each a block of every configuration in an order
     drawn per cycle, a gap of `gap_s` before each block (a waiting process blocks in a read; the
     gap lets the last one's thread pools go idle), the block's calls sized from the
     configuration's own time per call to last about `block_s`; then `release`;
  3. the processes finish as alone and write their JSON; each gets its blocks (doc["fwbench"]
     ["blocks"]: a row per block with the set, cycle, position, the configuration that ran just
     before, calls, seconds and compilations) and its place in the set (machine_info.fwbench:
     set, set_role, start_position, control).

A process that dies leaves the set: its configurations drop out of the cycles, its JSON is
rebuilt from its event stream as for a lone process (results.keep), the others go on.
"""
from __future__ import annotations

import json
import os
import random
import select
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.commands import checkout, plan, process, results
from reports.util import signals

GAP_S = 0.1         # the pause before each block (thread pools of the last process go idle)


@dataclass
class SetSpec:
    """One set: its index, cold or warm, the run's processes of it (unit, repeat, control) in
    start order, its cache folder and its seed."""
    index: int
    role: str
    members: list[tuple[str, int, bool]]       # (unit, repeat, control) in start order
    folder: str
    seed: int
    reference: str = "primary"     # the A/A control's reference in this set: "primary" or "control"


def calls_for(per_call_s: float, block_s: float, most: int = 1000) -> int:
    """Calls in a block of about `block_s` seconds, at least one."""
    return int(max(1, min(most, round(block_s / max(per_call_s, 1e-9)))))


@dataclass
class Member:
    """One process of a set, as the coordinator sees it."""
    unit: str
    repeat: int
    control: bool
    position: int
    proc: subprocess.Popen[Any] | None = None
    to: Any = None                      # our write end of its command pipe
    frm: Any = None                     # our read end of its reply pipe
    buffer: str = ""
    tasks: list[str] = field(default_factory=list)
    alive: bool = True
    ended: str | None = None            # what ended it from outside (a timeout), if anything
    started: float = 0.0
    watch: Any = None
    paths: dict[str, Path] = field(default_factory=dict)
    blocks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.unit}#{self.repeat}" + (" (control)" if self.control else "")

    def send(self, **msg: Any) -> bool:
        if not self.alive:
            return False
        try:
            self.to.write(json.dumps(msg) + "\n")
            self.to.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            self.alive = False
            return False

    def lines(self) -> list[dict[str, Any]]:
        """Whatever whole lines are waiting on its reply pipe (non-blocking)."""
        out = []
        try:
            chunk = os.read(self.frm.fileno(), 1 << 16)
        except BlockingIOError:
            return out
        except OSError:
            chunk = b""
        if not chunk:
            self.alive = False
            return out
        self.buffer += chunk.decode("utf-8", "replace")
        *whole, self.buffer = self.buffer.split("\n")
        for line in whole:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out


class Coordinator:
    """Runs one set on this machine: its processes, their turns and blocks, their results."""

    def __init__(self, spec: SetSpec, opts: plan.RunOptions, out: Path, progress: results.Progress,
                 cycles: int, block_s: float, gap_s: float = GAP_S) -> None:
        self.spec, self.opts, self.out, self.progress = spec, opts, out, progress
        self.cycles, self.block_s, self.gap_s = cycles, block_s, gap_s
        self.rng = random.Random(spec.seed)
        self.members = [Member(u, r, c, i) for i, (u, r, c) in enumerate(spec.members)]
        self.inbox: dict[int, list[dict[str, Any]]] = {id(m): [] for m in self.members}

    # -- the processes ----------------------------------------------------------------
    def start(self, cache: Path) -> None:
        self.t0 = time.monotonic()
        for m in self.members:
            name, label = plan.process_names(m.unit, m.repeat, self.opts.repeats)
            m.paths = {"log": plan.log_file(self.out, name), "tmp": self.out / f".{name}.benchmark.json.tmp",
                       "events": self.out / f".{name}.events.jsonl"}
            m.paths["log"].parent.mkdir(parents=True, exist_ok=True)
            for p in (m.paths["tmp"], m.paths["events"]):
                p.unlink(missing_ok=True)
            cmd = process.pytest_command(m.unit, self.opts, m.paths["tmp"], m.repeat, self.spec.role,
                                        task_order_seed=self.spec.seed)
            env = process.process_env(m.unit, self.opts, m.paths["events"], m.repeat, cache)
            to_child_r, to_child_w = os.pipe()
            from_child_r, from_child_w = os.pipe()
            env["FWBENCH_COORD"] = f"{to_child_r},{from_child_w}"
            env["FWBENCH_SET_CONTROL"] = "1" if m.control else "0"
            log = open(m.paths["log"], "w", encoding="utf-8")
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            m.proc = subprocess.Popen(cmd, cwd=checkout.CHECKOUT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, preexec_fn=process.die_with_parent,
                                      pass_fds=(to_child_r, from_child_w))
            log.close()
            os.close(to_child_r)
            os.close(from_child_w)
            m.to = os.fdopen(to_child_w, "w", buffering=1, encoding="utf-8")
            m.frm = os.fdopen(from_child_r, "rb", buffering=0)
            os.set_blocking(m.frm.fileno(), False)
            m.started = time.monotonic()
            m.watch = results.Watch(label + (" (control)" if m.control else ""), self.progress)

    def _poll(self, wait: float) -> None:
        """Read every member's pipe and event stream for up to `wait` seconds; a member whose
        process ended, or ran past --timeout-s, leaves the set."""
        live = [m for m in self.members if m.alive]
        if live:
            ready, _, _ = select.select([m.frm for m in live], [], [], wait)
            for m in live:
                if m.frm in ready:
                    self.inbox[id(m)] += m.lines()
        for m in self.members:
            m.watch.read(m.paths["events"])
            if m.alive and m.proc.poll() is not None:
                self.inbox[id(m)] += m.lines()
                m.alive = False
            # the processes take turns: a member's limit is --timeout-s for each process of the set
            limit = self.opts.timeout_s * len(self.members)
            if m.alive and time.monotonic() - m.started > limit:
                m.ended = (f"timed out after {limit:g} s (--timeout-s {self.opts.timeout_s:g} for each of the set's "
                           f"{len(self.members)} processes)")
                process._kill_group(m.proc)
                m.alive = False

    def expect(self, m: Member, key: str, value: Any = None) -> dict[str, Any] | None:
        """The member's next message with `key` (and that value), or None once it has left."""
        while True:
            box = self.inbox[id(m)]
            for i, msg in enumerate(box):
                if key in msg and (value is None or msg[key] == value):
                    del box[:i + 1]
                    return msg
            if not m.alive:
                return None
            self._poll(0.5)

    def ready(self, m: Member, task: str) -> bool:
        """Whether the member is ready for `task`: its next `ready` names it. One naming a later
        task stays in its inbox (the member has no case of this one); None: it has left."""
        msg = self.expect(m, "ready")
        if msg is None:
            return False
        if msg["ready"] != task:
            self.inbox[id(m)].insert(0, msg)
            return False
        return True

    # -- the protocol -----------------------------------------------------------------
    def run(self) -> None:
        for m in self.members:
            hello = self.expect(m, "hello")
            m.tasks = hello.get("tasks", []) if hello else []
        tasks = list(dict.fromkeys(t for m in self.members for t in m.tasks))
        for task in tasks:
            self.task(task)

    def task(self, task: str) -> None:
        members = [m for m in self.members if m.alive and task in m.tasks]
        self.rng.shuffle(members)
        configs: list[tuple[Member, dict[str, Any]]] = []
        for m in members:                                     # one process measures at a time
            if not self.ready(m, task) or not m.send(go=task):
                continue
            built = self.expect(m, "built", task)
            if built is not None:
                configs += [(m, c) for c in built["configs"]]
        for m, c in configs:                                  # every configuration's code back in place
            if m.send(warm=c["label"]):
                self.expect(m, "warmed", c["label"])
        for cycle in range(self.cycles):
            order = [mc for mc in configs if mc[0].alive]
            self.rng.shuffle(order)
            after = None
            for position, (m, c) in enumerate(order):
                time.sleep(self.gap_s)
                calls = calls_for(c["per_call_s"], self.block_s)
                t = time.monotonic() - self.t0
                if not m.send(block=c["label"], calls=calls):
                    continue
                ran = self.expect(m, "ran", c["label"])
                if ran is None:
                    continue
                m.blocks.append({"set": self.spec.index, "cycle": cycle, "position": position, "task": task,
                                 "sent_s": round(t, 6), "replied_s": round(time.monotonic() - self.t0, 6),
                                 "label": c["label"], "after": after, "calls": ran["calls"],
                                 "seconds": ran["seconds"], "compilations": ran["compilations"],
                                 "control": m.control, "repeat": m.repeat, **c["case"]})
                after = f"{m.unit}#{m.repeat}:{c['label']}"
        for m in members:
            m.send(release=task)
        if configs:
            self.progress.line(f"set {self.spec.index}: {task}: {len(configs)} configurations, {self.cycles} cycles "
                               f"({self.progress.elapsed()})")

    def finish(self) -> list[Path]:
        """Wait for the processes to end as alone; keep each one's JSON, with its blocks and its
        place in the set."""
        for m in self.members:
            if m.to is not None:
                try:
                    m.to.close()        # no more words: a process still waiting goes on alone
                except OSError:
                    pass
        while any(m.proc is not None and m.proc.poll() is None for m in self.members):
            self._poll(0.5)
        paths = []
        wall = time.monotonic() - getattr(self, "t0", time.monotonic())
        for m in self.members:
            if m.proc is None:            # never started (an interrupt while starting the set)
                continue
            m.watch.read(m.paths["events"])
            with signals.held():
                path = results.keep(m.unit, self.opts, self.out, m.proc.returncode, m.ended, m.watch, self.progress,
                                    m.paths["tmp"], m.paths["log"], m.repeat, self.spec.role)
                m.paths["events"].unlink(missing_ok=True)
                placed(path, m, self.spec, wall)
            paths.append(path)
        return paths

    def stop(self, why: str) -> None:
        """End every process still running, saying why (its result is rebuilt from its stream)."""
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.ended = m.ended or why
                process._kill_group(m.proc)
                m.alive = False


def placed(path: Path, m: Member, spec: SetSpec, wall_s: float) -> None:
    """Add the member's blocks and its place in the set (and the set's wall time) to its result file."""
    doc = results.read_json(path)
    if doc is None:
        return
    info = doc.setdefault("machine_info", {}).setdefault("fwbench", {})
    info.update(set=spec.index, set_role=spec.role, start_position=m.position, control=m.control,
                control_reference=spec.reference, set_wall_s=round(wall_s, 3))
    doc.setdefault("fwbench", {})["blocks"] = m.blocks
    results.write_json_atomic(path, doc)

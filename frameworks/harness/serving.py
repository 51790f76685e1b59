"""A serving case's measurement (workloads.base.Serve; docs/design/serving.md): the model's
deployable form exported here, then loaded and timed in a serving process of its own
(frameworks/serve.py), which for an artefact imports no model code.

time_serving, in order:
  export        the case's Servable writes its artefact (or, for the development path, its
                weights) into a folder of its own: export_s, artefact_bytes, the exporter, the
                dynamic dimensions; an exporter's refusal is Unsupported in its own words
  reference     the framework's eager model answers the check requests here, by the same
                request loop the serving process runs
  cold start    the serving process is started (imports, load) and answers the check requests;
                cold_start_s is the time from its start to the first answer, with
                serve_import_load_s and serve_first_s its parts
  check         every check answer against the eager one (workloads.serving.differs): one that
                differs is WrongResult (failed, nothing timed); check_rel_err records the error
  cold pass     the latency stream once, every request alone (a length seen first compiles
                here where the path compiles per shape): serve_stream_cold_s
  latency       with GC off in both processes, timed rounds of one stream request each
                (benchmark.pedantic: the client's round trip), whole passes over the stream,
                as many as the budget sizes (at least --min-rounds; --rounds fixes them), and
                at least the workload's min_requests:
                latency_p50_s, latency_p90_s, latency_p99_s; the serving process's own clock
                gives server_p50_s, and transport_s the difference of the medians
  throughput    each offline batch's request repeated for its share of the budget (one
                untimed call first), by the serving process's clock: serve_throughput (items/s, the
                best), serve_throughput_batch (where), serve_throughput_by_batch
  memory        the serving process's resident memory after the work (serve_rss_bytes) and its
                peak (peak_memory_bytes), and whether it imported model code
The host's state over the timed rounds counts the serving process's CPU time as the case's own.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from frameworks.harness.options import Options
from frameworks.harness.timing import choose_rounds, gc_off, timed_rounds
from frameworks.serve import MODEL_CODE
from workloads import serving as W
from workloads.base import FwbenchError, Serve, WrongResult

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSWER_TIMEOUT_S = 900          # the longest a serving process may take to answer one command
MEMORY_SOURCE = "the serving process's peak resident memory (VmHWM, /proc) over its life: load, check and every request"


class ServingError(FwbenchError):
    """The serving process failed (it could not load the artefact, or died): one line."""


class ServingProcess:
    """A serving process (frameworks/serve.py) and its protocol: started on a job folder,
    answering one command at a time."""

    def __init__(self, folder: str, job: dict[str, Any], serve: Serve, threads: int) -> None:
        self.folder = folder
        arrays: dict[str, np.ndarray] = {}
        batches = [r for _, r in serve.batches]
        for prefix, reqs in (("check_", serve.check), ("stream_", serve.stream), ("batch_", batches)):
            for i, req in enumerate(reqs):
                for j, a in enumerate(req):
                    arrays[f"{prefix}{i}_{j}"] = a
        arrays.update({f"setting_{k}": np.asarray(v) for k, v in serve.settings.items()})
        np.savez(os.path.join(folder, "requests.npz"), **arrays)
        with open(os.path.join(folder, "job.json"), "w") as f:
            json.dump({**job, "threads": threads}, f)
        self.log = open(os.path.join(folder, "serving.log"), "w+b")
        env = {**os.environ, "FWBENCH_COMPILE_CACHE": "off",
               "PYTHONPATH": os.pathsep.join(p for p in (CHECKOUT, os.environ.get("PYTHONPATH")) if p)}
        self.spawned = time.time()
        self.proc = subprocess.Popen([sys.executable, "-m", "frameworks.serve", folder, repr(self.spawned)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     cwd=CHECKOUT, bufsize=0)
        self._buf = b""

    def _line(self, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = end - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            chunk = os.read(self.proc.stdout.fileno(), 65536) if ready else None
            if not chunk:
                tail = self._tail()
                self.close()
                if chunk is None:
                    raise ServingError(f"the serving process did not answer within {timeout:g} s (it said: {tail})")
                raise ServingError(f"the serving process ended (exit code {self.proc.returncode}): {tail}")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        msg = json.loads(line)
        if msg.get("event") == "error":
            self.close()
            raise ServingError(f"the serving process failed: {msg['error']}")
        return msg

    def _tail(self) -> str:
        """The serving process's last line on stderr (where a crash says why)."""
        if self.log.closed:
            return "no output"
        self.log.seek(0)
        lines = [ln.strip() for ln in self.log.read().decode(errors="replace").splitlines() if ln.strip()]
        return (lines[-1] if lines else "no output")[:300]

    def ask(self, command: str) -> dict[str, Any]:
        try:
            self.proc.stdin.write(command.encode() + b"\n")
        except (BrokenPipeError, OSError):
            self._line()       # says why it ended
        return self._line()

    def ready(self) -> dict[str, Any]:
        return self._line()

    def cpu_seconds(self) -> float:
        """CPU seconds of this process and the serving process together (the host window's own)."""
        own = time.process_time()
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return own + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return own

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"q\n")
                self.proc.wait(timeout=30)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()

    def __enter__(self) -> ServingProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def checked(task: str, folder: str, serve: Serve, want: list[Any]) -> float:
    """The served answers (check.npz) against the eager ones: WrongResult naming the first that
    differs, else the largest relative error."""
    with np.load(os.path.join(folder, "check.npz")) as f:
        got = [tuple(f[f"out_{i}_{j}"] for j in range(2)) if task == "generate" else f[f"out_{i}_0"]
               for i in range(len(want))]
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        why = W.differs(task, g, w, serve.tolerance)
        if why:
            shape = "x".join(map(str, serve.check[i][0].shape))
            raise WrongResult(f"check request {i} ({shape}): the served {why}")
        worst = max(worst, W.check_error(task, g, w))
    return worst


def percentile(data: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(data, np.float64), q))


def time_serving(benchmark: Any, serve: Serve, model: Any, case: Any, record: dict[str, Any], opts: Options,
                 threads: int) -> None:
    """The serving case, from its export to its memory (this module's docstring), into `record`."""
    folder = tempfile.mkdtemp(prefix="fwbench-serving-")
    try:
        job, keys = model.export(folder)
        record.update(keys, serve_kind=model.path.kind, serve_engine=model.path.engine)
        want = model.expected(serve)
        with ServingProcess(folder, job, serve, threads) as server:
            ready = server.ready()
            record.update(cold_start_s=ready["since_spawn_s"], first_call_s=ready["since_spawn_s"],
                          serve_import_load_s=ready["load_s"], serve_first_s=ready["first_s"])
            record.update(check_rel_err=checked(case.task, folder, serve, want), check_tolerance=serve.tolerance)
            server.ask("go")
            n = len(serve.stream)
            cold = [server.ask(f"r {i}")["s"] for i in range(n)]
            record.update(serve_stream_cold_s=float(sum(cold)), serve_cold_request_s=",".join(f"{t:.4g}" for t in cold),
                          serve_keys=",".join(serve.keys))
            served: list[float] = []

            def request(i: int) -> None:
                served.append(server.ask(f"r {i}")["s"])
            turn = iter(range(1 << 62))

            def setup() -> tuple[tuple[int], dict[str, Any]]:
                return (next(turn) % n,), {}
            with gc_off():
                t0 = time.perf_counter()
                for i in range(n):            # a warm pass: every length seen; it sizes the passes
                    request(i)
                passes = max(choose_rounds(time.perf_counter() - t0, opts), -(-serve.min_requests // n))
                served.clear()
                record.update(timed_rounds(benchmark, request, passes * n, setup, own_cpu=server.cpu_seconds))
            stats = getattr(getattr(benchmark, "stats", None), "stats", None)
            data = list(getattr(stats, "data", None) or [])
            if data:
                record.update({f"latency_p{q}_s": percentile(data, q) for q in (50, 90, 99)})
                record.update(server_p50_s=percentile(served, 50),
                              transport_s=record["latency_p50_s"] - percentile(served, 50), serve_requests=len(data))
            share = opts.budget_s / max(1, len(serve.batches))
            rates = {}
            for b, req in serve.batches:
                r = server.ask(f"t {b} {share:g}")
                rates[b] = serve.items(req) / r["s"]
            best = max(rates, key=rates.get)
            record.update(serve_throughput=rates[best], serve_throughput_batch=best,
                          serve_throughput_by_batch=",".join(f"{b}:{v:.4g}" for b, v in rates.items()))
            mem = server.ask("m")
            imported = sorted(set(mem["modules"]) & set(MODEL_CODE))
            record.update(serve_rss_bytes=mem["rss"], peak_memory_bytes=mem["hwm"], peak_memory_source=MEMORY_SOURCE,
                          memory_note=MEMORY_SOURCE, model_code_imported=bool(imported),
                          serve_modules=",".join(imported) or None)
            if imported and model.path.kind != W.DEVELOPMENT:
                raise ServingError(f"the serving process of an artefact imported model code: {', '.join(imported)}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


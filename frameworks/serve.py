"""The serving process (workloads/serving.py, docs/design/serving.md): it loads one deployable
artefact, or for the development path builds the model from its weights, checks nothing
itself, and answers the requests of frameworks/harness/serving.py, which times them.

    python -m frameworks.serve JOB_FOLDER SPAWN_TIME

For an artefact it imports no model code (no frameworks/<fw>/{gpt,diffusion,serving}.py, no
workloads.gpt, workloads.diffusion or workloads.serving): only numpy, the engine that runs the
artefact (torch for an AOTInductor package, onnxruntime, jax, tensorflow for a SavedModel) and
fwbench's thread settings (frameworks.base); it reports which fwbench modules it imported, and
the client checks that none is model code (MODEL_CODE). The development path imports the
model (frameworks/<fw>/serving.py: dev_engine): that is what development is.

The job folder holds job.json (the engine, the files, the request loop, the threads) and
requests.npz (the requests and the loop's settings, numpy). Protocol: one JSON object per
line on the process's own stdout (anything else the process writes to file descriptor 1 goes
to stderr), commands one per line on stdin:

    (start)   -> {"event": "ready", import_s, load_s, first_s, first_at}: the check requests
                 answered (outputs in check.npz; the first one is the cold start's first answer)
    go        -> {"event": "staged"}: the stream's and the batches' requests in the engine's
                 arrays; Python's GC collected, then off
    r I       -> {"s": seconds}: stream request I, by this process's clock
    t B S     -> {"s": median seconds, "reps": n}: the batch-B request, repeated for about S s
                 after one untimed call
    m         -> {"rss", "hwm", "modules"}: resident and peak memory, fwbench modules imported
    q         -> exits 0
A failure is {"event": "error", "error": one line} and exit code 1 (one line on stderr too).
"""
from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from frameworks.base import _proc_status_kb, set_threads
from workloads.base import FwbenchError, error_line

# fwbench modules that are the model (its code, or the specification it is built from)
MODEL_CODE = ("frameworks.torch.gpt", "frameworks.torch.diffusion", "frameworks.torch.serving",
              "frameworks.jax.gpt", "frameworks.jax.diffusion", "frameworks.jax.serving",
              "frameworks.tensorflow.gpt", "frameworks.tensorflow.diffusion", "frameworks.tensorflow.serving",
              "workloads.gpt", "workloads.diffusion", "workloads.serving")


@dataclass
class Engine:
    """What serves a task: its functions on the engine's own arrays (generate: prefill and
    decode; sample: step), numpy in (put) and out (get), and the context it runs in."""
    fns: dict[str, Callable[..., Any]]
    put: Callable[[np.ndarray], Any]
    get: Callable[[Any], np.ndarray]
    scope: Callable[[], Any] = contextlib.nullcontext
    keep: list[Any] = field(default_factory=list)      # what must outlive the calls (loaded modules)


# ----------------------------------------------------------------------------- request loops

def generate(e: Engine, args: tuple[Any, ...], length: int, positions: list[Any], n_new: int,
             logits: bool = False) -> Any:
    """Greedy decoding: the prefill, then n_new - 1 decode steps, each new token read back to
    the host as it comes. Returns the new tokens (B, n_new), with logits (B, n_new, vocab)."""
    tok, lg, *caches = e.fns["prefill"](*args)
    toks, lgs = [e.get(tok)], [e.get(lg)] if logits else []
    for j in range(1, n_new):
        tok, lg, *caches = e.fns["decode"](tok, positions[length + j - 1], *caches)
        toks.append(e.get(tok))
        if logits:
            lgs.append(e.get(lg))
    new = np.stack(toks, 1)
    return (new, np.stack(lgs, 1)) if logits else new


def sample(e: Engine, args: tuple[Any, ...], steps: list[tuple[Any, Any, Any]]) -> np.ndarray:
    """DDIM: x <- a x + b eps(x, t) for each step's (t, a, b); x_0 read back."""
    x = args[0]
    for t, a, b in steps:
        x = e.fns["step"](x, t, a, b)
    return e.get(x)


class Requests:
    """A loop's requests staged in an engine's arrays (outside any timed call)."""

    def __init__(self, e: Engine, loop: str, settings: dict[str, np.ndarray]) -> None:
        self.e, self.loop = e, loop
        if loop == "generate":
            self.n_new = int(settings["n_new"])
            dtype = np.dtype(str(settings.get("position_dtype", "int32")))
            self.positions = [e.put(np.array([t], dtype)) for t in range(int(settings["block_size"]))]
        else:
            self.coefs = [(int(t), np.array([a], np.float32), np.array([b], np.float32))
                          for t, a, b in zip(settings["t"], settings["a"], settings["b"])]
            self.steps: dict[int, list[tuple[Any, Any, Any]]] = {}

    def stage(self, request: tuple[np.ndarray, ...]) -> Callable[[bool], Any]:
        """The request as a call (its argument: keep every step's logits, for the check)."""
        args = tuple(self.e.put(np.ascontiguousarray(a)) for a in request)
        if self.loop == "generate":
            length = int(request[0].shape[1])
            return lambda check=False: generate(self.e, args, length, self.positions, self.n_new, check)
        B = int(request[0].shape[0])
        if B not in self.steps:
            self.steps[B] = [(self.e.put(np.full((B,), t, np.int32)), self.e.put(a), self.e.put(b))
                             for t, a, b in self.coefs]
        steps = self.steps[B]
        return lambda check=False: sample(self.e, args, steps)


def answers(e: Engine, loop: str, settings: dict[str, Any], requests: Any, extra: dict[str, Any]) -> list[Any]:
    """Every request's output with its logits (generate), by the loop a serving process runs
    (`extra`: the framework's own settings of it, Servable.SETTINGS): what the check compares
    (the eager model's, in the benchmark process; the served ones)."""
    with e.scope():
        reqs = Requests(e, loop, {**settings, **extra})
        return [reqs.stage(r)(True) for r in requests]


# ----------------------------------------------------------------------------- engines

def _torch_threads(n: int) -> None:
    import torch
    torch.set_num_threads(n)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


def load_aoti(job: dict[str, Any]) -> Engine:
    """An AOTInductor package per function (torch._inductor.aoti_load_package)."""
    import torch
    import torch._inductor
    _torch_threads(job["threads"])
    fns = {name: torch._inductor.aoti_load_package(path) for name, path in job["files"].items()}
    return Engine(fns, torch.from_numpy, lambda t: t.numpy(), torch.no_grad)


def load_onnx(job: dict[str, Any]) -> Engine:
    """An ONNX file per function in ONNX Runtime (CPU), inputs in the graph's order; results
    stay ONNX Runtime's own values between calls (run_with_ort_values), as its KV-cache idiom."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = job["threads"], 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL

    def function(path: str) -> Callable[..., Any]:
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names, outs = [i.name for i in s.get_inputs()], [o.name for o in s.get_outputs()]
        if len(outs) == 1:
            return lambda *args: s.run_with_ort_values(outs, dict(zip(names, args)))[0]
        return lambda *args: s.run_with_ort_values(outs, dict(zip(names, args)))
    fns = {name: function(path) for name, path in job["files"].items()}
    return Engine(fns, ort.OrtValue.ortvalue_from_numpy, lambda v: v.numpy())


def load_jax_export(job: dict[str, Any]) -> Engine:
    """Serialised jax.export modules of (parameters, *arguments), deserialised and run under
    jax.jit (XLA compiles each concrete shape on first sight), with the weights file's arrays."""
    os.environ["PJRT_NPROC"] = str(job["threads"])
    import jax
    from jax import export
    jax.config.update("jax_default_matmul_precision", "highest")
    with np.load(job["files"]["weights"]) as f:
        params = {k: jax.device_put(f[k]) for k in f.files}
    fns = {}
    for name, path in job["files"].items():
        if name != "weights":
            with open(path, "rb") as f:
                call = jax.jit(export.deserialize(bytearray(f.read())).call)
            fns[name] = functools.partial(call, params)
    return Engine(fns, jax.device_put, np.asarray)


def load_saved_model(job: dict[str, Any]) -> Engine:
    """A SavedModel's restored functions, by name (TensorFlow's runtime; XLA where they were
    saved with jit_compile, or hold jax2tf's XlaCallModule)."""
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(job["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    m = tf.saved_model.load(job["files"]["saved_model"])
    return Engine({name: getattr(m, name) for name in job["functions"]}, tf.convert_to_tensor,
                  lambda t: t.numpy(), keep=[m])


def load_dev(job: dict[str, Any]) -> Engine:
    """The development path: the framework's model built from its weights in the case's mode
    (frameworks/<fw>/serving.py: dev_engine); imports the model code."""
    import frameworks
    adapter = frameworks.load(job["framework"])
    adapter.configure(job["threads"])
    with np.load(job["files"]["weights"]) as f:
        params = {k: f[k] for k in f.files}
    module = importlib.import_module(f"frameworks.{job['framework']}.serving")
    return module.dev_engine(adapter, job["dev"]["preset"], params, job["dev"]["task"], job["dev"]["mode"])


LOADERS: dict[str, Callable[[dict[str, Any]], Engine]] = {
    "aoti": load_aoti, "onnx": load_onnx, "jax-export": load_jax_export, "saved-model": load_saved_model,
    "dev": load_dev}


# ----------------------------------------------------------------------------- the process

def fwbench_modules() -> list[str]:
    """The fwbench modules this process imported."""
    return sorted(m for m in sys.modules if m.split(".")[0] in ("frameworks", "workloads", "reports"))


def memory() -> dict[str, Any]:
    rss, hwm = _proc_status_kb("VmRSS", "VmHWM")
    return {"rss": rss * 1024, "hwm": hwm * 1024, "modules": fwbench_modules()}


def serve(folder: str, spawned: float, out: Any) -> None:
    """Load, answer the check requests, then the client's commands (the module's docstring)."""
    def say(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    with open(os.path.join(folder, "job.json")) as f:
        job = json.load(f)
    set_threads(job["threads"])
    with np.load(os.path.join(folder, "requests.npz")) as f:
        arrays = {k: f[k] for k in f.files}

    def requests(prefix: str) -> list[tuple[np.ndarray, ...]]:
        n = sum(k.startswith(prefix) and k.endswith("_0") for k in arrays)
        return [tuple(arrays[f"{prefix}{i}_{j}"] for j in range(sum(k.startswith(f"{prefix}{i}_") for k in arrays)))
                for i in range(n)]
    settings = {k[len("setting_"):]: v for k, v in arrays.items() if k.startswith("setting_")}
    t0 = time.perf_counter()
    try:
        engine = LOADERS[job["engine"]](job)
    except Exception as e:  # noqa: BLE001  a file that does not load: one line
        raise FwbenchError(f"could not load {', '.join(map(os.path.basename, job['files'].values()))}: "
                           f"{error_line(e)}") from None
    imported = time.perf_counter()
    with engine.scope():
        reqs = Requests(engine, job["loop"], {**settings, **job.get("settings", {})})
        checks = [reqs.stage(r) for r in requests("check_")]
        t1 = time.perf_counter()
        outs = [checks[0](True)]
        first_at = time.time()
        t2 = time.perf_counter()
        outs += [c(True) for c in checks[1:]]
        flat = {}
        for i, o in enumerate(outs):
            for j, a in enumerate(o if isinstance(o, tuple) else (o,)):
                flat[f"out_{i}_{j}"] = a
        np.savez(os.path.join(folder, "check.npz"), **flat)
        say({"event": "ready", "since_spawn_s": first_at - spawned, "load_s": imported - t0, "first_s": t2 - t1,
             "first_at": first_at})
        _commands(reqs, requests, say)


def _commands(reqs: Requests, requests: Callable[[str], list[tuple[np.ndarray, ...]]],
              say: Callable[[dict[str, Any]], None]) -> None:
    """The client's commands, one a line on stdin, until `q` (the module's docstring)."""
    stream: list[Callable[[bool], Any]] = []
    batches: dict[int, Callable[[bool], Any]] = {}
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "go":
            stream = [reqs.stage(r) for r in requests("stream_")]
            batches = {int(r[0].shape[0]): reqs.stage(r) for r in requests("batch_")}
            gc.collect()
            gc.disable()
            say({"event": "staged"})
        elif cmd[0] == "r":
            s = time.perf_counter()
            stream[int(cmd[1])]()
            say({"s": time.perf_counter() - s})
        elif cmd[0] == "t":
            say(throughput(batches[int(cmd[1])], float(cmd[2])))
        elif cmd[0] == "m":
            say(memory())
        elif cmd[0] == "q":
            return
        else:
            raise FwbenchError(f"unknown command {line.strip()!r}")


def throughput(call: Callable[[bool], Any], budget_s: float, most: int = 100) -> dict[str, Any]:
    """One untimed call (a new shape compiles here), then calls for about budget_s seconds (at
    least 3, at most `most`): the median seconds per call."""
    call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget_s and len(times) < most):
        s = time.perf_counter()
        call()
        times.append(time.perf_counter() - s)
    return {"s": float(np.median(times)), "reps": len(times)}


def main(argv: list[str]) -> int:
    # the protocol keeps the real stdout; everything else written to descriptor 1 goes to stderr
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        serve(argv[0], float(argv[1]), out)
        return 0
    except Exception as e:  # noqa: BLE001  the client reads one line and records it
        line = str(e) if isinstance(e, FwbenchError) else error_line(e)
        out.write(json.dumps({"event": "error", "error": line}) + "\n")
        out.flush()
        print(f"fwbench serving process: {line}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

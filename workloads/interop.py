"""What could not be compiled: small programs that mix framework code with ordinary Python,
framework-free. Each program is described here with its numpy float64 reference (what eager
execution must give, outputs and side effects); frameworks/<fw>/interop.py writes it
idiomatically in each framework. Running it under each mode classifies the mode:

    eager         the mode runs Python as it is (the reference behaviour)
    compiled      compiled as it is, every output and side effect as in eager
    graph_breaks  compiled in pieces, Python between them (torch.compile: a compile of the
                  program as one graph, fullgraph=True, raises on some input, with Dynamo's
                  reason; Dynamo's own graph and break counters over the probe's calls are
                  kept beside it. torch._dynamo.explain is not used: in torch 2.13 it reports
                  0 breaks for Python's random.random(), which fullgraph=True refuses and the
                  default compile runs as 2 graphs with Python between them)
    wrong         runs, but differs from eager: a side effect that happened only while
                  tracing, or a branch / Python value frozen at trace time (found by comparing
                  every call with the reference, on inputs that take both branches)
    refused       raises: the framework's own error, one line (e.g. JAX's
                  TracerBoolConversionError, TensorFlow's symbolic-tensor errors)

and records it (docs/ARCHITECTURE.md, "What could not be compiled"): eager and compiled are
`ok`, graph_breaks `fallback` with Dynamo's reasons, refused `unsupported` with the error,
wrong `failed` with what differed and never timed. Tasks are the programs, so the capability
matrix in the report comes from these records.

Strategy `idiomatic` (accelerated modes, where a framework has one: REWRITTEN): the program
as that framework's documentation tells a user to write it for its compiler
(`jax.debug.print`, `lax.cond`, `jax.pure_callback`, `tf.numpy_function`, `torch.cond`, a
`torch.library.custom_op`, ...), probed and timed by the same protocol, its record carrying
what it uses (`rewrite_uses`) and how many lines it changes against the program as written
(`rewrite_lines`, counted by `lines_changed`): the price of compiling that program.

Protocol of one call (the same for the reference and every framework, probe and timed
calls): Python's `random` is seeded with SEED + k before call k; the program's printed
lines are captured; LOG (the list programs append to) is emptied before the call and read
after it.
"""
from __future__ import annotations

import contextlib
import difflib
import inspect
import io
import math
import os
import random
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from workloads.base import (
    Model,
    Preset,
    TaskSpec,
    Unsupported,
    WrongResult,
    check_positive,
    choose,
    error_line,
    fixed_tasks,
    no_device_strategies,
    rel_err,
)

NAME = "interop"
# Its strategies (the program as written and its idiomatic rewrite) are what it
# compares, not optional variants: every `--variants` setting runs them all.
OPTIONAL_VARIANTS = False
device_strategies = no_device_strategies
SEED = 1234          # call k seeds Python's random with SEED + k
LOG: list[Any] = []  # the Python list the list_append program appends to
POOL = 4             # inputs: both signs of the sum, four norms (so branches and loop counts differ)
PROBE_PASSES = 2     # the probe runs every input this many times (8 calls)
TOL = 1e-5           # float32 against the float64 reference, relative (workloads.base.rel_err)
OUTCOMES = ("eager", "compiled", "graph_breaks", "wrong", "refused")
STATUS_OF = {"eager": "ok", "compiled": "ok", "graph_breaks": "fallback", "wrong": "failed",
             "refused": "unsupported"}


@dataclass(frozen=True)
class InteropConfig:
    n: int = 1024    # elements of the input vector

    def __post_init__(self) -> None:
        check_positive(self, "n")


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", InteropConfig(n=16), batch=1, note="for tests"),
    "small": Preset("small", InteropConfig(n=1024), batch=1, note="CPU benchmark default"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("interop preset", name, PRESETS)]


def init_params(config: InteropConfig, seed: int = 0) -> dict[str, np.ndarray]:
    return {}   # the programs have no parameters


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _halve_until_unit(x: np.ndarray) -> np.ndarray:
    while np.linalg.norm(x) > 1:
        x = x / 2
    return x


@dataclass(frozen=True)
class Program:
    name: str
    feature: str                                       # the Python feature, in words
    reference: Callable[[np.ndarray, int], np.ndarray]  # (x float64, call index k) -> output
    printed: int = 0                                   # lines printed per call, eagerly
    appended: int = 0                                  # values appended to LOG per call, eagerly


PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("print", "Python's print between two tensor operations", lambda x, k: 2 * x + 1, printed=1),
    Program("value_branch", "a Python `if` on a tensor's value (its sum > 0)",
            lambda x, k: 2 * x if x.sum() > 0 else x - 1),
    Program("item_branch", "`.item()` (a Python float), then a branch on it and arithmetic with it",
            lambda x, k: x / x.sum() if x.sum() > 0 else x - x.sum()),
    Program("numpy_call", "a numpy function in the middle (np.tanh on the host array)",
            lambda x, k: np.tanh(2 * x) + 1),
    Program("scipy_call", "a scipy function in the middle (scipy.special.expit)", lambda x, k: x * _expit(x)),
    Program("list_append", "appending the tensor's sum to a Python list", lambda x, k: 3 * x, appended=1),
    Program("while_loop", "a data-dependent Python `while` (halve until the norm is at most 1)",
            lambda x, k: _halve_until_unit(x)),
    Program("python_random", "Python's `random.random()` (seeded before each call)",
            lambda x, k: x * random.Random(SEED + k).random()),
)}
TASKS = tuple(PROGRAMS)
tasks = fixed_tasks(TASKS)


# The programs as a user writes them where tensors have NumPy-style methods (`.sum()`,
# `.item()`) and operators: the same text in PyTorch and JAX (print_ and python_random use
# operators only, so TensorFlow too). frameworks/<fw>/interop.py take these as they are and
# write the others in their own API. They only call methods of the array they are given.
def print_(x):
    y = x * 2
    print("interop: doubled")
    return y + 1


def value_branch(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def item_branch(x):
    s = x.sum().item()
    if s > 0:
        return x / s
    return x - s


def list_append(x):
    LOG.append(x.sum())
    return x * 3


def python_random(x):
    return x * random.random()


ARRAY_METHOD_PROGRAMS = {"print": print_, "value_branch": value_branch, "item_branch": item_branch,
                         "list_append": list_append, "python_random": python_random}


def make_inputs(config: InteropConfig, seed: int = 0) -> list[np.ndarray]:
    """POOL float32 vectors: sums alternately positive and negative (both branches), norms
    from below 1 to about 20 sqrt(n) (while-loop counts from 0 up)."""
    z = np.random.default_rng(seed).standard_normal((POOL, config.n))
    out = []
    for i, (scale, sign) in enumerate(zip((0.02, 3.0, 10.0, 40.0), (1, -1, 1, -1))):
        v = z[i] - z[i].mean() + sign * 0.5
        out.append((scale * v / max(1.0, np.linalg.norm(v)) if scale < 1 else scale * v).astype(np.float32))
    return out


IDIOMATIC = "idiomatic"
# The programs each framework has an idiomatic rewrite of (frameworks/<fw>/interop.py's
# REWRITES hold them): those its compilers refuse, run wrongly or break as written. A program
# its compilers take as written has none (TensorFlow's AutoGraph turns the Python `if` and
# `while` on a tensor into tf.cond / tf.while_loop; Dynamo traces the numpy call and the
# list append).
REWRITTEN: dict[str, tuple[str, ...]] = {
    "jax": TASKS,
    "tensorflow": ("print", "item_branch", "numpy_call", "scipy_call", "list_append", "python_random"),
    "torch": ("print", "value_branch", "item_branch", "scipy_call", "while_loop", "python_random"),
}


def strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """The program as written (None), and in accelerated modes its idiomatic rewrite where the
    framework has one (eager runs every program as written)."""
    if mode != "eager" and task in REWRITTEN.get(framework, ()):
        return (None, IDIOMATIC)
    return (None,)


@dataclass(frozen=True)
class Rewrite:
    """A program rewritten in a framework's own idiom for its compiler: `fn` in place of the
    program, `uses` the API it rests on (in words, for the report), `helpers` the module-level
    definitions it needs (a custom op, ...; every line of them counts as changed), `setup`
    lines of configuration it needs (counted; `configure`, a context-manager factory, is
    entered around the compiled function's first call, where it is traced), `native_print`
    where it prints from native code (tf.print), which a redirect of sys.stdout does not see:
    its calls capture file descriptor 1 instead."""
    fn: Callable[[Any], Any]
    uses: str
    helpers: tuple[Any, ...] = ()
    setup: tuple[str, ...] = ()
    configure: Callable[[], Any] | None = None
    native_print: bool = False


def _code_lines(obj: Any, body: bool) -> list[str]:
    """The source lines of a function (its body only when `body`: decorators and signature
    dropped), stripped, without blank lines, comments and docstring lines."""
    src = textwrap.dedent(inspect.getsource(inspect.unwrap(obj)))
    lines = [ln.strip() for ln in src.splitlines()]
    if body:
        while lines and not lines[0].startswith("def "):
            lines.pop(0)
        lines = lines[1:]
    quote = '"' * 3
    out, in_doc = [], False
    for ln in lines:
        if in_doc:                       # inside a docstring: up to the line that closes it
            in_doc = quote not in ln
            continue
        if ln.startswith(quote):         # a docstring opens: closed on the same line or later
            in_doc = not (len(ln) > 3 and ln.endswith(quote))
            continue
        if ln and not ln.startswith("#"):
            out.append(ln)
    return out


def lines_changed(original: Callable[[Any], Any], rewrite: Rewrite) -> int:
    """Lines a rewrite changes against the program as written: in the function bodies, a
    replaced run of lines counts its longer side (difflib's opcodes), an added or removed line
    one; plus every line of its helpers (decorators and signature included) and its setup."""
    a, b = _code_lines(original, True), _code_lines(rewrite.fn, True)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    n = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")
    return n + sum(len(_code_lines(h, False)) for h in rewrite.helpers) + len(rewrite.setup)


def check_inputs(config: InteropConfig, method: str, /, *args: Any, **kwargs: Any) -> None:
    """The programs take any float32 vector they can compute on (each program's own inputs,
    make_inputs): no rule to check (workloads.base.check_inputs), the program name aside."""
    choose("interop program", method, PROGRAMS)


def task_spec(config: InteropConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """One call of a program on one input vector (inputs rotate over both branches)."""
    choose("interop program", task, TASKS)
    return TaskSpec(task, task, tuple((x,) for x in make_inputs(config, seed)), 1, "calls", 0.0,
                    f"n={config.n}", note=PROGRAMS[task].feature)


# ----------------------------------------------------------------------------- one call

class Call:
    """A program under a mode, called by the protocol of this module (seeded random,
    captured print, LOG emptied): what the probe and the timed rounds both call. `sync`
    waits for the result inside the capture (a compiled program's host callbacks, e.g.
    jax.debug.print's, may run after the call returns); `native_print` captures file
    descriptor 1 rather than sys.stdout (what native code prints: tf.print)."""

    def __init__(self, fn: Callable[[Any], Any], sync: Callable[[Any], Any] | None = None,
                 native_print: bool = False) -> None:
        self.fn, self.k, self.sync, self.native = fn, 0, sync or _same, native_print
        self._tmp: Any = None
        self.printed, self.appended = 0, []   # of the last call

    def __call__(self, x: Any) -> Any:
        random.seed(SEED + self.k)
        self.k += 1
        LOG.clear()
        out = io.StringIO()
        if self.native and self._tmp is None:
            self._tmp = tempfile.TemporaryFile()     # one per Call: not made on the timed path
        with (_fd_stdout(out, self._tmp) if self.native else contextlib.redirect_stdout(out)):
            y = self.sync(self.fn(x))
        self.printed = out.getvalue().count("\n")
        self.appended = list(LOG)
        LOG.clear()
        return y


def _same(y: Any) -> Any:
    return y


@contextlib.contextmanager
def _fd_stdout(out: io.StringIO, tmp: Any) -> Any:
    """What is written to file descriptor 1 (native code's stdout) while inside, into `out`,
    through the file `tmp` (emptied each time): a few system calls per call (dup, dup2, seek,
    read, truncate), where a redirect of sys.stdout swaps one Python attribute."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(tmp.fileno(), 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        tmp.seek(0)
        out.write(tmp.read().decode(errors="replace"))
        tmp.seek(0)
        tmp.truncate()


def first_call_within(fn: Callable[[Any], Any], configure: Callable[[], Any]) -> Callable[[Any], Any]:
    """fn, its first call (where a compiler traces) made inside configure()'s context."""
    first = [True]

    def call(x: Any) -> Any:
        if first:
            first.clear()
            with configure():
                return fn(x)
        return fn(x)
    return call


@dataclass
class Verdict:
    """What running a program under a mode showed (OUTCOMES); `reason` in the framework's
    words (refused, graph_breaks) or what differed (wrong)."""
    outcome: str
    reason: str | None
    calls: int
    calls_matching: int
    effects_expected: int
    effects_seen: int
    graphs: int | None = None
    graph_breaks: int | None = None

    @property
    def status(self) -> str:
        return STATUS_OF[self.outcome]

    def record(self) -> dict[str, Any]:
        """The record keys of this verdict (reports turn them into columns)."""
        return {"interop_outcome": self.outcome, "interop_calls": self.calls,
                "interop_calls_matching": self.calls_matching, "side_effects_expected": self.effects_expected,
                "side_effects_seen": self.effects_seen, "dynamo_graphs": self.graphs,
                "dynamo_graph_breaks": self.graph_breaks}


@dataclass(frozen=True)
class Pieces:
    """How to see, for a compiler that compiles in pieces (torch.compile), whether a program
    is one graph: `fullgraph(fn)` compiles fn as one graph or raises (torch.compile's
    fullgraph=True: the compiler's own refusal to break the graph, with its reason), and
    `counters()` reads the compiler's cumulative (graphs, graph breaks) of the process
    (Dynamo's counters), which the probe reads before and after its calls."""
    fullgraph: Callable[[Callable[[Any], Any]], Callable[[Any], Any]]
    counters: Callable[[], tuple[int, int]]


def probe(program: Program, fn: Callable[[Any], Any], inputs: list[Any], to_numpy: Callable[[Any], Any],
          eager: bool, pieces: Pieces | None = None, source: Callable[[Any], Any] | None = None,
          call: Call | None = None) -> Verdict:
    """Run `fn` (the program under a mode, freshly made) on every input PROBE_PASSES times,
    in order, comparing each call's output and side effects with the reference; classify.

    Where the mode compiles in pieces (`pieces`, torch.compile), the compiler's graphs and
    breaks over those calls are recorded (the growth of pieces.counters()), and the program
    (`source`, as written) is then compiled as one graph (pieces.fullgraph) and called on
    every input, by the same protocol: a break may lie on one branch only. The outcome is
    graph_breaks where that raises on some input or the break counter grew, with every
    distinct reason the compiler gave. `call`: fn under the protocol (default Call(fn))."""
    call, host = call or Call(fn), [np.asarray(to_numpy(x), np.float64) for x in inputs]
    n = PROBE_PASSES * len(inputs)
    expected = n * (program.printed + program.appended)
    seen = matching = 0
    worst = 0.0
    before = pieces.counters() if pieces is not None else None
    for k in range(n):
        x = host[k % len(inputs)]
        try:
            y = call(inputs[k % len(inputs)])
            got = np.asarray(to_numpy(y), np.float64)
        except Exception as e:  # noqa: BLE001  the framework's refusal, in its own words
            return Verdict("refused", error_line(e), k, matching, expected, seen)
        seen += call.printed + len(call.appended)
        err = rel_err(got, program.reference(x, k)) if got.shape == x.shape else math.inf
        ok = err <= TOL and call.printed == program.printed and len(call.appended) == program.appended
        if ok and program.appended:
            ok = all(_close(v, x.sum(), to_numpy) for v in call.appended)
        worst = max(worst, err)
        matching += ok
    if matching < n:
        what = []
        if seen != expected:
            what.append(f"side effects ran {seen} times in {n} calls, eagerly {expected}"
                        + (" (at trace time only)" if seen < expected else ""))
        if worst > TOL:
            what.append(f"output differs from eager in {n - matching} of {n} calls "
                        f"(largest relative error {worst:.2g}): a branch or Python value frozen at trace time")
        return Verdict("wrong", "; ".join(what) or f"{n - matching} of {n} calls differ from eager",
                       n, matching, expected, seen)
    if eager or pieces is None:
        return Verdict("eager" if eager else "compiled", None, n, matching, expected, seen)
    after = pieces.counters()
    graphs, n_breaks = after[0] - before[0], after[1] - before[1]
    reasons = [r for r in (one_graph(pieces.fullgraph(source or fn), x) for x in inputs) if r]
    outcome = "graph_breaks" if reasons or n_breaks else "compiled"
    reason = "; ".join(dict.fromkeys(reasons))[:1000] if reasons else (
        f"{n_breaks} graph breaks counted" if n_breaks else None)
    return Verdict(outcome, reason, n, matching, expected, seen, graphs, n_breaks)


def one_graph(fn: Callable[[Any], Any], x: Any) -> str | None:
    """None when fn (a program compiled as one graph) runs on x, else the compiler's reason:
    its message on one line, up to its hints (Dynamo's messages run over several lines:
    what failed, an explanation, hints), at most 300 characters. Called by the protocol of
    this module, LOG emptied afterwards."""
    try:
        Call(fn)(x)
    except Exception as e:  # noqa: BLE001  the compiler's refusal to make one graph
        text = " ".join(str(e).split()).split(" Hint:")[0]
        return f"{type(e).__name__}: {text}"[:300]
    finally:
        LOG.clear()
    return None


def _close(value: Any, want: float, to_numpy: Callable[[Any], Any]) -> bool:
    """Is a value a program appended to LOG the number eager appends? A placeholder left by
    tracing (a JAX tracer, a symbolic TF tensor) is not."""
    try:
        v = float(np.asarray(to_numpy(value)))
    except Exception:  # noqa: BLE001
        return False
    return abs(v - want) <= TOL * max(1.0, abs(want))


class Programs(Model):
    """The model object a framework's `build` returns: `getattr(model, program)` probes that
    program under the mode (a fresh function from `make`), then returns the timed callable
    (another fresh function from `make`, so its first call compiles); the verdict's record
    keys are then `record_extra(program)`. A refused program raises `refused(reason)` (the
    harness records it unsupported), a wrong one WrongResult (recorded failed, never timed),
    each with those keys.

    make(fn) -> the program under the mode; `adapter` gives to_numpy, asarray(x, device) and
    sync(y), which waits for a result; the case gives mode, device and strategy; pieces as
    for `probe`; tidy(reason) shortens a framework's message without changing its words
    (TensorFlow's graph names with their attributes). With strategy IDIOMATIC each program is
    the framework's rewrite (`rewrites`, a Rewrite per program of REWRITTEN[framework]; a program without one raises
    `refused`), and the record also carries rewrite_uses and rewrite_lines."""

    def __init__(self, programs: dict[str, Callable[[Any], Any]], make: Callable[[Callable], Callable],
                 adapter: Any, config: InteropConfig, case: Any, pieces: Pieces | None = None,
                 rewrites: dict[str, Rewrite] | None = None, tidy: Callable[[str], str] | None = None) -> None:
        assert set(programs) == set(PROGRAMS), "a framework implements every program"
        strategy = case.strategy
        choose("interop strategy", strategy or "as written", ("as written", IDIOMATIC))
        self._programs, self._make, self._to_numpy, self._pieces = programs, make, adapter.to_numpy, pieces
        self._refused, self.mode, self.config, self._sync = Unsupported, case.mode, config, adapter.sync
        self._rewrites = (rewrites or {}) if strategy == IDIOMATIC else None
        self._tidy = tidy
        self._inputs = [adapter.asarray(x, case.device) for x in make_inputs(config)]
        self.verdicts: dict[str, Verdict] = {}
        self._extras: dict[str, dict[str, Any]] = {}

    def _rewrite(self, name: str) -> Rewrite | None:
        if self._rewrites is None:
            return None
        if name not in self._rewrites:
            raise self._refused(f"no idiomatic rewrite of {name!r} in this framework (it has: "
                                f"{', '.join(sorted(self._rewrites)) or 'none'})")
        return self._rewrites[name]

    def _made(self, name: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Call]:
        """(the program's source function, it under the mode, a Call of that by the protocol)."""
        rw = self._rewrite(name)
        fn = rw.fn if rw else self._programs[name]
        made = self._make(fn)
        if rw and rw.configure and self.mode != "eager":
            made = first_call_within(made, rw.configure)
        return fn, made, Call(made, self._sync, bool(rw and rw.native_print))

    def verdict(self, name: str) -> Verdict:
        if name not in self.verdicts:
            fn, made, call = self._made(name)
            rw, pieces = self._rewrite(name), self._pieces
            if rw and rw.configure and pieces is not None:
                pieces = Pieces(lambda f: first_call_within(self._pieces.fullgraph(f), rw.configure),
                                self._pieces.counters)
            v = probe(PROGRAMS[name], made, self._inputs, self._to_numpy, self.mode == "eager", pieces, fn, call)
            if v.reason and self._tidy:
                v.reason = self._tidy(v.reason)
            self.verdicts[name] = v
        return self.verdicts[name]

    def timed(self, name: str) -> Call:
        """The program's timed callable, after its verdict (which raises if it is not timed)."""
        v = self.verdict(name)
        extra = {**v.record(), "status": v.status, "reason": v.reason}
        rw = self._rewrite(name)
        if rw:
            extra.update(rewrite_uses=rw.uses, rewrite_lines=lines_changed(self._programs[name], rw))
        if v.outcome == "refused":
            raise self._refused(v.reason or "refused", record_extra=extra)
        if v.outcome == "wrong":
            raise WrongResult(v.reason or "wrong result", record_extra=extra)
        self._extras[name] = extra
        return self._made(name)[2]

    def record_extra(self, method: str) -> dict[str, Any]:
        """The verdict's record keys of a program whose timed callable was looked up."""
        return self._extras.get(method, {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in PROGRAMS:
            raise AttributeError(name)
        return self.timed(name)


# What every framework's build returns, one class for every framework (its programs under the
# framework's `make`); tests/test_conformance.py checks each against it.
MODEL = Programs

"""Pieces every workload shares: user-facing errors, name checking, the task spec
that drives the benchmark harness, optimizer hyperparameters and tolerance maths.

Nothing here imports a framework.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import numpy as np


class FwbenchError(ValueError):
    """An error meant for the user: its message is one line saying what was wrong
    and what is valid. Command-line entry points print it without a traceback.
    `record_extra`: keys a case stopped by it adds to its record (none by default)."""

    def __init__(self, *args: Any, record_extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(*args)
        self.record_extra: Mapping[str, Any] = dict(record_extra or {})


class Model:
    """What the harness reads of every built model besides its workload's methods (the
    workload's MODEL Protocol): the optional behaviour, each declared here with the default
    that means "none", which a model class overrides where it has it. Every framework's model
    derives from it (tests/test_conformance.py checks each built one)."""
    # () -> what a call that updates the model changed besides its output (JAX's new
    # parameters and optimizer state), for the harness to wait on too; None: the output is all
    state: Callable[[], Any] | None = None
    # (*arrays) -> the arrays as the model's step takes them (a data-parallel model splits the
    # global batch over its devices, outside the timed region); None: as they are made
    place_inputs: Callable[..., tuple[Any, ...]] | None = None
    # method -> the attention its program runs where that differs from the framework's for the
    # device and precision (GPT: adapter.attention_impl names it otherwise); empty: none does
    attention_impls: Mapping[str, str] = MappingProxyType({})

    def record_extra(self, method: str) -> Mapping[str, Any]:
        """Keys the case of `method` adds to its record (interop's verdict); none by default."""
        return {}


CPUS_ENV = "FWBENCH_CPUS"


def parse_cpus(text: str) -> set[int]:
    """'0-3,6' (as taskset -c and Slurm write CPU lists) -> {0, 1, 2, 3, 6}."""
    out: set[int] = set()
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise FwbenchError(f"{CPUS_ENV}={text!r}: not a CPU list; write it as taskset -c does, e.g. 0-3,6") from None
    return out


def restrict_cpus() -> None:
    """Run on the CPUs FWBENCH_CPUS names, of those this process may use. A process inherits its
    parent's CPUs, except one a scheduler starts afresh: a Slurm job on a cluster that binds no
    tasks (TaskPlugin=task/none) may run anywhere on the node, and set_threads would pin it to
    the node's first CPUs, beside whatever runs there. sbatch passes the submitter's environment
    on, so a submitter that sets FWBENCH_CPUS keeps its jobs on its own CPUs (the test suite's
    workers do: each has one CPU). Unset, or naming no CPU this process may use: as is."""
    text = os.environ.get(CPUS_ENV, "").strip()
    if not text or not hasattr(os, "sched_setaffinity"):
        return
    mine = parse_cpus(text) & os.sched_getaffinity(0)
    if mine:
        os.sched_setaffinity(0, mine)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity; all of the machine's elsewhere than Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def git_commit() -> str | None:
    """The checkout's commit ('abc1234', with '-dirty' when tracked files changed), or None
    outside a git checkout."""
    import subprocess
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def split_presets(text: str) -> tuple[str, dict[str, str]]:
    """--preset as given -> (the default preset, {workload: preset}): 'small' names every
    workload's, 'gpt=gpt2,diffusion=ddpm-cifar' some workloads' (a bare name is the others')."""
    default, per = "small", {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        wl, eq, name = part.partition("=")
        if eq:
            per[wl.strip()] = name.strip()
        else:
            default = part
    return default, per


class Unsupported(FwbenchError):
    """Raised by a framework for a mode/task/device/strategy it cannot do. The case is
    recorded with status 'unsupported' and this message; nothing is faked in its place.
    (Here, not in frameworks/, so that a workload can refuse a case too.)"""


class WrongResult(FwbenchError):
    """A case ran but its result differs from the reference (a side effect that ran only
    while tracing, a branch frozen at trace time, a wrong padded result, a derivative that
    differs from the workload's float64 reference: TaskSpec.check). The harness records it
    `failed` with this message and times nothing: a wrong answer is never timed as a
    success; the pytest case xfails (the record is the finding, e.g. workloads.interop's
    "side effect at trace time only"), with the keys it adds in `record_extra`."""


# The device kinds a case or a run names; "cuda" and "gpu" name the same accelerator.
ACCELERATORS = ("cuda", "gpu")
DEVICE_KINDS = ("cpu", *ACCELERATORS)


def is_accelerator(device: str) -> bool:
    """Whether `device` ("cuda", "gpu", "cuda:1", "cpu", ...) names an accelerator."""
    return str(device).split(":")[0] in ACCELERATORS


def choose(kind: str, name: str, valid: Iterable[str]) -> str:
    """Return `name` if it is one of `valid`, else raise a one-line FwbenchError."""
    valid = tuple(valid)
    if name not in valid:
        raise FwbenchError(f"unknown {kind} {name!r}: choose one of {', '.join(valid)}")
    return name


def split_names(text: str | Iterable[str] | None, kind: str, valid: Iterable[str]) -> tuple[str, ...]:
    """Parse a comma list ('torch,jax') or an iterable of names, checking each one.
    None or 'all' means every valid name."""
    valid = tuple(valid)
    if text is None:
        return valid
    items = text.split(",") if isinstance(text, str) else list(text)
    items = [i.strip() for i in items if i.strip()]
    if not items or items == ["all"]:
        return valid
    return tuple(choose(kind, i, valid) for i in items)


def error_line(e: BaseException, text: str | None = None) -> str:
    """An exception as one line, in the framework's own words: "<Type>: <first line>" of its
    message (or of `text`, the message cleaned by the caller). TensorFlow wraps errors raised
    while tracing as "in user code: <frames> ... <Error>: <message>": the last line is the
    message there."""
    lines = [ln.strip() for ln in (str(e) if text is None else text).strip().splitlines() if ln.strip()]
    line = lines[-1] if lines and lines[0].startswith("in user code") else (lines[0] if lines else "")
    kind = type(e).__name__
    return (line if line.startswith(kind + ":") else f"{kind}: {line}")[:500]   # TF's last line names it


def merge_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Add the files of folder `src` to folder `dst` (made where missing): each file `dst`
    lacks is hard-linked (copied across file systems); a file `dst` already has is left as it
    is. For compile caches (the harness's per-case folders, `fwbench run`'s cold processes):
    Inductor's, JAX's and XLA's entries are content-addressed, a name holds one program."""
    def add(s: str, d: str) -> str:
        if not os.path.exists(d):
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)
        return d
    if os.path.isdir(src):
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True, copy_function=add)


def check_positive(obj: Any, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0:
            raise FwbenchError(f"{type(obj).__name__}.{n} must be a positive integer, got {v!r}")


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a numpy or framework array as a tuple of ints (torch.Size, TensorShape...)."""
    return tuple(map(int, x.shape))


_DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(x: Any) -> str:
    """The dtype of a numpy or framework array as numpy names it ('int32', 'float32'),
    remembered per dtype object: numpy computes `dtype.name` in Python, and input checks run
    in timed calls (measured: it cost a 0.75 ms JAX call 30 us when run right before it)."""
    d = x.dtype
    name = _DTYPE_NAMES.get(d)
    if name is None:
        name = _DTYPE_NAMES[d] = getattr(d, "name", None) or str(d).rpartition(".")[2]   # torch.int32 has no .name
    return name


def host_values(x: Any) -> np.ndarray:
    """A numpy copy (or view) of a small array from numpy, torch (any device), JAX or
    TensorFlow: what input checks read values from."""
    if hasattr(x, "detach"):                                         # torch.Tensor
        x = x.detach().cpu()
    return np.asarray(x)


InputRule = Callable[..., None]


def check_inputs(rules: Mapping[str, InputRule], config: Any, method: str, args: tuple[Any, ...],
                 kwargs: Mapping[str, Any]) -> None:
    """Refuse inputs a model's `method` cannot take, with its workload's one-line message:
    rules[method](config, *args, **kwargs) (numpy or any framework's arrays). Where inputs are
    made, never inside a timed call: the harness runs it on every input it converts (its pool,
    a stream's requests) and a library user on the inputs they make (each workload's
    `check_inputs(config, method, *args, **kwargs)`); a model's methods check no array (a
    call is what is timed: docs/ARCHITECTURE.md, "Input rules"), only the Python scalars whose
    wrong value would run on silently or without end (n_new, order)."""
    rule = rules.get(method)
    if rule is None:
        raise FwbenchError(f"no input rule for method {method!r} (methods with rules: {', '.join(rules)})")
    try:
        inspect.signature(rule).bind(config, *args, **kwargs)
    except TypeError as e:
        raise FwbenchError(f"{method} takes {inspect.signature(rule)} after the config: {e}") from None
    rule(config, *args, **kwargs)


def replace_config(config: Any, **changes: Any) -> Any:
    """dataclasses.replace with a clear error for unknown fields."""
    names = {f.name for f in dataclasses.fields(config)}
    bad = sorted(set(changes) - names)
    if bad:
        raise FwbenchError(
            f"{type(config).__name__} has no field {', '.join(bad)}: valid fields are {', '.join(sorted(names))}"
        )
    return dataclasses.replace(config, **changes)


def check_param_shapes(kind: str, want: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> None:
    """Refuse a parameter dict whose names or shapes differ from `want`, naming what differs."""
    missing = [k for k in want if k not in params]
    extra = [k for k in params if k not in want]
    if missing or extra:
        raise FwbenchError(f"{kind} params do not match the config: missing {missing[:4]}, unexpected {extra[:4]}")
    for k, s in want.items():
        if tuple(params[k].shape) != s:
            raise FwbenchError(f"{kind} param {k} has shape {tuple(params[k].shape)}, config needs {s}")


@dataclass(frozen=True)
class Preset:
    """A named configuration and the batch size its benchmarks use."""
    name: str
    config: Any
    batch: int
    note: str = ""


@dataclass(frozen=True)
class Stream:
    """A stream of requests whose shapes vary (workloads/dynamic.py): a TaskSpec's `inputs`
    are the requests in arrival order. The harness times each request of a first pass on a
    fresh model (cold: new shapes pay their compilation here), checks every output against
    `expected`, then times whole passes (warm: every shape seen before); see
    frameworks/harness/timing.py: time_stream."""
    keys: tuple[str, ...]                  # each request's shape, e.g. "T=37": new or seen
    expected: Any = None                   # i -> request i's output, numpy float64 (or None)
    tolerance: float = 0.0                 # rel_err allowed against expected
    record: Mapping[str, Any] = field(default_factory=dict)   # scalar record keys, e.g. padding_waste
    # request i's real output is its first rows[i] rows (a batch padded to a bucket); None: all
    rows: tuple[int, ...] | None = None
    # Instead of expected/tolerance, for outputs no single rel_err fits (token ids, a loss
    # with gradients): check(i, request i's output as numpy) -> None, or what differs.
    check: Callable[[int, Any], str | None] | None = None


@dataclass(frozen=True)
class Serve:
    """A serving case (workloads/serving.py): the model's deployable form is exported, then
    loaded and served by a process of its own that never imports the model code
    (frameworks/serve.py), and timed there by frameworks/harness/serving.py: time_serving. The
    requests are numpy arrays the serving process turns into its engine's own (outside any
    timed region); `loop` names the request loop it runs (frameworks/serve.py: LOOPS)."""
    loop: str                                          # "generate" (prefill + decode steps) | "sample"
    stream: tuple[tuple[np.ndarray, ...], ...]         # the latency stream, batch 1, in arrival order
    keys: tuple[str, ...]                              # each stream request's shape, e.g. "T=13"
    check: tuple[tuple[np.ndarray, ...], ...]          # requests checked against eager before timing
    batches: tuple[tuple[int, tuple[np.ndarray, ...]], ...]   # offline throughput: (batch, its request)
    items: Callable[[tuple[np.ndarray, ...]], int]     # a request's work in the TaskSpec's unit
    settings: Mapping[str, Any] = field(default_factory=dict)  # what the loop needs (n_new; t, a, b)
    tolerance: float = 0.0                             # rel_err allowed against the eager model
    min_requests: int = 0                              # fewest timed requests (whole passes over the stream)


@dataclass(frozen=True)
class TaskSpec:
    """What the benchmark harness needs to time one task, framework-free.

    The harness converts every numpy array of `inputs[i]` with the framework adapter
    (outside the timed region), then calls `getattr(model, method)(*inputs[i], **kwargs)`,
    rotating i each round so no cache can flatter a number.
    """
    task: str
    method: str
    inputs: tuple[tuple[np.ndarray, ...], ...]
    items: int            # work of one call, in `unit`; throughput = items / time
    unit: str
    flops: float          # model FLOPs of one call (workload formula)
    shape: str            # human-readable shape of the work, e.g. "B=8,T=128"
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
    # True when the call updates the model (a train step): the harness then also waits for
    # the model's state() (parameters, optimizer state), not only for the returned value.
    mutates: bool = False
    # A stream case (timed request by request, cold then warm) instead of steady rounds.
    stream: Stream | None = None
    # The problem's size as extra record keys (e.g. params, batch, n, m): report columns.
    sizes: Mapping[str, int] = field(default_factory=dict)
    # Correctness before timing: check(first call's output, as numpy) returns None when it
    # matches the workload's reference, else what differed; the harness then records the
    # case `failed` with that message and does not time it.
    check: Callable[[Any], str | None] | None = None
    # On an accelerator: peak memory of one call, measured after the timed rounds
    # (Adapter.call_peak_memory: the allocator's peak where it keeps one, else the process's
    # peak RSS delta) instead of the allocator's peak over the whole case; the record says
    # which (`peak_memory_source`). On the CPU every case gets that call, by one instrument
    # for every framework (frameworks.harness.memory).
    call_memory: bool = False
    # A serving case (Serve): exported, loaded by a process of its own and timed there
    # (frameworks/harness/serving.py) instead of steady rounds in this process.
    serve: Serve | None = None


# How torch's compiled train step is put together (frameworks/torch: TRAIN_RECIPES has what
# each does). JAX and TensorFlow compile the whole step as one program, so they have one way.
TORCH_TRAIN_RECIPES = ("eager-adamw", "compiled-adamw", "compiled-autograd")
# The recipe of torch's `compiled` train_step without a strategy, the same in every workload:
# the fastest that works (measured: docs/ARCHITECTURE.md, "torch's compiled train step").
TORCH_DEFAULT_RECIPE = "eager-adamw"


# torch's CUDA-graph variant of its compiled forward and train step: torch.compile's
# mode="reduce-overhead" records the step's kernel launches once and replays them as a CUDA
# graph (the launch overhead of small steps is what it removes). A strategy of its own, so
# its numbers are labelled, declared on CUDA placements only: a CPU has no graphs to replay.
CUDA_GRAPHS = "cudagraphs"
CUDA_GRAPH_TASKS = ("forward", "train_step")


def device_strategies(framework: str, mode: str, task: str, kind: str) -> tuple[str, ...]:
    """Strategies a model workload has on some devices only (`kind`: cpu, cuda, gpu):
    declared_cases adds them after the workload's `strategies`."""
    if framework == "torch" and mode == "compiled" and task in CUDA_GRAPH_TASKS and is_accelerator(kind):
        return (CUDA_GRAPHS,)
    return ()


def no_device_strategies(framework: str, mode: str, task: str, kind: str) -> tuple[str, ...]:
    """device_strategies of a workload that has none: the same strategies on every device."""
    return ()


def fixed_tasks(names: tuple[str, ...]) -> Callable[[Any], tuple[str, ...]]:
    """tasks(config) of a workload whose task names carry no sizes: `names` for every preset."""
    return lambda config: names


def train_step_strategies(framework: str, mode: str, task: str) -> tuple[str | None, ...]:
    """Strategies of a train step: torch's compiled one has the recipes other than its default
    as variants of their own; everything else has only the default (None)."""
    if framework == "torch" and mode == "compiled" and task == "train_step":
        return (None, *(r for r in TORCH_TRAIN_RECIPES if r != TORCH_DEFAULT_RECIPE))
    return (None,)


@dataclass(frozen=True)
class AdamW:
    """AdamW as torch.optim.AdamW defines it (decoupled weight decay, bias-corrected
    moments, eps added to the bias-corrected sqrt(v)), with global-norm gradient
    clipping first, as nanoGPT's training loop does:

        g <- g * min(1, clip / (||g||_2 + 1e-6))
        m <- b1 m + (1 - b1) g ;  v <- b2 v + (1 - b2) g^2
        p <- p (1 - lr wd [p is decayed]) - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    """
    lr: float
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    clip_norm: float = 1.0


def attn_scale(head_size: int) -> float:
    """The attention logits' scale, 1/sqrt(head size), in every model and framework."""
    return head_size ** -0.5


def adamw_reference(params: Mapping[str, np.ndarray], grads_seq: Iterable[Mapping[str, np.ndarray]],
                    opt: AdamW, decay: Iterable[str], store: Any = None) -> dict[str, np.ndarray]:
    """Numpy float64 AdamW over a sequence of given gradients; a reference for tests. With
    store=np.float32 the parameters are rounded to float32 after every step, as a float32
    implementation stores them (then only the arithmetic of one update is float64)."""
    decay = set(decay)
    p = {k: np.asarray(v, np.float64).copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v2 = {k: np.zeros_like(v) for k, v in p.items()}
    for t, grads in enumerate(grads_seq, start=1):
        g = {k: np.asarray(grads[k], np.float64) for k in p}
        norm = np.sqrt(sum(float(np.sum(x * x)) for x in g.values()))
        scale = min(1.0, opt.clip_norm / (norm + 1e-6))
        for k in p:
            gk = g[k] * scale
            m[k] = opt.beta1 * m[k] + (1 - opt.beta1) * gk
            v2[k] = opt.beta2 * v2[k] + (1 - opt.beta2) * gk * gk
            if k in decay:
                p[k] *= 1 - opt.lr * opt.weight_decay
            mhat = m[k] / (1 - opt.beta1 ** t)
            vhat = v2[k] / (1 - opt.beta2 ** t)
            p[k] -= opt.lr * mhat / (np.sqrt(vhat) + opt.eps)
            if store is not None:
                p[k] = p[k].astype(store).astype(np.float64)
    return p


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """Relative error in the Frobenius (flattened L2) norm: ||a - b|| / ||b||.

    This is the norm every equivalence tolerance in fwbench uses. Where b is all
    zeros the absolute norm ||a - b|| is returned instead.
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise AssertionError(f"shape mismatch {a.shape} vs {b.shape}")
    den = float(np.linalg.norm(b.ravel()))
    num = float(np.linalg.norm((a - b).ravel()))
    return num / den if den > 0 else num


def max_rel_err(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> tuple[float, str]:
    """Largest per-tensor rel_err over two dicts with the same keys, and its key."""
    if set(a) != set(b):
        raise AssertionError(f"different keys: only in first {sorted(set(a) - set(b))}, "
                             f"only in second {sorted(set(b) - set(a))}")
    worst = max(((rel_err(a[k], b[k]), k) for k in b), default=(0.0, ""))
    return worst

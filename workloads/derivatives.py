"""Higher-order derivatives and vmap, framework-free: the problems, their sizes, seeded
inputs, the strategies (transform variants) each framework offers, and numpy float64
references every result is checked against before it is timed.

Problems (the task names carry their size; `tasks(config)` lists a preset's):

    per_sample_grad_mlp_b{B}   one gradient per example of a tanh MLP classifier's
                               cross-entropy, for a batch of B examples: a dict of (B, ...)
                               arrays keyed like the parameters (MLP_KEYS)
    hvp_mlp                    Hessian-vector product of the MLP's mean loss over `data`
                               examples with respect to all parameters: a dict like them
    hessian_p{P}               the full Hessian (P', P') of a tanh MLP's mean loss with
                               respect to its flattened parameters, P' close to P (the
                               hidden width is chosen from P; records carry the exact P')
    jacobian_n{n}_m{m}         the Jacobian (m, n) of f(x) = B tanh(A x), R^n -> R^m
    nth_derivative_{k}         the k-th derivative of g(x) = sin(x) exp(x/2), evaluated at
                               `points` points (elementwise), (points,)
    per_sample_grad_gpt_b{B}   one gradient of the GPT loss per sequence (B sequences of
                               gpt_seq tokens): a dict of (B, ...) keyed by GPT-2 names
    hvp_gpt                    HVP of the GPT's mean loss over gpt_hvp_batch sequences with
                               respect to all parameters: a dict keyed by GPT-2 names
    ensemble_gpt_k{K}          the logits (K, B, T, vocab) of K GPTs (K stacked parameter
                               sets) on the same ensemble_batch sequences

The GPT (every GPT problem) is workloads/gpt.py's, at the `gpt` preset (tiny: 2 layers,
64 wide, 118,528 parameters) and gpt_seq tokens, each framework's own frameworks/<fw>/gpt.py
called as a function of its parameters; init_params makes the K GPTs (gpt_member).
GPT_CUT: the issue asks for the tiny and small GPT presets with B in {8, 32, 64}. The small
preset keeps the tiny GPT at T = 32 with B 8 and 32; the `large` preset has the small GPT
(4.2 M parameters) at B 8, 32 and 64. Why (measured, 2-core CPU, indicative): the eager
`loop` baselines cost about 0.16 s per sequence (JAX: 10 s per call at B 64, so about
110 s per case with its rounds, in each framework); one cold torch.compile of the tiny GPT's
per-sample gradients takes about 50 s; B 64 per-sample gradients of the small GPT hold
64 x 4.2 M floats (1 GB) per call; and the matrix must finish within 20 minutes.

The MLP (every MLP problem): logits = tanh(x W1 + b1) W2 + b2, cross-entropy with integer
labels; parameters w1 (d_in, hidden), b1 (hidden,), w2 (hidden, classes), b2 (classes,).

Inputs reach a framework's model as positional arrays (the harness converts numpy arrays
only): the MLP problems take (w1, b1, w2, b2, [v1, vb1, v2, vb2,] x, y), the Jacobian
(a, b, x), the n-th derivative (x) with `order` as a keyword; the GPT's per-sample gradients
(tokens, targets), its HVP (tokens, targets, *v in param_shapes order), the ensemble
(tokens) with `models` as a keyword (the GPTs' parameters are the model's, from init_params).

References (float64, independent of every framework's autodiff):
    per-sample gradients   analytic backpropagation, example by example
    Jacobian               analytic: B diag(1 - tanh(Ax)^2) A
    n-th derivative        analytic: g = Im(exp((1/2 + i) x)), so
                           g^(k)(x) = |c|^k exp(x/2) sin(x + k arg c), c = 1/2 + i
    HVP                    4th-order central differences of the analytic gradient along v,
                           step FD_H; the analytic gradient is itself checked against
                           differences of the loss (tests/test_derivatives.py)
    Hessian                analytic (Gauss-Newton term plus the logits' curvature), checked
                           against the differences of the gradient along each unit vector
    GPT per-sample grads   no float64 GPT gradient exists: each sequence's gradient along a
                           fixed random unit direction u against the 4th-order central
                           difference of that sequence's float64 loss along u (B values)
    GPT HVP                u^T H v for u = v/|v| and a random unit u, against the 2-D central
                           difference of the float64 mean loss (GPT_FD_H; 2 values)
    ensemble               the float64 forward (workloads.gpt.reference_logits) of each model

Correctness before timing: every TaskSpec carries `check(output)`, which compares the first
call's output with the reference (relative Frobenius error, workloads.base.rel_err, the
worst over a dict's arrays) and returns what differed, or None; the harness records a case
whose output differs as `failed` and does not time it. Tolerances (TOL) are about ten times
the worst error measured over the three frameworks, their modes and strategies.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

import numpy as np

from workloads import gpt as G
from workloads.base import (
    FwbenchError,
    Preset,
    TaskSpec,
    check_positive,
    choose,
    host_values,
    max_rel_err,
    no_device_strategies,
    rel_err,
    shape_of,
)
from workloads.base import check_inputs as _check_inputs

NAME = "derivatives"
# Its strategies (transforms, and the loops they are compared with) are what it
# compares, not optional variants: every `--variants` setting runs them all.
OPTIONAL_VARIANTS = False
device_strategies = no_device_strategies
PROBLEMS = ("per_sample_grad", "hvp", "hessian", "jacobian", "nth_derivative", "ensemble")
MLP_KEYS = ("w1", "b1", "w2", "b2")
FD_H = 1e-3          # step of the 4th-order central differences (float64), along unit vectors
POOL = 2             # input sets rotated through the timed rounds

# The strategies (transform variants) of each framework, per problem; the first is the
# default (the one a plain derivative call uses). Every mode of a framework has the same ones
# (but COMPILED_ONLY's). The MLP and GPT tasks of a problem share its strategies.
#   vmap / vectorized_map  the batched transform over examples (torch.func.vmap(grad),
#                          jax.vmap(jax.grad), tf.vectorized_map over a GradientTape);
#                          ensemble: the GPT forward vmapped over K stacked parameter sets
#                          (torch.func.stack_module_state + functional_call; jax.vmap over
#                          the stacked pytree; TF: tf.vectorized_map over the stacked
#                          variables of a functional call of the GPT module)
#   jacobian               TF: GradientTape.jacobian of the per-example losses (pfor)
#   batch_jacobian         TF: GradientTape.batch_jacobian of the per-example losses with
#                          respect to per-example copies of the parameters (it needs row i of
#                          the output to depend on row i of the source only; it does not apply
#                          to the Jacobian problem, which has one input and no batch, nor to
#                          the GPT, whose tf.Module reads shared variables: unsupported)
#   loop                   a Python loop over the examples, one gradient each (compiled
#                          mode: the one-example gradient is compiled, the loop is Python);
#                          ensemble: the compiled forward of each of the K models, stacked
#   fwd_rev / rev_rev      forward-over-reverse (jvp of grad; TF ForwardAccumulator over a
#                          tape) / reverse-over-reverse (grad of <grad, v>; nested tapes)
#   moments                TF: the GPT's fwd_rev HVP with the idiomatic tf.nn.moments LayerNorm
#                          (Keras 3's LayerNormalization computes the same on the TF backend):
#                          exact at first order only, so `failed` with CAUSES' line (the MLP
#                          has no LayerNorm: unsupported)
#   jacfwd_jacrev, jacrev_jacrev, hessian
#                          the Hessian by the two compositions and the framework's own
#                          `hessian` (torch.func.hessian, jax.hessian: both jacfwd(jacrev))
#   pfor / while           TF: tape.jacobian of the gradient, vectorised (pfor) or a while loop
#   jacfwd / jacrev        forward- / reverse-mode Jacobian (TF: vectorized_map of a
#                          ForwardAccumulator / tape.jacobian); jacrev_while: TF without pfor
#   grad                   the k-th derivative as k nested grads of the sum over points
#   vmap (nth)             vmap over points of k nested grads of the scalar function
#   autograd               torch.autograd.grad with create_graph, k times
#   autograd_traced        the same, compiled with Dynamo's trace_autograd_ops=True (compiled
#                          mode only: COMPILED_ONLY)
#   jet                    JAX's Taylor-mode jax.experimental.jet (one pass for any order)
#   tapes                  TF: k nested GradientTapes
STRATEGIES: dict[str, dict[str, tuple[str, ...]]] = {
    "per_sample_grad": {"torch": ("vmap", "loop"), "jax": ("vmap", "loop"),
                        "tensorflow": ("vectorized_map", "jacobian", "batch_jacobian", "loop")},
    "hvp": {"torch": ("fwd_rev", "rev_rev"), "jax": ("fwd_rev", "rev_rev"),
            "tensorflow": ("fwd_rev", "rev_rev", "moments")},
    "hessian": {"torch": ("jacfwd_jacrev", "jacrev_jacrev", "hessian"),
                "jax": ("jacfwd_jacrev", "jacrev_jacrev", "hessian"), "tensorflow": ("pfor", "while")},
    "jacobian": {"torch": ("jacrev", "jacfwd"), "jax": ("jacrev", "jacfwd"),
                 "tensorflow": ("jacrev", "jacfwd", "jacrev_while")},
    "nth_derivative": {"torch": ("grad", "vmap", "autograd", "autograd_traced"), "jax": ("grad", "vmap", "jet"),
                       "tensorflow": ("tapes",)},
    "ensemble": {"torch": ("vmap", "loop"), "jax": ("vmap", "loop"), "tensorflow": ("vectorized_map", "loop")},
}

# Strategies that are wrong by construction, and why: their check's failure says so first,
# then the error measured (the line the harness records as the case's reason and the report
# prints), so a `failed` case of this kind reads as a finding, not as a suite bug.
# (a format string of the relative error `err`; task_spec hands it to the case's Check).
CAUSES = {"moments": "tf.nn.moments stops the gradient through the mean: exact at first order only; relative "
                     "error {err:.2g} against the float64 second difference"}

# Strategies that exist only in a compiled mode (a compiler setting: in eager mode they would
# be another strategy's duplicate).
COMPILED_ONLY = {"autograd_traced"}

# Tolerances on the relative error against the float64 reference: ten times the worst error
# achieved over torch, jax and tensorflow, every mode and strategy, at the tiny and small
# presets (`python -m tests.measure.measure_derivatives tiny` and `... small`, 2-core CPU machine,
# 2026-12-03). Achieved, worst per framework (torch, jax, tensorflow):
TOL: dict[str, float] = {
    "per_sample_grad": 2e-6,   # 1.6e-7, 1.8e-7, 1.8e-7 (small, b64; tiny 1.1e-7, 1.3e-7, 1.2e-7)
    "hvp": 5e-6,               # 2.9e-7, 4.6e-7, 4.0e-7 (small, P = 19,210)
    "hessian": 3e-6,           # 1.4e-7, 1.5e-7, 2.5e-7 (tiny P = 30: 1.0e-7, 1.5e-7, 2.5e-7; small up to P = 2994)
    "jacobian": 4e-6,          # 3.2e-7, 2.8e-7, 3.4e-7 (small, hidden 256)
    # The GPT problems (tiny GPT; tiny preset T = 8, small T = 32): per-sample gradients along
    # u against differences of each sequence's loss; the HVP's u^T H v against the 2-D
    # difference (whose own error, about 2e-6, dominates: every framework lands there);
    # the ensemble's logits against the float64 forward of each model.
    "per_sample_grad_gpt": 3e-6,   # 1.5e-7, 9.9e-8, 2.7e-7 (tiny; TF graph jacobian the worst);
                                   # small (T 32, B 8/32): 1.8e-7, 2.8e-7, 2.7e-7
    "hvp_gpt": 2e-5,               # 1.8e-6, 2.0e-6, 2.3e-6 (tiny); small: 5.9e-7, 6.0e-7, 7.1e-7
                                   # (TF since its LayerNorm's mean is differentiable; its
                                   # `moments` strategy, tf.nn.moments, 2.2e-2 and 2.8e-3)
    "ensemble": 2e-6,              # 1.7e-7, 1.7e-7, 1.7e-7 (tiny and small)
    "nth_derivative": 2e-5,    # 2.0e-7, 1.9e-6, 2.5e-7: JAX's jet (Taylor mode, order 5: 1.9e-6;
                               # nested grads in every framework at most 2.5e-7)
}


@dataclass(frozen=True)
class DerivativesConfig:
    """Sizes of every problem. The MLP of per-sample gradients and the HVP is
    (d_in, hidden, classes); the Hessian's MLP is (hessian_d_in, width from P, hessian_classes)."""
    d_in: int = 64
    hidden: int = 256
    classes: int = 10
    data: int = 64                           # examples in the HVP's and the Hessian's loss
    psg_batches: tuple[int, ...] = (8, 32, 64)
    hessian_d_in: int = 8
    hessian_classes: int = 4
    # (large: 3000 and 10000 too; TF's eager `while` Hessian alone took about 8 minutes at
    # 3000, measured: over the small matrix's 20-minute budget)
    hessian_params: tuple[int, ...] = (100, 1000)
    jacobian_hidden: int = 256
    # (n, m) at n m = 10^4: jacrev costs m VJPs, jacfwd n JVPs, so where they cross is in between
    jacobian_shapes: tuple[tuple[int, int], ...] = ((1000, 10), (300, 30), (100, 100), (30, 300), (10, 1000))
    points: int = 1024
    orders: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    # The GPT problems: workloads.gpt's `gpt` preset at gpt_seq tokens per sequence. The
    # issue asks for the tiny and small GPT presets at B 8/32/64; the small matrix keeps the
    # tiny GPT (2 layers, 64 wide, 0.1 M parameters) at T = 32 only: see GPT_CUT.
    gpt: str = "tiny"
    gpt_seq: int = 32
    gpt_batches: tuple[int, ...] = (8, 32)          # per-sample gradients of the GPT loss (large: 64 too)
    gpt_hvp_batch: int = 8                          # sequences in the GPT HVP's loss
    ensemble_models: tuple[int, ...] = (4, 8)       # K stacked GPTs
    ensemble_batch: int = 2                         # sequences each model's forward sees

    def __post_init__(self) -> None:
        check_positive(self, "d_in", "hidden", "classes", "data", "hessian_d_in", "hessian_classes",
                       "jacobian_hidden", "points", "gpt_seq", "gpt_hvp_batch", "ensemble_batch")
        sizes = [*self.psg_batches, *self.hessian_params, *self.orders, *(d for s in self.jacobian_shapes for d in s),
                 *self.gpt_batches, *self.ensemble_models]
        G.preset(self.gpt)
        if self.gpt_seq > G.preset(self.gpt).config.block_size:
            raise FwbenchError(f"gpt_seq {self.gpt_seq} must be at most the {self.gpt} GPT's block_size "
                               f"({G.preset(self.gpt).config.block_size})")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            raise FwbenchError(f"DerivativesConfig sizes must be positive integers, got {sizes}")
        if not self.ensemble_models:
            raise FwbenchError("DerivativesConfig.ensemble_models must list at least one K: init_params makes "
                               "max(ensemble_models) GPTs, and member 0 is the GPT problems' model")


PRESETS: dict[str, Preset] = {
    "tiny": Preset("tiny", DerivativesConfig(d_in=6, hidden=8, classes=3, data=5, psg_batches=(4,),
                                             hessian_params=(30,), jacobian_hidden=8,
                                             jacobian_shapes=((12, 3), (3, 12)), points=16, orders=(1, 4),
                                             gpt_seq=8, gpt_batches=(3,), gpt_hvp_batch=2, ensemble_models=(2,),
                                             ensemble_batch=2),
                   batch=1, note="for tests"),
    "small": Preset("small", DerivativesConfig(), batch=1, note="CPU benchmark default"),
    # The Hessian at P = 3000 (TF's eager `while`: one tape replay per row, about 50 s a call)
    # and 10^4 (a 400 MB float32 result; jacfwd(jacrev) vmaps the gradient over 10^4 tangents,
    # (10^4, 64, 770) per intermediate: GBs), a denser Jacobian sweep and the GPT's per-sample
    # gradients at B 64: too heavy for the small matrix's 20 minutes on the 2-core CPU. Its GPT
    # problems use the `small` GPT (4 layers, 256 wide), the small preset's the `tiny` one.
    "large": Preset("large", DerivativesConfig(hessian_params=(100, 1000, 3000, 10000), gpt="small",
                                               gpt_batches=(8, 32, 64),
                                               jacobian_shapes=((1000, 10), (500, 20), (300, 30), (200, 50),
                                                                (100, 100), (50, 200), (30, 300), (20, 500),
                                                                (10, 1000))),
                    batch=1, note="Hessian to 10^4 parameters, dense Jacobian sweep, the small GPT at B 8/32/64 "
                                  "(not in the 20-minute matrix)"),
}


def preset(name: str) -> Preset:
    return PRESETS[choose("derivatives preset", name, PRESETS)]


def init_params(cfg: DerivativesConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """The GPTs of the GPT problems (the MLP problems' arrays are inputs of their tasks, made
    by task_spec): max(ensemble_models) GPTs of the `gpt` preset, member k's parameters
    named f"m{k}.<GPT-2 name>", seeded (seed, k). Member 0 is the model of the per-sample
    gradients and the HVP. The models hold them (torch's functional_call, JAX's pytree, TF's
    variables) and pass them to the transforms as arguments."""
    gcfg = G.preset(cfg.gpt).config
    return {f"m{k}.{name}": a for k in range(max(cfg.ensemble_models))
            for name, a in gpt_member(gcfg, seed, k).items()}


def gpt_member(gcfg: G.GPTConfig, seed: int, k: int) -> dict[str, np.ndarray]:
    """Ensemble member k: GPT-2's initialisation (workloads.gpt.init_params) with the LayerNorm
    weights and biases drawn around 1 and 0 (N(1, 0.1^2), N(0, 0.1^2)), so that every
    parameter's derivative is exercised (biases at 0 would leave terms of the HVP unchecked)."""
    rng = np.random.default_rng([seed, k, 12])
    out = G.init_params(gcfg, seed=int(rng.integers(1 << 31)))
    for name, a in out.items():
        if a.ndim == 1:
            out[name] = (a + rng.normal(0.0, 0.1, a.shape)).astype(np.float32)
    return out


def gpt_params(params: Mapping[str, Any], k: int = 0) -> dict[str, Any]:
    """Member k's parameters under their GPT-2 names, from init_params' dict."""
    prefix = f"m{k}."
    return {name[len(prefix):]: a for name, a in params.items() if name.startswith(prefix)}


# ----------------------------------------------------------------------------- tasks

_PATTERNS = {
    "per_sample_grad": re.compile(r"per_sample_grad_(?:mlp|gpt)_b(\d+)"),
    "hvp": re.compile(r"hvp_(?:mlp|gpt)"),
    "hessian": re.compile(r"hessian_p(\d+)"),
    "jacobian": re.compile(r"jacobian_n(\d+)_m(\d+)"),
    "nth_derivative": re.compile(r"nth_derivative_(\d+)"),
    "ensemble": re.compile(r"ensemble_gpt_k(\d+)"),
}


def tasks(cfg: DerivativesConfig) -> tuple[str, ...]:
    """A preset's task names, one per problem size."""
    return (*(f"per_sample_grad_mlp_b{b}" for b in cfg.psg_batches), "hvp_mlp",
            *(f"hessian_p{p}" for p in cfg.hessian_params),
            *(f"jacobian_n{n}_m{m}" for n, m in cfg.jacobian_shapes),
            *(f"nth_derivative_{k}" for k in cfg.orders),
            *(f"per_sample_grad_gpt_b{b}" for b in cfg.gpt_batches), "hvp_gpt",
            *(f"ensemble_gpt_k{k}" for k in cfg.ensemble_models))


TASKS = tasks(PRESETS["small"].config)


def problem_of(task: str) -> tuple[str, tuple[int, ...]]:
    """(problem, its sizes from the name) of a task name, e.g. 'hessian_p100' -> ('hessian', (100,))."""
    for problem, pat in _PATTERNS.items():
        m = pat.fullmatch(task)
        if m:
            sizes = tuple(int(g) for g in m.groups())
            if all(s > 0 for s in sizes):
                return problem, sizes
    raise FwbenchError(f"unknown derivatives task {task!r}: names look like {', '.join(tasks(PRESETS['tiny'].config))}")


def strategies(framework: str, mode: str, task: str) -> tuple[str, ...]:
    """The transform variants of a framework for a task (the first is the default)."""
    declared = STRATEGIES[problem_of(task)[0]].get(framework, ())
    return declared if mode == "compiled" else tuple(s for s in declared if s not in COMPILED_ONLY)


# ----------------------------------------------------------------------------- the MLP

@dataclass(frozen=True)
class MLP:
    d_in: int
    hidden: int
    classes: int

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {"w1": (self.d_in, self.hidden), "b1": (self.hidden,),
                "w2": (self.hidden, self.classes), "b2": (self.classes,)}

    @property
    def n_params(self) -> int:
        return sum(math.prod(s) for s in self.shapes().values())

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Weights N(0, 1/fan_in) (pre-activations and logits O(1), tanh well away from its
        linear range), biases N(0, 0.1^2). float32."""
        out = {}
        for k, s in self.shapes().items():
            std = 1 / math.sqrt(s[0]) if len(s) == 2 else 0.1
            out[k] = rng.normal(0.0, std, s).astype(np.float32)
        return out

    def data(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.standard_normal((n, self.d_in)).astype(np.float32),
                rng.integers(0, self.classes, n).astype(np.int32))


def hessian_mlp(cfg: DerivativesConfig, target: int) -> MLP:
    """The Hessian problem's MLP: the hidden width whose parameter count is closest to target."""
    per_unit = cfg.hessian_d_in + 1 + cfg.hessian_classes
    return MLP(cfg.hessian_d_in, max(1, round((target - cfg.hessian_classes) / per_unit)), cfg.hessian_classes)


def flatten(params: Mapping[str, np.ndarray], keys: tuple[str, ...] = MLP_KEYS) -> np.ndarray:
    """The parameters as one vector, in `keys` order (the MLP's by default), row-major."""
    return np.concatenate([np.asarray(params[k]).ravel() for k in keys])


def unflatten(theta: Any, model: MLP | Mapping[str, tuple[int, ...]],
              reshape: Callable[[Any, tuple[int, ...]], Any] = np.reshape) -> dict[str, Any]:
    """The parameter dict from its flat vector: slices of theta (numpy or any framework's
    array; `reshape` is that framework's, e.g. tf.reshape). `model` is the MLP, or the
    shapes by name in flat order (a GPT's workloads.gpt.param_shapes)."""
    out, i = {}, 0
    for k, s in (model.shapes() if isinstance(model, MLP) else model).items():
        n = math.prod(s)
        out[k] = reshape(theta[i:i + n], s)
        i += n
    return out


def reference_losses(params: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example cross-entropy (N,), float64."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    logits = np.tanh(np.asarray(x, np.float64) @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -logp[np.arange(len(y)), y]


def reference_per_sample_grads(params: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray
                               ) -> dict[str, np.ndarray]:
    """Analytic gradient of each example's loss: a dict of (N, ...) float64 arrays."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    x = np.asarray(x, np.float64)
    h = np.tanh(x @ p["w1"] + p["b1"])                                   # (N, hidden)
    logits = h @ p["w2"] + p["b2"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    dlogits = e / e.sum(-1, keepdims=True)
    dlogits[np.arange(len(y)), y] -= 1.0                                 # softmax - onehot
    da = (dlogits @ p["w2"].T) * (1.0 - h * h)                           # (N, hidden)
    return {"w1": x[:, :, None] * da[:, None, :], "b1": da,
            "w2": h[:, :, None] * dlogits[:, None, :], "b2": dlogits}


def reference_grad(params: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Analytic gradient of the mean loss."""
    return {k: g.mean(0) for k, g in reference_per_sample_grads(params, x, y).items()}


def directional(fn: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, v: np.ndarray,
                h: float = FD_H) -> np.ndarray:
    """4th-order central difference of fn at theta along v (float64)."""
    return (8 * (fn(theta + h * v) - fn(theta - h * v)) - (fn(theta + 2 * h * v) - fn(theta - 2 * h * v))) / (12 * h)


def _flat_grad(mlp: MLP, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return lambda theta: flatten(reference_grad(unflatten(theta, mlp), x, y))


def reference_hvp(mlp: MLP, params: Mapping[str, np.ndarray], v: Mapping[str, np.ndarray],
                  x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    theta = flatten(params).astype(np.float64)
    hv = directional(_flat_grad(mlp, x, y), theta, flatten(v).astype(np.float64))
    return unflatten(hv, mlp)


def reference_hessian(mlp: MLP, theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(P, P), analytic: the mean over examples of J^T S J (J = d logits / d theta, S the
    softmax's Hessian diag(p) - p p^T) plus sum_c r_c Hess(logit_c) (r = p - onehot), whose
    only non-zero blocks are (w1|b1, w1|b1) of hidden unit k with itself, q_k u u^T with
    u = (x, 1) and q = (W2 r) * tanh'', and (w1|b1 of unit k, w2[k, c]) = r_c tanh'(a_k) u.
    Differences of the gradient along each unit vector (the previous reference, 4 P
    gradients) took 93 s at P = 10^4 and 14 s at 3000, per case; this takes 7 s and 0.5 s.
    Tested against those differences (tests/test_derivatives.py)."""
    p = unflatten(np.asarray(theta, np.float64), mlp)
    x = np.asarray(x, np.float64)
    N, d, H, C = len(y), mlp.d_in, mlp.hidden, mlp.classes
    u = np.concatenate([x, np.ones((N, 1))], 1)                 # w1's rows, then b1, per unit
    z = np.tanh(x @ p["w1"] + p["b1"])
    logits = z @ p["w2"] + p["b2"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    prob = e / e.sum(-1, keepdims=True)
    r = prob.copy()
    r[np.arange(N), y] -= 1.0
    dz = 1 - z * z
    eye = np.eye(C)
    J = np.concatenate([np.einsum("ni,nck->ncik", u, p["w2"].T[None] * dz[:, None, :]).reshape(N, C, (d + 1) * H),
                        np.einsum("nk,cq->nckq", z, eye).reshape(N, C, H * C),
                        np.broadcast_to(eye, (N, C, C))], axis=2)
    S = prob[:, :, None] * eye - prob[:, :, None] * prob[:, None, :]
    P = J.shape[2]
    hess = J.reshape(N * C, P).T @ np.einsum("ncd,ndp->ncp", S, J).reshape(N * C, P)
    A, units = (d + 1) * H, np.arange(H)
    first = hess[:A, :A].reshape(d + 1, H, d + 1, H)
    first[:, units, :, units] += np.einsum("nk,ni,nj->kij", (r @ p["w2"].T) * (-2 * z * dz), u, u)
    cross = hess[:A, A:A + H * C].reshape(d + 1, H, H, C)
    cross[:, units, units, :] += np.einsum("nc,nk,ni->ikc", r, dz, u)
    hess[:A, :A] = first.reshape(A, A)
    hess[:A, A:A + H * C] = cross.reshape(A, H * C)
    hess[A:A + H * C, :A] = hess[:A, A:A + H * C].T
    return hess / N


def reference_jacobian(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d/dx of f(x) = b @ tanh(a @ x): (m, n) = b diag(1 - tanh(a x)^2) a."""
    a, b, x = (np.asarray(t, np.float64) for t in (a, b, x))
    s = 1.0 - np.tanh(a @ x) ** 2
    return (b * s) @ a


def nth_function(x: np.ndarray) -> np.ndarray:
    """g(x) = sin(x) exp(x/2), the scalar function of the n-th derivative problem."""
    return np.sin(x) * np.exp(x / 2)


def reference_nth_derivative(x: np.ndarray, order: int) -> np.ndarray:
    """g^(k)(x) = |c|^k exp(x/2) sin(x + k arg c) with c = 1/2 + i (g = Im exp(c x))."""
    x = np.asarray(x, np.float64)
    c = complex(0.5, 1.0)
    return abs(c) ** order * np.exp(x / 2) * np.sin(x + order * math.atan2(c.imag, c.real))


# ----------------------------------------------------------------------------- the GPT problems
# Per-sample gradients of the GPT (B x 0.1 M values) have no cheap float64 reference (the
# numpy GPT has no backward); they are checked by what they imply: each example's gradient
# along a fixed random direction u against the 4th-order central difference of that
# example's float64 loss along u. The HVP is checked by u^T H v for two directions u (v
# itself and a random one) against a 2-D central difference of the float64 mean loss:
# (L(+u+v) - L(+u-v) - L(-u+v) + L(-u-v)) / (4 h^2) with steps h u, h v (GPT_FD_H).
GPT_FD_H = 1e-3


def gpt_loss_fn(gcfg: G.GPTConfig, tokens: np.ndarray, targets: np.ndarray) -> Callable[[np.ndarray], float]:
    """theta (flat, float64, param_shapes order) -> the float64 mean loss on these sequences."""
    shapes = G.param_shapes(gcfg)
    return lambda theta: G.reference_loss(gcfg, unflatten(theta, shapes), tokens, targets)


def reference_gpt_slopes(gcfg: G.GPTConfig, params: Mapping[str, np.ndarray], tokens: np.ndarray,
                         targets: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(B, 1): each sequence's loss differenced along u (flat): <its gradient, u>."""
    theta = flatten(params, tuple(G.param_shapes(gcfg))).astype(np.float64)
    return np.array([[directional(gpt_loss_fn(gcfg, tokens[i:i + 1], targets[i:i + 1]), theta, u)]
                     for i in range(len(tokens))])


def reference_gpt_uhv(gcfg: G.GPTConfig, params: Mapping[str, np.ndarray], tokens: np.ndarray,
                      targets: np.ndarray, us: list[np.ndarray], v: np.ndarray, h: float = GPT_FD_H) -> np.ndarray:
    """(len(us),): u^T H v of the mean loss for each flat unit u, by the 2-D central difference
    along u and v / |v| (steps of length h), times |v|."""
    theta = flatten(params, tuple(G.param_shapes(gcfg))).astype(np.float64)
    loss = gpt_loss_fn(gcfg, tokens, targets)
    norm = np.linalg.norm(v)
    w = v / norm
    return norm * np.array([(loss(theta + h * u + h * w) - loss(theta + h * u - h * w)
                             - loss(theta - h * u + h * w) + loss(theta - h * u - h * w)) / (4 * h * h) for u in us])


def projector(shapes: Mapping[str, tuple[int, ...]], lead: tuple[int, ...], us: list[np.ndarray]
              ) -> Callable[[Mapping[str, Any]], np.ndarray]:
    """out (a dict of lead + shape arrays, keyed like `shapes`) -> its inner products with each
    flat u: (*lead, len(us)). Raises AssertionError (a structure difference) on other keys
    or shapes."""
    def project(out: Mapping[str, Any]) -> np.ndarray:
        assert set(out) == set(shapes), f"keys {sorted(set(out) ^ set(shapes))[:4]} differ"
        for k, s in shapes.items():
            assert tuple(np.shape(out[k])) == (*lead, *s), f"{k}: shape {np.shape(out[k])}, expected {(*lead, *s)}"
        n = math.prod(lead)
        flat = np.concatenate([np.asarray(out[k], np.float64).reshape(n, -1) for k in shapes], axis=1)
        return (flat @ np.stack(us, axis=1)).reshape(*lead, len(us))
    return project


def unit_direction(rng: np.random.Generator, size: int) -> np.ndarray:
    u = rng.standard_normal(size)
    return u / np.linalg.norm(u)


def gpt_task_spec(cfg: DerivativesConfig, problem: str, sizes: tuple[int, ...], task: str, seed: int) -> TaskSpec:
    """The GPT problems' specs (task_spec)."""
    gcfg = G.preset(cfg.gpt).config
    shapes = G.param_shapes(gcfg)
    P, T = G.n_params(gcfg, non_embedding=False), cfg.gpt_seq
    member = lambda k: gpt_member(gcfg, seed, k)  # noqa: E731
    rng = np.random.default_rng([seed, PROBLEMS.index(problem), 99])
    if problem == "ensemble":
        K, B = sizes[0], cfg.ensemble_batch
        inputs = tuple((G.make_batch(gcfg, B, seed=seed * 1000 + i, seq_len=T)[0],) for i in range(POOL))
        tokens0 = inputs[0][0]
        return TaskSpec(task, "ensemble_gpt", inputs, K * B, "sequences",
                        K * B * T * G.flops_per_token(gcfg, T, training=False), f"K={K},B={B},T={T},P={P}",
                        kwargs={"models": K}, note="K GPT forwards (PaLM's 2N + 4 L H Q T per token)",
                        sizes={"params": P, "batch": B, "models": K, "seq_len": T},
                        check=Check("ensemble", lambda: np.stack([G.reference_logits(gcfg, member(k), tokens0)
                                                                  for k in range(K)])))
    B = sizes[0] if problem == "per_sample_grad" else cfg.gpt_hvp_batch
    batches = [G.make_batch(gcfg, B, seed=seed * 1000 + i, seq_len=T) for i in range(POOL)]
    tokens0, targets0 = batches[0]
    if problem == "per_sample_grad":
        u = unit_direction(rng, P)
        return TaskSpec(task, "per_sample_grad_gpt", tuple(batches), B, "sequences",
                        B * T * G.flops_per_token(gcfg, T, training=True), f"B={B},T={T},P={P}",
                        note="a forward and backward per sequence (PaLM's 6N + 12 L H Q T per token)",
                        sizes={"params": P, "batch": B, "seq_len": T},
                        check=Check(problem, lambda: reference_gpt_slopes(gcfg, member(0), tokens0, targets0, u),
                                    projector(shapes, (B,), [u]), what="gpt"))
    vs = [{k: r.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
          for r in (np.random.default_rng([seed, i, 98]) for i in range(POOL))]
    inputs = tuple((tok, tgt, *(v[k] for k in shapes)) for (tok, tgt), v in zip(batches, vs))
    v0 = flatten(vs[0], tuple(shapes)).astype(np.float64)
    us = [v0 / np.linalg.norm(v0), unit_direction(rng, P)]
    return TaskSpec(task, "hvp_gpt", inputs, 1, "products", 2 * B * T * G.flops_per_token(gcfg, T, training=True),
                    f"B={B},T={T},P={P}", note="about two gradients", call_memory=True,
                    sizes={"params": P, "batch": B, "seq_len": T},
                    check=Check(problem, lambda: reference_gpt_uhv(gcfg, member(0), tokens0, targets0, us, v0),
                                projector(shapes, (), us), what="gpt"))


# ----------------------------------------------------------------------------- task specs

class Check:
    """check(output) -> None when the output matches the reference within TOL[problem], else
    what differed (structure, or the relative error). The reference is computed once, on
    first use (a Hessian's takes 4 P gradient evaluations). `cause`: a strategy's known
    cause of failing (CAUSES), said instead of the generic line."""
    cause: str | None = None

    def __init__(self, problem: str, reference: Callable[[], Any], project: Callable[[Any], Any] | None = None,
                 what: str = "") -> None:
        """`project`, when given, maps the output to what the reference is (e.g. inner products
        with fixed directions), raising AssertionError when the output's structure differs;
        `what` picks the tolerance TOL[f"{problem}_{what}"] instead of TOL[problem]."""
        self.problem, self._reference, self._ref, self.project = problem, reference, None, project
        self.tol_key = f"{problem}_{what}" if what else problem

    def reference(self) -> Any:
        if self._ref is None:
            self._ref = self._reference()
        return self._ref

    def error(self, out: Any) -> tuple[float | str, str]:
        """(relative error, where) against the reference, or (what differed, '') when the
        structure (shape, keys) differs."""
        ref = self.reference()
        try:
            if self.project is not None:
                out = self.project(out)
            if isinstance(ref, dict):
                if not isinstance(out, Mapping):
                    return f"expected a dict of {', '.join(ref)}, got {type(out).__name__}", ""
                err, key = max_rel_err({k: np.asarray(v) for k, v in out.items()}, ref)
                return err, f" (in {key})"
            return rel_err(np.asarray(out), ref), ""
        except AssertionError as e:
            return f"{self.problem}: result differs in structure: {e}", ""

    def __call__(self, out: Any) -> str | None:
        err, where = self.error(out)
        if isinstance(err, str):
            return err
        if not err <= TOL[self.tol_key]:     # NaN fails too
            if self.cause:
                return f"{self.cause.format(err=err)}{where} (tolerance {TOL[self.tol_key]:.1g})"
            return f"{self.problem}: relative error {err:.3g}{where} exceeds the tolerance {TOL[self.tol_key]:.1g}"
        return None


def task_spec(cfg: DerivativesConfig, batch: int, task: str, seed: int = 0, strategy: str | None = None) -> TaskSpec:
    """Inputs (POOL seeded sets), items, FLOPs, sizes and the correctness check of one task.
    `batch` (the preset's) is unused: each task's size is in its name."""
    problem, sizes = problem_of(task)
    if "gpt" in task:
        spec = gpt_task_spec(cfg, problem, sizes, task, seed)
        if strategy in CAUSES and spec.check is not None:
            spec.check.cause = CAUSES[strategy]
        return spec
    rngs = [np.random.default_rng([seed, i, PROBLEMS.index(problem)]) for i in range(POOL)]
    if problem in ("per_sample_grad", "hvp", "hessian"):
        mlp = hessian_mlp(cfg, sizes[0]) if problem == "hessian" else MLP(cfg.d_in, cfg.hidden, cfg.classes)
        n = sizes[0] if problem == "per_sample_grad" else cfg.data
        P = mlp.n_params
        sets = [(mlp.init(r), *mlp.data(r, n), r) for r in rngs]
        if problem == "per_sample_grad":
            inputs = tuple((*(p[k] for k in MLP_KEYS), x, y) for p, x, y, _ in sets)
            p0, x0, y0, _ = sets[0]
            return TaskSpec(task, "per_sample_grad", inputs, n, "examples", 6.0 * P * n, f"B={n},P={P}",
                            note="6 P FLOPs per example (forward 2P, backward 4P)",
                            sizes={"params": P, "batch": n},
                            check=Check(problem, lambda: reference_per_sample_grads(p0, x0, y0)))
        if problem == "hvp":
            vs = [{k: r.standard_normal(s).astype(np.float32) for k, s in mlp.shapes().items()} for *_, r in sets]
            inputs = tuple((*(p[k] for k in MLP_KEYS), *(v[k] for k in MLP_KEYS), x, y)
                           for (p, x, y, _), v in zip(sets, vs))
            p0, x0, y0, _ = sets[0]
            return TaskSpec(task, "hvp", inputs, 1, "products", 12.0 * P * n, f"N={n},P={P}",
                            note="12 P N FLOPs: about two gradients", sizes={"params": P, "batch": n},
                            call_memory=True,
                            check=Check(problem, lambda: reference_hvp(mlp, p0, vs[0], x0, y0)))
        inputs = tuple((flatten(p), x, y) for p, x, y, _ in sets)
        theta0, x0, y0 = inputs[0]
        return TaskSpec(task, "hessian", inputs, P, "columns", 12.0 * P * P * n, f"N={n},P={P}",
                        note="12 P^2 N FLOPs: one HVP per column", sizes={"params": P, "batch": n},
                        kwargs={"hidden": mlp.hidden, "classes": mlp.classes},
                        check=Check(problem, lambda: reference_hessian(mlp, theta0, x0, y0)))
    if problem == "jacobian":
        n, m = sizes
        k = cfg.jacobian_hidden
        inputs = tuple((r.normal(0, 1 / math.sqrt(n), (k, n)).astype(np.float32),
                        r.normal(0, 1 / math.sqrt(k), (m, k)).astype(np.float32),
                        r.standard_normal(n).astype(np.float32)) for r in rngs)
        a0, b0, x0 = inputs[0]
        return TaskSpec(task, "jacobian", inputs, n * m, "entries", 2.0 * m * k * n, f"n={n},m={m},hidden={k}",
                        note="2 m k n FLOPs: forming B diag(s) A", sizes={"n": n, "m": m},
                        check=Check(problem, lambda: reference_jacobian(a0, b0, x0)))
    order = sizes[0]
    inputs = tuple((r.uniform(-3.0, 3.0, cfg.points).astype(np.float32),) for r in rngs)
    x0 = inputs[0][0]
    return TaskSpec(task, "nth_derivative", inputs, cfg.points, "points", 0.0, f"points={cfg.points},order={order}",
                    kwargs={"order": order}, note="elementwise: no matmul FLOPs counted",
                    sizes={"derivative_order": order, "points": cfg.points},
                    check=Check(problem, lambda: reference_nth_derivative(x0, order)))


# ----------------------------------------------------------------------------- input rules
# What every framework's model would compute wrongly, or refuse with a deep error, has one rule
# and one-line message for all of them (tests/test_bad_sizes.py), run on the inputs where they
# are made (INPUT_RULES, workloads.base.check_inputs), never in a call: these calls take 0.02 to
# a few ms and are compared with what a user writes (tests/measure/measure_cookbook.py), so every
# Python step inside one shows (measured, JAX, 1 thread: GPTConfig.check_tokens' host copy of the
# token ids, 5 us alone, cost the 0.75 ms ensemble 60 us in the timed loop). A method checks only
# the Python ints that choose its function (order, models, hidden, classes: check_sizes,
# check_models), a few Python steps, where a wrong one would recurse without end or return fewer
# results than asked.

def check_examples(x: Any, what: str = "x") -> None:
    """The MLP problems' examples x (B, d_in): at least one (the mean loss of none is 0/0;
    per-sample gradients of none were an empty result in some frameworks and an error in
    others)."""
    shape = x.shape         # no conversion on the common path
    if len(shape) == 2 and shape[0]:
        return
    raise FwbenchError(f"{what} must be (examples, features) with at least one example, got shape {tuple(shape)}")


def _positive_int(v: Any) -> bool:
    return type(v) is int and v > 0 or (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0)


def check_order(order: Any) -> None:
    """The n-th derivative's order: a positive Python int (TensorFlow's nested tapes recursed
    without end at -1, torch and JAX returned the function itself for 0 and below)."""
    if not _positive_int(order):
        raise FwbenchError(f"order must be a positive integer (the k-th derivative, k >= 1), got {order!r}")


def check_hessian(theta: Any, x: Any, hidden: Any, classes: Any) -> None:
    """The Hessian problem's inputs: hidden and classes positive ints, x (N, d_in) with
    N >= 1, and theta the flat parameters of that MLP, (d_in + 1) hidden + (hidden + 1)
    classes of them (a mismatch failed deep inside)."""
    for name, v in (("hidden", hidden), ("classes", classes)):
        if not _positive_int(v):
            raise FwbenchError(f"{name} must be a positive integer, got {v!r}")
    check_examples(x)
    d = x.shape[1]
    want = (d + 1) * hidden + (hidden + 1) * classes
    if tuple(theta.shape) != (want,):
        raise FwbenchError(f"theta must be the {want} flat parameters of the {d}-{hidden}-{classes} MLP, "
                           f"got shape {tuple(theta.shape)}")


def check_labels(y: Any, classes: int) -> None:
    """The MLP problems' labels: class ids in [0, classes) (one past gave NaN in TensorFlow's
    XLA and finite wrong numbers in JAX, where torch raised). Reads a host copy of y: called
    once per input array (SeenInputs), not in the timed calls."""
    ids = host_values(y)
    if ids.size and (ids.min() < 0 or ids.max() >= classes):
        raise FwbenchError(f"labels y must lie in [0, {classes}) (the MLP's classes), got {ids.min()}..{ids.max()}")


def check_gpt_batch(gcfg: G.GPTConfig, tokens: Any, targets: Any) -> None:
    """The GPT problems' sequences: GPTConfig.check_batch's rules on shapes and dtypes
    (batch >= 1, 1..block_size tokens, int32 or int64, targets of the tokens' shape), the
    ids unread (see above)."""
    gcfg.check_batch(tokens, targets, values=False)


def check_gpt_hvp(gcfg: G.GPTConfig, tokens: Any, targets: Any, v: tuple[Any, ...]) -> None:
    """The GPT HVP's inputs: sequences as check_gpt_batch takes them, and one tangent per
    parameter, in workloads.gpt.param_shapes order and shapes (a shorter list was zipped
    away silently)."""
    check_gpt_batch(gcfg, tokens, targets)
    shapes = G.param_shapes(gcfg)
    if len(v) != len(shapes) or not all(tuple(t.shape) == s for t, s in zip(v, shapes.values())):
        raise FwbenchError(f"the GPT HVP takes {len(shapes)} tangents shaped like the parameters in "
                           f"workloads.gpt.param_shapes order, got {len(v)} of shapes "
                           f"{[tuple(t.shape) for t in v[:2]]}...")


def check_ensemble(gcfg: G.GPTConfig, tokens: Any, models: Any, built: int) -> None:
    """The ensemble's inputs: tokens as check_gpt_batch takes them, and K a positive int at
    most the GPTs built (max(ensemble_models)): K past them returned fewer results than asked
    in torch and JAX."""
    gcfg.check_tokens(tokens, values=False)
    check_models(models, built)


def check_sizes(**ints: Any) -> None:
    """Python ints a method builds its function from (order, hidden, classes): positive ints
    (a method's own check, a few Python steps; the arrays are checked where they are made)."""
    for name, v in ints.items():
        if not _positive_int(v):
            raise FwbenchError(f"{name} must be a positive integer, got {v!r}")


def check_models(models: Any, built: int) -> None:
    """The ensemble's K: an int in 1..built (K past the GPTs built returned fewer results)."""
    if not (_positive_int(models) and models <= built):
        raise FwbenchError(f"models must be an integer in 1..{built} (the GPTs built: max(ensemble_models)), "
                           f"got {models!r}")


def _mlp_labels(cfg: "DerivativesConfig", w1: Any, b1: Any, w2: Any, b2: Any, *rest: Any) -> None:
    """per_sample_grad's and hvp's arrays: examples x and labels y, the last two."""
    check_examples(rest[-2])
    check_labels(rest[-1], shape_of(w2)[-1])


def _hessian_rule(theta: Any, x: Any, y: Any, hidden: Any, classes: Any) -> None:
    check_hessian(theta, x, hidden, classes)
    check_labels(y, classes)


def _gpt_psg_rule(cfg: "DerivativesConfig", tokens: Any, targets: Any) -> None:
    """per_sample_grad_gpt's sequences: shapes (check_gpt_batch), then the ids' values."""
    gcfg = G.preset(cfg.gpt).config
    check_gpt_batch(gcfg, tokens, targets)
    gcfg.check_batch(tokens, targets)


def _gpt_hvp_rule(cfg: "DerivativesConfig", tokens: Any, targets: Any, *v: Any) -> None:
    gcfg = G.preset(cfg.gpt).config
    check_gpt_hvp(gcfg, tokens, targets, v)
    gcfg.check_batch(tokens, targets)


def _ensemble_rule(cfg: "DerivativesConfig", tokens: Any, models: Any) -> None:
    gcfg = G.preset(cfg.gpt).config
    check_ensemble(gcfg, tokens, models, max(cfg.ensemble_models))
    gcfg.check_tokens(tokens)


# Each method's input rule (workloads.base.check_inputs): where inputs are made, never in a call.
INPUT_RULES: dict[str, Any] = {
    "per_sample_grad": lambda cfg, w1, b1, w2, b2, x, y: _mlp_labels(cfg, w1, b1, w2, b2, x, y),
    "hvp": lambda cfg, w1, b1, w2, b2, v1, vb1, v2, vb2, x, y: _mlp_labels(cfg, w1, b1, w2, b2, x, y),
    "hessian": lambda cfg, theta, x, y, hidden, classes: _hessian_rule(theta, x, y, hidden, classes),
    "jacobian": lambda cfg, a, b, x: None,
    "nth_derivative": lambda cfg, x, order: check_order(order),
    "per_sample_grad_gpt": _gpt_psg_rule,
    "hvp_gpt": _gpt_hvp_rule,
    "ensemble_gpt": _ensemble_rule,
}


def check_inputs(cfg: "DerivativesConfig", method: str, /, *args: Any, **kwargs: Any) -> None:
    """The derivatives problems' input rules for `method`'s arguments, one line."""
    _check_inputs(INPUT_RULES, cfg, method, args, kwargs)


# ----------------------------------------------------------------------------- interface

@runtime_checkable
class DerivativesModel(Protocol):
    """What every framework implements (frameworks/<fw>/derivatives.py, `build(adapter,
    config, params, case)`). The case's `strategy` picks the transform for every
    method; a method whose problem the strategy does not belong to, or a transform the
    framework lacks, raises frameworks.base.Unsupported. Compiled modes compile the whole
    transformed function (torch.compile, jax.jit, tf.function(jit_compile=True); TF's graph
    mode: tf.function), on the first call."""

    def per_sample_grad(self, w1: Any, b1: Any, w2: Any, b2: Any, x: Any, y: Any) -> dict[str, Any]:
        """{w1: (B, d_in, hidden), b1: (B, hidden), w2: (B, hidden, classes), b2: (B, classes)}."""

    def hvp(self, w1: Any, b1: Any, w2: Any, b2: Any, v1: Any, vb1: Any, v2: Any, vb2: Any,
            x: Any, y: Any) -> dict[str, Any]:
        """H v of the mean loss, keyed like the parameters."""

    def hessian(self, theta: Any, x: Any, y: Any, hidden: int, classes: int) -> Any:
        """(P, P) Hessian of the mean loss of the MLP (d_in from x, hidden, classes) with
        respect to its flattened parameters theta (MLP_KEYS order, row-major)."""

    def jacobian(self, a: Any, b: Any, x: Any) -> Any:
        """(m, n) Jacobian of b @ tanh(a @ x) with respect to x."""

    def nth_derivative(self, x: Any, order: int) -> Any:
        """(points,) the order-th derivative of sin(x) exp(x/2) at each point."""


# What every framework's build returns: tests/test_conformance.py checks each against it.
MODEL = DerivativesModel

"""Higher-order derivatives and vectorisation in TensorFlow (workloads/derivatives.py), with
GradientTape, ForwardAccumulator and pfor (tf.vectorized_map, tape.jacobian):

    per-sample gradients   vectorized_map: tf.vectorized_map over a one-example tape;
                           jacobian: tape.jacobian of the per-example losses (pfor);
                           batch_jacobian: tape.batch_jacobian of the per-example losses
                           with respect to per-example copies of the parameters (see
                           batch_jacobian_grads); loop: a one-example tape per example in a
                           Python loop, stacked
    HVP                    fwd_rev: a ForwardAccumulator over a tape (TF's documented
                           forward-over-backward HVP); rev_rev: nested tapes, the outer
                           one differentiating <grad, v>; moments (the GPT): fwd_rev
                           with the GPT's LayerNorm as tf.nn.moments computes it
    Hessian                tape.jacobian of the gradient, pfor on (pfor) or off (while:
                           a tf.while_loop over the rows)
    Jacobian               jacrev: tape.jacobian (pfor); jacrev_while: without pfor;
                           jacfwd: tf.vectorized_map of a ForwardAccumulator over the
                           unit tangents (TF has no jacfwd of its own)
    n-th derivative        tapes: k nested GradientTapes
    ensemble (GPT)         vectorized_map: tf.vectorized_map of a functional call of the GPT
                           module over K stacked parameter sets; loop: the K modules'
                           forwards in one function, stacked

The GPT problems use frameworks/tensorflow/gpt.py's modules (member 0's tf.Variables are
the parameters differentiated, captured by the transformed functions as a TF user's
tf.function reads a model's variables; TFGPTs): per-sample gradients by vectorized_map,
jacobian (tape.jacobian of each sequence's loss) and loop; the HVP by fwd_rev and rev_rev,
and `moments`: fwd_rev of a GPT whose LayerNorm is the idiomatic tf.nn.moments one; the
ensemble by vectorized_map (tf.vectorized_map over the K stacked parameter sets of a
functional call of member 0's module, gpt.functional_call) and loop (one function calling
the K modules' forwards). Not applicable, so `unsupported` with the reason: batch_jacobian
of the GPT (BATCH_JACOBIAN_GPT) and `moments` of the MLP (MOMENTS_MLP).

Measured: vectorized_map over the GPT's per-sample gradients falls back to a while loop for
one op ("Using a while_loop for converting ResourceGather cause there is no registered
converter for this op.": the embedding lookup in a variable, differentiated), so those
cases are `fallback` with that message; tape.jacobian of the per-sequence losses vectorises
fully, and so does the vectorised ensemble (its embeddings are gathered from tensors, the
stacked parameter sets sliced by pfor, for which GatherV2 has a converter). Its logits match
the float64 forward of each model to 1.7e-7 (tiny) in eager, graph and compiled modes.

Measured: the GPT's HVP matches the float64 reference (2.1e-6 to 2.3e-6 at tiny: the 2-D
difference's own error) in every mode and strategy since the GPT's LayerNorm computes its
variance around a differentiable mean (gpt.layer_norm). With tf.nn.moments, whose variance
is reduce_mean(squared_difference(x, stop_gradient(mean))) (exact for the first derivative,
where the gradient through the mean is zero, as TF's source says, but not for the second),
it was 2.2e-2 off in every mode and strategy: the `moments` strategy keeps that form, and is
recorded `failed` with the cause (workloads.derivatives.CAUSES). Keras 3's
LayerNormalization on the TF backend computes its moments with tf.nn.moments too, and has the
same second derivative (tests/test_tf_axes.py).

batch_jacobian does not apply to the Jacobian problem (one input x, no batch dimension to
pair outputs with) nor to the Hessian (the gradient's entries all depend on every parameter).

Modes: "eager" runs the tapes op by op (pfor itself traces a tf.function inside); "graph"
is tf.function (Grappler, no XLA) and "compiled" tf.function(jit_compile=True) around the
whole transformed function, made through the adapter so traces are counted (the
per-sample `loop` baseline: around the one-example gradient, looped in Python; the
ensemble's `loop`: around the whole loop over the K models, one call).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from frameworks.base import Unsupported
from frameworks.tensorflow import gpt as tgpt
from frameworks.tensorflow import pfor_fallbacks
from frameworks.transforms import TransformModel
from workloads import derivatives as D
from workloads import gpt as G
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only


def logits(p: list[tf.Tensor], x: tf.Tensor) -> tf.Tensor:
    w1, b1, w2, b2 = p
    return tf.tanh(x @ w1 + b1) @ w2 + b2


def losses(p: list[tf.Tensor], x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """Per-example cross-entropy (N,)."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits(p, x))


def mean_loss(p: list[tf.Tensor], x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    return tf.reduce_mean(losses(p, x, y))


Loss = Callable[[list[Any], tf.Tensor, tf.Tensor], tf.Tensor]


def gradient(p: list[Any], x: tf.Tensor, y: tf.Tensor, loss: Loss = mean_loss) -> list[tf.Tensor]:
    """The gradient of the mean loss (the MLP's, or `loss`: the GPT's, whose p are its
    variables), dense (the GPT's embedding lookup gives IndexedSlices)."""
    with tf.GradientTape() as tape:
        tape.watch(p)
        value = loss(p, x, y)
    return [tf.convert_to_tensor(gi) for gi in tape.gradient(value, p)]


def example_grad(p: list[Any], x: tf.Tensor, y: tf.Tensor, loss: Loss = mean_loss) -> list[tf.Tensor]:
    """The gradient of one example's loss (x (d_in,) or one sequence (T,), y its label(s))."""
    return gradient(p, x[None], y[None], loss)


def g(x: tf.Tensor) -> tf.Tensor:
    """sin(x) exp(x/2), the n-th derivative problem's function."""
    return tf.sin(x) * tf.exp(x / 2)


def f_jac(a: tf.Tensor, b: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    return tf.linalg.matvec(b, tf.tanh(tf.linalg.matvec(a, x)))


# ----------------------------------------------------------------------------- transforms

def captured(params: list[Any] | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """f(p, *args) -> f as it is (params None: the MLP, whose parameters are the task's
    inputs), or a function of *args that reads `params` (the GPT's tf.Variables) from its
    closure: what a TF user writes, a tf.function that captures the model's variables. Passed
    as arguments instead, the GPT's variables (28 for the tiny GPT) cost its vectorized_map per-sample
    gradients 1.12x (graph) and 1.10x (XLA) the captured form's time (measured
    interleaved on one thread)."""
    if params is None:
        return lambda f: f
    return lambda f: lambda *args: f(params, *args)


def make_per_sample_grad(strategy: str, jit: Callable, loss: Loss = mean_loss, per_example: Loss = losses,
                         params: list[Any] | None = None) -> Callable[..., list[tf.Tensor]]:
    """Per-example gradients of the MLP (a function of (p, x, y)), or of the GPT (`loss` its
    mean loss, `per_example` each sequence's, `params` its variables, captured: a function of
    (x, y))."""
    bind = captured(params)
    if strategy == "vectorized_map":
        return jit(bind(lambda p, x, y: tf.vectorized_map(lambda xy: example_grad(p, *xy, loss), (x, y))))
    if strategy == "jacobian":
        def jacobian(p: list[Any], x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
            with tf.GradientTape() as tape:
                tape.watch(p)
                values = per_example(p, x, y)
            return tape.jacobian(values, p)
        return jit(bind(jacobian))
    if strategy == "batch_jacobian":
        return jit(batch_jacobian_grads)
    one = jit(bind(lambda p, x, y: example_grad(p, x, y, loss)))

    def loop(*args: Any) -> list[tf.Tensor]:   # ([p,] x, y)
        *p, x, y = args
        grads = [one(*p, x[i], y[i]) for i in range(x.shape[0])]
        return [tf.stack(gs) for gs in zip(*grads)]
    return loop


def batch_jacobian_grads(p: list[tf.Tensor], x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
    """Per-example gradients by tape.batch_jacobian. It needs every output row to depend on
    its own input row only, which the shared parameters are not: so each example gets its own
    copy of the parameters (broadcast to (B, ...)), the losses are computed with batched
    matmuls, and batch_jacobian of the (B, 1) losses with respect to each copy is that
    example's gradient. Honest, at the price of B copies of the parameters (B x memory)."""
    n = tf.shape(x)[0]
    copies = [tf.broadcast_to(pi[None], tf.concat([[n], tf.shape(pi)], 0)) for pi in p]
    with tf.GradientTape(persistent=True) as tape:     # one batch_jacobian per parameter
        tape.watch(copies)
        w1, b1, w2, b2 = copies
        h = tf.tanh(tf.einsum("bi,bih->bh", x, w1) + b1)
        out = tf.einsum("bh,bhc->bc", h, w2) + b2
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=out)[:, None]
    return [tf.reshape(tape.batch_jacobian(per_example, c), tf.shape(c)) for c in copies]


def make_hvp(strategy: str, jit: Callable, loss: Loss = mean_loss, params: list[Any] | None = None
             ) -> Callable[..., list[tf.Tensor]]:
    """fwd_rev (and `moments`, the GPT's fwd_rev with tf.nn.moments in its LayerNorm): a
    ForwardAccumulator over a tape; rev_rev: nested tapes. A function of (p, v, x, y), or of
    (v, x, y) reading the GPT's variables `params` (captured)."""
    def fwd_rev(p: list[Any], v: list[tf.Tensor], x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
        with tf.autodiff.ForwardAccumulator(p, v) as acc:
            grads = gradient(p, x, y, loss)
        return acc.jvp(grads)

    def rev_rev(p: list[Any], v: list[tf.Tensor], x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as outer:
            outer.watch(p)
            gv = tf.add_n([tf.reduce_sum(gi * vi) for gi, vi in zip(gradient(p, x, y, loss), v)])
        return [tf.convert_to_tensor(h) for h in outer.gradient(gv, p)]
    return jit(captured(params)(rev_rev if strategy == "rev_rev" else fwd_rev))


def make_hessian(strategy: str, jit: Callable, mlp: D.MLP) -> Callable[..., tf.Tensor]:
    """tape.jacobian of the gradient with respect to the flat parameters theta, split into
    the MLP's tensors by one tf.split. Not a slice per tensor (workloads.derivatives.unflatten):
    each slice's gradient is a StridedSliceGrad, which pfor converts and the `while` loop
    replays per row, where tf.split's is one concat. Measured (rough, interleaved, 1 thread):
    slices cost 1.2x split in eager mode (tiny, both strategies), 1.1-1.18x in graph mode
    (P = 100 and 1000; `while` the most), the same under XLA."""
    pfor = strategy == "pfor"
    shapes = list(mlp.shapes().values())
    sizes = [math.prod(s) for s in shapes]

    def hessian(theta: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        # without pfor, eager TF replays the tape once per row: it must be persistent
        with tf.GradientTape(persistent=not pfor) as outer:
            outer.watch(theta)
            with tf.GradientTape() as inner:
                inner.watch(theta)
                p = [tf.reshape(t, s) for t, s in zip(tf.split(theta, sizes), shapes)]
                loss = mean_loss(p, x, y)
            grad = inner.gradient(loss, theta)
        return outer.jacobian(grad, theta, experimental_use_pfor=pfor)
    return jit(hessian)


def make_jacobian(strategy: str, jit: Callable) -> Callable[..., tf.Tensor]:
    pfor = strategy == "jacrev"

    def jacrev(a: tf.Tensor, b: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape(persistent=not pfor) as tape:   # see make_hessian
            tape.watch(x)
            f = f_jac(a, b, x)
        return tape.jacobian(f, x, experimental_use_pfor=pfor)

    def jacfwd(a: tf.Tensor, b: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        def column(tangent: tf.Tensor) -> tf.Tensor:
            with tf.autodiff.ForwardAccumulator(x, tangent) as acc:
                f = f_jac(a, b, x)
            return acc.jvp(f)
        return tf.transpose(tf.vectorized_map(column, tf.eye(tf.shape(x)[0], dtype=x.dtype)))
    return jit(jacfwd if strategy == "jacfwd" else jacrev)


def make_nth_derivative(strategy: str, jit: Callable, order: int) -> Callable[[tf.Tensor], tf.Tensor]:
    def nested(x: tf.Tensor, k: int) -> tf.Tensor:
        """The k-th derivative: the gradient of the (k-1)-th, recorded on a tape of its own
        (each point's derivative depends on its own x only, so the gradient of the sum is
        elementwise)."""
        if k == 0:
            return g(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            d = nested(x, k - 1)
        return tape.gradient(d, x)
    return jit(lambda x: nested(x, order))


def make_gpt_per_sample_grad(strategy: str, jit: Callable, gpts: "TFGPTs") -> Callable[..., list[tf.Tensor]]:
    """make_per_sample_grad of the GPT: a function of (tokens, targets), member 0's variables captured."""
    return make_per_sample_grad(strategy, jit, gpts.loss, gpts.losses, gpts.vars)


def make_gpt_hvp(strategy: str, jit: Callable, model: tgpt.GPT) -> Callable[..., list[tf.Tensor]]:
    """make_hvp of a GPT module's mean loss: a function of (v, tokens, targets), its variables captured."""
    return make_hvp(strategy, jit, TFGPTs.loss_of(model), list(model.named.values()))


def make_ensemble(strategy: str, jit: Callable, gpts: "TFGPTs", k: int) -> Callable[[tf.Tensor], tf.Tensor]:
    """The logits (K, B, T, vocab) of the first k GPTs. vectorized_map: tf.vectorized_map over
    their k stacked parameter sets (TFGPTs.stacked) of member 0's module called functionally
    (gpt.functional_call, TF's counterpart of torch.func.functional_call); loop: one function
    (one tf.function in graph and compiled modes) that calls each module's forward and
    stacks the logits, as a TF user writes it. (Before: k tf.function calls stacked eagerly,
    1.30x (graph) and 1.54x (XLA) that one function's time.)"""
    if strategy == "vectorized_map":
        model, stacked = gpts.models[0], gpts.stacked(k)
        return jit(lambda tokens: tf.vectorized_map(lambda p: tgpt.functional_call(model, p, "logits", tokens),
                                                    stacked))
    models = gpts.models[:k]
    return jit(lambda tokens: tf.stack([m.logits(tokens) for m in models]))


def first_call_watched(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, its first call (where pfor vectorises, as the function is traced) run under
    pfor_fallbacks(), so a fallback to a while loop is recorded (the case is `fallback`)."""
    state = {"first": True}

    def call(*args: Any) -> Any:
        if state["first"]:
            state["first"] = False
            with pfor_fallbacks():
                return fn(*args)
        return fn(*args)
    return call


class TFDerivatives(TransformModel):
    framework = "tensorflow"

    def __init__(self, adapter: Any, case: Case) -> None:
        super().__init__(adapter, case)
        mode = case.mode
        self.jit = (lambda f: f) if mode == "eager" else (
            lambda f: adapter.function(f, jit_compile=mode == "compiled", reduce_retracing=True))

    def fn(self, problem: str, make: Callable[..., Callable[..., Any]], *static: Any) -> Callable[..., Any]:
        return super().fn(problem, lambda strategy, *s: first_call_watched(make(strategy, *s)), *static)

    def per_sample_grad(self, w1: tf.Tensor, b1: tf.Tensor, w2: tf.Tensor, b2: tf.Tensor,
                        x: tf.Tensor, y: tf.Tensor) -> dict[str, tf.Tensor]:
        grads = self.fn("per_sample_grad", make_per_sample_grad, self.jit)([w1, b1, w2, b2], x, y)
        return dict(zip(D.MLP_KEYS, grads))

    def hvp(self, w1: tf.Tensor, b1: tf.Tensor, w2: tf.Tensor, b2: tf.Tensor, v1: tf.Tensor,
            vb1: tf.Tensor, v2: tf.Tensor, vb2: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> dict[str, tf.Tensor]:
        if self.strategy_for("hvp") == "moments":
            raise Unsupported(MOMENTS_MLP)
        hv = self.fn("hvp", make_hvp, self.jit)([w1, b1, w2, b2], [v1, vb1, v2, vb2], x, y)
        return dict(zip(D.MLP_KEYS, hv))

    def hessian(self, theta: tf.Tensor, x: tf.Tensor, y: tf.Tensor, hidden: int, classes: int) -> tf.Tensor:
        D.check_sizes(hidden=hidden, classes=classes)
        fn = self.fn("hessian", make_hessian, self.jit, D.MLP(int(x.shape[1]), hidden, classes))
        return fn(theta, x, y)

    def jacobian(self, a: tf.Tensor, b: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
        return self.fn("jacobian", make_jacobian, self.jit)(a, b, x)

    def nth_derivative(self, x: tf.Tensor, order: int) -> tf.Tensor:
        D.check_order(order)
        return self.fn("nth_derivative", make_nth_derivative, self.jit, order)(x)

    # -- the GPT problems (self.gpt: TFGPTs)
    gpt: "TFGPTs"

    def per_sample_grad_gpt(self, tokens: tf.Tensor, targets: tf.Tensor) -> dict[str, tf.Tensor]:
        if self.strategy_for("per_sample_grad") == "batch_jacobian":
            raise Unsupported(BATCH_JACOBIAN_GPT)
        g = self.gpt
        grads = self.fn("per_sample_grad", make_gpt_per_sample_grad, self.jit, g)(tokens, targets)
        return dict(zip(g.names, grads))

    def hvp_gpt(self, tokens: tf.Tensor, targets: tf.Tensor, *v: tf.Tensor) -> dict[str, tf.Tensor]:
        g = self.gpt
        # `moments`: the same HVP (fwd_rev) of a GPT whose LayerNorm is tf.nn.moments (member 0's
        # parameters in a module of its own); exact at first order only, so its check fails
        model = g.moments_model() if self.strategy_for("hvp") == "moments" else g.models[0]
        given = dict(zip(g.shapes, v))
        hv = self.fn("hvp", make_gpt_hvp, self.jit, model)([given[n] for n in g.names], tokens, targets)
        return dict(zip(g.names, hv))

    def ensemble_gpt(self, tokens: tf.Tensor, models: int) -> tf.Tensor:
        D.check_models(models, len(self.gpt.models))
        return self.fn("ensemble", make_ensemble, self.jit, self.gpt, models)(tokens)


# Where a TF strategy does not apply to the GPT, and why (the case is `unsupported`).
BATCH_JACOBIAN_GPT = ("tape.batch_jacobian does not apply to the GPT's per-sample gradients: it needs each "
                      "output row to depend on its own source row only, i.e. per-example copies of every "
                      "parameter, and the GPT (tf.Module) reads its shared tf.Variables inside its layers "
                      "(the MLP problem, written over plain tensors, does it)")
MOMENTS_MLP = ("the moments strategy is the GPT's HVP with tf.nn.moments in its LayerNorm; the MLP has no "
               "LayerNorm")


class TFGPTs:
    """The GPT of frameworks/tensorflow/gpt.py, one module per ensemble member (its
    tf.Variables hold member k's parameters): member 0's variables `vars` (in its `names`
    order) are the parameters the per-sample gradients and the HVP differentiate; the
    transforms capture them (make_per_sample_grad, make_hvp)."""

    def __init__(self, adapter: Any, config: D.DerivativesConfig, params: dict[str, np.ndarray], device: str) -> None:
        self.gcfg = G.preset(config.gpt).config
        self.shapes = tuple(G.param_shapes(self.gcfg))
        self._device, self._params = adapter.tf_device(device), params
        self._place = adapter.placement(device)
        with self._place:
            self.models = [tgpt.GPT(self.gcfg, D.gpt_params(params, k)) for k in range(max(config.ensemble_models))]
        self.names = list(self.models[0].named)
        self.vars = list(self.models[0].named.values())
        self._stacked: dict[int, dict[str, tf.Tensor]] = {}
        self._moments: tgpt.GPT | None = None
        model = self.models[0]
        self.loss: Loss = self.loss_of(model)

        def per_sequence(p: list[Any], x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model.logits(x))
            return tf.reduce_mean(ce, axis=1)
        self.losses: Loss = per_sequence

    @staticmethod
    def loss_of(model: tgpt.GPT) -> Loss:
        """The mean loss of `model`, as a function of (p, x, y) whose p are its variables."""
        return lambda p, x, y: model.loss(x, y)

    def moments_model(self) -> tgpt.GPT:
        """Member 0's parameters in a GPT whose LayerNorm is tf.nn.moments (made once)."""
        if self._moments is None:
            with self._place:
                self._moments = tgpt.GPT(self.gcfg, D.gpt_params(self._params, 0), norm=tgpt.moments_layer_norm)
        return self._moments

    def stacked(self, k: int) -> dict[str, tf.Tensor]:
        """The first k members' parameters stacked, {GPT-2 name: (k, ...) tensor}: what
        torch.func.stack_module_state makes (made once per k). Tensors, not tf.Variables: the
        function reads them as captured inputs, where stacked variables cost it a resource
        read each (measured 4% of the small preset's compiled K = 4 call, 1.28 against 1.23 ms)."""
        if k not in self._stacked:
            with self._place:
                self._stacked[k] = {n: tf.stack([m.named[n] for m in self.models[:k]]) for n in self.names}
        return self._stacked[k]


def build(adapter: Any, config: D.DerivativesConfig, params: dict[str, np.ndarray], case: Case) -> TFDerivatives:
    model = TFDerivatives(adapter, case)
    model.gpt = TFGPTs(adapter, config, params, case.device)
    return model

"""What a TensorFlow user writes for each derivatives case instead of fwbench's model
(frameworks/tensorflow/derivatives.py): the same work, written the way TensorFlow's own
guides write it, for tests/measure/measure_cookbook.py to time side by side with fwbench's (issue 19:
each case at most 1.02x this).

Sources of each form: the "Advanced automatic differentiation" guide (nested tapes for
higher-order gradients, tape.jacobian, batch_jacobian, per-example gradients by
tf.vectorized_map over a one-example tape, as the tf.vectorized_map API page shows), the
"forward-mode autodiff" part (tf.autodiff.ForwardAccumulator: Jacobian-vector products, the
Hessian-vector product as a ForwardAccumulator over a GradientTape, a Jacobian by
vectorized_map of JVPs over the unit tangents), and tf.function / tf.function(jit_compile=True)
around the whole computation in graph / compiled mode (eager: plain calls). A model's weights
are read from the model (tf.Variables captured by the tf.function), its gradients keyed by the
variables' names.

Not fwbench's code: nothing here imports frameworks/tensorflow/derivatives.py. The GPT is
frameworks/tensorflow/gpt.py's (the model under test, not the transform), built afresh here
from the workload's numpy parameters.

make(task, strategy, mode, config, inputs, kwargs, params) -> a callable taking the same
positional inputs and kwargs as fwbench's model method and returning the same structure, or
None where a strategy has no cookbook form (the comment says why).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf

from frameworks.tensorflow import gpt as tgpt
from workloads import derivatives as D
from workloads import gpt as G

MLP_KEYS = ("w1", "b1", "w2", "b2")


def compile_fn(fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """The whole computation as a user compiles it in `mode`."""
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=mode == "compiled")


# ----------------------------------------------------------------------------- the models

def mlp_losses(w1, b1, w2, b2, x, y):
    """Per-example cross-entropy of the tanh MLP."""
    logits = tf.tanh(x @ w1 + b1) @ w2 + b2
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)


def gpt_model(config: D.DerivativesConfig, params: dict[str, np.ndarray], member: int = 0,
              norm: Callable[..., Any] | None = None) -> tgpt.GPT:
    return tgpt.GPT(G.preset(config.gpt).config, D.gpt_params(params, member), norm=norm)


def by_name(variables: list[tf.Variable], values: list[Any]) -> dict[str, Any]:
    """{variable name (without ':0'): value}, dense."""
    return {v.name.split(":")[0]: tf.convert_to_tensor(g) for v, g in zip(variables, values)}


# ----------------------------------------------------------------------------- per-sample gradients

def mlp_example_grad(params: list[tf.Tensor], xi: tf.Tensor, yi: tf.Tensor) -> list[tf.Tensor]:
    """The gradient of one example's loss: a tape over the model on a batch of one."""
    with tf.GradientTape() as tape:
        tape.watch(params)
        loss = tf.reduce_mean(mlp_losses(*params, xi[None], yi[None]))
    return tape.gradient(loss, params)


def per_sample_grad_mlp(strategy: str, mode: str) -> Callable[..., Any] | None:
    if strategy == "vectorized_map":
        def per_example(w1, b1, w2, b2, x, y):
            params = [w1, b1, w2, b2]
            return dict(zip(MLP_KEYS, tf.vectorized_map(lambda xy: mlp_example_grad(params, *xy), (x, y))))
        return compile_fn(per_example, mode)
    if strategy == "jacobian":
        def jacobian(w1, b1, w2, b2, x, y):
            params = [w1, b1, w2, b2]
            with tf.GradientTape() as tape:
                tape.watch(params)
                losses = mlp_losses(*params, x, y)
            return dict(zip(MLP_KEYS, tape.jacobian(losses, params)))
        return compile_fn(jacobian, mode)
    if strategy == "loop":
        one = compile_fn(lambda w1, b1, w2, b2, xi, yi: mlp_example_grad([w1, b1, w2, b2], xi, yi), mode)

        def loop(w1, b1, w2, b2, x, y):
            grads = [one(w1, b1, w2, b2, x[i], y[i]) for i in range(x.shape[0])]
            return {k: tf.stack(gs) for k, gs in zip(MLP_KEYS, zip(*grads))}
        return loop
    # batch_jacobian: TF's guides use tape.batch_jacobian for a batch of inputs' Jacobians;
    # per-example gradients through it need a copy of the parameters per example (fwbench's
    # own construction, batch_jacobian_grads): no cookbook form of it to compare with
    return None


def per_sample_grad_gpt(strategy: str, mode: str, config: D.DerivativesConfig,
                        params: dict[str, np.ndarray]) -> Callable[..., Any] | None:
    model = gpt_model(config, params)
    variables = list(model.trainable_variables)

    def example_grad(tok, tgt):
        with tf.GradientTape() as tape:
            loss = model.loss(tok[None], tgt[None])
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]   # wte's: dense

    if strategy == "vectorized_map":
        return compile_fn(lambda tokens, targets: by_name(variables, tf.vectorized_map(
            lambda example: example_grad(*example), (tokens, targets))), mode)
    if strategy == "jacobian":
        def jacobian(tokens, targets):
            with tf.GradientTape() as tape:
                ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=model.logits(tokens))
                losses = tf.reduce_mean(ce, axis=1)                  # one loss per sequence
            return by_name(variables, tape.jacobian(losses, variables))
        return compile_fn(jacobian, mode)
    if strategy == "loop":
        one = compile_fn(example_grad, mode)

        def loop(tokens, targets):
            grads = [one(tokens[i], targets[i]) for i in range(tokens.shape[0])]
            return by_name(variables, [tf.stack(gs) for gs in zip(*grads)])
        return loop
    return None    # batch_jacobian: not applicable to the GPT (fwbench records it unsupported)


# ----------------------------------------------------------------------------- HVP

def hvp_of(loss: Callable[[], tf.Tensor], params: list[Any], v: list[tf.Tensor], strategy: str) -> list[tf.Tensor]:
    """H v of loss() with respect to params: the guide's forward-over-reverse (a
    ForwardAccumulator around a GradientTape), or nested tapes (reverse-over-reverse)."""
    if strategy == "rev_rev":
        with tf.GradientTape() as outer:
            outer.watch(params)
            with tf.GradientTape() as inner:
                inner.watch(params)
                value = loss()
            grads = inner.gradient(value, params)
            gv = tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g) * vi) for g, vi in zip(grads, v)])
        return outer.gradient(gv, params)
    with tf.autodiff.ForwardAccumulator(params, v) as acc:
        with tf.GradientTape() as tape:
            tape.watch(params)
            value = loss()
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(value, params)]
    return acc.jvp(grads)


def hvp_mlp(strategy: str, mode: str) -> Callable[..., Any] | None:
    if strategy == "moments":
        return None    # the GPT's LayerNorm form; the MLP has none (fwbench: unsupported)

    def hvp(w1, b1, w2, b2, v1, vb1, v2, vb2, x, y):
        params = [w1, b1, w2, b2]
        hv = hvp_of(lambda: tf.reduce_mean(mlp_losses(*params, x, y)), params, [v1, vb1, v2, vb2], strategy)
        return dict(zip(MLP_KEYS, hv))
    return compile_fn(hvp, mode)


def hvp_gpt(strategy: str, mode: str, config: D.DerivativesConfig, params: dict[str, np.ndarray]
            ) -> Callable[..., Any]:
    # moments: the same forward-over-reverse HVP of a GPT whose LayerNorm is tf.nn.moments
    model = gpt_model(config, params, norm=tgpt.moments_layer_norm if strategy == "moments" else None)
    variables = list(model.trainable_variables)
    names = tuple(G.param_shapes(G.preset(config.gpt).config))

    def hvp(tokens, targets, *v):
        given = dict(zip(names, v))
        tangents = [given[var.name.split(":")[0]] for var in variables]
        hv = hvp_of(lambda: model.loss(tokens, targets), variables, tangents, strategy)
        return by_name(variables, hv)
    return compile_fn(hvp, mode)


# ----------------------------------------------------------------------------- Hessian, Jacobian, n-th derivative

def hessian(strategy: str, mode: str, inputs: tuple, kwargs: dict) -> Callable[..., Any]:
    d_in = int(inputs[1].shape[1])
    shapes = D.MLP(d_in, kwargs["hidden"], kwargs["classes"]).shapes()
    sizes = [int(np.prod(s)) for s in shapes.values()]

    def full_hessian(theta, x, y, hidden, classes):
        # without pfor, eager TF replays the tape once per row: it must be persistent
        with tf.GradientTape(persistent=strategy == "while") as outer:
            outer.watch(theta)
            with tf.GradientTape() as inner:
                inner.watch(theta)
                params = [tf.reshape(t, s) for t, s in zip(tf.split(theta, sizes), shapes.values())]
                loss = tf.reduce_mean(mlp_losses(*params, x, y))
            grad = inner.gradient(loss, theta)
        return outer.jacobian(grad, theta, experimental_use_pfor=strategy == "pfor")
    return compile_fn(full_hessian, mode)


def jacobian(strategy: str, mode: str) -> Callable[..., Any]:
    def f(a, b, x):
        return tf.linalg.matvec(b, tf.tanh(tf.linalg.matvec(a, x)))

    if strategy == "jacfwd":
        def jacfwd(a, b, x):
            def jvp(tangent):
                with tf.autodiff.ForwardAccumulator(x, tangent) as acc:
                    y = f(a, b, x)
                return acc.jvp(y)
            basis = tf.eye(tf.size(x), dtype=x.dtype)
            return tf.transpose(tf.vectorized_map(jvp, basis))      # (n, m) -> (m, n)
        return compile_fn(jacfwd, mode)

    def jacrev(a, b, x):
        with tf.GradientTape(persistent=strategy == "jacrev_while") as tape:
            tape.watch(x)
            y = f(a, b, x)
        return tape.jacobian(y, x, experimental_use_pfor=strategy == "jacrev")
    return compile_fn(jacrev, mode)


def nth_derivative(mode: str, order: int) -> Callable[..., Any]:
    def derivative(x, k):
        """The k-th derivative of sin(x) exp(x/2) at each point: a tape per order, nested."""
        if k == 0:
            return tf.sin(x) * tf.exp(x / 2)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = derivative(x, k - 1)
        return tape.gradient(y, x)
    fn = compile_fn(lambda x: derivative(x, order), mode)
    return lambda x, order: fn(x)


# ----------------------------------------------------------------------------- the ensemble

def ensemble(strategy: str, mode: str, config: D.DerivativesConfig, params: dict[str, np.ndarray],
             k: int) -> Callable[..., Any]:
    models = [gpt_model(config, params, member=i) for i in range(k)]
    if strategy == "vectorized_map":
        # TF has no functional call of a tf.Module; the model's file offers one (it swaps the
        # module's variables for the given tensors while the call is traced), and the K weight
        # sets are stacked once, as a user stacks them for tf.vectorized_map
        stacked = {name: tf.stack([m.named[name] for m in models]) for name in models[0].named}

        def vectorized(tokens):
            return tf.vectorized_map(lambda p: tgpt.functional_call(models[0], p, "logits", tokens), stacked)
        fn = compile_fn(vectorized, mode)
    else:
        fn = compile_fn(lambda tokens: tf.stack([m.logits(tokens) for m in models]), mode)
    return lambda tokens, models: fn(tokens)


# ----------------------------------------------------------------------------- the interface

def make(task: str, strategy: str, mode: str, config: D.DerivativesConfig, inputs: tuple, kwargs: dict,
         params: dict[str, np.ndarray]) -> Callable[..., Any] | None:
    """The cookbook callable of a derivatives case (module docstring), or None."""
    problem = D.problem_of(task)[0]
    gpt = "gpt" in task
    if problem == "per_sample_grad":
        return per_sample_grad_gpt(strategy, mode, config, params) if gpt else per_sample_grad_mlp(strategy, mode)
    if problem == "hvp":
        return hvp_gpt(strategy, mode, config, params) if gpt else hvp_mlp(strategy, mode)
    if problem == "hessian":
        return hessian(strategy, mode, inputs, kwargs)
    if problem == "jacobian":
        return jacobian(strategy, mode)
    if problem == "nth_derivative":
        return nth_derivative(mode, kwargs["order"])
    return ensemble(strategy, mode, config, params, kwargs["models"])

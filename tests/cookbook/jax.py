"""What a JAX user writes for each derivatives case instead of fwbench's model
(frameworks/jax/derivatives.py), for tests/measure/measure_cookbook.py to time side by side (issue
19: each case at most 1.02x this). The forms are JAX's "The Autodiff Cookbook" and its
documentation's:

    per-sample gradients  "Per-example gradients": jit(vmap(grad(loss), in_axes=(None, 0, 0)))
                          with the loss of one example (a batch of one); the baseline, a jitted
                          grad per example in a Python loop, stacked
    HVP                   hvp(f, primals, tangents) = jvp(grad(f), primals, tangents)[1]
                          (forward-over-reverse) and hvp_revrev = grad(lambda x: vdot(grad(f)(x),
                          v))(x) (reverse-over-reverse)
    Hessian               hessian = jacfwd(jacrev(f)), jacrev(jacrev(f)), jax.hessian, of the loss
                          of the flat parameters unravelled by jax.flatten_util.ravel_pytree
    Jacobian              jacrev(f, argnums=2) / jacfwd(f, argnums=2)
    n-th derivative       nested grad of the sum over points, vmap of nested grads of the scalar
                          function ("vmap(grad(grad(f)))"), and Taylor mode (jax.experimental.jet)
    ensemble              vmap of the model over the stacked parameter pytrees
                          (jax.tree.map(jnp.stack)); the baseline, a jitted forward per model

Compiled mode is jax.jit around the whole computation (the loop baselines: around the
one-example function), eager the plain call (JAX dispatches op by op). The losses are
optax's, as JAX's training examples write them.

Not fwbench's code: nothing here imports frameworks/jax/derivatives.py; the GPT is
frameworks/jax/gpt.py's pure functions (the model under test).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import grad, jacfwd, jacrev, jvp, vmap
from jax.flatten_util import ravel_pytree

from frameworks.jax import gpt as jgpt
from workloads import derivatives as D
from workloads import gpt as G

MLP_KEYS = ("w1", "b1", "w2", "b2")


def compile_fn(fn: Callable[..., Any], mode: str, **kw: Any) -> Callable[..., Any]:
    """fn as a user runs it in `mode`: jax.jit, or as it is."""
    return jax.jit(fn, **kw) if mode == "compiled" else fn


# ----------------------------------------------------------------------------- the MLP

def mlp(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(mlp(params, x), y).mean()


def example_loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    """The loss of one example, as a batch of one."""
    return loss(params, x[None], y[None])


def per_sample_grads(strategy: str, mode: str, example_loss: Callable, params_of: Callable) -> Callable[..., Any]:
    """vmap(grad) of the one-example loss, or the loop baseline; params_of(*leading inputs)
    is the parameter pytree the call's leading positional inputs give (none for the GPT)."""
    if strategy == "vmap":
        fn = compile_fn(vmap(grad(example_loss), in_axes=(None, 0, 0)), mode)
        return lambda *args: fn(params_of(*args[:-2]), *args[-2:])
    one = compile_fn(grad(example_loss), mode)

    def loop(*args):
        params, (x, y) = params_of(*args[:-2]), args[-2:]
        grads = [one(params, x[i], y[i]) for i in range(x.shape[0])]
        return jax.tree.map(lambda *g: jnp.stack(g), *grads)
    return loop


def hvp(f: Callable, primals: tuple, tangents: tuple) -> Any:
    return jvp(grad(f), primals, tangents)[1]


def hvp_revrev(f: Callable, primals: tuple, tangents: tuple) -> Any:
    (x,), (v,) = primals, tangents
    return grad(lambda x: sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(grad(f)(x)), jax.tree.leaves(v))))(x)


HVP = {"fwd_rev": hvp, "rev_rev": hvp_revrev}


def hvp_mlp(strategy: str, mode: str) -> Callable[..., Any]:
    product = HVP[strategy]

    def call(w1, b1, w2, b2, v1, vb1, v2, vb2, x, y):
        params, v = dict(zip(MLP_KEYS, (w1, b1, w2, b2))), dict(zip(MLP_KEYS, (v1, vb1, v2, vb2)))
        return product(lambda p: loss(p, x, y), (params,), (v,))
    return compile_fn(call, mode)


HESSIAN = {"jacfwd_jacrev": lambda f: jacfwd(jacrev(f)), "jacrev_jacrev": lambda f: jacrev(jacrev(f)),
           "hessian": jax.hessian}


def hessian_mlp(strategy: str, mode: str, mlp: D.MLP) -> Callable[..., Any]:
    transform = HESSIAN[strategy]
    # the flat vector is in the MLP's parameter order: a list, since ravel_pytree orders a
    # dict's leaves by key
    _, unravel = ravel_pytree([np.zeros(s, np.float32) for s in mlp.shapes().values()])

    def call(theta, x, y, hidden, classes):
        return transform(lambda t: loss(dict(zip(MLP_KEYS, unravel(t))), x, y))(theta)
    return compile_fn(call, mode, static_argnames=("hidden", "classes"))


def f_jac(a: jax.Array, b: jax.Array, x: jax.Array) -> jax.Array:
    return b @ jnp.tanh(a @ x)


def jacobian(strategy: str, mode: str) -> Callable[..., Any]:
    return compile_fn((jacrev if strategy == "jacrev" else jacfwd)(f_jac, argnums=2), mode)


def g(x: jax.Array) -> jax.Array:
    return jnp.sin(x) * jnp.exp(x / 2)


def nth_derivative(strategy: str, mode: str, order: int) -> Callable[..., Any]:
    if strategy == "jet":
        from jax.experimental.jet import jet

        def taylor(x):
            # x(t) = x + t: the first series term 1, the others 0; jet's k-th output term is
            # the k-th derivative of g at x
            return jet(g, (x,), ([jnp.ones_like(x)] + [jnp.zeros_like(x)] * (order - 1),))[1][order - 1]
        fn = compile_fn(taylor, mode)
    elif strategy == "vmap":
        d = g
        for _ in range(order):
            d = grad(d)
        fn = compile_fn(vmap(d), mode)
    else:
        d = g
        for _ in range(order):
            d = (lambda h: grad(lambda x: h(x).sum()))(d)
        fn = compile_fn(d, mode)
    return lambda x, order: fn(x)


# ----------------------------------------------------------------------------- the GPT

def gpt_params(config: D.DerivativesConfig, params: dict[str, np.ndarray], k: int) -> list[dict[str, jax.Array]]:
    return [{n: jnp.asarray(a) for n, a in D.gpt_params(params, i).items()} for i in range(k)]


def make(task: str, strategy: str, mode: str, config: D.DerivativesConfig, inputs: tuple, kwargs: dict,
         params: dict[str, np.ndarray]) -> Callable[..., Any] | None:
    """The cookbook version of a derivatives case (tests/cookbook/__init__.py); every JAX
    strategy has one."""
    problem, sizes = D.problem_of(task)
    if "gpt" in task:
        gcfg = G.preset(config.gpt).config
        if problem == "ensemble":
            members = gpt_params(config, params, sizes[0])
            forward = lambda p, tokens: jgpt.logits(p, tokens, cfg=gcfg)  # noqa: E731
            if strategy == "loop":
                one = compile_fn(forward, mode)
                return lambda tokens, models: jnp.stack([one(p, tokens) for p in members])
            stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *members)
            fn = compile_fn(vmap(forward, in_axes=(0, None)), mode)
            return lambda tokens, models: fn(stacked, tokens)
        (p0,) = gpt_params(config, params, 1)
        if problem == "per_sample_grad":
            return per_sample_grads(strategy, mode, lambda p, t, y: jgpt.loss(p, t[None], y[None], cfg=gcfg),
                                    lambda: p0)
        names, product = tuple(G.param_shapes(gcfg)), HVP[strategy]
        fn = compile_fn(lambda p, v, tokens, targets: product(lambda q: jgpt.loss(q, tokens, targets, cfg=gcfg),
                                                              (p,), (v,)), mode)
        return lambda tokens, targets, *v: fn(p0, dict(zip(names, v)), tokens, targets)
    if problem == "per_sample_grad":
        return per_sample_grads(strategy, mode, example_loss, lambda *p: dict(zip(MLP_KEYS, p)))
    if problem == "hvp":
        return hvp_mlp(strategy, mode)
    if problem == "hessian":
        return hessian_mlp(strategy, mode, D.MLP(int(inputs[1].shape[1]), kwargs["hidden"], kwargs["classes"]))
    if problem == "jacobian":
        return jacobian(strategy, mode)
    return nth_derivative(strategy, mode, kwargs["order"])

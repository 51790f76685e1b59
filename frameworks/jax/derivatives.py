"""Higher-order derivatives and vmap in JAX (workloads/derivatives.py): pure functions of
the parameter dict (a pytree) and JAX's own transforms, composed in frameworks/transforms.py
(shared with torch.func, whose transforms have the same signatures):

    per-sample gradients   vmap: jax.vmap(jax.grad(one-example loss)); loop: jax.grad per
                           example in a Python loop, stacked
    HVP                    fwd_rev: jax.jvp of jax.grad; rev_rev: jax.grad of <grad, v>
    Hessian                jax.jacfwd(jax.jacrev), jax.jacrev(jax.jacrev), jax.hessian, of the
                           loss of the flat parameters unravelled by ravel_pytree's function
    Jacobian               jax.jacrev / jax.jacfwd
    n-th derivative        grad: k nested jax.grad of the sum over points; vmap: jax.vmap of
                           k nested jax.grad of the scalar function; jet: Taylor mode
                           (jax.experimental.jet), all k coefficients in one pass
    GPT per-sample grads   vmap / loop as above over frameworks/jax/gpt.py's loss of one
                           sequence; GPT HVP fwd_rev / rev_rev over its mean loss
    ensemble               vmap: jax.vmap of the GPT's logits over K stacked pytrees;
                           loop: the (jitted) forward of each of the K models, stacked

Modes: "eager" calls the transformed functions as they are (JAX dispatches op by op);
"compiled" wraps each in jax.jit (the loop baseline: the one-example gradient).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from frameworks import transforms as T
from frameworks.jax import gpt as jgpt
from workloads import derivatives as D
from workloads import gpt as G
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only

Params = dict[str, jax.Array]


def logits(p: Params, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def mean_loss(p: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits(p, x), y).mean()


def example_loss(p: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """The loss of one example (x (d_in,), y ())."""
    return mean_loss(p, x[None], y[None])


def g(x: jax.Array) -> jax.Array:
    """sin(x) exp(x/2), the n-th derivative problem's function."""
    return jnp.sin(x) * jnp.exp(x / 2)


def unflattener(mlp: D.MLP) -> Callable[[jax.Array], Params]:
    """The MLP's parameters from the flat vector as a JAX user splits one: the unravel
    function of jax.flatten_util.ravel_pytree over the parameters in flat order (one
    lax.split, then a reshape each). Static slices theta[i:i + n] per parameter
    (workloads.derivatives.unflatten), which fwbench used before, compiled to a slower
    Hessian program: 1.14x and 1.09x the ravel_pytree version's time (interleaved,
    1 thread; 1.09x at P = 100 re-measured here)."""
    _, unravel = ravel_pytree([np.zeros(s, np.float32) for s in mlp.shapes().values()])
    return lambda theta: dict(zip(D.MLP_KEYS, unravel(theta)))


FUNC = T.Func(grad=jax.grad, vmap=lambda f, in_dims: jax.vmap(f, in_axes=in_dims), jvp=jax.jvp,
              jacfwd=jax.jacfwd, jacrev=jax.jacrev, hessian=jax.hessian, stack=jnp.stack,
              unflattener=unflattener, tanh=jnp.tanh, mean_loss=mean_loss, example_loss=example_loss, g=g)


class JaxDerivatives(T.FuncModel):
    func = FUNC
    framework = "jax"

    def make_nth_derivative(self, strategy: str, order: int) -> Callable[[jax.Array], jax.Array]:
        if strategy != "jet":
            return super().make_nth_derivative(strategy, order)
        from jax.experimental.jet import jet

        def taylor(x: jax.Array) -> jax.Array:
            # x(t) = x + t: first series term 1, the others 0; jet's k-th output term is
            # d^k/dt^k g(x(t)) at t = 0, i.e. g^(k)(x)
            series = [jnp.ones_like(x)] + [jnp.zeros_like(x)] * (order - 1)
            return jet(g, (x,), (series,))[1][order - 1]
        return self.jit(taylor)


def gpt_func(config: D.DerivativesConfig, params: dict[str, np.ndarray]) -> T.GPTFunc:
    """The GPT of frameworks/jax/gpt.py (already pure functions of a pytree in GPT-2's names
    and layout): the loss of one sequence for the per-sample gradients, the ensemble members
    stacked leaf by leaf for jax.vmap."""
    gcfg = G.preset(config.gpt).config
    names = tuple(G.param_shapes(gcfg))
    members = [{k: jnp.asarray(v) for k, v in D.gpt_params(params, i).items()}
               for i in range(max(config.ensemble_models))]
    func = FUNC.with_model(lambda p, t, y: jgpt.loss(p, t, y, cfg=gcfg),
                           lambda p, t, y: jgpt.loss(p, t[None], y[None], cfg=gcfg),
                           lambda p, t: jgpt.logits(p, t, cfg=gcfg))
    return T.GPTFunc(gcfg, func, members, lambda k: jax.tree.map(lambda *xs: jnp.stack(xs), *members[:k]),
                     named=lambda out: out, own=lambda v: dict(zip(names, v)))


def build(adapter: Any, config: D.DerivativesConfig, params: dict[str, np.ndarray], case: Case) -> JaxDerivatives:
    model = JaxDerivatives(adapter, case, jax.jit if case.mode == "compiled" else (lambda f: f))
    model.gpt = gpt_func(config, params)
    return model

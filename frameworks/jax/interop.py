"""workloads.interop's programs in JAX, as a JAX user writes them; "compiled" is jax.jit.
jit traces the Python function once per input shape and dtype with abstract values, so
Python sees no concrete value: what needs one is refused (JAX's own error), what does not
runs once, at trace time (side effects, Python's random).

REWRITES: each program as JAX's documentation tells a user to write it under jit (the
`idiomatic` strategy): jax.debug.print and jax.debug.callback for side effects, lax.cond and
lax.while_loop for control flow on values, jax.pure_callback for a numpy or scipy function,
io_callback for Python's random (a callback with a side effect)."""
from __future__ import annotations

import random
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.experimental import io_callback

from workloads import interop as I
from workloads.case import Case
from workloads.interop import LOG
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only


def numpy_call(x):
    return jnp.asarray(np.tanh(np.asarray(x * 2))) + 1


def scipy_call(x):
    return x * jnp.asarray(scipy.special.expit(np.asarray(x)))


def while_loop(x):
    while jnp.linalg.norm(x) > 1:
        x = x / 2
    return x


PROGRAMS = {**I.ARRAY_METHOD_PROGRAMS, "numpy_call": numpy_call, "scipy_call": scipy_call,
            "while_loop": while_loop}


# -- the idiomatic rewrites (workloads.interop.lines_changed counts what each changes)
def print_rw(x):
    y = x * 2
    jax.debug.print("interop: doubled")
    return y + 1


def value_branch_rw(x):
    return jax.lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, x)


def item_branch_rw(x):
    s = x.sum()
    return jax.lax.cond(s > 0, lambda x: x / s, lambda x: x - s, x)


def numpy_call_rw(x):
    return jax.pure_callback(np.tanh, jax.ShapeDtypeStruct(x.shape, x.dtype), x * 2) + 1


def scipy_call_rw(x):
    return x * jax.pure_callback(scipy.special.expit, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def list_append_rw(x):
    jax.debug.callback(LOG.append, x.sum())
    return x * 3


def while_loop_rw(x):
    return jax.lax.while_loop(lambda x: jnp.linalg.norm(x) > 1, lambda x: x / 2, x)


def python_random_rw(x):
    return x * io_callback(lambda: np.float32(random.random()), jax.ShapeDtypeStruct((), jnp.float32))


REWRITES = {
    "print": I.Rewrite(print_rw, "jax.debug.print"),
    "value_branch": I.Rewrite(value_branch_rw, "jax.lax.cond"),
    "item_branch": I.Rewrite(item_branch_rw, "jax.lax.cond on the sum"),
    "numpy_call": I.Rewrite(numpy_call_rw, "jax.pure_callback"),
    "scipy_call": I.Rewrite(scipy_call_rw, "jax.pure_callback"),
    "list_append": I.Rewrite(list_append_rw, "jax.debug.callback"),
    "while_loop": I.Rewrite(while_loop_rw, "jax.lax.while_loop"),
    "python_random": I.Rewrite(python_random_rw, "jax.experimental.io_callback"),
}


def _jit(fn):
    """jax.jit of a new function object each time, so no jit cache is shared with an earlier
    jit of the same program (the probe's): the timed function's first call traces and compiles."""
    return jax.jit(lambda x: fn(x))


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], case: Case) -> I.Programs:
    make = _jit if case.mode == "compiled" else (lambda f: f)
    return I.Programs(PROGRAMS, make, adapter, config, case, rewrites=REWRITES)

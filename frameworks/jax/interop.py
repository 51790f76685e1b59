"""workloads.interop's programs in JAX, as a JAX user writes them; "compiled" is jax.jit.
jit traces the Python function once per input shape and dtype with abstract values, so
Python sees no concrete value: what needs one is refused (JAX's own error), what does not
runs once, at trace time (side effects, Python's random)."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from frameworks.base import Unsupported
from workloads import interop as I


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


def _jit(fn):
    """jax.jit of a new function object each time, so no jit cache is shared with an earlier
    jit of the same program (the probe's): the timed function's first call traces and compiles."""
    return jax.jit(lambda x: fn(x))


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], mode: str,
          device: str) -> I.Programs:
    make = _jit if mode == "compiled" else (lambda f: f)
    return I.Programs(PROGRAMS, make, adapter.to_numpy, lambda x: adapter.asarray(x, device), config, mode,
                      Unsupported)

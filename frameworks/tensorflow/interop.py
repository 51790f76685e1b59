"""workloads.interop's programs in TensorFlow 2, as a TF user writes them; "graph" is
tf.function, "compiled" tf.function(jit_compile=True). tf.function traces the Python
function into a graph: AutoGraph turns a Python `if`/`while` on a tensor into tf.cond /
tf.while_loop, Python side effects run only while tracing, and what needs a concrete value
(numpy, .numpy()) is refused with TensorFlow's own error."""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.special
import tensorflow as tf

from frameworks.base import Unsupported
from workloads import interop as I
from workloads.interop import LOG


def value_branch(x):
    if tf.reduce_sum(x) > 0:
        return x * 2
    return x - 1


def item_branch(x):
    s = float(tf.reduce_sum(x).numpy())
    if s > 0:
        return x / s
    return x - s


def numpy_call(x):
    return tf.constant(np.tanh(x * 2)) + 1


def scipy_call(x):
    return x * tf.constant(scipy.special.expit(x))


def list_append(x):
    LOG.append(tf.reduce_sum(x))
    return x * 3


def while_loop(x):
    while tf.norm(x) > 1:
        x = x / 2
    return x


PROGRAMS = {"print": I.print_, "value_branch": value_branch, "item_branch": item_branch,
            "numpy_call": numpy_call, "scipy_call": scipy_call, "list_append": list_append,
            "while_loop": while_loop, "python_random": I.python_random}


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], mode: str,
          device: str) -> I.Programs:
    if mode == "eager":
        make = lambda f: f   # noqa: E731
    else:
        make = lambda f: adapter.function(f, jit_compile=mode == "compiled")   # noqa: E731
    return I.Programs(PROGRAMS, make, adapter.to_numpy, lambda x: adapter.asarray(x, device), config, mode,
                      Unsupported)

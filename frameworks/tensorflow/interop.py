"""workloads.interop's programs in TensorFlow 2, as a TF user writes them; "graph" is
tf.function, "compiled" tf.function(jit_compile=True). tf.function traces the Python
function into a graph: AutoGraph turns a Python `if`/`while` on a tensor into tf.cond /
tf.while_loop, Python side effects run only while tracing, and what needs a concrete value
(numpy, .numpy()) is refused with TensorFlow's own error.

REWRITES: each program TensorFlow does not take as written, as its guides tell a user to
write it in a tf.function (the `idiomatic` strategy): tf.print for print (it prints from
native code, to file descriptor 1 with output_stream=sys.stdout), a tensor in the `if`
rather than .numpy() (AutoGraph makes it a tf.cond), tf.numpy_function for numpy, scipy,
the list append and Python's random. XLA (jit_compile=True) compiles neither PrintV2 nor
PyFunc: there the rewrites of print and the host calls are refused, in XLA's words."""
from __future__ import annotations

import random
import re
import sys
from typing import Any

import numpy as np
import scipy.special
import tensorflow as tf

from workloads import interop as I
from workloads.case import Case
from workloads.interop import LOG
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only


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


# -- the idiomatic rewrites (workloads.interop.lines_changed counts what each changes)
def print_rw(x):
    y = x * 2
    tf.print("interop: doubled", output_stream=sys.stdout)
    return y + 1


def item_branch_rw(x):
    s = tf.reduce_sum(x)
    if s > 0:
        return x / s
    return x - s


def numpy_call_rw(x):
    return tf.numpy_function(np.tanh, [x * 2], tf.float32) + 1


def scipy_call_rw(x):
    return x * tf.numpy_function(scipy.special.expit, [x], tf.float32)


def list_append_rw(x):
    tf.numpy_function(lambda s: LOG.append(s) or s, [tf.reduce_sum(x)], tf.float32)
    return x * 3


def python_random_rw(x):
    return x * tf.numpy_function(lambda: np.float32(random.random()), [], tf.float32)


REWRITES = {
    "print": I.Rewrite(print_rw, "tf.print", native_print=True),
    "item_branch": I.Rewrite(item_branch_rw, "the tensor in the if (AutoGraph)"),
    "numpy_call": I.Rewrite(numpy_call_rw, "tf.numpy_function"),
    "scipy_call": I.Rewrite(scipy_call_rw, "tf.numpy_function"),
    "list_append": I.Rewrite(list_append_rw, "tf.numpy_function"),
    "python_random": I.Rewrite(python_random_rw, "tf.numpy_function"),
}


def tidy(reason: str) -> str:
    """TensorFlow's message without the attribute list of each graph's name
    ("__inference_f_12[_XlaMustCompile=true,config_proto=...]" -> "__inference_f_12") and the
    op-creation traceback XLA appends; XLA's refusal of an op as its gist in TF's words
    ("InvalidArgumentError: unsupported operation for XLA_CPU_JIT: PrintV2")."""
    reason = re.sub(r"\[_XlaMustCompile[^\]]*\]", "", reason).split(" The op is created at:")[0]
    m = re.search(r"Detected unsupported operations when trying to compile graph \S+ on (XLA_\w+): (\w+)", reason)
    return f"{reason.split(':')[0]}: unsupported operation for {m[1]}: {m[2]}" if m else reason


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], case: Case) -> I.Programs:
    if case.mode == "eager":
        make = lambda f: f   # noqa: E731
    else:
        make = lambda f: adapter.function(f, jit_compile=case.mode == "compiled")   # noqa: E731
    return I.Programs(PROGRAMS, make, adapter, config, case, rewrites=REWRITES, tidy=tidy)

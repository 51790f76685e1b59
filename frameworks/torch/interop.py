"""workloads.interop's programs in PyTorch, as a PyTorch user writes them; "compiled" is
torch.compile with its defaults (fullgraph=False: Dynamo breaks the graph where it cannot
trace, runs that part in Python and resumes). Whether a program is one graph is what
torch.compile(fullgraph=True) says on every input (it raises, with Dynamo's reason, where
it would break); Dynamo's own counters give the graphs and breaks it met over the probe's
calls. Not torch._dynamo.explain: in torch 2.13 it reports 0 breaks and 1 graph for
`python_random`, which fullgraph=True refuses ("Attempted to call function marked as
skipped ... Random.random") and the default compile runs as 2 graphs with a break.

REWRITES: each program that breaks the graph as written, as PyTorch's documentation tells
a user to write it for one graph (the `idiomatic` strategy): print made reorderable
(torch._dynamo.config.reorderable_logging_functions: Dynamo prints after the graph),
torch.cond for a branch on a value, the higher-order while_loop for a data-dependent loop,
and a torch.library.custom_op (with its fake for tracing) around the scipy function and
Python's random."""
from __future__ import annotations

import random
from typing import Any, Callable

import numpy as np
import scipy.special
import torch
from torch._higher_order_ops import while_loop as hop_while_loop

from workloads import interop as I
from workloads.case import Case
from workloads.precision import DEFAULT

PRECISIONS = (DEFAULT,)     # the numeric policies its build honours: fp32 only


def numpy_call(x):
    return torch.from_numpy(np.tanh((x * 2).cpu().numpy())).to(x.device) + 1


def scipy_call(x):
    return x * torch.from_numpy(scipy.special.expit(x.cpu().numpy())).to(x.device)


def while_loop(x):
    while x.norm() > 1:
        x = x / 2
    return x


PROGRAMS = {**I.ARRAY_METHOD_PROGRAMS, "numpy_call": numpy_call, "scipy_call": scipy_call,
            "while_loop": while_loop}


# -- the idiomatic rewrites (workloads.interop.lines_changed counts what each changes)
def print_rw(x):
    y = x * 2
    print("interop: doubled")
    return y + 1


def reorderable_print() -> Any:
    return torch._dynamo.config.patch(reorderable_logging_functions={print})


def value_branch_rw(x):
    return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))


def item_branch_rw(x):
    s = x.sum()
    return torch.cond(s > 0, lambda x, s: x / s, lambda x, s: x - s, (x, s))


@torch.library.custom_op("fwbench::expit", mutates_args=())
def expit(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(scipy.special.expit(x.cpu().numpy())).to(x.device)


@expit.register_fake
def expit_fake(x):
    return torch.empty_like(x)


def scipy_call_rw(x):
    return x * expit(x)


def while_loop_rw(x):
    return hop_while_loop(lambda x: x.norm() > 1, lambda x: (x / 2,), (x,))[0]


@torch.library.custom_op("fwbench::python_random", mutates_args=())
def python_random_op(x: torch.Tensor) -> torch.Tensor:
    return torch.tensor(random.random(), dtype=x.dtype, device=x.device)


@python_random_op.register_fake
def python_random_fake(x):
    return x.new_empty(())


def python_random_rw(x):
    return x * python_random_op(x)


REWRITES = {
    "print": I.Rewrite(print_rw, "reorderable print",
                       setup=("torch._dynamo.config.reorderable_logging_functions.add(print)",),
                       configure=reorderable_print),
    "value_branch": I.Rewrite(value_branch_rw, "torch.cond"),
    "item_branch": I.Rewrite(item_branch_rw, "torch.cond on the sum"),
    "scipy_call": I.Rewrite(scipy_call_rw, "torch.library.custom_op", helpers=(expit._init_fn, expit_fake)),
    "while_loop": I.Rewrite(while_loop_rw, "higher-order while_loop"),
    "python_random": I.Rewrite(python_random_rw, "torch.library.custom_op",
                               helpers=(python_random_op._init_fn, python_random_fake)),
}


def fullgraph(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """fn compiled as one graph (fullgraph=True), from empty Dynamo caches (so no graph of the
    probe's default compile serves it; the timed function compiles afresh after it too). The
    eager backend: Dynamo decides whether one graph exists before any backend sees it, and
    Inductor's code generation, which the probe's calls have already paid for, adds nothing."""
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend="eager")


def dynamo_counters() -> tuple[int, int]:
    """Dynamo's (graphs, graph breaks) so far in the process: graphs it compiled
    (counters['stats']['unique_graphs']) and the breaks it met while tracing. A break at a
    call Dynamo cannot trace is counted under 'graph_break'; one at data-dependent control
    flow (an `if` or `while` on a tensor) stays under 'unimplemented' (torch 2.13,
    symbolic_convert.py), so both are summed."""
    c = torch._dynamo.utils.counters
    return (int(c["stats"]["unique_graphs"]),
            int(sum(c["graph_break"].values()) + sum(c["unimplemented"].values())))


def compiled(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """torch.compile(fn) with its defaults, from empty Dynamo caches: Dynamo caches graphs by
    code object, so a graph compiled earlier in the process for the same program (the
    probe's, a fullgraph attempt's, another case's) would otherwise serve this function and
    its first call would compile nothing."""
    torch._dynamo.reset()
    return torch.compile(fn)


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], case: Case) -> I.Programs:
    make = compiled if case.mode == "compiled" else (lambda f: f)
    return I.Programs(PROGRAMS, make, adapter, config, case,
                      I.Pieces(fullgraph, dynamo_counters) if case.mode == "compiled" else None, rewrites=REWRITES)

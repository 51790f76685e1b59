"""workloads.interop's programs in PyTorch, as a PyTorch user writes them; "compiled" is
torch.compile with its defaults (fullgraph=False: Dynamo breaks the graph where it cannot
trace, runs that part in Python and resumes). Whether a program is one graph is what
torch.compile(fullgraph=True) says on every input (it raises, with Dynamo's reason, where
it would break); Dynamo's own counters give the graphs and breaks it met over the probe's
calls. Not torch._dynamo.explain: in torch 2.13 it reports 0 breaks and 1 graph for
`python_random`, which fullgraph=True refuses ("Attempted to call function marked as
skipped ... Random.random") and the default compile runs as 2 graphs with a break."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.special
import torch

from frameworks.base import Unsupported
from workloads import interop as I
from workloads.interop import LOG


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


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], mode: str,
          device: str) -> I.Programs:
    make = compiled if mode == "compiled" else (lambda f: f)
    return I.Programs(PROGRAMS, make, adapter.to_numpy, lambda x: adapter.asarray(x, device), config, mode,
                      Unsupported, I.Pieces(fullgraph, dynamo_counters) if mode == "compiled" else None)

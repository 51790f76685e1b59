"""workloads.interop's programs in PyTorch, as a PyTorch user writes them; "compiled" is
torch.compile with its defaults (fullgraph=False: Dynamo breaks the graph where it cannot
trace, runs that part in Python and resumes), and torch._dynamo.explain counts the graphs,
breaks and reasons of one call."""
from __future__ import annotations

import contextlib
import io
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


def explain(fn: Callable[[Any], Any]) -> Callable[[Any], tuple[int, int, list[str]]]:
    """Dynamo's own account of one call of fn: graphs, graph breaks and their reasons
    (torch._dynamo.explain, which also empties Dynamo's caches before and after; it uses
    Dynamo's graph-collecting backend, so nothing is compiled by Inductor here)."""
    def run(x: Any) -> tuple[int, int, list[str]]:
        with contextlib.redirect_stdout(io.StringIO()):
            out = torch._dynamo.explain(fn)(x)
        LOG.clear()
        reasons = [" ".join(str(r.reason).split()) for r in out.break_reasons]
        # every break, not explain's graph_count - 1: a break where no graph follows counts too
        return out.graph_count, len(reasons), reasons
    return run


def build(adapter: Any, config: I.InteropConfig, params: dict[str, np.ndarray], mode: str,
          device: str) -> I.Programs:
    compiled = mode == "compiled"
    make = torch.compile if compiled else (lambda f: f)
    return I.Programs(PROGRAMS, make, adapter.to_numpy, lambda x: adapter.asarray(x, device), config, mode,
                      Unsupported, explain if compiled else None)

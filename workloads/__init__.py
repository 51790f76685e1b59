"""Framework-free workload definitions: what is computed, never how.

Each workload module of WORKLOADS provides:
    NAME, TASKS, PRESETS, preset(name), init_params(config, seed),
    task_spec(config, batch, task, seed, strategy=None) -> TaskSpec,
    strategies(framework, mode, task) -> the case variants (the first is the default),
    device_strategies(framework, mode, task, kind) -> those on some devices only
    (workloads.base.no_device_strategies where there are none),
    OPTIONAL_VARIANTS: whether `--variants default` leaves out the strategies after the first,
    tasks(config) -> the task names of a preset (workloads.base.fixed_tasks(TASKS) where no
    name carries a size), check_inputs(config, method, *args, **kwargs),
    and MODEL, the Protocol its frameworks' models implement (CONTRIBUTING.md: "A workload").
tests/test_conformance.py checks every workload declares these (WORKLOAD_DECLARES) and every
framework's models against MODEL.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from workloads.base import FwbenchError, choose

WORKLOADS = ("gpt", "diffusion", "interop", "dynamic", "derivatives", "serving")


def get(name: str) -> ModuleType:
    """The workload module by name, e.g. get("gpt") -> workloads.gpt."""
    return importlib.import_module(f"workloads.{choose('workload', name, WORKLOADS)}")


def available() -> tuple[str, ...]:
    """Workloads whose module is present in this checkout."""
    return tuple(w for w in WORKLOADS if importlib.util.find_spec(f"workloads.{w}") is not None)


__all__ = ["WORKLOADS", "get", "available", "FwbenchError"]

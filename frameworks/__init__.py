"""The framework registry: adapters loaded by name, no framework imported up front.

    >>> import frameworks
    >>> frameworks.names()
    ('torch', 'jax', 'tensorflow')
    >>> fw = frameworks.load("jax")          # imports jax only now
    >>> model = fw.build("gpt", config, params, mode="compiled", device="cpu")

The registry is workloads/framework_facts.py (FACTS: one entry per framework, which `fwbench
run` and the reports read too); the adapter of framework <name> is frameworks/<name>/__init__.py.
A framework that is not installed raises FrameworkUnavailable with a one-line reason
and the pip command; `frameworks.status()` lists what is usable without raising.
"""
from __future__ import annotations

import importlib
import importlib.util

from frameworks.base import Adapter, FrameworkUnavailable, Unsupported, set_threads
from workloads.base import FwbenchError, choose
from workloads.framework_facts import FACTS

_LOADED: dict[str, Adapter] = {}


def names() -> tuple[str, ...]:
    """Every framework fwbench knows, installed or not (workloads/framework_facts.py: FACTS)."""
    return tuple(FACTS)


def load(name: str) -> Adapter:
    """The adapter for `name` (one instance per process). Raises FwbenchError for an
    unknown name and FrameworkUnavailable (one line, with the pip command) when the
    framework is missing or fails to import."""
    choose("framework", name, FACTS)
    if name in _LOADED:
        return _LOADED[name]
    module, hint = FACTS[name].module, FACTS[name].install
    if importlib.util.find_spec(module) is None:
        raise FrameworkUnavailable(f"{name} is not installed: {hint}")
    try:
        adapter_module = importlib.import_module(f"frameworks.{name}")
        adapter = adapter_module.Adapter()
    except Exception as e:  # a broken install: say so in one line, keep the others usable
        first = (str(e).strip().splitlines() or [""])[0]
        raise FrameworkUnavailable(f"{name} failed to import ({type(e).__name__}: {first}): {hint}") from e
    _LOADED[name] = adapter
    return adapter


def status(selected: tuple[str, ...] | None = None) -> dict[str, Adapter | str]:
    """For each framework: its adapter, or the one-line reason it cannot be used."""
    out: dict[str, Adapter | str] = {}
    for n in selected or names():
        try:
            out[n] = load(n)
        except FrameworkUnavailable as e:
            out[n] = str(e)
    return out


__all__ = ["Adapter", "FrameworkUnavailable", "FwbenchError", "Unsupported", "load", "names",
           "status", "set_threads"]

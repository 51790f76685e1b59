"""The framework registry: adapters loaded by name, no framework imported up front.

    >>> import frameworks
    >>> frameworks.names()
    ('torch', 'jax', 'tensorflow')
    >>> fw = frameworks.load("jax")          # imports jax only now
    >>> model = fw.build("gpt", config, params, mode="compiled", device="cpu")

A framework that is not installed raises FrameworkUnavailable with a one-line reason
and the pip command; `frameworks.status()` lists what is usable without raising.
"""
from __future__ import annotations

import importlib
import importlib.util

from frameworks.base import Adapter, FrameworkUnavailable, Unsupported, set_threads
from workloads.base import FwbenchError, choose

# name -> (module that must be importable, install hint)
_SPECS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "pip install 'fwbench[torch]'   (CPU build: pip install torch==2.13.0)"),
    "jax": ("jax", "pip install 'fwbench[jax]'   (GPU: pip install 'jax[cuda12]')"),
    "tensorflow": ("tensorflow", "pip install 'fwbench[tensorflow]'"),
}
_LOADED: dict[str, Adapter] = {}


def names() -> tuple[str, ...]:
    """Every framework fwbench knows, installed or not."""
    return tuple(_SPECS)


def install_hint(name: str) -> str:
    return _SPECS[choose("framework", name, _SPECS)][1]


def load(name: str) -> Adapter:
    """The adapter for `name` (one instance per process). Raises FwbenchError for an
    unknown name and FrameworkUnavailable (one line, with the pip command) when the
    framework is missing or fails to import."""
    choose("framework", name, _SPECS)
    if name in _LOADED:
        return _LOADED[name]
    module, hint = _SPECS[name]
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
           "status", "install_hint", "set_threads"]

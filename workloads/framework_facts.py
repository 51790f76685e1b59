"""The framework registry: what fwbench knows about each framework without importing it, one
entry per framework. Framework-free, so the three layers read the same entry:
`frameworks` (load, the compile caches' folders and variables), `fwbench run` (whether a
framework is installed, which cache variables a process must not inherit) and the reports
(order, the compile counter's words, op-by-op eager, colours), which may not import
`frameworks` (docs/ARCHITECTURE.md, "Import rules").

A framework is this entry plus its folder frameworks/<name>/ (CONTRIBUTING.md, "A framework");
the conformance test names a folder without an entry and an entry without a folder.
"""
from __future__ import annotations

from dataclasses import dataclass

from workloads.base import FwbenchError


@dataclass(frozen=True)
class FrameworkFacts:
    module: str                  # the top-level module that must be importable (found with find_spec)
    install: str                 # how to install it: the one-line reason when it is missing says it
    cache_subdir: str            # its persistent compile cache: this sub-folder of fwbench's cache folder
    cache_env: str | None        # the variable its runtime reads that folder from (set before it loads)
    cache_flag: tuple[str, str] | None   # or (variable, flag): a flag inside a variable names it
    counter: str                 # what its compilation counter counts, in a few words (the report's text)
    op_by_op_eager: bool         # its eager mode dispatches op by op: a speedup over it is labelled so
    colour: int | None = None    # its colour in every figure (seaborn's colorblind palette); None: a spare


# In the order the reports list them.
FACTS: dict[str, FrameworkFacts] = {
    "torch": FrameworkFacts(
        module="torch", install="pip install 'fwbench[torch]'   (CPU build: pip install torch==2.13.0)",
        cache_subdir="torchinductor", cache_env="TORCHINDUCTOR_CACHE_DIR", cache_flag=None,
        counter="dynamo graphs", op_by_op_eager=False, colour=3),                   # vermillion
    "jax": FrameworkFacts(
        module="jax", install="pip install 'fwbench[jax]'   (GPU: pip install 'jax[cuda12]')",
        cache_subdir="jax", cache_env="JAX_COMPILATION_CACHE_DIR", cache_flag=None,
        counter="XLA executables, eager ops included", op_by_op_eager=True, colour=0),   # blue
    "tensorflow": FrameworkFacts(
        module="tensorflow", install="pip install 'fwbench[tensorflow]'",
        cache_subdir="tf_xla", cache_env=None, cache_flag=("TF_XLA_FLAGS", "--tf_xla_persistent_cache_directory"),
        counter="tf.function traces", op_by_op_eager=True, colour=2),              # bluish green
}


def facts(name: str) -> FrameworkFacts:
    """`name`'s entry, or one line saying that it has none and where it goes."""
    try:
        return FACTS[name]
    except KeyError:
        raise FwbenchError(f"framework {name!r} has no entry in workloads/framework_facts.py FACTS (its module, "
                           f"install hint, compile-cache folder and variable, counter and eager kind; entries: "
                           f"{', '.join(FACTS)})") from None

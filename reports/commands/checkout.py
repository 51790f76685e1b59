"""The checkout `fwbench run` runs from: where it is (CHECKOUT), which frameworks it can run
(`installed`: the framework importable and its adapter present, neither imported), why one
cannot, its benchmark cases, and the machine information of a process that ended early
(`host_info`, measured in a fresh process). Imports no framework, nor the frameworks package."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from workloads.base import FwbenchError
from workloads.case import FRAMEWORKS  # noqa: F401  (fwbench's frameworks, in report order; the CLI reads it here)
from workloads.framework_facts import facts

CHECKOUT = Path(__file__).resolve().parents[2]


# The harness's reason for a mode a framework does not have (frameworks/harness/run.py: run_case).
NO_SUCH_MODE = re.compile(r"has no '\w+' mode \(it has ")


def adapter_file(name: str) -> Path:
    """Where this checkout keeps the framework's fwbench adapter (frameworks/<name>/__init__.py)."""
    return CHECKOUT / "frameworks" / name / "__init__.py"


def installed(name: str) -> bool:
    """Is the framework importable and its fwbench adapter present? Imports neither: the
    adapter is looked for as a file (find_spec of frameworks.<name> would import the
    frameworks package), the framework with find_spec of its top-level module (which finds
    it without importing it)."""
    return importlib.util.find_spec(facts(name).module) is not None and adapter_file(name).is_file()


def absent_reason(name: str) -> str:
    """Why `installed(name)` is False, with what to do about it."""
    if importlib.util.find_spec(facts(name).module) is None:
        return f"{name} is not installed: pip install 'fwbench[{name}]'"
    return f"{name} is installed but this checkout has no fwbench adapter for it (frameworks/{name}/__init__.py)"


def version_of(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def benchmarks_dir() -> Path:
    d = CHECKOUT / "tests" / "benchmarks"
    if not d.is_dir():
        raise FwbenchError(f"fwbench run needs the benchmark cases of a source checkout ({d} is missing): "
                           "clone the repository and pip install -e . there")
    return d


def host_info(fw: str, threads: int, device: str) -> dict[str, Any]:
    """The harness's machine information (frameworks.harness.machine.host_info: CPU name, C
    heap policy, GEMM rate, the framework's modes) for a result file rebuilt after its process
    ended early, measured in a fresh process at the same thread count, so utilisation keeps
    the same denominator and the set-up matches the other runs'. {} if that fails."""
    code = ("import json; from frameworks.base import set_threads; set_threads(%d); from frameworks.harness.machine "
            "import host_info; print(json.dumps(host_info(%r, %r)))" % (threads, fw, device))
    try:
        out = subprocess.run([sys.executable, "-c", code], cwd=CHECKOUT, capture_output=True, text=True, timeout=180)
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return {}


def pytest_benchmark_version() -> str:
    return version_of("pytest-benchmark")


"""`fwbench env` (run as `python -m frameworks.env`): each framework through fwbench's
registry, found (version, devices, modes), missing (the install command) or broken, then
Python's and the benchmark suite's set-up. The command line runs it in a process of its
own, so that `reports` never imports a framework."""
from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

import frameworks


def main() -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")     # TensorFlow's start-up chatter is not the answer
    rows = []
    for name, a in frameworks.status().items():
        if isinstance(a, str):
            rows.append((name, "missing", "", a))
            continue
        try:
            devs = ", ".join(a.devices())
            rows.append((name, "found", a.version(), f"devices: {devs}; modes: {', '.join(a.modes)}"))
        except Exception as e:   # a broken runtime: report it, keep listing the others
            rows.append((name, "broken", "", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
    widths = [max(len(r[i]) for r in rows + [("framework", "status", "version", "")]) for i in range(3)]
    print("  ".join(h.ljust(w) for h, w in zip(("framework", "status", "version"), widths)) + "  details")
    for r in rows:
        print("  ".join(x.ljust(w) for x, w in zip(r[:3], widths)) + "  " + r[3])
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"\npython {platform.python_version()}, numpy {importlib.metadata.version('numpy')}, "
          f"pytest-benchmark {importlib.metadata.version('pytest-benchmark')}, {cpus} CPUs available")
    bench = Path(__file__).resolve().parent.parent / "tests" / "benchmarks"
    print(f"benchmark cases: {bench}" if bench.is_dir() else
          f"benchmark cases: not found ({bench}); `fwbench run` needs a source checkout")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

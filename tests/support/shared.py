"""What the workers of one test run share (tests/conftest.py runs the suite in pytest-xdist
workers): a folder in the run's base temporary folder, and the committed examples rendered
once into it, whichever test asks first."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import reports

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "reports" / "examples"
AXES = EXAMPLES / "cpu-2core-axes"
# The committed runs whose reports the tests read, by name: their result folders.
EXAMPLE_RUNS = {"cpu-2core": [EXAMPLES / "cpu-2core"],
                "cpu-2core-axes": [AXES / "dynamic", AXES / "derivatives"],
                "cpu-2core-serving": [EXAMPLES / "cpu-2core-serving"],
                "scaleout-quick": [ROOT / "docs" / "measurements" / "scaleout-quick"]}
SHARED_ENV = "FWBENCH_TEST_SHARED"     # set by tests/conftest.py at the session's start


def run_dir() -> Path:
    """The folder this test run's workers share: under pytest's base temporary folder of the run
    (the workers' own are inside it), so pytest removes it with its old runs."""
    d = Path(os.environ.get(SHARED_ENV) or tempfile.gettempdir()) / "fwbench-shared"
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """An exclusive lock over this run's workers, by name."""
    with open(run_dir() / f"{name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def has_example(name: str) -> bool:
    return all(any(f.glob("*.json")) for f in EXAMPLE_RUNS[name])


def rendered_example(name: str) -> tuple[Path, dict[str, Any]]:
    """The example `name` rendered as `fwbench report` renders it (the paper compiled), once per
    test run: its output folder and what render returned of the paper (problems, pages, fonts)
    and of the figures (problems)."""
    out = run_dir() / "examples" / name
    done = out / "render.json"
    with locked(f"example-{name}"):
        if not done.exists():
            paths = reports.render(reports.load(EXAMPLE_RUNS[name]), out, pdf=True)
            kept = ("paper_problems", "paper_pages", "paper_fonts", "figure_problems")
            done.write_text(json.dumps({k: paths[k] for k in kept if k in paths}))
    return out, json.loads(done.read_text())

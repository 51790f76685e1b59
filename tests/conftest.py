"""fwbench's pytest hooks and options (see frameworks/pytest_plugin.py) and shared fixtures.

The README's test command, `python -m pytest` with no paths, runs the suite in parallel
worker processes (pytest-xdist, from the dev extra: one per CPU, at most 4, a test file per
worker at a time; FWBENCH_TEST_WORKERS overrides, 0 runs it serially), because most of its time
is single-threaded compiling and importing. A test marked `alone` (timings, a busy-machine
check, a Slurm cluster of one node) runs with no other test beside it. Given paths, `-n`, `-p
no:xdist`, or `--benchmark-only` (a framework process of `fwbench run`), pytest runs as usual.
"""
import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

import pytest

from frameworks.pytest_plugin import *  # noqa: F401,F403  (hooks must live in the conftest namespace)

# Reports rendered by tests write paper.tex but do not compile it (seconds each); the paper
# tests compile it on purpose (tests/test_paper.py).
os.environ.setdefault("FWBENCH_PDF", "0")

MAX_WORKERS = 4


def _workers(config: pytest.Config) -> int:
    """How many worker processes the whole suite runs in here (0: serially)."""
    if os.environ.get("FWBENCH_TEST_WORKERS"):
        return int(os.environ["FWBENCH_TEST_WORKERS"])
    explicit = config.args_source != pytest.Config.ArgsSource.TESTPATHS
    if (explicit or not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
            or config.option.numprocesses is not None or config.option.dist != "no"
            or config.getoption("benchmark_only", False) or config.option.collectonly or config.option.usepdb):
        return 0
    return min(len(os.sched_getaffinity(0)), MAX_WORKERS)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite in workers, each taking a test file at a time (a file's module fixtures
    are built once); xdist turns the count into its workers (its own tryfirst hook, after this)."""
    n = _workers(config) if config.pluginmanager.hasplugin("xdist") else 0
    if n > 1 and not hasattr(config, "workerinput"):
        config.option.numprocesses, config.option.dist = n, "loadfile"


def pytest_sessionstart(session: pytest.Session) -> None:
    """In a worker, pytest-benchmark turns its fixture off (numbers from parallel processes are
    not benchmarks); the tests here use the fixture as the harness does, for its rounds and
    statistics, and those that judge times are `alone`: it is turned back on."""
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is not None and os.environ.get("PYTEST_XDIST_WORKER"):
        bs.disabled = bool(session.config.getoption("benchmark_disable")
                           and not session.config.getoption("benchmark_enable"))
        bs.xdist_warning = False


@contextlib.contextmanager
def _turn(alone: bool):
    """A turnstile over the run's workers (flock): every test passes the gate, then holds the
    room shared; an `alone` test holds the gate while it takes the room exclusively, so no
    other test starts, and those running finish, before it runs."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not uid:
        yield
        return
    d = Path(tempfile.gettempdir()) / f"fwbench-tests-{uid}"
    d.mkdir(exist_ok=True)
    with open(d / "gate", "a") as gate, open(d / "room", "a") as room:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    with _turn(item.get_closest_marker("alone") is not None):
        yield

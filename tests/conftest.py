"""fwbench's pytest hooks and options (see frameworks/pytest_plugin.py) and shared fixtures.

The README's test command, `python -m pytest` with no paths, runs the suite in parallel
worker processes (pytest-xdist, from the test extra: one per CPU, at most 4, a test file per
worker at a time; FWBENCH_TEST_WORKERS overrides, 0 runs it serially), each worker on one CPU
of its own. The suite is CPU-bound: on 2 cores, with the compile caches an earlier run left
(shared by the workers), it takes about 18 minutes in workers, 24-27 from empty caches. A test
marked `alone` (timings, a busy-machine check) runs with no other test beside it, on every
CPU (a file's alone tests first, one after another in one turn); tests marked
`serial("slurm")` (the one-node Slurm cluster) run one at a time, beside the others. Given
paths, `-n`, `-p no:xdist`, or `--benchmark-only` (a framework process of `fwbench run`),
pytest runs as usual.
"""
import contextlib
import fcntl
import gc
import itertools
import os
import shutil
import sys
import zlib
from typing import Iterator

import pytest
import threadpoolctl

from frameworks.base import default_cache_dir
from frameworks.harness.gemm import GEMM_N_ENV
from frameworks.pytest_plugin import *  # noqa: F401,F403  (hooks must live in the conftest namespace)
from frameworks.pytest_plugin import pytest_collection_modifyitems as plugin_modifyitems
from tests.support.shared import SHARED_ENV, run_dir
from workloads.base import CPUS_ENV, merge_tree
from workloads.framework_facts import facts

# Reports rendered by tests write paper.tex but do not compile it (seconds each); the paper
# tests compile it on purpose (tests/test_paper.py).
os.environ.setdefault("FWBENCH_PDF", "0")
# A benchmark process a test starts (pytest --benchmark-only, `fwbench run`, a Slurm job) times
# each case once: beside the other worker the machine is always busy, and the harness would wait
# up to 30 s for a quiet machine and measure the case again from its build, twice (its default
# --busy-retries). Measured on 2 cores: test_first_calls' JAX eager test, three cases, took 183 s
# in the suite and 32 s alone. A test's own --busy-retries, later on its command line, wins.
if "--busy-retries" not in os.environ.get("PYTEST_ADDOPTS", ""):
    os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} --busy-retries 0".strip()
# A worker's compile caches are a folder of its own inside the suite's (the controller's configure
# set FWBENCH_CACHE_DIR to the suite's folder, tests/, before the workers started), whose torch,
# JAX and TensorFlow (XLA) sub-folders are links to one folder all workers share (SHARED_CACHES):
# a program compiled in either worker, in this run or an earlier one, is found whichever worker a
# test file lands on next time (per-worker folders were warm only where earlier runs had put every
# file on both workers: the compiled torch UNet's block took 84 s instead of 12 on a worker that
# had not). TF's programs are keyed by their functions' names too (_tf_names). The two tests that
# count XLA's compiles as the entries written to the folder (adapter.counters) are `alone`: the
# other worker's writes would count too.
SHARED_CACHES = ("torch", "jax", "tensorflow")


def _share_caches(suite: str, worker: str) -> str:
    own = os.path.join(suite, worker)
    for fw in SHARED_CACHES:
        sub = facts(fw).cache_subdir
        shared, link = os.path.join(suite, "shared", sub), os.path.join(own, sub)
        os.makedirs(shared, exist_ok=True)
        if os.path.islink(link):
            continue
        if os.path.isdir(link):        # a folder of this worker's own from before: its entries join
            merge_tree(link, shared)
            shutil.rmtree(link)
        os.makedirs(own, exist_ok=True)
        os.symlink(shared, link)
    return own


if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["FWBENCH_CACHE_DIR"] = _share_caches(default_cache_dir(), os.environ["PYTEST_XDIST_WORKER"])
# Each worker runs on one CPU of its own (round robin), so its frameworks take one thread each
# and two workers' thread pools do not contend for the same cores; an `alone` test gets every
# CPU back while it runs (_turn). A process the worker starts inherits its CPU; a Slurm job does
# not (the test cluster binds no tasks) and finds it in FWBENCH_CPUS, which sbatch passes on
# (workloads.base.restrict_cpus): without it set_threads pinned every job to CPU 0, beside the
# worker there, while the submitting worker's CPU idled.
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
if os.environ.get("PYTEST_XDIST_WORKER") and len(CPUS) > 1:
    _mine = CPUS[int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")) % len(CPUS)]
    os.sched_setaffinity(0, {_mine})
    os.environ[CPUS_ENV] = str(_mine)
    # numpy's BLAS was loaded above with a thread per CPU; on the worker's one CPU its threads
    # spin waiting on each other: a float64 reference (numpy) of the ddpm-cifar UNet took 83 s in
    # a worker, 1.2 s alone. One thread, for good (a process the worker starts inherits the one
    # CPU and sizes its own pools by it).
    threadpoolctl.threadpool_limits(1)

MAX_WORKERS = 4


# The harness collects Python's garbage before each case it times (frameworks.harness.timing.gc_off):
# in a worker that has imported the frameworks and run earlier files, a full scan of about a million
# objects, 0.8 s a case (test_harness.py's 15 in-process cases spent 12.4 s in it). A module whose
# tests run cases in the worker freezes what is alive before each test (gc.freeze: out of the
# collector's reach, so a collection scans what the test made) and gives it back after its last
# test (gc.unfreeze), so what its tests left behind is collected again.
@pytest.fixture(scope="module")
def _thawed_after_module() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.fixture
def frozen_heap(_thawed_after_module: None) -> None:
    gc.freeze()


def _workers(config: pytest.Config) -> int:
    """How many worker processes the whole suite runs in here (0: serially)."""
    if (not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
            or config.option.numprocesses is not None or config.option.dist != "no"
            or config.getoption("benchmark_only", False) or config.option.collectonly or config.option.usepdb):
        return 0
    if os.environ.get("FWBENCH_TEST_WORKERS"):
        return int(os.environ["FWBENCH_TEST_WORKERS"])
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:      # paths given: as usual
        return 0
    return min(len(os.sched_getaffinity(0)), MAX_WORKERS)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite in workers, each taking a test file at a time (a file's module fixtures
    are built once); xdist turns the count into its workers (its own tryfirst hook, after this)."""
    n = _workers(config)
    if n > 1:
        config.option.numprocesses, config.option.dist = n, "loadfile"
        config.option.loadscopereorder = False      # the files in FIRST's order (below), not by test count


# The order in which the workers take the test files (a file not named follows, in collection
# order): the `alone` ones first, so that none waits at the gate for another worker's long test
# to end (tests/conftest.py: _turn); then the Slurm file, which waits on Slurm (15-23% of the two
# CPUs idle while it and the side-by-side file run), beside the busiest files; then the
# rest longest first, so that no long file is left for the end while the other worker idles
# (xdist's default takes the files with the most tests first: the Slurm, side-by-side and
# first-call files, few tests and minutes each, came last). test_slurm.py and test_distributed.py
# take turns at the one-node Slurm cluster: they stand far enough apart that the second starts
# after the first has ended. From --durations on the 2-core machine (a file's tests summed, 10 to
# 197 s); a stale order costs time, never a result.
FIRST = ("test_sets.py", "test_startup_and_busy.py", "test_library.py", "test_tf_axes.py", "test_dynamic.py",
         "test_slurm.py", "test_serving.py", "test_scaleout.py", "test_precision_tensorflow.py",
         "test_distributed.py", "test_derivatives.py", "test_diffusion_equivalence.py", "test_paper.py",
         "test_reports_stats.py", "test_mutations.py", "test_run_interrupts.py", "test_first_calls.py",
         "test_cli_fwbench.py", "test_launch.py", "test_gpt_equivalence.py", "test_peers.py",
         "test_precision_jax.py", "test_harness.py", "test_benchmark_run.py", "test_preset_equivalence.py",
         "test_report_reads.py", "test_runner_repeats.py", "test_reports_scale.py",
         "test_run_paths.py", "test_cookbook.py", "test_cli_errors.py", "test_global_precision.py",
         "test_conformance.py", "test_interop.py", "test_precision_torch.py", "test_memory.py")


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("alone") is not None


def _keeps_room(item: pytest.Item | None) -> bool:
    """Whether the test may hold the room over from or into a neighbour: alone, and not serial."""
    return _alone(item) and item.get_closest_marker("serial") is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The plugin's selection (frameworks/pytest_plugin.py), then, in a plain test run, the files
    in FIRST's order, and in each file its `alone` tests first (a stable sort: the rest keep
    their order): a worker then runs a file's alone tests one after another, holding the room
    from the first to the last (pytest_runtest_protocol), not one at a time between the other
    worker's tests."""
    plugin_modifyitems(config, items)
    if not config.getoption("benchmark_only", False):
        items.sort(key=place)


def place(item: pytest.Item) -> tuple[int, bool]:
    """A test's place in a plain run: its file's in FIRST (a file not named, or a benchmark
    module, after those named), then, in its file, `alone` before the rest."""
    rank = FIRST.index(item.path.name) if item.path.parent.name == "tests" and item.path.name in FIRST else len(FIRST)
    return rank, not _alone(item)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In a worker, pytest-benchmark turns its fixture off (numbers from parallel processes are
    not benchmarks); the tests here use the fixture as the harness does, for its rounds and
    statistics, and those that judge times are `alone`: it is turned back on."""
    # The tests' benchmark processes and in-process cases measure the machine's GEMM rate (sampled
    # before the first case and after the last, numpy's and the framework's) at 256 x 256: at the
    # default 2048 it took 4.6 s of each such process (2.3 s a sample on one core; 0.02 s at 256,
    # at 98% of the rate), and no test judges the rate (a test that does sets its own). Not in a
    # benchmark run (--benchmark-only, fwbench run's processes): its rate is the default's.
    if not session.config.getoption("benchmark_only", False):
        os.environ.setdefault(GEMM_N_ENV, "256")
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is not None and os.environ.get("PYTEST_XDIST_WORKER"):
        bs.disabled = bool(session.config.getoption("benchmark_disable")
                           and not session.config.getoption("benchmark_enable"))
        bs.xdist_warning = False
    # A pytest a test starts (a benchmark process of fwbench run) is no worker: with xdist's
    # worker variables it would take itself for one and turn pytest-benchmark off. (The run id
    # stays: it names the folder the workers share, tests/support/shared.py.)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        os.environ.pop(name, None)
    # What the workers share lives in the run's base temporary folder (a worker's own is inside
    # it), which pytest removes with its old runs; a benchmark process shares nothing.
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None and not session.config.getoption("benchmark_only", False):
        base = factory.getbasetemp()
        os.environ[SHARED_ENV] = str(base.parent if hasattr(session.config, "workerinput") else base)


@contextlib.contextmanager
def _env(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@contextlib.contextmanager
def _turn(config: pytest.Config, alone: bool, serial: str | None):
    """A turnstile over the run's workers (flock): every test passes the gate, then holds the
    room shared; an `alone` test holds the gate while it takes the room exclusively, so no
    other test starts, and those running finish, before it runs. A `serial(name)` test first
    takes its name's lock: one such test at a time (a one-node Slurm cluster), the others
    beside it as usual."""
    if not hasattr(config, "workerinput"):        # not a worker (a pytest a test started, say)
        yield
        return
    d = run_dir()
    with contextlib.ExitStack() as held:
        if serial:
            own = held.enter_context(open(d / f"serial-{serial}", "a"))
            fcntl.flock(own, fcntl.LOCK_EX)
        gate = held.enter_context(open(d / "gate", "a"))
        room = held.enter_context(open(d / "room", "a"))
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)
        own_cpus = os.sched_getaffinity(0) if alone and CPUS else None
        if own_cpus is not None:
            os.sched_setaffinity(0, CPUS)
            held.callback(os.sched_setaffinity, 0, own_cpus)
            held.enter_context(_env(CPUS_ENV, ",".join(map(str, CPUS))))
        yield                                     # closing the files releases every lock


# TensorFlow names each traced function "__inference_<name>_<ops.uid()>" (and a while loop's
# body, a gradient, likewise) from one counter per process, and XLA's persistent cache keys a
# program by those names (a tf.function compiled in two processes, the counter stepped 5 in the
# second: a new entry): a test's programs were found only when its worker had run the same tests
# before it, in the same order, as the run that wrote them. In a test the counter starts at a
# number of the test's own (from its node id's CRC, far above what TF's own counter reaches), so a
# test that traces what it traced last time finds its programs, whatever ran before it (measured:
# test_precision_tensorflow.py's compiled tests after three test_dynamic.py ones, from a folder
# they had filled alone: 49.5 s and no entry of theirs written, against 65 s unpatched). A test
# that must compile (one that counts XLA's compiles) steps the counter at random first. Its
# programs also hold the source paths of TF's own files (the op metadata): a program compiled
# from another virtual environment's TF (a CI clone's .venv-ci) is another entry, and a function
# traced outside a test (a benchmark process's GEMM rate) keeps TF's own counter.
UID_SPAN = 1 << 24                 # uids a test may take (one that must compile steps up to 2^20)
_uid_bases: set[int] = set()


def uid_base(nodeid: str, taken: set[int]) -> int:
    """Where TF's counter starts in the test `nodeid`: from its CRC, past the bases taken."""
    base = (1 << 40) + zlib.crc32(nodeid.encode()) * UID_SPAN
    while base in taken:           # two node ids with one CRC: the later one moves on
        base += UID_SPAN
    return base


@contextlib.contextmanager
def _tf_names(item: pytest.Item):
    """TF's ops.uid() counting from the test's own base while it runs (if TF is loaded), in a
    plain test run: a benchmark process (--benchmark-only, fwbench run's) keeps TF's own counter,
    its cases' names as a user's process gives them."""
    ops = sys.modules.get("tensorflow.python.framework.ops")
    if ops is None or item.config.getoption("benchmark_only", False):
        yield
        return
    base = uid_base(item.nodeid, _uid_bases)
    _uid_bases.add(base)
    own, counter = ops.uid, itertools.count(base)
    ops.uid = lambda: next(counter)
    try:
        yield
    finally:
        ops.uid = own


# The room an `alone` test of this worker took, kept while the worker's next test is `alone` too.
_kept_room: contextlib.ExitStack | None = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Each test inside its turn (_turn). An `alone` test whose next test is `alone` too keeps
    the room for it: released between them, it went to the other worker, whose test (46 s, the
    Slurm end-to-end one) started in the gap while the alone tests left waited and a CPU idled."""
    global _kept_room
    serial = item.get_closest_marker("serial")
    alone = _keeps_room(item)
    room, _kept_room = _kept_room, None
    if room is None or not alone:
        if room is not None:
            room.close()
        room = contextlib.ExitStack()
        room.enter_context(_turn(item.config, _alone(item), serial.args[0] if serial else None))
    try:
        with _tf_names(item):
            yield
    finally:
        if alone and _keeps_room(nextitem):
            _kept_room = room
        else:
            room.close()

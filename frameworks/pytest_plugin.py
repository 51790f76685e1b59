"""fwbench's pytest hooks: options, case generation, machine info, non-timed records.

tests/conftest.py star-imports this module, so the hooks apply to fwbench's own test
tree only (no global pytest11 entry point that would add options to other projects).

Options (all optional):
    --framework torch,jax     frameworks to benchmark (default: all known; missing ones skip)
    --workload gpt            workloads to benchmark (default: all)
    --preset small            workload preset (default: small), or per workload:
                              --preset gpt=gpt2,diffusion=ddpm-cifar
    --device cpu              cpu (default), cuda or gpu
    --threads N               intra-op threads for every framework (default: all CPUs available)
    --matmul-precision        highest (default: full fp32, TF32 off) or tf32
    --budget-s S              timed seconds per case used to size rounds (default 3)
    --rounds N                fixed timed rounds per case (overrides --budget-s)
    --min-rounds N            fewest timed rounds when sized by the budget (default 7)
    --warmup-rounds N         untimed rounds before the timed ones (default 2)
    --devices N               data-parallel train steps over N devices (default 1; one count per
                              process: `fwbench run --devices 1,2` starts a process per count)
    --simulated-devices       split the CPU into the N devices (JAX host-platform devices,
                              TensorFlow logical devices, torch one process per device)
    --bare-loop               also time a bare loop over the same callable (bare_loop_median_s)
    --variants all|default    every case variant (strategy) the workloads declare (default),
                              or only each case's default, the first strategy declared,
                              where the others are optional (gpt, diffusion: the workload's
                              OPTIONAL_VARIANTS; fwbench run's sets and --quick do)
    --case-order-seed S       run the benchmark cases in a random order drawn with seed S
                              (default: collection order); `fwbench run` sets it per process
    --task-order-seed S       run the cases task by task, the tasks in an order drawn with seed S
                              (the cases of a task in the case order); `fwbench run` sets it per set,
                              the same for each of the set's processes, which take turns task by
                              task at its coordinator's word (frameworks.harness.sidebyside)
    --cache-role cold|warm    this process's compile-cache role (default: from the cache
                              folder at start: empty -> cold, filled -> warm); records'
                              compile_cache. Every case runs from a fresh in-process compile
                              state either way (Adapter.case_caches): in a cold process each
                              case compiles into an empty cache folder of its own, in a warm
                              one it finds the run's filled cache
    --repeat I, --repeats N, --cold C, --warm W, --run-id ID
                              set by `fwbench run`: this process's index among its
                              framework's N = C + W processes (C cold, W warm), and the run
                              they belong to

Compile caches: a benchmark run uses FWBENCH_CACHE_DIR (default ~/.cache/fwbench; `fwbench
run` gives each cold process an empty folder of its own and every warm process the run's
shared folder, filled from the cold ones); a plain test run (no --benchmark-only) uses a
folder of its own beside it, so tests never warm a cache that a benchmark reports as cold.
"""
from __future__ import annotations

import random
from typing import Any

import pytest

import frameworks
import workloads
from frameworks import harness
from frameworks.base import default_cache_dir, prepare_placement, set_cache_role
from frameworks.harness import machine, sidebyside
from workloads import options
from workloads.base import FwbenchError, split_names
from workloads.case import PRECISIONS, Case, declared_cases
from workloads.parallel import device_counts

_SESSION_KEY = pytest.StashKey[harness.Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("fwbench")
    for o in options.HARNESS:            # declared once: workloads/options.py
        g.addoption(o.flag, **o.pytest_kwargs())


def _options(config: pytest.Config) -> harness.Options:
    v = options.checked({o.name: config.getoption(o.name) for o in options.HARNESS})
    v["frameworks"] = split_names(v.pop("framework"), "framework", frameworks.names())
    v["workloads"] = split_names(v.pop("workload"), "workload", workloads.available())
    split_names(v["precision"], "precision", PRECISIONS)          # checked here, split per workload
    counts = device_counts(v["devices"])
    if len(counts) > 1:
        raise FwbenchError(f"--devices {v['devices']}: a pytest process runs one placement; give one count "
                           f"(`fwbench run --devices {v['devices']}` starts a process per count)")
    return harness.Options(**v)


def _timing(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_only", False) or config.getoption("benchmark_enable", False))


def pytest_configure(config: pytest.Config) -> None:
    import os
    if not _timing(config) and "FWBENCH_CACHE_DIR" not in os.environ:
        os.environ["FWBENCH_CACHE_DIR"] = os.path.join(default_cache_dir(), "tests")
    try:
        opts = _options(config)
        # before any framework starts: its devices and its pools (threads per device)
        opts.threads = prepare_placement(opts.n_devices, opts.simulated_devices, opts.device, opts.threads)
        set_cache_role(opts.cache_role)
    except FwbenchError as e:
        raise pytest.UsageError(str(e)) from None
    session = harness.Session(opts, describe_node=machine.node_info)
    link = sidebyside.link_from_env() if _timing(config) else None
    if link is not None:       # a process of fwbench run's set: its tasks take turns with the others'
        session.sides = sidebyside.SideBySide(link, ",".join(opts.frameworks))
    config.stash[_SESSION_KEY] = session


def session_of(config: pytest.Config) -> harness.Session:
    return config.stash[_SESSION_KEY]


@pytest.fixture(scope="session")
def fwbench_session(request: pytest.FixtureRequest) -> harness.Session:
    return session_of(request.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Benchmark modules set WORKLOAD = "..." and take a `case` (workloads.case.Case): every
    case the workload declares for the selected frameworks (workloads.case.declared_cases).
    Ids read framework-mode-task[-strategy]."""
    workload = getattr(metafunc.module, "WORKLOAD", None)
    if workload is None or "case" not in metafunc.fixturenames:
        return
    opts = session_of(metafunc.config).options
    cases = []
    if workload in opts.workloads:
        cases = declared_cases(workload, opts.frameworks, opts.presets[workload], opts.variants,
                               precisions=split_names(opts.precision, "precision", PRECISIONS),
                               placement=opts.placement)
    metafunc.parametrize("case", cases, ids=[c.id for c in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Benchmark cases (modules with WORKLOAD) time real work: they run under
    --benchmark-only (or --benchmark-enable) and are skipped with that reason in a plain
    test run. Tests of the harness itself use the benchmark fixture on stand-in work: they
    run in a plain test run and are skipped under --benchmark-only, so that no stand-in
    timing ever lands in a results file."""
    timing = _timing(config)
    opts = session_of(config).options
    # A benchmark module of a workload not selected has one placeholder item (an empty
    # parameter set): deselect it rather than report a skip for it.
    unselected = [it for it in items if getattr(getattr(it, "module", None), "WORKLOAD", None)
                  not in (None, *opts.workloads)]
    if unselected:
        config.hook.pytest_deselected(items=unselected)
        items[:] = [it for it in items if it not in unselected]
    seed = opts.case_order_seed
    slots = [i for i, it in enumerate(items) if getattr(getattr(it, "module", None), "WORKLOAD", None)]
    order = [items[i] for i in slots]
    if seed is not None:   # the benchmark cases in a seeded random order, in the slots they held
        random.Random(seed).shuffle(order)
    if opts.task_order_seed is not None:    # task by task, the tasks in the set's order, each's cases in that order
        tasks = sorted({task_of(it) for it in order})
        random.Random(opts.task_order_seed).shuffle(tasks)
        order.sort(key=lambda it: tasks.index(task_of(it)))
    for i, it in zip(slots, order):
        items[i] = it
    skip_case = pytest.mark.skip(reason="benchmark case: run with --benchmark-only")
    skip_self = pytest.mark.skip(reason="harness self-test, not a benchmark")
    for item in items:
        if "benchmark" not in getattr(item, "fixturenames", ()):
            continue
        is_case = getattr(getattr(item, "module", None), "WORKLOAD", None) is not None
        if is_case and not timing:
            item.add_marker(skip_case)
        elif not is_case and timing:
            item.add_marker(skip_self)


def pytest_collection_finish(session: pytest.Session) -> None:
    """In a set: say hello with the tasks this process will run, in order (after -k and every
    other deselection)."""
    sides = session_of(session.config).sides
    if sides is not None:
        _in_set(session.config, lambda: sides.hello([t for t in dict.fromkeys(map(task_of, session.items)) if t]))


def task_of(item: pytest.Item) -> str | None:
    """The task a benchmark case belongs to, 'workload/task' (None for any other item)."""
    case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
    return f"{case.workload}/{case.task}" if isinstance(case, Case) else None   # a test's own 'case' is not one


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """In a set: before the first case of a task, wait for the task's turn."""
    sides, task = session_of(item.config).sides, task_of(item)
    if sides is not None and task is not None and sides.task != task:
        _in_set(item.config, lambda: sides.begin(task))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """In a set: after the last case of a task, its configurations' blocks, side by side with
    the set's other processes', until the coordinator releases the task."""
    sides, task = session_of(item.config).sides, task_of(item)
    if sides is not None and task is not None and (nextitem is None or task_of(nextitem) != task):
        _in_set(item.config, lambda: sides.serve(task))


def _in_set(config: pytest.Config, step: Any) -> None:
    """A step of the set's protocol; if the coordinator has gone, the process goes on alone
    (its cases keep their own rounds; no blocks)."""
    try:
        step()
    except (EOFError, OSError, ValueError):
        session_of(config).sides = None


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    s = session_of(config)
    machine_info["fwbench"] = machine.machine_info(s.options, s.gemm_samples, s.peaks)
    machine_info["fwbench"]["compiler_startup"] = dict(s.compiler_startup)


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]) -> None:
    s = session_of(config)
    fw = output_json["machine_info"].setdefault("fwbench", {})
    fw.setdefault("missing", {}).update(s.missing)
    output_json["fwbench"] = {"schema": fw.get("schema"), "records": s.records, "missing": fw["missing"]}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """pytest-benchmark writes no --benchmark-json when nothing was timed; fwbench's records
    of cases that did not run (unsupported, failed) and the missing frameworks still belong
    in one, so write it here (pytest-benchmark's own writing runs before this hook)."""
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is None or not bs.json or bs.benchmarks or bs.disabled or _SESSION_KEY not in session.config.stash:
        return
    hook = session.config.hook
    output_json = hook.pytest_benchmark_generate_json(
        config=session.config, benchmarks=[], include_data=True, machine_info=bs.get_machine_info(),
        commit_info=hook.pytest_benchmark_generate_commit_info(config=session.config))
    hook.pytest_benchmark_update_json(config=session.config, benchmarks=[], output_json=output_json)
    bs.save_json(output_json)

"""The `fwbench` command line and `fwbench run`'s process handling.

The runner tests drive a stand-in benchmark suite (written into tmp_path) that behaves like
tests/benchmarks but can crash or hang on demand, so crash and timeout handling is tested
for real without a framework. The real-run test at the end uses an installed framework.
"""
from __future__ import annotations

import ast
import contextlib
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import reports
from reports.commands import checkout, cli, plan, results, runner
from tests.support.reports_fixtures import plausible_run, record, result_json, times, write
from workloads.case import FRAMEWORKS

COMMANDS = ("run", "report", "compare", "env")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0 and "usage: fwbench " + command in capsys.readouterr().out


@pytest.mark.parametrize("argv, phrase", [
    ([], "required: COMMAND"),
    (["report"], "required: RESULTS"),
    (["report", "/no/such/dir"], "nothing to report: /no/such/dir: no such file or folder"),
    (["report", "RESULTS", "--weights", "speed=1"], "unknown concern 'speed'"),
    (["run", "--framework", "mxnet"], "unknown framework 'mxnet'"),
    (["run", "--threads", "0"], "--threads must be a positive integer, got 0"),
    (["run", "--weights", "throughput"], "name=value"),
    (["compare", "a.json"], "required: NEW"),
    (["bogus"], "invalid choice"),
    (["run", "--framework", ""], "names no framework"),
    (["run", "--framework", " , "], "names no framework"),
    (["run", "--budget-s", "inf"], "--budget-s must be a positive finite number of seconds, got inf"),
    (["run", "--budget-s", "-1"], "--budget-s must be a positive finite number of seconds"),
    (["run", "--rounds", "0"], "--rounds must be an integer of at least 1, got 0"),
    (["run", "--timeout-s", "nan"], "expected a positive finite number"),
    (["compare", "a", "b", "--margin", "-0.1"], "expected a fraction above 0 and below 1"),
    (["compare", "a", "b", "--margin", "nan"], "expected a fraction above 0 and below 1"),
])
def test_bad_input_is_one_line_and_exit_2(argv, phrase, capsys, tmp_path):
    argv = [str(tmp_path) if a == "RESULTS" else a for a in argv]
    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2
    assert phrase in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_report_with_a_bad_file_warns_and_renders_the_rest(tmp_path, capsys):
    small = [(record("torch", "forward", m, first_call_s=f), times(t, seed=i))
             for i, (m, f, t) in enumerate([("eager", 0.1, 0.01), ("compiled", 3.0, 0.006)])]
    write(tmp_path / "in" / "torch.json", result_json(small))
    write(tmp_path / "in" / "broken.json", "{")
    rc = cli.main(["report", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--weights", "throughput=2"])
    err = capsys.readouterr().err
    assert rc == 0 and "broken.json: malformed JSON" in err
    assert (tmp_path / "out" / "report.html").exists() and (tmp_path / "out" / "figures" / "speedup.pdf").exists()
    assert "throughput=2" in (tmp_path / "out" / "report.md").read_text()


def test_python_m_reports_errors_without_traceback_and_imports_no_framework():
    """`python -m reports` (the `fwbench` command) in a fresh process: a bad path is one line
    on stderr with exit code 2, and neither it nor importing every reports module imports a
    framework or fwbench's frameworks package."""
    code = textwrap.dedent("""
        import runpy, sys
        sys.argv = ["fwbench", "report", "/no/such/results"]
        try:
            runpy.run_module("reports", run_name="__main__")
        except SystemExit as e:
            rc = e.code
        import importlib, pkgutil, reports
        for m in pkgutil.walk_packages(reports.__path__, "reports."):
            if m.name != "reports.__main__":
                importlib.import_module(m.name)
        loaded = sorted(m for m in ("torch", "jax", "tensorflow", "frameworks") if m in sys.modules)
        print(rc, loaded)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "2 []", out.stdout + out.stderr
    assert out.stderr.count("\n") == 1 and "no such file or folder" in out.stderr and "Traceback" not in out.stderr


def _reports_imports() -> tuple[dict[str, set[str]], list[str]]:
    """From the source of every reports module: the reports modules each imports (at module
    level or inside a function; `from pkg import mod` counts as mod, the implicit import of a
    parent package does not), and every import of the frameworks package: a statement, or
    importlib's import_module / find_spec given a name in it (find_spec of a submodule
    imports its parent package)."""
    root = Path(reports.__file__).resolve().parent.parent
    mods = {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted((root / "reports").rglob("*.py"))}
    edges: dict[str, set[str]] = {m: set() for m in mods}
    bad = []
    for m, path in mods.items():
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom) and n.module:
                subs = [f"{n.module}.{a.name}" for a in n.names]
                names = [t for t in subs if t in mods] + ([] if all(t in mods for t in subs) else [n.module])
            elif isinstance(n, ast.Call) and n.args and getattr(n.func, "attr", getattr(n.func, "id", None)) in (
                    "import_module", "find_spec", "__import__"):
                a = n.args[0]
                names = [a.value if isinstance(a, ast.Constant) else "".join(
                    v.value for v in getattr(a, "values", ()) if isinstance(v, ast.Constant))]
            else:
                continue
            bad += [f"{m}: {t}" for t in names if isinstance(t, str) and t.split(".")[0] == "frameworks"]
            edges[m] |= {t for t in names if t in mods and t != m}
    return edges, bad


def test_reports_modules_import_no_circle_and_no_frameworks():
    """Running, analysis, rendering and the sections import each other one way: no circle
    among reports modules (axes.py, now reports.sections, once imported findings inside its
    functions, and findings imported it); and no reports module imports fwbench's frameworks package (fwbench env runs
    frameworks/env.py in a process of its own; the runner looks for an adapter's file)."""
    edges, bad = _reports_imports()
    assert bad == []
    done: set[str] = set()

    def walk(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, "import circle: " + " -> ".join((*path[path.index(m):], m))
        if m not in done:
            for t in sorted(edges[m]):
                walk(t, (*path, m))
            done.add(m)
    for m in sorted(edges):
        walk(m, ())
    assert "reports.rendering.document" in edges["reports"]     # imports inside functions count too


def _layer(m: str) -> int | None:
    """The index in reports.LAYERS of the folder holding module m (reports.<folder>...); the
    package's top-level modules (reports, reports.__main__) sit above every folder; None for a
    folder that is not a layer."""
    parts = m.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return len(reports.LAYERS)
    return reports.LAYERS.index(parts[1]) if parts[1] in reports.LAYERS else None


def test_reports_imports_run_down_the_folders():
    """reports/'s folders are its layers (reports.LAYERS, bottom up): a module imports only from
    its own folder or the folders below it, imports inside functions included; every folder is a
    layer. A new module needs no edit here: its folder places it."""
    edges, _ = _reports_imports()
    assert [m for m in edges if _layer(m) is None] == [], f"a reports folder not in reports.LAYERS {reports.LAYERS}"
    up = [f"{m} ({reports.LAYERS[_layer(m)]}) imports {t} ({reports.LAYERS[_layer(t)]})"
          for m, ts in sorted(edges.items()) for t in sorted(ts) if _layer(t) > _layer(m)]
    assert up == []
    root = Path(reports.__file__).parent
    folders = sorted(d.name for d in root.iterdir() if d.is_dir() and any(d.rglob("*.py")) and d.name != "examples")
    assert folders == sorted(reports.LAYERS)
    assert _layer("reports.sections.scaleout") < _layer("reports.conclusions.findings") < _layer(
        "reports.rendering.sections.scaleout")      # the judging half below its readers, the drawing half above


def test_every_section_has_its_drawing_half():
    """The registry's judging halves (reports.sections) and drawing halves
    (reports.rendering.sections) name the same sections."""
    from reports import sections
    from reports.rendering import sections as drawings
    assert [s.name for s in sections.SECTIONS] == list(drawings.DRAWINGS)
    assert sections.WORKLOADS == ("dynamic", "interop", "derivatives", "serving")
    assert [s.name for s in sections.CASE_AXES] == ["precision", "scaleout"]


def test_pytest_benchmark_compare_reads_fwbench_json(tmp_path):
    f = write(tmp_path / "torch.json", plausible_run("torch"))
    out = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(f), "--columns", "min,median"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "test_gpt[torch-compiled-train_step]" in out.stdout and "Median" in out.stdout


# ----------------------------------------------------------------------------- fwbench run

FAKE_CONFTEST = '''
import datetime, pytest
from types import SimpleNamespace

def _node():                 # the real harness's machine facts (frameworks.harness.Session.node)
    from frameworks.harness.machine import node_info
    return node_info()

SESSION = SimpleNamespace(records=[], missing={}, node=_node, compiler_startup={"torch/compiled": 1.25})

def pytest_addoption(parser):
    from workloads.options import HARNESS       # every option fwbench run may pass a process
    for o in HARNESS:
        parser.addoption(o.flag, action="store_true" if o.type is None else "store")

def pytest_configure(config):
    # what this process was given, for the runner's tests: its environment padding and cache
    # folder, the files it found there; then it leaves a file of its own in that folder
    import json, os
    from pathlib import Path
    cache, out = os.environ.get("FWBENCH_CACHE_DIR"), config.getoption("benchmark_json")
    if cache is None or out is None or config.getoption("repeat") is None:
        return
    i = config.getoption("repeat")
    found = sorted(p.name for p in Path(cache).rglob("*") if p.is_file())
    env = Path(out).parent.parent / "fake-env"
    env.mkdir(exist_ok=True)
    (env / f"env-{i}.json").write_text(json.dumps({"pad": len(os.environ.get("FWBENCH_ENV_PAD", "")),
                                                   "cache": cache, "found": found}))
    (Path(cache) / f"made-by-{i}").write_text("a program")

@pytest.fixture(scope="session")
def fwbench_session():
    return SESSION

def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["fwbench"] = {"gemm_flops": 1e10, "threads": 1, "preset": "tiny", "device": "cpu",
                               "date": "2025-01-01T00:00:00+00:00", "frameworks": {"torch": {"version": "0"}},
                               "missing": {}}

def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["fwbench"] = {"schema": 1, "records": SESSION.records, "missing": SESSION.missing}

def pytest_unconfigure(config):
    import os, signal
    if os.environ["FAKE"] == "crash_at_exit":      # after pytest-benchmark wrote its JSON
        os.kill(os.getpid(), signal.SIGSEGV)
    if os.environ["FAKE"] == "hang_at_exit":       # every case done and written, then stuck
        import time
        time.sleep(600)
'''

FAKE_TEST = '''
import os, signal, time, pytest
from workloads.record import empty

WORKLOAD = "gpt"
CASES = [("torch", "eager", "forward"), ("torch", "graph", "forward"), ("torch", "compiled", "forward"),
         ("torch", "compiled", "train_step")]

@pytest.mark.parametrize("framework,mode,task", CASES, ids=["-".join(c) for c in CASES])
def test_gpt(benchmark, fwbench_session, framework, mode, task, request):
    rec = empty(framework=framework, framework_version="0", workload=WORKLOAD, task=task, mode=mode, preset="tiny",
                shape="B=1", param_dtype="float32", device="cpu", threads=1, items=10, unit="tokens", flops=1e6,
                first_call_s=0.01, compilations=0, peak_memory_bytes=None, status="ok", reason=None)
    if mode == "graph":
        rec.update(status="unsupported", reason="torch has no 'graph' mode", first_call_s=None)
        fwbench_session.records.append(rec)
        pytest.skip("torch has no 'graph' mode")
    if (mode, task) == ("compiled", "forward"):
        if os.environ["FAKE"] == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if os.environ["FAKE"] == "kill_job" and str(request.config.getoption("repeat")) == os.environ["FAKE_KILL"]:
            os.kill(os.getppid(), signal.SIGKILL)     # the job that runs this process dies
            time.sleep(30)
        if os.environ["FAKE"] == "hang":
            if os.environ.get("FAKE_PIDFILE"):
                with open(os.environ["FAKE_PIDFILE"], "a") as f:     # one line per hanging process
                    f.write(f"{os.getpid()}\\n")
            time.sleep(600)
        if os.environ["FAKE"] == "fill_disk":       # the results' disk fills up during this case
            with open(os.path.join(os.environ["FAKE_FILL"], "filler"), "wb") as f:
                try:
                    while True:
                        f.write(b"x" * 4096)
                        f.flush()
                except OSError:
                    pass
    benchmark.pedantic(lambda: sum(range(2000)), rounds=5, iterations=1)
    benchmark.extra_info.update(rec)
'''


@pytest.fixture
def fake_suite(tmp_path, monkeypatch):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(FAKE_CONFTEST)
    (suite / "test_fake.py").write_text(FAKE_TEST)
    monkeypatch.setattr(checkout, "benchmarks_dir", lambda: suite)
    return tmp_path / "out"


def _run(fake_suite, monkeypatch, behaviour, timeout_s=120.0, extra=()):
    monkeypatch.setenv("FAKE", behaviour)
    opts = plan.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=timeout_s, extra=list(extra))
    return runner.run(opts, fake_suite, results.Progress())


def test_run_moves_the_finished_json_into_place(fake_suite, monkeypatch, capsys):
    [path] = _run(fake_suite, monkeypatch, "normal")
    assert path == fake_suite / "torch.json"
    assert not list(fake_suite.glob(".*"))                     # no temporary or event files left
    df = reports.load(path)
    assert sorted(df["status"]) == ["ok", "ok", "ok", "unsupported"] and df.attrs["problems"] == []
    err = capsys.readouterr().err
    assert "torch: 4 cases" in err and "[torch 4/4]" in err and "median" in err


def test_a_crash_keeps_finished_cases_and_names_the_crashing_one(fake_suite, monkeypatch):
    [path] = _run(fake_suite, monkeypatch, "crash")
    df = reports.load(path).set_index("task")
    assert df.attrs["problems"] == []
    by_mode = {(t, m): (s, r) for t, m, s, r in zip(df.index, df["mode"], df["status"], df["reason"])}
    assert by_mode[("forward", "eager")][0] == "ok"                       # timing survived the crash
    assert by_mode[("forward", "graph")] == ("unsupported", "torch has no 'graph' mode")
    status, reason = by_mode[("forward", "compiled")]
    assert status == "failed" and "SIGSEGV" in reason and "during this case" in reason
    status, reason = by_mode[("train_step", "compiled")]
    assert status == "failed" and reason.startswith("not run: the torch process ended before this case")
    doc = json.loads(path.read_text())
    assert doc["fwbench"]["note"].startswith("rebuilt by fwbench run")
    assert doc["machine_info"]["fwbench"]["gemm_flops"] > 1e8        # measured again for utilisation
    assert df["utilisation"].notna().any()


def test_a_crash_after_the_json_was_written_keeps_it(fake_suite, monkeypatch, capsys):
    [path] = _run(fake_suite, monkeypatch, "crash_at_exit")
    doc = json.loads(path.read_text())
    assert "exited with code -11 after writing its results" in doc["fwbench"]["note"]
    assert doc["machine_info"]["fwbench"]["gemm_flops"] == 1e10           # pytest-benchmark's own file
    assert sorted(reports.load(path)["status"]) == ["ok", "ok", "ok", "unsupported"]
    assert "but then the torch process exited with code -11" in capsys.readouterr().err


def test_a_timeout_is_recorded_as_failed(fake_suite, monkeypatch):
    [path] = _run(fake_suite, monkeypatch, "hang", timeout_s=8)
    df = reports.load(path)
    failed = df[df["status"] == "failed"]
    assert len(failed) == 2 and failed["reason"].str.contains("timed out after 8 s").all()


def test_a_pytest_usage_error_is_the_users_error(fake_suite, monkeypatch):
    from workloads.base import FwbenchError
    with pytest.raises(FwbenchError, match="no-such-option"):
        _run(fake_suite, monkeypatch, "normal", extra=["--no-such-option"])


def test_absent_framework_gets_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.setattr(checkout, "installed", lambda name: False)
    path = results.write_absent("tensorflow", plan.RunOptions(frameworks=()), tmp_path)
    df = reports.load(path)
    missing = reports.measures.data.missing_frameworks(df)
    assert df.empty and missing == {"tensorflow": checkout.absent_reason("tensorflow")}


def test_installed_does_not_import_frameworks():
    code = ("import sys; from reports.commands import checkout; from workloads.case import FRAMEWORKS; "
            "[checkout.installed(f) for f in FRAMEWORKS]; "
            "[checkout.absent_reason(f) for f in FRAMEWORKS]; "
            "print(sorted(m for m in ('torch', 'jax', 'tensorflow', 'frameworks') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def test_installed_looks_for_the_adapter_file(tmp_path, monkeypatch):
    """A framework counts as installed when its module is found and the checkout has its
    adapter (frameworks/<name>/__init__.py); an empty folder is no adapter."""
    import dataclasses

    from workloads.framework_facts import FACTS
    monkeypatch.setattr(checkout, "CHECKOUT", tmp_path)
    for name in ("numpy", "no_such_framework_module"):      # registry entries whose module is `name`
        monkeypatch.setitem(FACTS, name, dataclasses.replace(FACTS["jax"], module=name))
    (tmp_path / "frameworks" / "numpy").mkdir(parents=True)
    assert not checkout.installed("numpy")                     # importable, but no adapter
    (tmp_path / "frameworks" / "numpy" / "__init__.py").write_text("")
    assert checkout.installed("numpy") and not checkout.installed("no_such_framework_module")


# ----------------------------------------------------------------------------- real frameworks

def _an_installed_framework():
    for fw in ("jax", "torch", "tensorflow"):      # jax compiles the tiny forward fastest
        if checkout.installed(fw):
            return fw
    pytest.skip("no framework with an fwbench adapter is installed")


@pytest.mark.slow
def test_real_tiny_run_renders_a_report(tmp_path):
    """The real pipeline: pytest-benchmark on tests/benchmarks in a subprocess (forward only,
    3 rounds), the plugin's JSON moved into place, and the report rendered from it."""
    fw = _an_installed_framework()
    opts = plan.RunOptions(frameworks=(fw,), workloads="gpt", preset="tiny", rounds=3, timeout_s=900,
                             extra=["-k", "forward"])
    [path] = runner.run(opts, tmp_path, results.Progress())
    doc = json.loads(path.read_text())
    assert doc["machine_info"]["fwbench"]["gemm_flops"] > 0
    assert all(len(b["stats"]["data"]) == 3 for b in doc["benchmarks"])
    df = reports.load(path)
    assert df.attrs["problems"] == [] and set(df["task"]) == {"forward"}
    assert set(df.loc[df["mode"] == "eager", "status"]) == {"ok"}
    paths = reports.render(df, tmp_path / "report")
    assert paths["md"].exists() and (tmp_path / "report" / "figures" / "throughput.png").exists()
    assert f"| forward | {fw} | eager | ok |" in paths["md"].read_text()


@pytest.mark.slow
def test_env_lists_frameworks():
    out = subprocess.run([sys.executable, "-m", "reports", "env"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    for fw in FRAMEWORKS:
        assert fw in out.stdout
    assert "benchmark cases:" in out.stdout


# `fwbench run`'s modules, split by concern from one 834-line runner.py: none grows back past these.
RUN_MODULES = ("cli", "flags", "checkout", "plan", "process", "results", "runner")


@pytest.mark.parametrize("name", RUN_MODULES)
def test_the_run_modules_stay_small(name):
    """Each of `fwbench run`'s modules at most 350 lines, none of its functions over 60."""
    path = Path(reports.__file__).parent / "commands" / f"{name}.py"
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 350
    long = [f"{n.name}: {n.end_lineno - n.lineno + 1} lines" for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 60]
    assert long == []


def test_no_function_of_the_package_is_over_60_lines():
    """Every function of frameworks/, workloads/ and reports/ at most 60 lines (docstring included):
    a longer one is split where its concerns part."""
    root = Path(reports.__file__).parent.parent
    long = []
    for folder in ("frameworks", "workloads", "reports"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            long += [f"{path.relative_to(root)}: {n.name}, {n.end_lineno - n.lineno + 1} lines" for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 60]
    assert long == []


def test_fwbench_runs_modules_are_at_most_350_lines():
    """`fwbench run` (reports/commands/) is split by concern, each module at most 350 lines: a
    larger one holds two concerns (as runner.py did: options, scheduling, processes, jobs)."""
    folder = Path(reports.__file__).parent / "commands"
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(folder.glob("*.py"))}
    assert {k: n for k, n in sizes.items() if n > 350} == {}


def test_the_suites_file_order_names_test_files_that_exist_and_puts_the_alone_ones_first():
    """tests/conftest.py: FIRST orders the files the workers take; a name that is no file orders
    nothing, and an `alone` file after a long one waits at the gate for it."""
    from tests import conftest
    here = Path(__file__).parent
    assert [f for f in conftest.FIRST if not (here / f).is_file()] == []
    marked = re.compile(r"^(@pytest\.mark\.alone|pytestmark = .*pytest\.mark\.alone)", re.M)
    alone = [f.name for f in sorted(here.glob("test_*.py")) if marked.search(f.read_text(encoding="utf-8"))]
    assert alone and set(conftest.FIRST[:len(alone)]) == set(alone), alone


def test_a_files_alone_tests_come_first_and_hold_the_room_from_the_first_to_the_last(monkeypatch):
    """tests/conftest.py: in a file the `alone` tests run before the rest, and an alone test
    whose next test is alone keeps the room for it (released between them, the other worker's
    46 s Slurm test started in the gap while the alone ones left waited), released after the
    last; a test that is not alone never keeps it."""
    from tests import conftest
    monkeypatch.setattr(conftest, "_kept_room", None)

    class Item:
        # no workerinput: _turn takes no lock, the keeping is checked; a plain test run
        config = SimpleNamespace(getoption=lambda *a: False)

        def __init__(self, name: str, *marks: str) -> None:
            self.path, self.marks, self.nodeid = Path(__file__).parent / name, marks, f"tests/{name}::t"

        def get_closest_marker(self, name: str):
            return SimpleNamespace(args=("slurm",)) if name in self.marks else None

    first, later = conftest.FIRST[0], conftest.FIRST[1]
    items = [Item(later, "alone"), Item(first), Item(first, "alone"), Item("benchmarks/x.py"), Item(first, "alone")]
    order = sorted(items, key=conftest.place)
    assert order == [items[2], items[4], items[1], items[0], items[3]]

    turns = []                                   # each turn taken: [alone, released]

    @contextlib.contextmanager
    def turn(config, alone, serial):
        turns.append([alone, False])
        yield
        turns[-1][1] = True
    monkeypatch.setattr(conftest, "_turn", turn)

    def run(item: Item, nxt: Item | None) -> None:
        hook = conftest.pytest_runtest_protocol(item, nxt)
        next(hook)
        with contextlib.suppress(StopIteration):
            hook.send(None)

    a, b, plain = Item(first, "alone"), Item(first, "alone"), Item(first)
    run(a, b)
    assert turns == [[True, False]] and conftest._kept_room is not None    # kept for b
    run(b, plain)
    assert turns == [[True, True]] and conftest._kept_room is None         # b in a's turn; released after it
    run(plain, a)
    assert turns[1:] == [[False, True]]
    run(Item(first, "alone", "serial"), b)                                 # a serial test never keeps it
    assert turns[2:] == [[True, True]] and conftest._kept_room is None


def test_the_workers_share_their_compile_caches(tmp_path):
    """tests/conftest.py: a worker's torch, JAX and TF cache folders are links to one folder of
    the suite's, and an earlier per-worker folder's entries join it."""
    from tests import conftest
    from workloads.framework_facts import facts
    assert set(conftest.SHARED_CACHES) == set(FRAMEWORKS)
    for fw in ("torch", "tensorflow"):
        old = tmp_path / "gw1" / facts(fw).cache_subdir
        old.mkdir(parents=True)
        (old / "entry").write_text(fw)
    own = {w: Path(conftest._share_caches(str(tmp_path), w)) for w in ("gw0", "gw1", "gw0")}
    for fw in conftest.SHARED_CACHES:
        sub = facts(fw).cache_subdir
        links = [own[w] / sub for w in ("gw0", "gw1")]
        assert all(p.is_symlink() for p in links)
        assert links[0].resolve() == links[1].resolve() == (tmp_path / "shared" / sub).resolve()
    for fw in ("torch", "tensorflow"):
        assert (own["gw0"] / facts(fw).cache_subdir / "entry").read_text() == fw


def test_tensorflows_uid_counter_starts_at_the_tests_own_number_in_each_test(monkeypatch):
    """tests/conftest.py: while a test runs, TF's ops.uid() (the number in each traced function's
    name, which XLA's cache keys programs by) counts from a base of the test's own node id,
    whatever ran before it; two node ids with one base get two; TF's own counter is back after, and
    in a benchmark process (its cases named as a user's process names them)."""
    from tests import conftest
    ops = SimpleNamespace(uid=lambda: 7)
    monkeypatch.setitem(sys.modules, "tensorflow.python.framework.ops", ops)
    monkeypatch.setattr(conftest, "_uid_bases", set())
    runs = []

    def item(nodeid: str, benchmark_only: bool = False) -> SimpleNamespace:
        return SimpleNamespace(nodeid=nodeid, config=SimpleNamespace(getoption=lambda *a: benchmark_only))
    for nodeid in ("tests/a.py::t", "tests/b.py::t", "tests/a.py::t"):
        with conftest._tf_names(item(nodeid)):
            runs.append([ops.uid() for _ in range(3)])
        assert ops.uid() == 7
    with conftest._tf_names(item("tests/c.py::t", benchmark_only=True)):
        assert ops.uid() == 7                                   # a benchmark process: TF's own counter
    a = conftest.uid_base("tests/a.py::t", set())
    assert runs[0] == [a, a + 1, a + 2] and runs[1][0] == conftest.uid_base("tests/b.py::t", set()) != a
    assert runs[2][0] == a + conftest.UID_SPAN                       # its base was taken: the next span
    assert a > 1 << 40 and conftest.uid_base("tests/a.py::t", set()) == a     # the same in every process

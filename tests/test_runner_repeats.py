"""`fwbench run --repeats`: processes as the unit of replication, interleaved in a seeded
order, one JSON each, the run's own compile cache cold for the first process and warm after."""
from __future__ import annotations

import io
import json

import pytest

import reports
from reports import runner
from tests.test_cli_fwbench import _an_installed_framework, fake_suite  # noqa: F401  (fixture)


def test_schedule_interleaves_rounds_in_a_seeded_order():
    fws = ("torch", "jax", "tensorflow")
    order = runner.schedule(fws, 3, seed=7)
    assert len(order) == 9 and set(order) == {(f, r) for f in fws for r in range(3)}
    # round r runs every framework's r-th process before any (r+1)-th one
    assert [r for _, r in order] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert order == runner.schedule(fws, 3, seed=7)                       # reproducible
    orders = {tuple(f for f, _ in runner.schedule(fws, 3, seed=s)) for s in range(20)}
    assert len(orders) > 1                                                # and shuffled
    seeds = {runner.case_order_seed(0, f, r) for f in fws for r in range(3)}
    assert len(seeds) == 9 and runner.case_order_seed(0, "jax", 1) == runner.case_order_seed(0, "jax", 1)


def test_modes_a_framework_lacks_print_no_line():
    out = io.StringIO()
    watch = runner._Watch("torch", runner.Progress(out))
    watch.on({"event": "collected", "cases": [{"nodeid": "a", "mode": "graph"}, {"nodeid": "b", "mode": "eager"}]})
    watch.on({"event": "done", "nodeid": "a", "outcome": "skipped",
              "reason": "torch has no 'graph' mode (it has eager, compiled)"})
    watch.on({"event": "done", "nodeid": "b", "outcome": "skipped", "reason": "no GPU here"})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "graph" not in out.getvalue() and "no GPU here" in lines[1]
    assert "1 n/a" in watch.summary() and "1 skipped" in watch.summary()


def test_repeats_write_one_json_per_process(fake_suite, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE", "normal")
    opts = runner.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=120, repeats=2, seed=3)
    paths = runner.run(opts, fake_suite, runner.Progress())
    assert [p.name for p in paths] == ["torch-0.json", "torch-1.json"]
    for i, p in enumerate(paths):
        log = (fake_suite / "logs" / f"torch-{i}.log").read_text()
        assert f"--repeat {i} --repeats 2 --case-order-seed {runner.case_order_seed(3, 'torch', i)}" in log
        assert f"--run-id {opts.run_id}" in log
    assert not opts.cache_dir.exists()                                    # the run's cache is removed
    assert len(reports.load(fake_suite)) == 8


@pytest.mark.slow
def test_first_process_is_cold_and_the_next_warm(tmp_path, monkeypatch):
    """A real framework, twice: the run's own cache starts empty and the second process
    finds what the first compiled; every record carries its process index."""
    fw = _an_installed_framework()
    monkeypatch.setenv("FWBENCH_CACHE_DIR", str(tmp_path / "caches"))
    opts = runner.RunOptions(frameworks=(fw,), workloads="gpt", preset="tiny", rounds=3, timeout_s=900,
                             repeats=2, extra=["-k", "forward and compiled"])
    paths = runner.run(opts, tmp_path / "out", runner.Progress())
    states = []
    for i, p in enumerate(paths):
        doc = json.loads(p.read_text())
        info = doc["machine_info"]["fwbench"]
        assert info["repeat"] == i and info["repeats"] == 2 and info["run_id"] == opts.run_id
        assert info["compile_cache_dirs"][fw].startswith(str(tmp_path / "caches" / "runs" / opts.run_id))
        [b] = doc["benchmarks"]
        rec = b["extra_info"]
        assert rec["repeat"] == i and rec["order"] is not None
        states.append(rec["compile_cache"])
    assert states == ["cold", "warm"]
    assert not (tmp_path / "caches" / "runs" / opts.run_id).exists()


def test_workloads_not_selected_leave_no_placeholder_case():
    """`--workload gpt` (as `fwbench run --quick` passes gpt,diffusion): the other workloads'
    benchmark modules are deselected, not reported as skipped empty parameter sets."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "pytest", "--benchmark-only", "tests/benchmarks", "--workload", "gpt",
                          "--collect-only", "-q", "-p", "no:cacheprovider"], capture_output=True, text=True,
                         timeout=300, cwd=runner.CHECKOUT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ids = [ln for ln in out.stdout.splitlines() if "::" in ln]
    assert ids and all("test_gpt.py::test_gpt[" in ln for ln in ids)
    assert "empty parameter set" not in out.stdout


def test_a_crash_in_a_run_of_several_processes_keeps_each_processs_file(fake_suite, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE", "crash")
    opts = runner.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=120, repeats=2)
    paths = runner.run(opts, fake_suite, runner.Progress())
    assert [p.name for p in paths] == ["torch-0.json", "torch-1.json"]
    for i, p in enumerate(paths):
        doc = json.loads(p.read_text())
        assert doc["machine_info"]["fwbench"]["repeat"] == i and doc["machine_info"]["fwbench"]["ended_by"]
        failed = [r for r in doc["fwbench"]["records"] if r["status"] == "failed"]
        assert failed and all(r["repeat"] == i for r in failed)

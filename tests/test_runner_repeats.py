"""`fwbench run --cold N --warm M`: processes as the unit of replication, interleaved in
seeded rounds, one JSON each; cold processes each from an empty cache folder of their own,
merged into the run's shared folder that every warm process uses; a padded environment."""
from __future__ import annotations

import io
import json

import pytest

import reports
from reports.commands import checkout, plan, results, runner
from tests.test_cli_fwbench import _an_installed_framework, fake_suite  # noqa: F401  (fixture)
from workloads.case import FRAMEWORKS


def test_schedule_runs_the_first_cold_round_first_then_the_others_in_a_seeded_order():
    fws = ("torch", "jax", "tensorflow")
    order = plan.schedule(fws, 2, 5, seed=7)
    assert len(order) == 21 and {(f, i) for f, i, _, _ in order} == {(f, i) for f in fws for i in range(7)}
    # round r runs every framework's r-th process before any (r+1)-th one; round 0 is cold-0
    assert [i for _, i, _, _ in order] == [r for r in range(7) for _ in fws]
    assert {(role, folder) for _, i, role, folder in order if i == 0} == {("cold", "cold-0")}
    for f in fws:
        mine = [(role, folder) for g, _, role, folder in order if g == f]
        assert [r for r, _ in mine].count("cold") == 2 and [r for r, _ in mine].count("warm") == 5
        assert [d for r, d in mine if r == "cold"] == ["cold-0", "cold-1"]
        assert {d for r, d in mine if r == "warm"} == {plan.SHARED_CACHE}
    assert order == plan.schedule(fws, 2, 5, seed=7)                    # reproducible
    rounds = {tuple(role for f, _, role, _ in plan.schedule(fws, 2, 5, seed=s) if f == "jax") for s in range(20)}
    assert len(rounds) > 2                          # the second cold round is not always round 1
    orders = {tuple(f for f, _, _, _ in plan.schedule(fws, 2, 5, seed=s)) for s in range(20)}
    assert len(orders) > 1                                                # frameworks shuffled per round
    seeds = {plan.case_order_seed(0, f, r) for f in fws for r in range(3)}
    assert len(seeds) == 9 and plan.case_order_seed(0, "jax", 1) == plan.case_order_seed(0, "jax", 1)


def test_a_run_needs_a_cold_process():
    from workloads.base import FwbenchError
    with pytest.raises(FwbenchError, match="at least one cold process"):
        plan.RunOptions(frameworks=("torch",), cold=0, warm=3)
    assert plan.RunOptions(frameworks=("torch",), cold=2, warm=5).repeats == 7


def test_environment_padding_is_seeded_per_process_and_spread():
    pads = [plan.env_pad(0, f, i) for f in FRAMEWORKS for i in range(7)]
    assert all(set(p) <= {"x"} and len(p) < plan.ENV_PAD_MAX for p in pads)
    assert len({len(p) for p in pads}) > 15 and pads[0] == plan.env_pad(0, FRAMEWORKS[0], 0)
    assert plan.env_pad(1, "torch", 0) != plan.env_pad(0, "torch", 0)


def test_merge_cache_adds_what_the_shared_folder_lacks(tmp_path):
    (tmp_path / "cold-0" / "jax").mkdir(parents=True)
    (tmp_path / "cold-0" / "jax" / "a").write_text("new")
    (tmp_path / "shared" / "jax").mkdir(parents=True)
    (tmp_path / "shared" / "jax" / "b").write_text("kept")
    plan.merge_cache(tmp_path / "cold-0", tmp_path / "shared")
    plan.merge_cache(tmp_path / "cold-0", tmp_path / "shared")        # again: nothing changes
    assert sorted(p.name for p in (tmp_path / "shared" / "jax").iterdir()) == ["a", "b"]
    assert (tmp_path / "shared" / "jax" / "a").read_text() == "new"
    plan.merge_cache(tmp_path / "missing", tmp_path / "shared")       # a cold process that made no folder


def test_modes_a_framework_lacks_print_no_line():
    out = io.StringIO()
    watch = results.Watch("torch", results.Progress(out))
    watch.on({"event": "collected", "cases": [{"nodeid": "a", "mode": "graph"}, {"nodeid": "b", "mode": "eager"}]})
    watch.on({"event": "done", "nodeid": "a", "outcome": "skipped",
              "reason": "torch has no 'graph' mode (it has eager, compiled)"})
    watch.on({"event": "done", "nodeid": "b", "outcome": "skipped", "reason": "no GPU here"})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "graph" not in out.getvalue() and "no GPU here" in lines[1]
    assert "1 n/a" in watch.summary() and "1 skipped" in watch.summary()


def test_cold_and_warm_processes_write_one_json_each_with_their_role_and_folder(fake_suite, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE", "normal")
    opts = plan.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=120, cold=2, warm=1, seed=3)
    paths = runner.run(opts, fake_suite, results.Progress())
    assert [p.name for p in paths] == ["torch-0.json", "torch-1.json", "torch-2.json"]
    roles = []
    for i, p in enumerate(paths):
        log = (fake_suite / "logs" / f"torch-{i}.log").read_text()
        for flag in (f"--repeat {i} ", "--repeats 3 ", "--cold 2 ", "--warm 1 ",
                     f"--case-order-seed {plan.case_order_seed(3, 'torch', i)} "):
            assert flag in log, flag
        assert f"--run-id {opts.run_id}" in log
        roles.append(log.split("--cache-role ")[1].split()[0])
        env = json.loads((fake_suite.parent / "fake-env" / f"env-{i}.json").read_text())     # what the fake process saw
        assert env["pad"] == len(plan.env_pad(3, "torch", i))
        folder = "cold-" + str(roles[:i].count("cold")) if roles[-1] == "cold" else plan.SHARED_CACHE
        assert env["cache"] == str(opts.cache_dir / folder)
    assert roles[0] == "cold" and sorted(roles) == ["cold", "cold", "warm"]
    assert not opts.cache_dir.exists()                                    # the run's cache is removed
    assert len(reports.load(fake_suite)) == 12


def test_each_cold_folder_is_merged_into_the_shared_one_before_the_warm_process(fake_suite, monkeypatch):  # noqa: F811
    """The stand-in writes a file named after its process into its FWBENCH_CACHE_DIR and
    lists what it found there: the warm process finds both cold processes' files."""
    monkeypatch.setenv("FAKE", "normal")
    opts = plan.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=120, cold=2, warm=1, seed=0,
                             keep_cache=True)
    order = plan.schedule(opts.frameworks, 2, 1, 0)
    runner.run(opts, fake_suite, results.Progress())
    warm = next(i for _, i, role, _ in order if role == "warm")
    env = json.loads((fake_suite.parent / "fake-env" / f"env-{warm}.json").read_text())
    colds = [i for _, i, role, _ in order if role == "cold"]
    assert sorted(env["found"]) == sorted(f"made-by-{i}" for i in colds)
    assert sorted(p.name for p in (opts.cache_dir / "cold-1").iterdir()) == [f"made-by-{colds[1]}"]
    import shutil
    shutil.rmtree(opts.cache_dir)


@pytest.mark.slow
def test_first_process_is_cold_and_the_next_warm(tmp_path, monkeypatch):
    """A real framework, one cold and one warm process: the cold one's own folder starts
    empty and is merged into the shared one, where the warm process finds its programs;
    every record carries its process index and role."""
    fw = _an_installed_framework()
    monkeypatch.setenv("FWBENCH_CACHE_DIR", str(tmp_path / "caches"))
    opts = plan.RunOptions(frameworks=(fw,), workloads="gpt", preset="tiny", rounds=3, timeout_s=900,
                             cold=1, warm=1, extra=["-k", "forward and compiled"])
    paths = runner.run(opts, tmp_path / "out", results.Progress())
    states, hits = [], []
    for i, (p, folder) in enumerate(zip(paths, ("cold-0", "shared"))):
        doc = json.loads(p.read_text())
        info = doc["machine_info"]["fwbench"]
        assert info["repeat"] == i and info["repeats"] == 2 and info["run_id"] == opts.run_id
        assert (info["cold"], info["warm"]) == (1, 1) and info["cache_role"] == ("cold", "warm")[i]
        assert info["env_bytes"] > info["env_pad_bytes"] >= 0
        assert info["compile_cache_dirs"][fw].startswith(str(tmp_path / "caches" / "runs" / opts.run_id / folder))
        [b] = doc["benchmarks"]
        rec = b["extra_info"]
        assert rec["repeat"] == i and rec["order"] is not None
        assert rec["first_call_valid"] is True and rec["first_call_compilations"] > 0
        states.append(rec["compile_cache"])
        hits.append(rec["cache_hits"])
    assert states == ["cold", "warm"]
    assert hits[0] in (0, None) and (hits[1] is None or hits[1] > 0)    # the warm process loads the cold one's
    assert not (tmp_path / "caches" / "runs" / opts.run_id).exists()


def test_workloads_not_selected_leave_no_placeholder_case():
    """`--workload gpt` (as `fwbench run --quick` passes gpt,diffusion): the other workloads'
    benchmark modules are deselected, not reported as skipped empty parameter sets."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "pytest", "--benchmark-only", "tests/benchmarks", "--workload", "gpt",
                          "--collect-only", "-q", "-p", "no:cacheprovider"], capture_output=True, text=True,
                         timeout=300, cwd=checkout.CHECKOUT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ids = [ln for ln in out.stdout.splitlines() if "::" in ln]
    assert ids and all("test_gpt.py::test_gpt[" in ln for ln in ids)
    assert "empty parameter set" not in out.stdout


def test_a_crash_in_a_run_of_several_processes_keeps_each_processs_file(fake_suite, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE", "crash")
    opts = plan.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=120, cold=1, warm=1)
    paths = runner.run(opts, fake_suite, results.Progress())
    assert [p.name for p in paths] == ["torch-0.json", "torch-1.json"]
    for i, p in enumerate(paths):
        doc = json.loads(p.read_text())
        info = doc["machine_info"]["fwbench"]
        assert info["repeat"] == i and info["ended_by"] and info["cache_role"] == ("cold", "warm")[i]
        assert (info["cold"], info["warm"], info["repeats"]) == (1, 1, 2)
        failed = [r for r in doc["fwbench"]["records"] if r["status"] == "failed"]
        assert failed and all(r["repeat"] == i and r["compile_cache"] == ("cold", "warm")[i] for r in failed)

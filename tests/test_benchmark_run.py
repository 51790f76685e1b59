"""A real `pytest --benchmark-only` run (tiny preset, cheap cases) writes a JSON that holds
everything a report needs: a valid record per timed case, records for the cases that did
not run, and fwbench's machine information."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from frameworks.harness import gemm
from tests.support.helpers import INSTALLED, MISSING
from workloads import record as record_mod


@pytest.fixture(scope="module")
def run_json(tmp_path_factory):
    if not INSTALLED:
        pytest.skip("no framework installed")
    out = tmp_path_factory.mktemp("bench") / "run.json"
    cmd = [sys.executable, "-m", "pytest", "tests/benchmarks/test_gpt.py", "--benchmark-only",
           "--preset", "tiny", "--rounds", "3", "-k", "forward and not compiled", "-q",
           "-p", "no:cacheprovider", f"--benchmark-json={out}", "--benchmark-save-data"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_timed_case_carries_a_valid_record(run_json):
    benches = run_json["benchmarks"]
    assert {b["extra_info"]["framework"] for b in benches} == set(INSTALLED)
    for b in benches:
        rec = b["extra_info"]
        assert record_mod.problems(rec) == [], (b["fullname"], record_mod.problems(rec))
        assert rec["workload"] == "gpt" and rec["task"] == "forward" and rec["preset"] == "tiny"
        assert rec["status"] == "ok" and rec["first_call_s"] > 0 and rec["items"] == 64
        assert "test_gpt[" in b["fullname"] and len(b["stats"]["data"]) == 3
        assert b["stats"]["median"] > 0


def test_cases_that_did_not_run_leave_records(run_json):
    recs = run_json["fwbench"]["records"]
    unsupported = {(r["framework"], r["mode"]) for r in recs if r["status"] == "unsupported"}
    for fw in INSTALLED:
        if fw != "tensorflow":
            assert (fw, "graph") in unsupported
    assert all(record_mod.problems(r) == [] for r in recs)
    assert set(run_json["fwbench"]["missing"]) == set(MISSING)


def test_machine_info_has_what_utilisation_needs(run_json):
    info = run_json["machine_info"]["fwbench"]
    assert info["gemm_flops"] > 1e9 and info["threads"] >= 1
    # measured before the first case and after the last, by numpy and every framework
    # loaded; the best of them all is the rate
    assert len(info["gemm_samples"]) == 2
    assert set(info["gemm_rates"]) == {"numpy", *INSTALLED}
    assert info["gemm_flops"] == max(info["gemm_rates"].values())
    assert info["gemm_flops"] == max(r for sample in info["gemm_samples"] for r in sample.values())
    assert "before the first case and after the last" in info["gemm_note"]
    assert f"float32 {gemm.gemm_n()}x{gemm.gemm_n()} matmul" in info["gemm_note"]     # the size measured at
    assert info["allocator"]
    assert set(info["frameworks"]) == set(INSTALLED)
    for fw in INSTALLED:
        assert info["frameworks"][fw]["version"]
    assert info["cpu"] and "gpt=tiny" in info["preset"]
    # every framework's compile cache is in the test suite's own folder (FWBENCH_CACHE_DIR,
    # inherited from this test session), never in the benchmarks' default one
    cache_root = os.environ["FWBENCH_CACHE_DIR"]
    for fw, folder in info["compile_cache_dirs"].items():
        assert folder.startswith(cache_root), (fw, folder)
    assert set(info["settings"]) == set(INSTALLED) and all("threads" in v for v in info["settings"].values())
    assert info["case_order"] == "collection order"


def test_records_say_how_the_first_call_compiled(run_json):
    for b in run_json["benchmarks"]:
        rec = b["extra_info"]
        assert rec["compile_cache"] in ("cold", "warm") and rec["compile_cache_dir"]
        assert rec["compile_s_source"]
        assert rec["compile_s"] is None or 0 <= rec["compile_s"] <= rec["first_call_s"]
        assert rec["gc_disabled"] is True and rec["recompiled_during_timing"] is False


def _pytest(tmp_path, *args):
    cmd = [sys.executable, "-m", "pytest", "tests/benchmarks/test_gpt.py", "--benchmark-only", "--preset", "tiny",
           "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_a_run_with_nothing_timed_still_writes_its_records(tmp_path):
    fw = next((f for f in INSTALLED if f != "tensorflow"), None)       # tensorflow has a graph mode
    if fw is None:
        pytest.skip("needs torch or jax")
    out = tmp_path / "run.json"
    proc = _pytest(tmp_path, "--framework", fw, "-k", "graph", f"--benchmark-json={out}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["benchmarks"] == [] and doc["machine_info"]["fwbench"]["cpu"]
    assert {r["status"] for r in doc["fwbench"]["records"]} == {"unsupported"}


@pytest.mark.parametrize("args, phrase", [
    (["--rounds", "-1"], "--rounds must be an integer of at least 1"),
    (["--rounds", "0"], "--rounds must be an integer of at least 1"),
    (["--warmup-rounds", "-1"], "--warmup-rounds must be an integer of at least 0"),
    (["--budget-s", "-1"], "--budget-s must be a positive finite number"),
    (["--budget-s", "inf"], "--budget-s must be a positive finite number"),
    (["--min-rounds", "0"], "--min-rounds must be an integer of at least 1"),
    (["--framework", ","], "--framework names no framework"),
])
def test_bad_pytest_options_are_usage_errors(tmp_path, args, phrase):
    proc = _pytest(tmp_path, *args)
    assert proc.returncode == 4 and phrase in proc.stderr and "Traceback" not in proc.stderr + proc.stdout

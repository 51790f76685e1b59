"""Paths the user gives are the user's (issue 32): `fwbench run --out relout` from a folder
other than the checkout writes its results there (the benchmark processes run in the
checkout), and a run whose processes wrote no record exits non-zero naming the log."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _fwbench(cwd: Path, *args: str, select: str) -> subprocess.CompletedProcess[str]:
    """`python -m reports run` (the CLI, as a user starts it) from `cwd`, on the real tiny
    gpt cases of torch, the pytest selection `select` in each benchmark process (PYTEST_ADDOPTS)."""
    env = dict(os.environ, PYTEST_ADDOPTS=os.environ.get("PYTEST_ADDOPTS", "") + f" -k {select}",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "reports", "run", "--framework", "torch", "--workload", "gpt",
                           "--preset", "tiny", "--rounds", "2", "--cold", "1", "--warm", "0", "--cycles", "2", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_relative_out_from_another_folder_gets_the_results(tmp_path):
    pytest.importorskip("torch")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    r = _fwbench(cwd, "--out", "relout", "--no-report", select="eager-forward")
    assert r.returncode == 0, r.stderr
    # one set: torch's process and its control (torch-1), each with its own file and log
    doc = json.loads((cwd / "relout" / "torch-0.json").read_text())
    [bench] = doc["benchmarks"]                     # the timed case, from pytest-benchmark's own file
    assert bench["extra_info"]["status"] == "ok" and bench["stats"]["rounds"] == 2
    assert doc["fwbench"]["blocks"] and doc["machine_info"]["fwbench"]["set"] == 0
    assert (cwd / "relout" / "logs" / "torch-0.log").is_file() and (cwd / "relout" / "torch-1.json").is_file()
    assert not (ROOT / "relout").exists()           # nothing went to the checkout's folder of that name


def test_a_run_that_wrote_no_record_fails_and_names_the_log(tmp_path):
    pytest.importorskip("torch")
    r = _fwbench(tmp_path, "--out", "relout", select="no_such_case")
    log = tmp_path / "relout" / "logs" / "torch-0.log"
    assert r.returncode == 2, r.stderr
    [line] = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert line.startswith("fwbench run: error: no process of the run wrote a record") and str(log) in line
    assert "Traceback" not in r.stderr and "report:" not in r.stdout

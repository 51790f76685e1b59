"""Runs across machines (issue 21): `fwbench run --launcher submitit-local` (submitit's local
executor, named so that a machine with Slurm's client on the PATH does not pick Slurm) keeps
timed processes apart in time, stamps each result with its host and interval, and a job that
dies leaves `failed` records while the others render; reports on folders from two machines
give a report per machine and state no ratio between them. Slurm itself: tests/test_slurm.py."""
from __future__ import annotations

import datetime
import json

import pandas as pd
import pytest

import reports
from reports.commands import checkout, plan, results, runner
from tests.support import reports_fixtures as fx
from tests.test_cli_fwbench import fake_suite  # noqa: F401,F811  (fixture)


def _t(s: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(s)


def test_submitit_local_jobs_never_overlap_and_a_killed_job_fails_alone(fake_suite, monkeypatch, tmp_path):  # noqa: F811
    pytest.importorskip("submitit")
    monkeypatch.setenv("FAKE", "kill_job")
    monkeypatch.setenv("FAKE_KILL", "1")
    opts = plan.RunOptions(frameworks=("torch",), preset="tiny", timeout_s=120.0, cold=1, warm=2,
                             launcher="submitit-local", suite=checkout.benchmarks_dir(), cache_dir=tmp_path / "cache")
    paths = runner.run(opts, fake_suite, results.Progress())
    assert sorted(p.name for p in paths) == ["torch-0.json", "torch-1.json", "torch-2.json"]
    docs = {p.name: json.loads(p.read_text()) for p in paths}
    jobs = [d["machine_info"]["fwbench"]["job"] for n, d in docs.items() if n != "torch-1.json"]
    assert all(j["host"] and j["start"] < j["end"] for j in jobs)
    spans = sorted((_t(j["start"]), _t(j["end"])) for j in jobs)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans          # never two at once
    df = reports.load(paths)
    killed = df[df["run_file"] == "torch-1.json"]
    assert (killed["status"] == "failed").any()
    assert killed.loc[killed["status"] == "failed", "reason"].str.contains("ended without a result").all()
    others = df[df["run_file"] != "torch-1.json"]
    assert (others["status"] == "ok").sum() == 6                                  # 3 timed cases x 2 processes
    assert reports.render(df, tmp_path / "report")["md"].exists()
    # each process's job, where and when, in the set-up (the stand-in suite's files lack the
    # machine fingerprint the rebuilt one has, so they read as two machines: a report each)
    setups = "".join(p.read_text().split("Appendix A: set-up")[1] for p in (tmp_path / "report").rglob("report.md")
                     if "Appendix A: set-up" in p.read_text())
    for n, d in docs.items():
        j = d["machine_info"]["fwbench"].get("job")
        if j:
            assert f"{n}: job {j['job_id']} on {j['host']}, {j['start'][:10]}" in setups


def test_two_machines_get_a_report_each_and_no_ratio_between_them(tmp_path):
    a = fx.write(tmp_path / "a" / "torch.json", fx.plausible_run("torch", machine_id="aaaa", cpu="CPU A", host="a1"))
    b = fx.write(tmp_path / "b" / "torch.json", fx.plausible_run("torch", slow=2.0, machine_id="bbbb", cpu="CPU B",
                                                                 host="b1"))
    df = reports.load([a, b])
    paths = reports.render(df, tmp_path / "out")
    assert paths["figure_problems"] == {}                        # every machine's figures, gathered
    index = (tmp_path / "out" / "report.md").read_text()
    assert "results from 2 machines" in index and "states no ratio between machines" in index
    assert "machine_id aaaa; hosts a1" in index and "machine_id bbbb; hosts b1" in index
    for k, mid in ((1, "aaaa"), (2, "bbbb")):
        sub = pd.read_csv(tmp_path / "out" / f"machine-{k}" / "data.csv")
        assert set(sub["machine_id"]) == {mid}                  # each report holds its machine's numbers only
    # machine B is 2x slower everywhere, yet its table reads as A's: every number in it is
    # relative to machine B's own fastest, none to machine A's
    tables = [t for t in index.split("## Machine ")[1:]]
    rows = [[ln for ln in t.splitlines() if ln.startswith("| torch")] for t in tables]
    assert rows[0] == rows[1] and rows[0]
    assert paths["md"].name == "report.md"

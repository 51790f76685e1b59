"""Every way a `fwbench run` can end keeps what finished: real signals to a real `fwbench
run` process on the stand-in suite of test_cli_fwbench, a parent killed outright, a timeout
after the last case, a full disk."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reports
from reports.commands import checkout, cli, plan, results
from tests.test_cli_fwbench import FAKE_CONFTEST, FAKE_TEST, _run, fake_suite  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parent.parent


def _suite(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(FAKE_CONFTEST)
    (suite / "test_fake.py").write_text(FAKE_TEST)
    return suite


def _start(tmp_path, behaviour, *args):
    """`fwbench run` (the real CLI, in its own process) on the stand-in suite, lone processes
    (--cycles 0: one after another; a set's interrupts: tests/test_sets.py)."""
    suite = _suite(tmp_path)
    code = ("import sys; from pathlib import Path; from reports.commands import checkout, cli; "
            f"checkout.benchmarks_dir = lambda: Path({str(suite)!r}); sys.exit(cli.main(sys.argv[1:]))")
    env = dict(os.environ, FAKE=behaviour, FAKE_PIDFILE=str(tmp_path / "child.pid"),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = tmp_path / "out"
    fixed = {"--framework": "torch,jax", "--warm": "0", "--cycles": "0"}
    given = dict(zip(args[::2], args[1::2]))
    opts = [x for k, v in {**fixed, **given}.items() for x in (k, v)]
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "--preset", "tiny", "--out", str(out), "--no-report",
                             "--cold", "1", *opts], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pidfile = tmp_path / "child.pid"
    deadline = time.monotonic() + 120
    while not (pidfile.exists() and pidfile.read_text()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()
    return proc, int(pidfile.read_text().split()[0]), out


def _gone(pid, within=10.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_keeps_finished_cases_kills_the_child_and_says_so(tmp_path, sig):
    proc, child, out = _start(tmp_path, "hang")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, err
    assert _gone(child), "the benchmark process outlived fwbench run"
    assert f"interrupted by {name}" in err and "Traceback" not in err
    assert not list(out.glob(".*"))                                 # nothing hidden left behind
    doc = json.loads((out / "torch.json").read_text())
    info = doc["machine_info"]["fwbench"]
    assert info["cpu"] and info["allocator"] and info["gemm_flops"] > 1e8 and info["threads"] >= 1
    assert f"interrupted by {name}" in info["ended_by"]
    df = reports.load(out)
    assert df.attrs["problems"] == []
    st = {(t, m): (s, r) for t, m, s, r in zip(df["task"], df["mode"], df["status"], df["reason"])}
    assert st[("forward", "eager")][0] == "ok"
    assert st[("forward", "graph")][0] == "unsupported"
    assert st[("forward", "compiled")][0] == "failed" and f"interrupted by {name}" in st[("forward", "compiled")][1]
    assert st[("train_step", "compiled")][1].startswith("not run")
    missing = reports.measures.data.missing_frameworks(df)
    assert f"interrupted by {name} before jax started" in missing["jax"]
    rc = cli.main(["report", str(out), "-o", str(tmp_path / "report")])
    md = (tmp_path / "report" / "report.md").read_text()
    assert rc == 0 and "Runs that ended early: torch.json" in md and f"interrupted by {name}" in md


def test_the_child_dies_with_a_parent_killed_outright(tmp_path):
    proc, child, _ = _start(tmp_path, "hang")
    proc.kill()
    proc.communicate(timeout=60)
    assert _gone(child), "the benchmark process outlived a SIGKILLed fwbench run"


def test_a_timeout_after_the_last_case_keeps_the_complete_json(fake_suite, monkeypatch):  # noqa: F811
    [path] = _run(fake_suite, monkeypatch, "hang_at_exit", timeout_s=8)
    doc = json.loads(path.read_text())
    assert doc["machine_info"]["fwbench"]["gemm_flops"] == 1e10                 # pytest-benchmark's own file
    assert "timed out after 8 s (--timeout-s) after writing its results" in doc["fwbench"]["note"]
    df = reports.load(path)
    assert sorted(df["status"]) == ["ok", "ok", "ok", "unsupported"]
    assert "timed out" in df.attrs["runs"][0]["ended_by"]


def test_rebuilt_json_after_a_crash_has_the_machine_and_the_modes(fake_suite, monkeypatch):  # noqa: F811
    [path] = _run(fake_suite, monkeypatch, "crash")
    info = json.loads(path.read_text())["machine_info"]["fwbench"]
    assert info["cpu"] and info["allocator"] and info["cpus_available"] >= 1
    df = reports.load(path)
    reason = df.loc[df["mode"] == "compiled", "reason"].iloc[0]
    assert reason.startswith("process killed by SIGSEGV: Fatal Python error") and ".." not in reason
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_a_full_disk_keeps_the_results_elsewhere_and_says_where(fake_suite, monkeypatch, capsys):  # noqa: F811
    real = results.write_json_atomic

    def full(path, doc):
        if Path(path).parent == fake_suite:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, doc)
    monkeypatch.setattr(results, "write_json_atomic", full)
    [path] = _run(fake_suite, monkeypatch, "crash")
    err = capsys.readouterr().err
    try:
        assert path.parent != fake_suite and path.exists()
        assert f"cannot write the results {fake_suite / 'torch.json'}: No space left on device" in err
        assert f"kept them in {path}" in err
        assert "ok" in set(reports.load(path)["status"])
    finally:
        path.unlink(missing_ok=True)


def test_a_really_full_disk(tmp_path, monkeypatch, capsys):
    """The results folder on a 256 KiB tmpfs that fills up during a case (root only)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        suite = _suite(tmp_path)
        monkeypatch.setattr(checkout, "benchmarks_dir", lambda: suite)
        monkeypatch.setenv("FAKE_FILL", str(disk))
        [path] = _run(disk / "out", monkeypatch, "fill_disk")
        err = capsys.readouterr().err
        assert "No space left on device" in err and f"kept them in {path}" in err
        df = reports.load(path)
        assert df.attrs["problems"] == [] and "ok" in set(df["status"])      # the case before survived
        assert "produced no timed case" not in err
        path.unlink()
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_cases_never_reached_in_a_mode_the_framework_lacks_are_unsupported(monkeypatch):
    monkeypatch.setattr(checkout, "host_info", lambda fw, threads, device: {"cpu": "CPU X", "allocator": "kept",
                                                                          "modes": ["eager", "compiled"]})
    w = results.Watch("torch", results.Progress())
    cases = [{"nodeid": f"t[{m}]", "workload": "gpt", "task": "forward", "mode": m}
             for m in ("eager", "graph", "compiled")]
    w.on({"event": "collected", "cases": cases})
    w.on({"event": "done", "nodeid": "t[eager]", "outcome": "passed", "benchmark": None, "records": []})
    w.on({"event": "start", "nodeid": "t[compiled]"})
    doc = w.rebuild("torch", plan.RunOptions(frameworks=("torch",)), "process killed by SIGKILL")
    st = {r["mode"]: (r["status"], r["reason"]) for r in doc["fwbench"]["records"]}
    assert st["graph"] == ("unsupported", "torch has no 'graph' mode (it has eager, compiled)")
    assert st["compiled"] == ("failed", "process killed by SIGKILL during this case")
    assert doc["machine_info"]["fwbench"]["cpu"] == "CPU X" and doc["machine_info"]["fwbench"]["allocator"] == "kept"


def test_crash_reasons_carry_no_progress_characters(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("$ python -m pytest ...\n..s.F  [ 40%]\n..sFatal Python error: Aborted\n")
    assert results.log_tail(log) == "Fatal Python error: Aborted"
    log.write_text("$ cmd\n.sEException: boom\n")
    assert results.log_tail(log) == "Exception: boom"


def test_a_result_rebuilt_on_another_host_keeps_the_nodes_machine(monkeypatch):
    """A Slurm job that died on a node is rebuilt on the submitting host: the file names the
    node's CPU and fingerprint from the process's own machine event, and no GEMM rate (the
    submitting host's would be the wrong denominator)."""
    here = {"cpu": "Submit CPU", "allocator": "kept", "host": "login1", "machine_id": "m-login",
            "gemm_flops": 5e10, "gemm_rates": {"numpy": 5e10}, "gemm_note": "numpy", "modes": ["eager"]}
    monkeypatch.setattr(checkout, "host_info", lambda fw, threads, device: dict(here))
    node = {"cpu": "Node CPU", "allocator": "kept", "host": "node7", "machine_id": "m-node", "cores": 64}
    w = results.Watch("torch", results.Progress())
    w.on({"event": "collected", "cases": [{"nodeid": "t[eager]", "workload": "gpt", "task": "forward",
                                           "mode": "eager"}]})
    w.on({"event": "machine", "machine": node})
    w.on({"event": "done", "nodeid": "t[eager]", "outcome": "passed", "benchmark": None, "records": []})
    info = w.rebuild("torch", plan.RunOptions(frameworks=("torch",)), "process killed by SIGKILL")[
        "machine_info"]["fwbench"]
    assert (info["cpu"], info["host"], info["machine_id"], info["cores"]) == ("Node CPU", "node7", "m-node", 64)
    assert info["gemm_flops"] is None and "gemm_rates" not in info and "ran on node7" in info["gemm_note"]
    w.machine = dict(node, host="login1")                   # the same host: measured here, as before
    info = w.rebuild("torch", plan.RunOptions(frameworks=("torch",)), "x")["machine_info"]["fwbench"]
    assert info["gemm_flops"] == 5e10 and info["cpu"] == "Submit CPU"


def test_the_event_stream_names_the_machine_the_process_ran_on(fake_suite, monkeypatch):  # noqa: F811
    """The stand-in suite's process (the real plugin; its session's node() is the harness's
    node_info) writes its machine into the stream before its first case's results, and a
    crash leaves it there."""
    import socket
    events = []
    real = results.Watch.on
    monkeypatch.setattr(results.Watch, "on", lambda self, ev: (events.append(ev), real(self, ev))[1])
    [path] = _run(fake_suite, monkeypatch, "crash")
    kinds = [e["event"] for e in events]
    assert "machine" in kinds and kinds.index("machine") < kinds.index("done")
    m = events[kinds.index("machine")]["machine"]
    assert m["host"] == socket.gethostname() and m["cpu"] and m["machine_id"]
    # the compiler start-ups its session measured before the crash stay in the rebuilt result
    # (the stand-in session's: torch/compiled 1.25 s), so its report's Appendix C keeps them
    info = json.loads(path.read_text())["machine_info"]["fwbench"]
    assert "rebuilt" in json.loads(path.read_text())["fwbench"]["note"]
    assert info["compiler_startup"] == {"torch/compiled": 1.25}

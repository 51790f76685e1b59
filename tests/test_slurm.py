"""`fwbench run` on a real Slurm (issue 32): CI starts a one-node cluster on localhost
(.ci/slurm-up: Debian's slurm-wlm and munge, partitions `debug` and `short` with MaxTime 1
minute) and sets FWBENCH_REQUIRE_SLURM=1, so that these tests fail there when no Slurm
answers; elsewhere they skip, saying why.

End to end on the real tiny cases (the run's records carry Slurm's job ids, shown in the
report); on the stand-in suite of test_cli_fwbench: a `scancel` of the running job from
outside (the finished case kept, the rest marked), Ctrl-C / SIGTERM (every job of the run
cancelled, the "not run" files written), a partition that does not exist (sbatch's own words,
one line), and a job pending on PartitionTimeLimit (reported, the run's jobs cancelled)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reports
from tests.test_cli_fwbench import FAKE_CONFTEST, FAKE_TEST

# the one-node Slurm cluster: one such test at a time
pytestmark = pytest.mark.serial("slurm")

ROOT = Path(__file__).resolve().parent.parent
SHORT = "short"            # .ci/slurm-up's partition with MaxTime 1 minute


def _reachable() -> str | None:
    """None when sbatch, srun and a controller that answers are here; else why not."""
    missing = [c for c in ("sbatch", "srun", "squeue", "scancel", "sinfo") if shutil.which(c) is None]
    if missing:
        return f"Slurm's client commands are not on the PATH ({', '.join(missing)}): bash .ci/slurm-up starts a cluster"
    try:
        r = subprocess.run(["sinfo", "-h", "-o", "%P %T"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 30 s"
    if r.returncode != 0 or not r.stdout.strip():
        return "no Slurm controller answers: " + "; ".join((r.stderr or r.stdout).strip().splitlines())[:200]
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    pytest.importorskip("submitit")
    why = _reachable()
    if why:
        if os.environ.get("FWBENCH_REQUIRE_SLURM") == "1":
            pytest.fail(f"FWBENCH_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)


def _env(**kw: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **kw)


def _start(tmp_path: Path, behaviour: str, *args: str, frameworks: str = "torch", **env: str) -> subprocess.Popen:
    """`fwbench run` (the real CLI, in its own process) on the stand-in suite, from tmp_path: lone
    processes, a job each (--cycles 0, unless args give --cycles: a set per job)."""
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    (suite / "conftest.py").write_text(FAKE_CONFTEST)
    (suite / "test_fake.py").write_text(FAKE_TEST)
    code = ("import sys; from pathlib import Path; from reports.commands import checkout, cli; "
            f"checkout.benchmarks_dir = lambda: Path({str(suite)!r}); sys.exit(cli.main(sys.argv[1:]))")
    return subprocess.Popen([sys.executable, "-c", code, "run", "--framework", frameworks, "--preset", "tiny",
                             "--out", "out", "--no-report", "--cold", "1", "--warm", "0", "--timeout-s", "120",
                             *(() if "--cycles" in args else ("--cycles", "0")), *args],
                            cwd=tmp_path, env=_env(FAKE=behaviour, FAKE_PIDFILE=str(tmp_path / "child.pid"), **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: subprocess.Popen, within: float = 120.0) -> None:
    """Until `path` has content (the stand-in case that hangs wrote its pid: the job is running)."""
    deadline = time.monotonic() + within
    while not (path.exists() and path.read_text()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None and path.exists(), proc.communicate()


def _job_ids(err: str) -> list[str]:
    return re.findall(r"submitted as slurm job (\d+)", err)


def _active(ids: list[str], settle_s: float = 60.0) -> list[str]:
    """Those of the jobs Slurm still has pending, running or completing after `settle_s`.

    A cancelled job passes through COMPLETING while slurmd reaps its processes and runs the
    epilog; on a loaded 2-core machine that took a few seconds (a CI run saw it). A job fwbench
    failed to cancel stays RUNNING (the stand-in hangs for far longer), so waiting cannot hide it."""
    deadline = time.monotonic() + settle_s
    while True:
        r = subprocess.run(["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", "%i %T"],
                           capture_output=True, text=True, timeout=60)
        left = [ln for ln in r.stdout.splitlines() if ln.split()[1] in ("PENDING", "RUNNING", "COMPLETING")]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)


def _error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "error:" in ln]


def test_a_run_on_slurm_end_to_end_with_job_ids_in_the_report(slurm, tmp_path):
    """`fwbench run --launcher submitit` (Slurm, since sbatch is here) on the real tiny gpt case
    of torch in eager mode (the cheapest real case: PYTEST_ADDOPTS selects it in each process),
    one cold and one warm set (each a job on a node: torch's process and its control, side by
    side, in 2 short cycles: the jobs are under test, not the blocks), a relative --out: records,
    blocks, job ids in the JSON and report.

    --threads 1: the job's processes are not pinned as the test workers are, and with a thread
    per CPU they share a CPU with the other worker's test; OpenMP's threads then wait on each
    other at every operation (measured on 2 cores: 262 s in the suite against 53 s alone)."""
    pytest.importorskip("torch")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "reports", "run", "--launcher", "submitit", "--framework", "torch",
                        "--workload", "gpt", "--preset", "tiny", "--rounds", "2", "--cold", "1", "--warm", "1",
                        "--cycles", "2", "--block-s", "0.02", "--threads", "1", "--timeout-s", "300", "--out", "run"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=900,
                       env=_env(PYTEST_ADDOPTS=os.environ.get("PYTEST_ADDOPTS", "") + " -k eager-forward"))
    assert r.returncode == 0, r.stderr
    ids = _job_ids(r.stderr)
    assert len(ids) == 2 and "launcher: submitit on Slurm" in r.stderr
    assert "--time=16 (minutes" in r.stderr                          # 2 processes x 300 s + 10% + 5 min
    assert f"slurm job {ids[0]}: RUNNING on " in r.stderr and f"set 0: slurm job {ids[0]} done" in r.stderr
    assert "[torch#0 1/1] gpt forward eager: median" in r.stderr     # and the running job's cases
    assert "submitit WARNING" not in r.stderr and "sacct" not in r.stderr
    out = tmp_path / "run"
    for i in range(4):                                               # 2 sets x (torch, its control)
        doc = json.loads((out / f"torch-{i}.json").read_text())
        info = doc["machine_info"]["fwbench"]
        job = info["job"]
        assert job["job_id"] == ids[info["set"]] and job["host"] and job["start"] < job["end"]
        [bench] = doc["benchmarks"]
        assert bench["extra_info"]["status"] == "ok" and doc["fwbench"]["blocks"]
    md = (out / "report.md").read_text()
    for i in range(4):
        assert re.search(rf"torch-{i}.json: job ({ids[0]}|{ids[1]}) on ", md)
    script = (out / "submitit" / f"{ids[0]}_submission.sh").read_text()
    assert "#SBATCH --exclusive" in script and "#SBATCH --mem=0" in script and "#SBATCH --time=16" in script
    print(f"slurm jobs {ids}: {time.monotonic() - t0:.0f} s")


def test_scancel_of_the_running_job_keeps_the_finished_case(slurm, tmp_path):
    proc = _start(tmp_path, "hang", "--launcher", "slurm")
    _wait_for(tmp_path / "child.pid", proc)
    [jid] = [p.name.split("_")[0] for p in (tmp_path / "out" / "submitit").glob("*_submission.sh")]
    subprocess.run(["scancel", jid], check=True, timeout=60)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    # Slurm sends SIGTERM, then SIGKILL after KillWait: the job ends CANCELLED, or its runner
    # first keeps the results itself, blaming the SIGTERM that ended its benchmark process
    assert (f"slurm job {jid}: CANCELLED" in err or f"slurm job {jid} ended early: process killed by SIGTERM" in err)
    assert "Traceback" not in err
    df = reports.load(tmp_path / "out" / "torch.json")
    st = {(t, m): (s, r) for t, m, s, r in zip(df["task"], df["mode"], df["status"], df["reason"])}
    assert st[("forward", "eager")][0] == "ok"                       # finished before the cancel: kept
    assert st[("forward", "compiled")][0] == "failed"                # running when cancelled
    assert st[("train_step", "compiled")][0] == "failed"             # never reached
    assert all(jid in r or "SIGTERM" in r for s, r in st.values() if s == "failed")
    assert not _active([jid])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_every_job_of_the_run(slurm, tmp_path, sig):
    """Two frameworks' cold processes are one round: two jobs at once on a one-node cluster, so
    one runs (and hangs) while the other waits for the node; the signal ends both. (The stand-in
    suite records every case as torch's; each process's file is its framework's.)"""
    proc = _start(tmp_path, "hang", "--launcher", "slurm", frameworks="torch,jax")
    _wait_for(tmp_path / "child.pid", proc)
    time.sleep(3)                                                    # the job's first case is written
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, err
    ids = _job_ids(err)
    assert len(ids) == 2 and f"interrupted by {name}: cancelled slurm job(s) {', '.join(ids)}" in err
    assert not _active(ids) and "Traceback" not in err
    docs = {f: json.loads((tmp_path / "out" / f"{f}.json").read_text()) for f in ("torch", "jax")}
    [ran] = [f for f, d in docs.items() if d["benchmarks"]]          # the job that had the node
    [waited] = [f for f in docs if f != ran]
    assert [b["extra_info"]["status"] for b in docs[ran]["benchmarks"]] == ["ok"]   # its finished case is kept
    failed = [r for r in docs[ran]["fwbench"]["records"] if r["status"] == "failed"]
    assert len(failed) == 2 and all(f"interrupted by {name}" in r["reason"] for r in failed)
    assert docs[waited]["machine_info"]["fwbench"]["missing"][waited] == \
        f"not run: fwbench run was interrupted by {name} before {waited} started"


def test_a_signal_cancels_the_running_sets_job_and_keeps_its_finished_cases(slurm, tmp_path):
    """Side by side on Slurm: a set per job (torch's process and its control on one node); SIGTERM
    while the first set's job runs: the job is cancelled, both its processes keep their finished
    case, the hanging one is failed with the reason, and the next set is written as not run."""
    proc = _start(tmp_path, "hang", "--launcher", "slurm", "--cycles", "2", "--warm", "1")
    _wait_for(tmp_path / "child.pid", proc)
    time.sleep(3)                                                    # the job's first cases are written
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err
    [jid] = _job_ids(err)
    assert f"interrupted by SIGTERM: cancelled slurm job(s) {jid}" in err and not _active([jid])
    out = tmp_path / "out"
    for i in (0, 1):                                                 # set 0: torch and its control
        doc = json.loads((out / f"torch-{i}.json").read_text())
        assert [b["extra_info"]["status"] for b in doc["benchmarks"]] == ["ok"]
        assert any("interrupted by SIGTERM" in (r.get("reason") or "") for r in doc["fwbench"]["records"])
    later = json.loads((out / "torch-2.json").read_text())           # set 1 never started
    assert later["machine_info"]["fwbench"]["missing"]["torch"] == \
        "not run: fwbench run was interrupted by SIGTERM before set 1 started"


@pytest.mark.parametrize("how", [("--partition", "nosuch"), ("--sbatch=--no-such-option",), ("SBATCH_PARTITION",)])
def test_sbatch_refusal_is_one_line_in_sbatchs_words(slurm, tmp_path, how):
    args, env = (how, {}) if how[0] != "SBATCH_PARTITION" else ((), {"SBATCH_PARTITION": "nosuch"})
    proc = _start(tmp_path, "normal", "--launcher", "slurm", *args, **env)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    [line] = _error_lines(err)
    assert line.startswith("fwbench run: error: sbatch refused the job: sbatch: ")
    assert ("invalid partition specified: nosuch" in line) if "nosuch" in str(how) + str(env) else \
        "unrecognized option '--no-such-option'" in line
    assert "Traceback" not in err and len(err.splitlines()) <= 3


def test_a_job_pending_on_a_limit_it_cannot_meet_stops_the_run(slurm, tmp_path):
    """The short partition allows 1 minute; the job asks --timeout-s 120 s + margin = 8 minutes."""
    proc = _start(tmp_path, "normal", "--launcher", "slurm", "--partition", SHORT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    [line] = _error_lines(err)
    ids = _job_ids(err)
    assert f"slurm job {ids[0]} cannot start: it is pending on PartitionTimeLimit" in line
    assert f"it asks --time=8:00, partition {SHORT} allows 1:00" in line and "cancelled the run's jobs" in line
    assert not _active(ids)
    doc = json.loads((tmp_path / "out" / "torch.json").read_text())
    assert doc["machine_info"]["fwbench"]["missing"]["torch"].startswith("not run: fwbench run was stopped")


# ----------------------------------------------------------------------------- without a cluster

@pytest.mark.parametrize("args,words", [
    (["--partition", "gpu"], "--partition set what a Slurm job asks for: they need --launcher slurm"),
    (["--launcher", "submitit-local", "--mem", "10G", "--qos", "high"], "--qos, --mem set what a Slurm job"),
    (["--launcher", "slurm", "--sbatch=-p gpu"], "--sbatch takes sbatch's long options as --name=value or --flag"),
])
def test_slurm_options_refused_where_they_mean_nothing_in_one_line(args, words, capsys):
    from reports.commands import cli
    assert cli.main(["run", "--framework", "torch", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_the_jobs_sbatch_options():
    from reports.commands import launch
    assert launch.time_limit(600) == 16 and launch.time_limit(3600) == 71     # 10% and 5 minutes over --timeout-s
    assert launch.sbatch_extra(["--constraint=a100", "--requeue", "--comment=a=b c"]) == \
        {"constraint": "a100", "requeue": True, "comment": "a=b c"}
    assert launch.sbatch_message("sbatch: error: invalid partition specified: x\n"
                                 "sbatch: error: Batch job submission failed: Invalid partition name specified") == \
        ("sbatch: error: invalid partition specified: x; "
         "sbatch: error: Batch job submission failed: Invalid partition name specified")
    assert launch.sbatch_message("sbatch: unrecognized option '--x'\nTry \"sbatch --help\" for more information") == \
        "sbatch: unrecognized option '--x'"
    for reason in ("PartitionTimeLimit", "ReqNodeNotAvail, UnavailableNodes:n[1-2]", "QOSMaxWallDurationPerJobLimit",
                   "AssocMaxNodesPerJobLimit", "InvalidAccount"):
        assert launch.UNRESOLVABLE.match(reason), reason
    for reason in ("Resources", "Priority", "None", "PartitionConfig", "QOSGrpCpuLimit", "BeginTime"):
        assert not launch.UNRESOLVABLE.match(reason), reason

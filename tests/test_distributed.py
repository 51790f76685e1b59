"""Data parallel across processes (issue 43): one process per device, each framework's own
distributed runtime, launched by Slurm (srun) or by fwbench's local launcher.

On CI's real one-node Slurm (.ci/slurm-up; FWBENCH_REQUIRE_SLURM=1 there, so these fail
when no cluster answers, and skip elsewhere): `fwbench run --processes-per-case 2 --launcher
slurm` runs the GPT train step's data-parallel form in each framework under `srun
--ntasks=2`, every rank's check against one device passes and the document holds both
ranks' communication figures; `srun --ntasks=2` with a mutation (the last rank keeps its own
gradients, or every rank sums) fails the check; a rank killed from outside ends the step with
one line naming it, the finished case kept. The same launch path without Slurm (N processes
here), a peer that never comes, and the framework-free pieces (Slurm's host lists, the
alpha-beta fit and model, the report's tables and claim 5's row) run anywhere.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reports.commands import distributed as rd
from reports.commands import ranks
from reports.measures import distributed as ad
from tests.support.helpers import INSTALLED
from tests.test_slurm import _env, slurm  # noqa: F401  (the fixture: a Slurm that answers, or skip/fail)
from workloads import commmodel, gpt, parallel
from workloads import distributed as wd
from workloads.base import FwbenchError

# the one-node Slurm cluster: one such test at a time
pytestmark = pytest.mark.serial("slurm")

ROOT = Path(__file__).resolve().parent.parent
TINY = gpt.preset("tiny").config
ANALYTIC = sum(math.prod(s) for s in gpt.param_shapes(TINY).values()) * 4          # every gradient once, fp32
EMBEDDING = TINY.vocab_size * TINY.n_embd * 4
# What each framework's step all-reduces by its own account (tests/test_scaleout.py measured the
# same on simulated devices): DDP's buckets hold every gradient once; TensorFlow's step adds the
# loss's mean across the workers (4 bytes); XLA reduces the tied embedding's two gradient terms
# apart and the loss too.
ALLREDUCED = {"torch": ANALYTIC, "tensorflow": ANALYTIC + 4, "jax": ANALYTIC + EMBEDDING + 4}
FRAMEWORKS = ("torch", "jax", "tensorflow")
SWEEP = (4, 64, 1024, 16384, 262144, 1048576, 4194304)     # the rank program's default all-reduce sizes


def _need(fw: str) -> None:
    if fw not in INSTALLED:
        pytest.skip(f"{fw} not installed")


def _run(tmp_path: Path, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports", "run", "--preset", "tiny", "--workload", "gpt",
                           "--cold", "1", "--warm", "0", "--out", "run", *args], cwd=tmp_path, env=_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def _doc(tmp_path: Path, name: str) -> dict:
    return json.loads((tmp_path / "run" / wd.FOLDER / name).read_text())


# ----------------------------------------------------------------------------- on a real Slurm

@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_srun_runs_each_frameworks_data_parallel_step_checked_on_every_rank(slurm, tmp_path, fw):  # noqa: F811
    """fwbench run --processes-per-case 2 --launcher slurm: one srun --ntasks=2 job step, the
    ranks joined by the framework's own runtime from Slurm's environment; the check passes on
    both ranks, and the document has both ranks' step, no-sync step, collectives alone and
    collectives, and both ranks' all-reduce sweep."""
    _need(fw)
    t0 = time.monotonic()
    # The test cluster binds no tasks: the ranks take the CPU FWBENCH_CPUS names (the last this
    # test may use; a suite worker's own), which srun passes on with the environment.
    cpu = max(os.sched_getaffinity(0))
    r = _run(tmp_path, "--processes-per-case", "2", "--launcher", "slurm", "--framework", fw, "--quick",
             "--rounds", "3", FWBENCH_CPUS=str(cpu))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "launched by srun (Slurm)" in r.stderr and "## Processes x frameworks (measured)" in r.stdout
    log = (tmp_path / "run" / "logs" / f"{fw}-p2-0.log").read_text()
    assert log.startswith("$ srun --ntasks=2 ") and "--kill-on-bad-exit=1" in log.splitlines()[0]
    d = _doc(tmp_path, f"{fw}-p2-0.json")
    assert d["complete"] and d["launcher"] == "srun" and d["processes"] == 2 and len(d["hosts"]) == 2
    assert d["job"] and "." in d["job"]                                   # Slurm's job and step ids
    assert f"on CPUs [{cpu}] " in d["pinning"], d["pinning"]
    [c] = d["cases"]
    assert c["status"] == "ok", c
    assert c["check"]["grad_rel"] <= parallel.GRAD_RTOL["gpt"] and c["check"]["rel"] <= parallel.CHECK_RTOL["gpt"]
    assert [r["rank"] for r in c["ranks"]] == [0, 1]
    for rank in c["ranks"]:
        assert rank["status"] == "ok" and rank["failure"] is None
        assert len(rank["step_s"]) == 3 and len(rank["nosync_s"]) == 3 and len(rank["comm_s"]) == 3
        assert rank["collectives"]["all-reduce"]["bytes"] == ALLREDUCED[fw], rank["collectives"]
    assert c["analytic_allreduce_bytes"] == ANALYTIC and c["allreduce_bytes"] == ALLREDUCED[fw]
    sweep = d["sweep"]
    assert [r["rank"] for r in sweep["ranks"]] == [0, 1]
    assert [p["bytes"] for p in sweep["points"]] == list(SWEEP) and all(p["s"] > 0 for p in sweep["points"])
    print(f"{fw}: srun step {c['step_s'] * 1e3:.2f} ms, {time.monotonic() - t0:.0f} s")
    assert time.monotonic() - t0 < 120


# (framework, mutation): "skip" — the last rank joins the all-reduce but keeps its own gradients
# (rank 0's stay right: only a check of every rank sees it); "sum" — every rank sums.
MUTANTS = [(fw, "skip") for fw in FRAMEWORKS] + [("torch", "sum")]


@pytest.mark.parametrize("fw,mutation", MUTANTS)
def test_a_wrong_reduction_fails_the_check_under_srun(slurm, tmp_path, fw, mutation):  # noqa: F811
    """srun --ntasks=2 of the rank program with a mutation: the case is failed, never timed,
    and the reason names the rank whose gradients are wrong. With "skip" rank 0's reduced
    gradients are right (its error stays within GRAD_RTOL) and rank 1's are its own rows'
    (off by O(1): measured 1.5): a check of rank 0 alone would pass it."""
    _need(fw)
    doc = tmp_path / "doc.json"
    p = subprocess.run(["srun", "--ntasks=2", "--kill-on-bad-exit=1", "--time=5", sys.executable, "-m",
                        "frameworks.distributed", fw, "gpt", "--out", str(doc), "--check-only", "--mutate", mutation],
                       cwd=ROOT, env=_env(FWBENCH_DIST_PORT=str(ranks.free_ports(2))), capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(doc.read_text())
    [c] = d["cases"]
    assert d["mutation"] == mutation and c["status"] == "failed", c
    assert c["step_s"] is None                                            # never timed
    grads = {r["rank"]: r["grad_rel"] for r in c["ranks"]}
    assert grads[1] > 100 * parallel.GRAD_RTOL["gpt"] and "rank 1: data parallel on 2 devices reduces the " \
        "gradients wrong" in c["reason"], c["reason"]
    if mutation == "skip":
        assert grads[0] <= parallel.GRAD_RTOL["gpt"], grads
    else:
        assert abs(grads[0] - 1.0) < 1e-3 and abs(grads[1] - 1.0) < 1e-3, grads     # a sum over 2 is off by N - 1


def _kill_rank_1_after_the_first_case(tmp_path: Path, proc: subprocess.Popen, name: str) -> None:
    """Wait until rank 0 has written the first case, then SIGKILL rank 1 (its pid file)."""
    doc = tmp_path / "run" / wd.FOLDER / name
    pid = wd.parts_dir(doc) / "rank1.pid"
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if json.loads(doc.read_text())["cases"] and pid.exists():
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    os.kill(json.loads(pid.read_text())["pid"], signal.SIGKILL)


@pytest.mark.parametrize("launcher,cause", [
    pytest.param("slurm", "rank 1 (vm) ended: Killed, as srun reports it", id="srun"),
    pytest.param("local", "rank 1 (127.0.0.1) was killed by SIGKILL", id="local")])
def test_a_killed_rank_ends_the_step_with_one_line_and_keeps_the_finished_case(request, tmp_path, launcher, cause):
    """torch, two cases (data parallel, then FSDP2's sharded form with many rounds): rank 1 is
    killed while the second runs. The step ends (srun --kill-on-bad-exit, or the local
    launcher, ends rank 0), one line names rank 1 and how it ended, and the document keeps
    the first case and records the second failed with that line."""
    _need("torch")
    if launcher == "slurm":
        request.getfixturevalue("slurm")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "reports", "run", "--preset", "tiny", "--workload", "gpt",
                             "--cold", "1", "--warm", "0", "--out", "run", "--processes-per-case", "2", "--launcher",
                             launcher, "--framework", "torch", "--rounds", "400"], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _kill_rank_1_after_the_first_case(tmp_path, proc, "torch-p2-0.json")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    said = [ln for ln in err.splitlines() if "rank 1" in ln]
    assert len(said) == 1, err
    if launcher == "local":
        assert cause in said[0]
    else:       # srun names the task it saw die; "Killed" is SIGKILL's word
        assert "rank 1 (" in said[0] and "Killed" in said[0], said
    assert "kept 1 finished case(s) of 2" in said[0] and "Traceback" not in err
    d = _doc(tmp_path, "torch-p2-0.json")
    first, second = d["cases"]
    assert first["strategy"] is None and first["status"] == "ok" and first["step_s"] > 0
    assert second["strategy"] == parallel.SHARDED and second["status"] == "failed"
    assert second["reason"].startswith(said[0].split(": ")[1].split("; kept")[0]) and not d["complete"]
    assert time.monotonic() - t0 < 150


def test_a_peer_that_never_comes_is_one_line_after_the_runtimes_timeout(tmp_path):
    """Rank 0 of 2 started alone (its peer unreachable): torch.distributed's rendezvous gives up
    after FWBENCH_DIST_TIMEOUT_S and the rank exits with one line naming itself and the cause."""
    _need("torch")
    env = {k: v for k, v in _env().items() if not k.startswith("SLURM_")}
    env.update({wd.RANK: "0", wd.SIZE: "2", wd.HOSTS: "127.0.0.1,127.0.0.1", wd.PORT: str(ranks.free_ports(2)),
                "FWBENCH_DIST_TIMEOUT_S": "3"})
    p = subprocess.run([sys.executable, "-m", "frameworks.distributed", "torch", "gpt", "--out",
                        str(tmp_path / "d.json")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    [line] = [ln for ln in p.stderr.splitlines() if ln.startswith("rank 0 (127.0.0.1): ")]
    assert "timed out" in line.lower() or "timeout" in line.lower(), line
    assert (wd.parts_dir(tmp_path / "d.json") / "rank0.error").read_text().strip() == line


# ----------------------------------------------------------------------------- framework-free

def test_slurms_host_lists_and_tasks_per_node_expand_as_scontrol_does():
    assert wd.expand_hostlist("vm") == ["vm"]
    assert wd.expand_hostlist("n[01-03,7],gpu5") == ["n01", "n02", "n03", "n7", "gpu5"]
    assert wd.expand_hostlist("a[9-10]b,c") == ["a9b", "a10b", "c"]
    assert wd.tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(FwbenchError, match="cannot read SLURM_STEP_TASKS_PER_NODE"):
        wd.tasks_per_node("two")


def test_a_processes_place_comes_from_srun_or_fwbenchs_launcher_and_nothing_else():
    env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "12",
           "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", wd.PORT: "4000"}
    w = wd.world(env)
    assert (w.rank, w.size, w.hosts, w.port) == (3, 4, ("n1", "n1", "n2", "n2"), 4000)
    assert (w.launcher, w.job) == ("srun", "12.0")
    assert w.coordinator == "n1" and w.local_rank == 1 and w.worker(3) == "n2:4003"
    no_port = {k: v for k, v in env.items() if k != wd.PORT}
    assert wd.world(no_port).port == wd.slurm_port("12", "0")
    local = wd.world({wd.RANK: "1", wd.SIZE: "2", wd.HOSTS: "127.0.0.1,127.0.0.1", wd.PORT: "5000"})
    assert (local.rank, local.launcher, local.local_rank) == (1, "local", 1)
    with pytest.raises(FwbenchError, match="srun --ntasks=N"):
        wd.world({})
    with pytest.raises(FwbenchError, match="inconsistent world: rank 2 of 2"):
        wd.world({wd.RANK: "2", wd.SIZE: "2", wd.HOSTS: "a,b", wd.PORT: "1"})
    with pytest.raises(FwbenchError, match="FWBENCH_DIST_TIMEOUT_S must be a positive number"):
        wd.peer_timeout_s({"FWBENCH_DIST_TIMEOUT_S": "soon"})


def test_the_cause_of_a_step_is_the_rank_that_died_not_those_srun_ended_after_it(tmp_path):
    """srun's lines as a CI run printed them: rank 0's gloo error came first, then srun ended the
    step; rank 1, SIGKILLed from outside, is the cause. A rank that exited with an error is the
    cause over one srun then terminated, and its own error line is the one said."""
    killed = ("srun: error: vm: task 0: Exited with exit code 1\n"
              "srun: launch/slurm: _step_signal: Terminating StepId=12.0\nsrun: error: vm: task 1: Killed\n")
    assert ranks.srun_cause(killed, tmp_path) == "rank 1 (vm) ended: Killed, as srun reports it"
    (tmp_path / "rank0.error").write_text("rank 0 (vm): ValueError: bad\n")
    exited = "srun: error: vm: task 0: Exited with exit code 1\nsrun: error: vm: task 1: Terminated\n"
    assert ranks.srun_cause(exited, tmp_path) == "rank 0 (vm): ValueError: bad"
    assert ranks.srun_cause("srun: error: vm: tasks 0-1: Exited with exit code 2\n", tmp_path / "none") == \
        "rank 0 (vm): Exited with exit code 2 (srun)"
    assert ranks.srun_cause("nothing said\n", tmp_path) is None


def test_a_step_that_ended_badly_keeps_its_finished_cases_and_marks_the_rest(tmp_path):
    doc = tmp_path / "torch-p2-0.json"
    doc.write_text(json.dumps({"kind": wd.KIND, "framework": "torch", "processes": 2, "complete": False,
                               "running": 1, "cases": [{"strategy": None, "status": "ok", "step_s": 0.01}]}))
    d = rd.finalize(doc, {}, [None, "sharded", "other"], "rank 1 (vm) ended: Killed, as srun reports it")
    assert [(c["strategy"], c["status"]) for c in d["cases"]] == [(None, "ok"), ("sharded", "failed"),
                                                                  ("other", "failed")]
    assert d["cases"][1]["reason"] == "rank 1 (vm) ended: Killed, as srun reports it during this case"
    assert d["cases"][2]["reason"].startswith("not reached: rank 1") and d["ended_by"].startswith("rank 1")
    gone = rd.finalize(tmp_path / "none.json", {"kind": wd.KIND, "framework": "jax", "processes": 2}, [None], "x")
    assert gone["cases"] == [{"strategy": None, "status": "failed", "reason": "x during this case"}]


def test_processes_per_case_is_checked_in_one_line():
    with pytest.raises(FwbenchError, match="--processes-per-case takes a comma list of process counts"):
        rd.counts("0,2")
    assert rd.counts("1,2,2") == (1, 2)


def _ring(S: float, n: int, a: float, b: float) -> float:      # written here, apart from the code under test
    return 2 * (n - 1) * a + 2 * (n - 1) / n * S * b


def test_the_alpha_beta_fit_recovers_the_link_it_was_measured_on():
    """Points made from a known alpha and beta (the ring formula written in this test): the fit
    gives them back to rounding, and a residual of 0; 5% noise moves them by about that."""
    alpha, beta = 40e-6, 1 / 300e6
    sizes = [4, 64, 1024, 16384, 262144, 1048576, 4194304]
    exact = commmodel.fit([(s, _ring(s, 2, alpha, beta)) for s in sizes], 2)
    assert exact.alpha_s == pytest.approx(alpha, rel=1e-9) and exact.beta == pytest.approx(beta, rel=1e-9)
    assert exact.max_rel_residual < 1e-9 and exact.bandwidth == pytest.approx(300e6, rel=1e-9)
    noise = [1.05, 0.95, 1.03, 0.97, 1.05, 0.96, 1.04]
    noisy = commmodel.fit([(s, _ring(s, 4, alpha, beta) * f) for s, f in zip(sizes, noise)], 4)
    assert noisy.alpha_s == pytest.approx(alpha, rel=0.1) and noisy.beta == pytest.approx(beta, rel=0.1)
    assert 0.03 < noisy.max_rel_residual < 0.1
    # a line that would need a negative latency is refitted through the origin, never negative
    through0 = commmodel.fit([(1000, 1e-6), (2000, 3e-6)], 2)
    assert through0.alpha_s == 0 and through0.beta > 0
    with pytest.raises(FwbenchError, match="at 2 sizes or more"):
        commmodel.fit([(4, 1e-5), (4, 2e-5)], 2)


def test_the_models_all_reduces_and_step_by_hand():
    link = commmodel.Link(alpha_s=1e-6, bandwidth=1e9, alpha_source="", bandwidth_source="")
    assert commmodel.ring_s(1e6, 4, link) == pytest.approx(6e-6 + 1.5e-3)        # 2*3 alpha + 2*3/4 S/B
    assert commmodel.tree_s(1e6, 5, link) == pytest.approx(6e-6 + 2e-3)          # 2*ceil(log2 5) alpha + 2 S/B
    assert commmodel.ring_s(1e6, 1, link) == 0 == commmodel.tree_s(1e6, 1, link)
    net = commmodel.INTERCONNECT
    params, flops = commmodel.gpt_step(gpt.GPTConfig())
    assert 124e6 < params < 125e6                                                # GPT-2 124M (tied head)
    p = commmodel.predict_step(params, flops, 4096, "ring", 1, 0.0)
    compute = flops / (net.peak_flops * net.mfu)
    comm = 2 * 4095 * net.inter.alpha_s + 2 * 4095 / 4096 * params * 4 / net.inter.bandwidth
    assert p.compute_s == pytest.approx(compute) and p.comm_s == pytest.approx(comm)
    assert p.efficiency == pytest.approx(compute / (compute + comm))
    full = commmodel.predict_step(params, flops, 4096, "ring", 1, 1.0)
    assert full.step_s == pytest.approx(compute + max(0.0, comm - 2 / 3 * compute))
    assert commmodel.predict_step(params, flops, 8, "tree", 1, 0.0).comm_s == pytest.approx(
        2 * 3 * net.intra.alpha_s + 2 * params * 4 / net.intra.bandwidth)        # one node: NVLink
    assert commmodel.ddp_buckets(params * 4) == 1 + math.ceil((params * 4 - 2 ** 20) / (25 * 2 ** 20))


# ----------------------------------------------------------------------------- the report

def _case(step: float, nosync: float, comm: float | None, n: int, strategy: str | None = None) -> dict:
    ranks = [{"rank": r, "step_s": [step] * 3, "status": "ok"} for r in range(n)]
    analytic = ANALYTIC if n > 1 else None
    return {"strategy": strategy, "status": "ok", "reason": None, "step_s": step, "nosync_s": nosync,
            "comm_s": comm, "check": {"grad_rel": 2e-7, "rel": 3e-6, "grad_rtol": 1e-5, "rtol": 4e-5},
            "collectives": {"all-reduce": {"count": 1, "bytes": ANALYTIC + EMBEDDING}},
            "allreduce_bytes": ANALYTIC + EMBEDDING, "allreduce_count": 1, "analytic_allreduce_bytes": ANALYTIC,
            "wire_bytes": ANALYTIC + EMBEDDING if n > 1 else 0, "analytic_wire_bytes": analytic, "ranks": ranks}


def _docs(folder: Path) -> None:
    """jax at 1 and 2 processes, two repeats each, and a sweep: what a --processes-per-case run writes."""
    (folder / wd.FOLDER).mkdir(parents=True, exist_ok=True)
    steps = {(1, 0): 0.010, (1, 1): 0.020, (2, 0): 0.0125, (2, 1): 0.040}
    for (n, r), s in steps.items():
        doc = {"kind": wd.KIND, "schema": 1, "framework": "jax", "workload": "gpt", "mode": "compiled",
               "preset": "tiny", "processes": n, "threads_per_process": 1, "launcher": "srun", "repeat": r,
               "machine_id": "m", "cases": [_case(s, s * 0.6, s * 0.5 if n > 1 else None, n)], "complete": True,
               "sweep": {"points": [{"bytes": b, "s": _ring(b, 2, 50e-6, 1 / 200e6)} for b in (4, 1024, 1 << 20)]}
               if n > 1 else None}
        (folder / wd.FOLDER / wd.document_name("jax", n, r)).write_text(json.dumps(doc))
    (folder / wd.FOLDER / "bad.json").write_text(json.dumps({"kind": "other"}))


def test_the_processes_table_pairs_repeats_and_keeps_measured_apart_from_modelled(tmp_path):
    """Efficiency t(1)/t(N) pairs each repeat's steps (0.010/0.0125 and 0.020/0.040: median 0.65;
    medians apart would give 0.57), the communication share is 1 - t(no-sync)/t(step), the fit
    recovers the sweep's link, the JAX profile counts one embedding beyond the analytic, and
    claim 5's pieces say measured and modelled apart."""
    _docs(tmp_path)
    docs, probs = ad.read([tmp_path])
    assert len(docs) == 4 and len(probs) == 1 and "not a distributed document" in probs[0]
    t = ad.table(docs)
    two = t[t["processes"] == 2].iloc[0]
    assert two["efficiency t(1) / t(N)"] == "0.65" and two["communication share"] == "0.40"
    assert two["overlap"] == "0.20"                       # 1 - (t - 0.6 t) / 0.5 t
    assert two["on the wire, measured / analytic"].endswith(f"= {(ANALYTIC + EMBEDDING) / ANALYTIC:.3f}")
    assert t[t["processes"] == 1].iloc[0]["efficiency t(1) / t(N)"] == "1 (baseline)"
    [fit] = ad.fits(docs).values()
    assert fit.alpha_s == pytest.approx(50e-6, rel=1e-6) and fit.bandwidth == pytest.approx(200e6, rel=1e-6)
    [prof] = ad.profiles(docs)
    assert prof.framework == "jax" and prof.extra_embeddings == 1
    pred = ad.predictions(docs)
    assert set(pred["devices"]) == {64, 1024, 4096} and set(pred["all-reduce"]) == {"ring", "tree"}
    import pandas as pd
    df = pd.DataFrame()
    df.attrs["distributed"] = docs
    c5 = ad.claim5(df)
    assert c5.measured.startswith("data parallel across 1, 2 processes (srun) on CPUs over loopback: jax checked")
    assert "alpha-beta on this loopback jax 50 us / 200 MB/s" in c5.measured
    assert c5.modelled.startswith("modelled, not measured: on NVIDIA H100") and "4,096 GPUs" in c5.modelled


def test_claim_5_states_the_mechanism_and_the_model_never_a_verdict_from_a_cpu(tmp_path):
    from reports import sections
    from reports.conclusions import claims, findings, replicates
    from reports.measures import data
    from tests.support.reports_fixtures import simulated_processes
    simulated_processes(tmp_path, "torch", {("gpt", "train_step", "eager"): 0.01}, cold=1, warm=2, seed=3)
    _docs(tmp_path)
    df = data.load([tmp_path])
    assert len(df.attrs["distributed"]) == 4
    c = sections.judged_in_report(replicates.cases(df))
    row = claims.table(c, findings.prepare(c, 0.1), replicates.cases(df)).iloc[4]
    assert row["verdict"] == claims.NOT_TESTABLE
    assert "across 1, 2 processes" in row["what was measured"] and row["caveat"].startswith("modelled, not measured")


@pytest.mark.skipif("torch" not in INSTALLED, reason="torch not installed")
def test_the_local_launcher_runs_the_same_step_without_slurm(tmp_path):
    """--launcher local: the same program in 2 processes here (FWBENCH_DIST_* in place of
    Slurm's variables), 1 and 2 processes, the summary's tables printed."""
    r = _run(tmp_path, "--processes-per-case", "1,2", "--launcher", "local", "--framework", "torch", "--quick",
             "--rounds", "3")
    assert r.returncode == 0, r.stderr[-3000:]
    one, two = _doc(tmp_path, "torch-p1-0.json"), _doc(tmp_path, "torch-p2-0.json")
    assert one["launcher"] == two["launcher"] == "local" and two["hosts"] == ["127.0.0.1"] * 2
    assert one["cases"][0]["status"] == two["cases"][0]["status"] == "ok"
    assert one["sweep"] is None and len(two["sweep"]["points"]) == len(SWEEP)
    assert "| torch | eager, data parallel | 2 | local |" in r.stdout
    assert (tmp_path / "run" / wd.FOLDER / "summary.md").read_text().strip() == r.stdout.strip()


def test_every_framework_has_its_multi_process_runtime():
    """Each registered framework's folder defines MODE and start() in distributed.py (read as
    source: nothing imported), the entry point `python -m frameworks.distributed` loads."""
    import ast

    from workloads.framework_facts import FACTS
    for fw in FACTS:
        src = ROOT / "frameworks" / fw / "distributed.py"
        assert src.is_file(), f"frameworks/{fw}/distributed.py is missing (CONTRIBUTING.md: a framework)"
        tree = ast.parse(src.read_text())
        names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "MODE" in names and "start" in funcs, fw

"""Scale-out (issue 21): data-parallel train steps equal the one-device step, their
collectives match the analytic gradient all-reduce, and the placement axis reaches the
runner, the records and the report.

The distributed checks run `python -m frameworks.scaleout_check` in a process of its own
(simulated devices are made before a framework starts, so they cannot share this one),
each at N = 2 on the tiny GPT within 60 s on the 2-core CPU machine (torch's compiled ones within
90 s, which they need from empty caches: COLD_COMPILE_LIMIT_S).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reports.commands import plan, process
from reports.measures import scaleout, stats
from tests.support.helpers import INSTALLED
from workloads import parallel
from workloads.base import FwbenchError
from workloads.case import Case, Placement, declared_cases

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 60
# torch's compiled checks from empty caches: two ranks compile the same step (Inductor's C++ kernels)
# beside the other test worker; the FSDP2 one took 47, 56 and 62 s in three fresh-machine suites
# (the 60 s holds for the compiled step run on a cache an earlier run filled)
COLD_COMPILE_LIMIT_S = 90


def limit_s(fw: str, mode: str) -> float:
    return COLD_COMPILE_LIMIT_S if (fw, mode) == ("torch", "compiled") else LIMIT_S


def _run(fw: str, workload: str, n: int, mode: str, out: Path | None = None,
         strategy: str | None = None, mutate: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "frameworks.scaleout_check", fw, workload, str(n), "--mode", mode]
    if mutate is not None:
        cmd += ["--mutate", mutate]
    if out is not None:
        cmd += ["--out", str(out)]
    if strategy is not None:
        cmd += ["--strategy", strategy]
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "FWBENCH_SIMULATED_DEVICES",
                                                            "FWBENCH_THREADS", "OMP_NUM_THREADS",
                                                            "FWBENCH_DP_MUTATION")}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _check(fw: str, workload: str, n: int, mode: str, out: Path | None = None, strategy: str | None = None,
           mutate: str | None = None) -> dict:
    t0 = time.monotonic()
    p = _run(fw, workload, n, mode, out, strategy, mutate)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.monotonic() - t0
    return res


# (framework, mode): each framework's idiomatic data-parallel step
CONFIGS = [("torch", "eager"), ("jax", "compiled"), ("tensorflow", "graph")]


@pytest.fixture(scope="module")
def gpt_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    d = tmp_path_factory.mktemp("dp")
    out = {}
    for fw, mode in CONFIGS:
        if fw in INSTALLED:
            out[fw] = _check(fw, "gpt", 2, mode, d / f"{fw}.npz")
            out[fw]["params"] = dict(np.load(d / f"{fw}.npz"))
    return out


@pytest.mark.parametrize("fw", [f for f, _ in CONFIGS])
def test_data_parallel_equals_one_device(gpt_runs: dict[str, dict], fw: str) -> None:
    if fw not in gpt_runs:
        pytest.skip(f"{fw} not installed")
    r = gpt_runs[fw]
    assert r["grad_rel"] <= parallel.GRAD_RTOL["gpt"], r
    assert r["rel"] <= parallel.CHECK_RTOL["gpt"], r
    assert r["failure"] is None, r
    assert r["wall_s"] <= LIMIT_S, f"{fw} N=2 check took {r['wall_s']:.0f} s"


# (framework, mode, strategy, mutation): each framework's data-parallel step with its gradients
# summed instead of averaged, or every device given device 0's rows (workloads.parallel.MUTATIONS),
# and the sharded forms' summed reduce-scatter / psum
MUTANTS = [(fw, mode, None, m) for fw, mode in CONFIGS for m in ("sum", "shard")] + [
    ("torch", "eager", parallel.SHARDED, "sum"), ("jax", "compiled", parallel.SHARDED, "sum")]


@pytest.mark.parametrize("fw,mode,strategy,mutate", MUTANTS)
def test_the_check_fails_a_wrong_reduction(fw: str, mode: str, strategy: str | None, mutate: str) -> None:
    """The check compares the first step's reduced gradients with one device's (issue 32: the
    parameters after 3 clipped AdamW steps were as close with a sum as with the mean, 3.6e-6
    at N = 2): a sum over N = 2 devices is off by N - 1 = 1, device 0's rows twice by ~1.5
    (measured), far past GRAD_RTOL, and the check names the gradients."""
    if fw not in INSTALLED:
        pytest.skip(f"{fw} not installed")
    r = _check(fw, "gpt", 2, mode, strategy=strategy, mutate=mutate)
    assert r["mutation"] == mutate
    assert r["grad_rel"] > 100 * parallel.GRAD_RTOL["gpt"], r
    assert r["failure"] and "reduces the gradients wrong" in r["failure"], r
    if mutate == "sum":
        assert abs(r["grad_rel"] - 1.0) < 1e-3, r       # exactly N - 1 off


@pytest.mark.parametrize("fw", [f for f, _ in CONFIGS])
def test_collectives_match_analytic(gpt_runs: dict[str, dict], fw: str) -> None:
    """DDP all-reduces every gradient once (its buckets' bytes equal the parameters'), as does
    TensorFlow's one batched all-reduce; XLA's program all-reduces the tied embedding's two
    gradient contributions (the gather's and the head's) apart, before adding them, plus the
    loss: the analytic bytes, one more embedding and a scalar."""
    if fw not in gpt_runs:
        pytest.skip(f"{fw} not installed")
    r = gpt_runs[fw]
    got = r["collectives"]["all-reduce"]["bytes"]
    analytic = r["analytic_allreduce_bytes"]
    import workloads
    cfg = workloads.get("gpt").preset("tiny").config
    extra = cfg.vocab_size * cfg.n_embd * 4 + 4 if fw == "jax" else 0
    assert got == analytic + extra, (got, analytic, r["collectives"])
    assert r["collectives"]["source"]


@pytest.mark.skipif("tensorflow" not in INSTALLED, reason="tensorflow not installed")
def test_tensorflow_step_runs_one_all_reduce_of_the_gradients(gpt_runs: dict[str, dict]) -> None:
    """TensorFlow's data-parallel step, counted from the collective ops in its traced graph
    (not from what the code hands to all_reduce): one all-reduce per device, of the gradients'
    bytes, and no other collective (issue 32: the AdamW's ~100 variable writes each went
    through a cross-replica sync and a copy of replica 0's value, none of it counted)."""
    coll = gpt_runs["tensorflow"]["collectives"]
    ops = {k: v for k, v in coll.items() if isinstance(v, dict)}
    assert ops == {"all-reduce": {"count": 1, "bytes": gpt_runs["tensorflow"]["analytic_allreduce_bytes"]}}, coll
    assert "traced step's graph" in coll["source"]


def test_three_frameworks_agree_after_data_parallel_steps(gpt_runs: dict[str, dict]) -> None:
    """The N = 2 parameters after 3 AdamW steps agree across frameworks, on the data-parallel
    check's own measure and bound (max |difference| / max |parameter| <= CHECK_RTOL['gpt']).
    Not per tensor: the key bias's gradient vanishes in exact arithmetic (softmax ignores a
    shift common to a row), each framework's rounding noise there has its own sign, and
    AdamW turns either into a full step (measured: 4.2e-4 relative between torch and JAX on
    h.0.attn.c_attn.bias, in a run where the whole model agreed to 3e-6)."""
    if len(gpt_runs) < 2:
        pytest.skip("fewer than two frameworks installed")
    fws = list(gpt_runs)
    for a in fws:
        for b in fws[fws.index(a) + 1:]:
            err = parallel.max_rel_diff(gpt_runs[a]["params"], gpt_runs[b]["params"])
            assert err <= parallel.CHECK_RTOL["gpt"], (a, b, err)


@pytest.mark.skipif("jax" not in INSTALLED, reason="jax not installed")
def test_diffusion_data_parallel_jax() -> None:
    r = _check("jax", "diffusion", 2, "compiled")
    assert r["grad_rel"] <= parallel.GRAD_RTOL["diffusion"] and r["rel"] <= parallel.CHECK_RTOL["diffusion"], r
    analytic = r["analytic_allreduce_bytes"]
    assert analytic <= r["collectives"]["all-reduce"]["bytes"] <= analytic + 64


# -- data-parallel strategies: sharded (ZeRO-3 / FSDP) and the no-sync probe ------------------

# (framework, mode) of each sharded form that is built: torch FSDP2 (fully_shard) and JAX's
# parameters placed on the mesh's data axis; TensorFlow's would be DTensor (Unsupported).
SHARDED_CONFIGS = [("torch", "eager"), pytest.param("torch", "compiled", marks=pytest.mark.slow),
                   ("jax", "compiled")]


@pytest.mark.parametrize("fw,mode", SHARDED_CONFIGS)
def test_sharded_equals_one_device_and_moves_the_analytic_bytes(fw: str, mode: str) -> None:
    """The sharded step equals the one-device step, and what its collectives move on a ring
    is the analytic 3(N-1)/N x G within [0.95, 1.2]. Measured at N = 2 on the tiny GPT:
    FSDP2 all-gathers every parameter in the forward and again in the backward (6 calls, 2 G)
    and reduce-scatters the gradients (3 calls, G), plus DTensor's all-reduce of the 28
    per-parameter clipping norms (112 bytes): ratio 1.0002. XLA on CPU gathers each
    parameter once (G plus an activation all-gather of 32 KiB) and reduces the gradients
    with all-reduce (then slices its shard) instead of reduce-scatter: (N-1)/N x 1.07 G +
    2(N-1)/N x G, ratio 1.02 at N = 2 (1.09 at N = 4, where the tied embedding's two
    gradient terms are all-reduced apart, as in the default step)."""
    if fw not in INSTALLED:
        pytest.skip(f"{fw} not installed")
    r = _check(fw, "gpt", 2, mode, strategy=parallel.SHARDED)
    assert r["grad_rel"] <= parallel.GRAD_RTOL["gpt"] and r["rel"] <= parallel.CHECK_RTOL["gpt"], r
    assert r["collectives"]["source"] and r["wire_bytes"] is not None, r["collectives"]
    assert 0.95 <= r["wire_bytes"] / r["analytic_wire_bytes"] <= 1.2, r
    if fw == "torch":   # FSDP2's own collectives, full-tensor bytes: 2 G gathered, G reduce-scattered
        g = r["analytic_allreduce_bytes"]
        assert r["collectives"]["all-gather"]["bytes"] == 2 * g, r["collectives"]
        assert r["collectives"]["reduce-scatter"]["bytes"] == g, r["collectives"]
    assert r["wall_s"] <= limit_s(fw, mode), f"{fw} {mode} sharded N=2 check took {r['wall_s']:.0f} s"


NO_SYNC_CONFIGS = [("torch", "eager"), pytest.param("torch", "compiled", marks=pytest.mark.slow),
                   ("jax", "compiled"), ("tensorflow", "graph")]


@pytest.mark.parametrize("fw,mode", NO_SYNC_CONFIGS)
def test_no_sync_reduces_no_gradients(fw: str, mode: str) -> None:
    """The no-sync probe runs and, by the framework's own account (DDP's communication hook,
    the compiled HLO, the step's all_reduce), moves no gradient: no collective of more than
    a few scalars, and no all-gather or reduce-scatter."""
    if fw not in INSTALLED:
        pytest.skip(f"{fw} not installed")
    r = _check(fw, "gpt", 2, mode, strategy=parallel.NO_SYNC)
    coll = r["collectives"]
    assert coll["source"], coll
    ops = {k: v for k, v in coll.items() if isinstance(v, dict)}
    assert not set(ops) - {"all-reduce"}, ops
    assert ops.get("all-reduce", {"bytes": 0})["bytes"] <= 64, ops
    assert r["wire_bytes"] in (None, 0) or r["wire_bytes"] <= 64, r
    assert r["analytic_wire_bytes"] is None
    # unsynchronised: the replicas' parameters are device 0's, not the one-device model's
    assert r["rel"] > parallel.CHECK_RTOL["gpt"], r
    assert r["wall_s"] <= limit_s(fw, mode), f"{fw} {mode} no-sync N=2 took {r['wall_s']:.0f} s"


@pytest.mark.skipif("tensorflow" not in INSTALLED, reason="tensorflow not installed")
def test_tensorflow_sharded_is_unsupported() -> None:
    p = _run("tensorflow", "gpt", 2, "graph", strategy=parallel.SHARDED)
    assert p.returncode != 0 and "Unsupported" in p.stderr and "DTensor" in p.stderr, p.stderr[-2000:]


# -- framework-free pieces ---------------------------------------------------------------

HLO = """
%all-reduce.1 = f32[64,192]{1,0} all-reduce(f32[64,192]{1,0} %p), channel_id=1, replica_groups={{0,1}}
%ar = (f32[64]{0}, bf16[8,8]{1,0}) all-reduce(f32[64]{0} %a, bf16[8,8]{1,0} %b), replica_groups={{0,1}}
%ag = f32[4,4]{1,0} all-gather-start(f32[2,4]{1,0} %c), dimensions={0}
%done = f32[4,4]{1,0} all-gather-done(f32[4,4]{1,0} %ag)
%add = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y)
"""


def test_hlo_collectives_counts_ops_and_bytes() -> None:
    got = parallel.hlo_collectives(HLO)
    assert got["all-reduce"] == {"count": 2, "bytes": 64 * 192 * 4 + 64 * 4 + 8 * 8 * 2}
    assert got["all-gather"] == {"count": 1, "bytes": 16 * 4}
    assert set(got) == {"all-reduce", "all-gather"}


def test_device_counts_and_shards() -> None:
    assert parallel.device_counts("1,2,2") == (1, 2)
    for bad in ("0", "x", "", "1,-2"):
        with pytest.raises(FwbenchError, match="comma list of device counts"):
            parallel.device_counts(bad)
    a = np.arange(12).reshape(6, 2)
    assert np.array_equal(np.concatenate([parallel.shard(a, 3, i) for i in range(3)]), a)
    with pytest.raises(ValueError, match="does not split"):
        parallel.shard(a, 4, 0)


def test_placement_declares_only_parallel_tasks() -> None:
    cases = declared_cases("gpt", ("torch",), "tiny", "default", placement=Placement("cpu", 2, True))
    assert cases and {c.task for c in cases} == set(parallel.PARALLEL_TASKS)
    assert all(c.id.endswith("-x2") for c in cases)
    one = declared_cases("gpt", ("torch",), "tiny", "default")
    assert {c.task for c in one} > set(parallel.PARALLEL_TASKS)
    assert Case("torch", "gpt", "train_step", "eager", placement=Placement("cpu", 2, True)).fields()["n_devices"] == 2


def test_runner_units_name_a_process_per_device_count() -> None:
    assert plan.units(("torch", "jax"), "1,2") == ("torch", "jax", "torch-x2", "jax-x2")
    assert plan.split_unit("torch-x2") == ("torch", 2)
    assert plan.split_unit("tensorflow") == ("tensorflow", 1)
    opts = plan.RunOptions(frameworks=("torch",), devices="1,2", simulated_devices=True, threads=1)
    cmd = process.pytest_command("torch-x2", opts, Path("x.json"), 0, "cold")
    assert cmd[cmd.index("--framework") + 1] == "torch" and cmd[cmd.index("--devices") + 1] == "2"
    assert "--simulated-devices" in cmd


def test_cpu_needs_simulated_devices() -> None:
    from frameworks.base import prepare_placement
    with pytest.raises(FwbenchError, match="--simulated-devices"):
        prepare_placement(2, simulated=False, kind="cpu")


def _rec(fw: str, n: int, median: float, over: bool = False) -> dict:
    return {"framework": fw, "workload": "gpt", "task": "train_step", "mode": "eager", "strategy": None,
            "precision": "fp32", "preset": "tiny", "device": "cpu", "n_devices": n, "threads_per_device": 1,
            "threads": n, "global_batch": 2 * n, "oversubscribed": over, "status": "ok", "median_s": median,
            "case": f"gpt/train_step/{fw}/eager/-/tiny/cpu" + (f"/x{n}" if n > 1 else ""),
            "est": None}


def test_weak_scaling_pairs_rounds_and_never_rates_oversubscription() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for n, t, over in ((1, 0.100, False), (2, 0.125, False)):
        procs = {f"torch{'-x%d' % n if n > 1 else ''}-{i}.json": t * float(np.exp(rng.normal(0, 0.01)))
                 for i in range(4)}
        r = _rec("torch", n, float(np.median(list(procs.values()))), over)
        r["est"] = stats.Est.of(procs)
        rows.append(r)
    over = _rec("jax", 4, 0.3, over=True)
    one_jax = _rec("jax", 1, 0.1)
    for r in (over, one_jax):
        r["est"] = stats.Est.of({f"jax{'-x4' if r['n_devices'] > 1 else ''}-{i}.json": r["median_s"] for i in range(3)})
    t = scaleout.judged(pd.DataFrame(rows + [over, one_jax]), margin=0.05)
    torch_row = t[t["framework"] == "torch"].iloc[0]
    assert torch_row["weak-scaling efficiency"] == f"{0.100 / 0.125:.2f}"
    assert "slower" in torch_row["verdict"]
    jax_row = t[t["framework"] == "jax"].iloc[0]
    assert jax_row["weak-scaling efficiency"].startswith("none: oversubscribed")
    assert scaleout._round_key("torch-x2-3.json") == "torch-3.json"


def test_communication_share_and_sharded_ratio_pair_cases_within_processes() -> None:
    """The no-sync probe and the sharded form are paired with the data-parallel step of the
    same process; the sharded form's weak-scaling twin is the one-device default step, and
    the probe has none."""
    rng = np.random.default_rng(1)
    files = [f"torch-x2-{i}.json" for i in range(4)]
    drift = {f: float(np.exp(rng.normal(0, 0.04))) for f in files}      # process-to-process drift
    rows = []
    for strategy, t in ((None, 0.010), (parallel.NO_SYNC, 0.007), (parallel.SHARDED, 0.013)):
        r = _rec("torch", 2, t, False)
        r["strategy"] = strategy
        r["case"] += f"/{strategy}"
        r["est"] = stats.Est.of({f: t * drift[f] * float(np.exp(rng.normal(0, 0.002))) for f in files})
        r["median_s"] = r["est"].value
        rows.append(r)
    one = _rec("torch", 1, 0.008)
    one["est"] = stats.Est.of({f.replace("-x2", ""): 0.008 for f in files})
    df = pd.DataFrame(rows + [one])
    c = scaleout.communication(df).iloc[0]
    share = 1 - rows[1]["median_s"] / rows[0]["median_s"]
    assert c["exposed communication share"].startswith(f"{share:.2f} [")
    lo, hi = (float(x) for x in c["exposed communication share"].split("[")[1].rstrip("]").split(","))
    assert lo - 0.005 <= 0.3 <= hi + 0.005 and hi - lo < 0.05   # paired within processes: the drift cancels
    assert c["sharded / data parallel"].startswith("1.30 [")
    w = scaleout.weak_scaling(df, None)
    assert {m.partition(", ")[2] for m in w[scaleout.MODE]} == {"data parallel", parallel.SHARDED}  # no-sync: none
    said = " ".join(b + " " + " ".join(" ".join(r) for r in b.rows) for b in scaleout.sentence(df, 0.1))  # + rows
    assert f"eager ({parallel.SHARDED})" in said and "Exposed communication share" in said


def test_slowdown_splits_into_non_communication_and_communication_factors() -> None:
    """t(N)/t(1) = t(no-sync)/t(1) x t(data parallel)/t(no-sync), each paired as the share is
    (the no-sync probe over the one-device process of its round, data parallel over the probe
    within its process), with the devices' cores in words from the record; and the memory
    table sets the sharded form's per-device state against data parallel's."""
    rng = np.random.default_rng(2)
    files = [f"jax-x2-{i}.json" for i in range(5)]
    drift = {f: float(np.exp(rng.normal(0, 0.04))) for f in files}
    rows = []
    for strategy, t, state in ((None, 0.020, 3000), (parallel.NO_SYNC, 0.012, 3000), (parallel.SHARDED, 0.026, 1600)):
        r = _rec("jax", 2, t, False)
        r.update(strategy=strategy, case=r["case"] + f"/{strategy}", cpus_available=2, cores=2,
                 pinning="one process; the devices share its XLA CPU thread pool (not pinned per device)",
                 device_state_bytes=state, device_state_source="shards on device 0")
        r["est"] = stats.Est.of({f: t * drift[f] * float(np.exp(rng.normal(0, 0.002))) for f in files})
        r["median_s"] = r["est"].value
        rows.append(r)
    one = _rec("jax", 1, 0.006)
    one["est"] = stats.Est.of({f.replace("-x2", ""): 0.006 * drift[f] for f in files})
    one["median_s"] = one["est"].value
    df = pd.DataFrame(rows + [one])
    sp = scaleout.slowdown_split(df).iloc[0]
    total, noncomm, comm = (float(sp[c].split(" ")[0]) for c in (
        "slowdown t(N) / t(1)", "non-communication t(no-sync) / t(1)", "communication t(N) / t(no-sync)"))
    assert abs(total - rows[0]["median_s"] / one["median_s"]) < 0.006 and abs(noncomm * comm - total) < 0.02
    assert abs(noncomm - 2.0) < 0.05 and abs(comm - 20 / 12) < 0.02
    for c in ("slowdown t(N) / t(1)", "non-communication t(no-sync) / t(1)", "communication t(N) / t(no-sync)"):
        lo, hi = (float(x) for x in sp[c].split("[")[1].rstrip("]").split(","))
        assert lo <= float(sp[c].split(" ")[0]) <= hi and hi - lo < 0.1, sp[c]   # paired: the drift cancels
    assert sp["cores"].startswith("devices share one process's thread pool") and "2 devices x 1 thread on 2 CPUs" \
        in sp["cores"]
    said = " ".join(b + " " + " ".join(" ".join(r) for r in b.rows) for b in scaleout.sentence(df, 0.1))  # + rows
    assert "splits into" in said and f"{noncomm:.2f} x {comm:.2f}" in said
    over = pd.Series({"n_devices": 4, "threads_per_device": 1, "cpus_available": 2, "pinning": "pinned"})
    assert scaleout.cores(over).startswith("devices share cores: 4 devices x 1 thread on 2 CPUs")
    mem = scaleout.memory(df).iloc[0]
    assert mem["sharded / data parallel"] == "0.53" and mem["instrument"] == "shards on device 0"

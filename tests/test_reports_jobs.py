"""The choice per job and the claims answered by name (issue 28), on synthetic runs whose
answers are known from how they were built (tests/support/reports_fixtures.py)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from reports import cli, sections
from reports.analysis import claims, data, findings, jobs, replicates
from reports.rendering import choice
from tests.support.reports_fixtures import simulated_processes
from workloads.base import FwbenchError


def _cases(folder: Path, medians: dict[str, dict[tuple[str, str, str], float]], cold: int = 3, warm: int = 5):
    for k, (fw, m) in enumerate(medians.items()):
        simulated_processes(folder, fw, m, cold=cold, warm=warm, seed=11 + k)
    c = sections.judged_in_report(replicates.cases(data.load([folder])))
    return c, findings.prepare(c, 0.1)


def test_eager_that_dominates_a_compiled_mode_is_the_recommended_configuration(tmp_path):
    """torch eager is faster in steady state than torch compiled and (first calls are 100
    steps cold) sooner too: every job's torch entry is the eager configuration, torch is
    named cheapest against a JAX three times slower, and the cheapest configuration never
    changes with N."""
    c, _ = _cases(tmp_path, {"torch": {("gpt", "forward", "eager"): 0.010, ("gpt", "forward", "compiled"): 0.014},
                             "jax": {("gpt", "forward", "eager"): 0.060, ("gpt", "forward", "compiled"): 0.030}})
    conf = jobs.configurations(c)
    for n in (jobs.SHORT, jobs.LONG):
        o = jobs.outcome(conf, jobs.Job("forward", n, "gpt"))
        best = o.best.set_index("framework")
        assert best.at["torch", "configuration"] == "torch eager"
        assert best.at["jax", "configuration"] == "jax compiled"
        assert (o.verdict, o.named) == (jobs.LEADER, ["torch"])
        # the cost is first call + N x step, from the case's own numbers
        r = conf[conf["configuration"] == "torch eager"].iloc[0]
        assert best.at["torch", "cost"] == pytest.approx(r["first_call_cold_s"] + n * r["median_s"])
        assert best.at["torch", "lo"] < best.at["torch", "cost"] < best.at["torch", "hi"]
    assert jobs.leader_changes(conf, jobs.Job("forward", 1, "gpt")) == [(1, "torch eager")]
    table = jobs.job_table(c)
    assert list(table["answer"]) == ["torch cheapest", "torch cheapest"]
    # torch compiled is dominated (slower and later): off the Pareto front, eager on it
    assert "torch eager" in set(jobs.pareto(c)["configuration"]) and "torch compiled" not in set(
        jobs.pareto(c)["configuration"])


def test_quick_report_says_tiny_presets_need_not_predict_the_default_ones(tmp_path):
    c, fam = _cases(tmp_path, {"torch": {("gpt", "forward", "eager"): 0.010}}, cold=1, warm=1)
    assert set(c["preset"]) == {"tiny"}
    first = choice.page_one(c, fam, None)[0]
    assert first[0] == "p" and "need not predict" in first[1]
    assert not any("need not predict" in str(b[1]) for b in choice.page_one(c.assign(preset="small"), fam, None))


def test_leader_change_is_where_the_costs_cross(tmp_path):
    """A compiled mode twice as fast whose first call costs more: the change of leader is the
    N where first call + N x step of the two configurations cross (within one count)."""
    c, _ = _cases(tmp_path, {"torch": {("gpt", "forward", "eager"): 0.020, ("gpt", "forward", "compiled"): 0.010}})
    conf = jobs.configurations(c)
    conf.loc[conf["mode"] == "compiled", "first_call_cold_s"] = 5.0     # compiling costs 5 s, eager 0.1 s
    conf.loc[conf["mode"] == "eager", "first_call_cold_s"] = 0.1
    e = conf[conf["mode"] == "eager"].iloc[0]
    k = conf[conf["mode"] == "compiled"].iloc[0]
    cross = (k["first_call_cold_s"] - e["first_call_cold_s"]) / (e["median_s"] - k["median_s"])
    ch = jobs.leader_changes(conf, jobs.Job("forward", 1, "gpt"))
    assert [x[1] for x in ch] == ["torch eager", "torch compiled"]
    assert 400 < cross < 600 and abs(ch[1][0] - math.ceil(cross)) <= 1


def test_a_three_way_tie_is_reported_as_a_tie_not_credited_to_the_first_listed(tmp_path):
    same = {("gpt", "forward", "compiled"): 0.010}
    c, _ = _cases(tmp_path, {"torch": same, "jax": same, "tensorflow": same})
    o = jobs.outcome(jobs.configurations(c), jobs.Job("forward", jobs.LONG, "gpt"))
    assert o.verdict == jobs.TIE
    assert sorted(o.named) == ["jax", "tensorflow", "torch"]
    assert o.sentence().startswith("tie: ")
    # the weighted appendix credits a tied concern to no framework
    rank, _ = findings.ranking(c, dict(findings.DEFAULT_WEIGHTS))
    sens = findings.sensitivity(rank)
    assert "coverage" not in " ".join(sens["leads on"])


def test_one_process_per_side_is_indicative(tmp_path):
    c, _ = _cases(tmp_path, {"torch": {("gpt", "forward", "compiled"): 0.010},
                             "jax": {("gpt", "forward", "compiled"): 0.030}}, cold=1, warm=1)
    o = jobs.outcome(jobs.configurations(c), jobs.Job("forward", 100, "gpt"))
    assert o.verdict == jobs.INDICATIVE and o.sentence().startswith("indicative (one process): torch")


def test_job_option_parses_and_refuses_bad_jobs_in_one_line(tmp_path, capsys):
    assert jobs.parse_job("train_step:5000") == jobs.Job("train_step", 5000)
    assert jobs.parse_job("gpt/generate:1,000") == jobs.Job("generate", 1000, "gpt")
    for bad in ("train_step", "train_step:0", "train_step:-5", ":5", "a/b/c:5"):
        with pytest.raises(FwbenchError, match="--job takes TASK:N"):
            jobs.parse_job(bad)
    simulated_processes(tmp_path / "in", "torch", {("gpt", "forward", "eager"): 0.01}, cold=1, warm=1)
    rc = cli.main(["report", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--job", "nope:5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == cli.EXIT_USAGE and len(err) == 1
    assert "no timed case of that task" in err[0] and "valid tasks: gpt/forward" in err[0]
    assert not (tmp_path / "out").exists()
    rc = cli.main(["report", str(tmp_path / "in"), "-o", str(tmp_path / "out2"), "--job", "x"])
    assert rc == cli.EXIT_USAGE and "--job takes" in capsys.readouterr().err


def test_the_readers_job_is_answered(tmp_path):
    c, _ = _cases(tmp_path, {"torch": {("gpt", "forward", "eager"): 0.010}})
    t = jobs.job_table(c, [jobs.parse_job("forward:5000")])
    assert list(t["job"]) == ["gpt forward: 5,000 calls"]
    assert t["torch"].iloc[0].startswith("torch eager: ")


def _claim1(c, fam) -> str:
    t = claims.table(c, fam).set_index("claim")
    return t.loc[claims.CLAIMS[0].text, "verdict"]


@pytest.mark.parametrize("compiled, verdict", [
    ({"forward": 0.005, "train_step": 0.005}, claims.SUPPORTED),          # 2x everywhere: reaches 1.4x, none slower
    ({"forward": 0.010, "train_step": 0.0101}, claims.NOT_SUPPORTED),     # 1.0x: no interval reaches 1.4x
    ({"forward": 0.005, "train_step": 0.020}, claims.MIXED),              # 2x on one, slower than eager on the other
])
def test_claim_verdicts_from_synthetic_data(tmp_path, compiled, verdict):
    med = {("gpt", t, "eager"): 0.010 for t in compiled} | {("gpt", t, "compiled"): x for t, x in compiled.items()}
    c, fam = _cases(tmp_path, {"torch": med})
    assert _claim1(c, fam) == verdict
    t = claims.table(c, fam)
    # the other claims' workloads (dynamic, derivatives, interop) did not run
    assert list(t["verdict"].iloc[1:]) == [claims.NOT_RUN] * 3
    assert t["source"].iloc[0].endswith("https://pytorch.org/get-started/pytorch-2.0/")


def test_claim_not_tested_without_its_workload(tmp_path):
    c, fam = _cases(tmp_path, {"jax": {("gpt", "forward", "compiled"): 0.01}})
    assert _claim1(c, fam) == claims.NOT_RUN

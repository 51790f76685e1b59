"""The choice per job and the claims answered by name (issue 28), on synthetic runs whose
answers are known from how they were built (tests/support/reports_fixtures.py)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from reports import sections
from reports.commands import cli
from reports.conclusions import findings, jobs, replicates
from reports.measures import data
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
        assert (o.verdict, o.named) == (jobs.LEADER, ["torch"]) and o.sentence() == "cheapest: torch"
        # the cost is first call + N x step, from the case's own numbers
        r = conf[conf["configuration"] == "torch eager"].iloc[0]
        assert best.at["torch", "cost"] == pytest.approx(r["first_call_cold_s"] + n * r["median_s"])
        assert best.at["torch", "lo"] < best.at["torch", "cost"] < best.at["torch", "hi"]
    assert [(x.n, x.configuration) for x in jobs.leader_changes(conf, jobs.Job("forward", 1, "gpt"))] == [
        (1, "torch eager")]
    table = jobs.job_table(c)
    assert list(table["answer"]) == ["cheapest: torch", "cheapest: torch"]
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
    from reports.measures import stats
    conf = jobs.configurations(c)
    for mode, first in (("compiled", 5.0), ("eager", 0.1)):      # compiling costs 5 s, eager 0.1 s
        i = conf.index[conf["mode"] == mode][0]
        e = conf.at[i, "est_first_cold"]                         # its processes' values, rescaled to that mean
        conf.at[i, "est_first_cold"] = stats.Est({k: v - e.mean + math.log(first) for k, v in e.logs.items()})
        conf.at[i, "first_call_cold_s"] = first
    e = conf[conf["mode"] == "eager"].iloc[0]
    k = conf[conf["mode"] == "compiled"].iloc[0]
    cross = (k["first_call_cold_s"] - e["first_call_cold_s"]) / (e["median_s"] - k["median_s"])
    ch = jobs.leader_changes(conf, jobs.Job("forward", 1, "gpt"))
    assert [x.configuration for x in ch] == ["torch eager", "torch compiled"]
    assert 400 < cross < 600 and abs(ch[1].n - math.ceil(cross)) <= 1
    # its 95% interval, from draws of both first calls and of the paired step ratio, holds the crossing
    assert ch[1].resolved and ch[1].lo <= ch[1].n <= ch[1].hi and ch[1].hi < 2 * cross
    assert f"from N = {ch[1].n:,} [" in jobs.changes_text(ch)


def test_three_equal_frameworks_are_not_resolved_not_credited_to_the_first_listed(tmp_path):
    same = {("gpt", "forward", "compiled"): 0.010}
    c, _ = _cases(tmp_path, {"torch": same, "jax": same, "tensorflow": same})
    o = jobs.outcome(jobs.configurations(c), jobs.Job("forward", jobs.LONG, "gpt"))
    assert o.verdict == jobs.UNRESOLVED
    assert sorted(o.named) == ["jax", "tensorflow", "torch"]
    assert o.sentence().startswith(f"cheapest: {o.named[0]}; not resolved against ")
    assert o.level == pytest.approx(1 - 0.05 / 3)     # the job's three pairs share 5%
    # the weighted appendix credits a tied concern to no framework
    rank, _ = findings.ranking(c, dict(findings.DEFAULT_WEIGHTS))
    sens = findings.sensitivity(rank)
    assert "coverage" not in " ".join(sens["leads on"])


def test_one_process_per_side_is_indicative(tmp_path):
    c, _ = _cases(tmp_path, {"torch": {("gpt", "forward", "compiled"): 0.010},
                             "jax": {("gpt", "forward", "compiled"): 0.030}}, cold=1, warm=1)
    o = jobs.outcome(jobs.configurations(c), jobs.Job("forward", 100, "gpt"))
    assert o.verdict == jobs.INDICATIVE and o.sentence().startswith("indicative (no interval): torch")


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


# ----------------------------------------------------------------------------- issue 40: the rules' edges


def _row(fw: str, mode: str, steps: dict[str, float], first: dict[str, float], startup: dict[str, float] | None = None,
         task: str = "forward"):
    """A configuration as jobs.configurations makes one, from per-process values chosen here."""
    import pandas as pd

    from reports.measures import stats
    e, f = stats.Est.of(steps), stats.Est.of(first)
    su = stats.Est.of(startup) if startup else None
    return {"workload": "gpt", "task": task, "framework": fw, "mode": mode, "strategy": None, "case": f"{fw}/{mode}",
            "configuration": f"{fw} {mode}", "median_s": e.value, "est": e, "n_processes": e.n,
            "first_call_cold_s": f.value, "est_first_cold": f, "n_first_cold": f.n, "items": float("nan"),
            "startup_s": su.value if su else 0.0, "est_startup": su, "requests": float("nan"),
            "stream_cold_s": float("nan"), "_": pd.NA}


def _frame(*rows):
    import pandas as pd
    return pd.DataFrame(list(rows)).drop(columns="_")


def _spread(centre: float, rel: float, n: int = 7) -> dict[str, float]:
    """n process values around `centre`, evenly spread over +-rel (a known, fixed spread)."""
    import numpy as np
    return {f"p{i}": centre * (1 + rel * x) for i, x in enumerate(np.linspace(-1, 1, n))}


def test_a_leader_wholly_below_one_framework_and_overlapping_another(tmp_path):
    """Issue 40: the old rule named every framework whose interval reached the leader's a tie,
    so a leader overlapping one framework and wholly below another listed both, and a cheaper
    framework of two behind an uncertain leader was lost. Pairwise: tensorflow (cheapest, a
    wide spread) is not resolved against jax, but is against torch; and behind a leader
    resolved against neither, jax wholly below torch is said."""
    first = _spread(1.0, 0.01, 2) | {"p2": 1.0}
    tf = _row("tensorflow", "compiled", _spread(0.0100, 0.05), first)
    jx = _row("jax", "compiled", _spread(0.0102, 0.005), first)
    th = _row("torch", "compiled", _spread(0.0130, 0.005), first)
    o = jobs.outcome(_frame(tf, jx, th), jobs.Job("forward", jobs.LONG, "gpt"))
    assert (o.verdict, o.named) == (jobs.UNRESOLVED, ["tensorflow", "jax"])
    assert o.sentence() == "cheapest: tensorflow; not resolved against jax"
    assert o.pair("tensorflow", "torch").resolved and o.pair("tensorflow", "torch").hi < 1
    # the leader uncertain against both: the pair behind it is still stated
    wide = _row("tensorflow", "compiled", _spread(0.0100, 0.40), first)
    o = jobs.outcome(_frame(wide, jx, th), jobs.Job("forward", jobs.LONG, "gpt"))
    assert o.named == ["tensorflow", "jax", "torch"]
    assert o.sentence() == "cheapest: tensorflow; not resolved against jax, torch; jax below torch"
    # a framework whose cost has no interval (two processes) is not tested, never a range
    two = _row("jax", "compiled", {"a": 0.0102, "b": 0.0103}, first)
    o = jobs.outcome(_frame(tf, two, th), jobs.Job("forward", jobs.LONG, "gpt"))
    assert o.best.set_index("framework").at["jax", "lo"] != o.best.set_index("framework").at["jax", "lo"]   # nan
    assert o.sentence() == "cheapest: tensorflow; not tested against jax (no interval)"


def test_a_first_call_of_two_processes_gives_no_range_and_the_pooled_one_an_interval(tmp_path):
    """A cold first call's interval is the one Appendix C prints (the spread pooled over the
    framework's cases of the mode), never the two processes' range: two cold processes a case
    give costs with intervals through the pool; a case the pool leaves out gives none."""
    c, _ = _cases(tmp_path, {"torch": {("gpt", t, m): 0.01 for t in ("forward", "train_step", "generate")
                                       for m in ("eager", "compiled")}}, cold=2, warm=5)
    conf = jobs.configurations(c)
    r = conf[conf["configuration"] == "torch compiled"].iloc[0]
    assert r["est_first_cold"].n == 2 and r["est_first_cold"].pool is not None and r["est_first_cold"].tested
    value, lo, hi = jobs.cost(r, 100)
    assert lo < value < hi
    lo1, hi1 = r["first_call_cold_lo_s"], r["first_call_cold_hi_s"]       # the pooled interval, as printed
    assert lo1 < r["first_call_cold_s"] < hi1 and (lo1, hi1) != r["est_first_cold"].range()
    from reports.measures import stats
    left_out = r.copy()
    left_out["est_first_cold"] = stats.Est(r["est_first_cold"].logs, pool=(math.nan, 0.0, 0))
    assert math.isnan(jobs.cost(left_out, 100)[1])


def test_the_compiler_start_up_is_inside_every_compiled_first_call_cost(tmp_path):
    """A fresh process pays its compiled mode's compiler start-up once (the runs'
    compiler_startup): it is added to every compiled configuration's cold and warm first call
    (eager pays none), and it changes the answer where it decides it: torch compiled is faster
    per call and its own first call shorter than jax's, so without the start-up it would be
    cheapest for 100 calls; 10 s of start-up makes jax cheapest there."""
    med = {("gpt", "forward", "eager"): 0.050, ("gpt", "forward", "compiled"): 0.010}
    simulated_processes(tmp_path, "torch", med, cold=3, warm=5, seed=1, compiler_startup={"torch/compiled": 10.0})
    simulated_processes(tmp_path, "jax", {("gpt", "forward", "compiled"): 0.012}, cold=3, warm=5, seed=2,
                        compiler_startup={"jax/compiled": 0.1})
    c = sections.judged_in_report(replicates.cases(data.load([tmp_path])))
    findings.prepare(c, 0.1)
    conf = jobs.configurations(c).set_index("configuration")
    assert conf.at["torch compiled", "startup_s"] == pytest.approx(10.0)
    assert conf.at["torch eager", "startup_s"] == 0.0 and conf.at["jax compiled", "startup_s"] == pytest.approx(0.1)
    for role in ("cold", "warm"):
        r = conf.loc["torch compiled"]
        assert jobs.cost(r, 100, role)[0] == pytest.approx(10.0 + r[f"first_call_{role}_s"] + 100 * r["median_s"])
        e = conf.loc["torch eager"]
        assert jobs.cost(e, 100, role)[0] == pytest.approx(e[f"first_call_{role}_s"] + 100 * e["median_s"])
    # without the start-up torch compiled (first call 100 steps = 1 s) beats jax (1.2 s); with it, jax wins
    t, j = conf.loc["torch compiled"], conf.loc["jax compiled"]
    assert t["first_call_cold_s"] + 100 * t["median_s"] < j["first_call_cold_s"] + 100 * j["median_s"]
    o = jobs.outcome(conf.reset_index(), jobs.Job("forward", 100, "gpt"))
    assert o.named[0] == "jax"
    # the Pareto front's first call is what a fresh process waits for: start-up included
    front = jobs.pareto(c).set_index("configuration")
    assert front.at["torch compiled", "first call"] == pytest.approx(10.0 + t["first_call_cold_s"])


def test_a_change_of_leader_whose_steps_do_not_differ_is_not_resolved():
    """Issue 40: break-even N was printed to the unit where the two slopes do not differ (95%
    intervals like [7,345, inf)). Two configurations whose steps overlap at 95% cross somewhere
    by the point estimates, but where is not resolved: the table says so instead of a count."""
    first_e, first_c = _spread(0.1, 0.05, 3), _spread(5.0, 0.05, 3)
    eager = _row("torch", "eager", _spread(0.0100, 0.08), first_e)
    comp = _row("torch", "compiled", {k: v * 0.99 for k, v in _spread(0.0100, 0.08).items()}, first_c)
    comp["est"].logs = {k: v + 0.03 * (-1) ** i for i, (k, v) in enumerate(comp["est"].logs.items())}   # unpaired noise
    conf = _frame(eager, comp)
    ch = jobs.leader_changes(conf, jobs.Job("forward", 1, "gpt"))
    assert [x.configuration for x in ch] == ["torch eager", "torch compiled"]
    assert ch[1].resolved is False and "not resolved" in jobs.changes_text(ch)
    assert f"{ch[1].n:,} [" not in jobs.changes_text(ch)

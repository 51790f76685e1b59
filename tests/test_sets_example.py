"""Issue 39 on the committed example (reports/examples/cpu-2core: `fwbench run --workload
gpt,diffusion` of sets on the 2-core AMD EPYC, stopped after 1 cold and 2 warm sets of the 6 then
planned, 50 minutes): what the run is, its controls' false alarms against the stated rate, and
the issue's allocation targets simulated at the run's own components for the default allocation
(reports.conclusions.variance's side plan: per comparison between frameworks, the SD of a cycle's
log ratio and of a set's mean beyond its cycles'). Targets out of reach on this machine are
strict xfails that say the measured figure."""
from __future__ import annotations

from pathlib import Path

import pytest
from scipy import stats as sps

import reports
from reports.conclusions import replicates, variance
from reports.measures import controls, stats, verdicts
from reports.rendering import figures, method, parts
from workloads import options

EXAMPLE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "cpu-2core"
SETS, CYCLES = options.SETS_COLD + options.SETS_WARM, options.RUN_CYCLES
TRIALS = 4000


@pytest.fixture(scope="module")
def records():
    return reports.load([EXAMPLE])


@pytest.fixture(scope="module")
def side(records):
    return variance.side_plan(records)


@pytest.fixture(scope="module")
def at5(side):
    return variance.simulate_side(side, SETS, CYCLES, 1.05, TRIALS)


@pytest.fixture(scope="module")
def at10(side):
    return variance.simulate_side(side, SETS, CYCLES, 1.10, TRIALS)


def test_the_example_is_a_run_of_sets(records, side):
    per_set = records.dropna(subset=["set"]).drop_duplicates("run_file").groupby("set")
    assert side.sets == 3 and side.cycles == CYCLES
    roles = records.drop_duplicates("set")["set_role"].value_counts().to_dict()
    assert roles == {"cold": 1, "warm": 2}
    assert all(len(g) == 4 and g["control"].sum() == 1 for _, g in per_set)     # 3 frameworks and the control
    assert set(records[records["control"] == True]["framework"]) == {"tensorflow"}      # noqa: E712
    assert len(side.between_frameworks()) == 20


def test_the_controls_false_alarms_are_consistent_with_the_stated_rate(records):
    """With no difference, each control is called faster or slower with probability 5%: the
    count seen must not be improbable under that rate (binomial, one-sided at 1%)."""
    ctrl = controls.aa(records)
    called, tested = controls.false_alarms(ctrl)
    assert tested >= 10
    assert sps.binom.sf(called - 1, tested, 0.05) > 0.01, (called, tested)


def test_the_report_states_the_controls_the_resolution_and_the_wall_time():
    md = (EXAMPLE / "report.md").read_text()
    assert "### Side by side: A/A controls and the position effect" in md
    assert "of wall time in all (cold sets" in md and "Position effect:" in md
    assert "Resolution" in md.split("## Summary")[0] or "resolve" in md.split("## Summary")[0]


def test_the_false_claims_and_coverage_hold_at_the_runs_components(at5):
    assert at5["false"] <= 0.05, at5
    assert 0.935 <= at5["coverage"] <= 0.965, at5


@pytest.mark.xfail(strict=True, reason="issue 39's bars are out of reach on this machine: a cycle's log ratio "
                   "between two configurations spreads 11.7% (median over the comparisons between frameworks; the "
                   "set's mean beyond it ~0), and a set costs 11.6 min outside its cycles (every case built, "
                   "compiled and timed in its own rounds again), so the default 6 sets of 10 cycles give +-5.0% "
                   "at 95%, +-11.6% at the Holm levels, 8% power at a true 5% and 45% at 10%, in about 100 min; "
                   "+-5.6% at the Holm levels takes 8 sets of 20 cycles, about 174 min "
                   "(docs/design/statistics.md, 'Allocation, side by side')")
def test_the_default_allocation_meets_the_issues_targets(side, at5, at10):
    assert at5["half_holm"] <= 0.05 and at5["half95"] <= 0.03, at5
    assert at5["power"] >= 0.80 and at10["power"] >= 0.95, (at5, at10)
    assert side.run_time(SETS, CYCLES) <= 45 * 60


def test_pairing_is_what_the_sets_buy(side):
    """At the run's own components the paired design narrows the Holm-level half-width with
    more sets (the t quantile) far more than with more cycles at few sets: the allocation's
    reason for six sets (options.SETS_COLD + SETS_WARM)."""
    few = variance.simulate_side(side, 3, 30, 1.05, 2000)
    more = variance.simulate_side(side, 6, 10, 1.05, 2000)
    assert more["half_holm"] < few["half_holm"] / 2, (few, more)


def test_one_set_reads_as_one_set(records):
    """The example's cold set alone, as `fwbench run --quick` measures (one set): the Replication
    lines and the figure captions speak of sets and of the noise between a set's blocks, and the
    whole example of sets too; a lone process's 'round-to-round' is not what its interval covers."""
    one = replicates.cases(records[records["set"] == 0])
    lines = " ".join(parts.stability_lines(one))
    assert "0 of 42 timed cases have two steady-state sets or more" in lines and "block-to-block noise only" in lines
    assert "round-to-round" not in lines and "processes" not in lines
    assert "interval over sets" in figures.caption("throughput", one)
    assert "paired over the sets" in figures.caption("speedup", one)
    a, b = one[one["status"] == "ok"].iloc[0], one[one["status"] == "ok"].iloc[1]
    j = verdicts.judge(a, b, stats.Family())
    assert stats.sentence(j, "a", "b", 0.1).startswith("a against b: not tested (fewer than 3 sets)")
    intro = " ".join(str(b[-1]) for b in parts.intro_blocks(one, stats.Family(), {}, stats.MARGIN))
    assert "single steady-state set (as `fwbench run --quick` measures), so no comparison between sets" in intro
    how = " ".join(method.method_lines(one, stats.Family()))
    assert "fewer than 3 sets on a side" in how and "t distribution over sets" in how
    assert "fewer than 3 processes" not in how and "t distribution over processes" not in how

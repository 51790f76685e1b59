"""Issue 30: the default allocation of `fwbench run` at variance components estimated from
measured runs (not assumed constants): simulated reports of a run's own family of
comparisons, the share of tasks where a true 20% difference between frameworks is called
"faster" (mean over the tasks' comparisons), any false faster/slower in reports of equal
speeds, and the coverage of their 95% intervals. Two runs: the one the defaults were chosen
on (BASIS, a 2-core Intel Xeon: power >= 80%, false claims <= 5%, coverage 93.5-96.5%, at
most 45 minutes at its process costs) and the committed example (a run of the defaults on a
2-core AMD EPYC whose state changes over seconds: false claims and coverage hold there too,
power does not reach 80%, a strict xfail that says what it would cost; docs/design/
statistics.md, "Where the spread between processes comes from"). The vectorised simulation
is checked against stats.Family on the same draws."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

import reports
from reports.conclusions import variance
from reports.measures import stats
from workloads import options

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "measurements" / "lone-cpu-2core"    # the default lone run (--cycles 0) before issue 39
BASIS = ROOT / "docs" / "measurements" / "allocation-basis-xeon"
TRIALS = 4000


@pytest.fixture(scope="module")
def plan() -> variance.Plan:
    return variance.plan(reports.load(BASIS), BASIS)


@pytest.fixture(scope="module")
def example_plan() -> variance.Plan:
    return variance.plan(reports.load(EXAMPLE), EXAMPLE)


@pytest.fixture(scope="module")
def example_defaults(example_plan) -> dict:
    """The defaults simulated at the committed example's components (shared by its two tests)."""
    return variance.simulate(example_plan, options.RUN_WARM, options.RUN_ROUNDS, trials=TRIALS, seed=30)


def test_the_plan_is_estimated_from_the_example(plan):
    """Each comparison's cases carry their own components; the op-by-op eager comparisons are
    a group of their own (issue 30: 27 such sat in the report's one family). Since issue 40 each
    task compares every pair of frameworks' fastest configurations (3 pairs of 6 tasks, 18; 40
    comparisons, 6 between frameworks, before)."""
    assert len(plan.comparisons) == 52 and len(plan.between_frameworks()) == 18
    groups = [c[3] for c in plan.comparisons]
    assert groups.count(stats.OP_BY_OP) == 24 and groups.count(stats.MAIN) == 28
    # the issue's diffusion-sample case: TensorFlow's warm medians spread 167-251 ms
    tf_sample = "diffusion/sample/tensorflow/compiled/-/small/cpu"
    assert plan.between[tf_sample] > 0.1 > float(np.median(list(plan.between.values())))
    assert {k for k in plan.wall} == {(f, r) for f in ("torch", "jax", "tensorflow") for r in ("cold", "warm")}


def test_the_default_allocation_meets_the_target(plan):
    s = variance.simulate(plan, options.RUN_WARM, options.RUN_ROUNDS, trials=TRIALS, seed=30)
    assert s["power"] >= 0.80, s
    assert s["false"] <= 0.05, s
    assert 0.935 <= s["coverage"] <= 0.965 and 0.935 <= s["case_coverage"] <= 0.965, s
    assert plan.run_time(options.RUN_COLD, options.RUN_WARM, options.RUN_ROUNDS) <= 45 * 60


def test_on_the_committed_example_false_claims_and_coverage_hold(example_plan, example_defaults):
    """The example's machine spreads more between processes (its state over seconds): the
    defaults' intervals and false-claim rate must hold there as well."""
    assert len(example_plan.between_frameworks()) == 19     # 18 pairs, and gpt train_step's compiled mode
    s = example_defaults
    assert s["false"] <= 0.05, s
    assert 0.935 <= s["coverage"] <= 0.965 and 0.935 <= s["case_coverage"] <= 0.965, s


@pytest.mark.xfail(strict=True, reason="issue 30's bar is not met on the committed example's machine (2-core "
                   "AMD EPYC): its state over seconds spreads a case 10% between processes (median; TensorFlow's "
                   "sampler 26%), and a true 20% is called faster in 35% of tasks; 80% takes 14 warm processes a "
                   "framework, about 74 minutes with one cold one (docs/design/statistics.md)")
def test_on_the_committed_example_the_defaults_meet_the_target(example_plan, example_defaults):
    s = example_defaults
    assert s["power"] >= 0.80, s
    assert example_plan.run_time(options.RUN_COLD, options.RUN_WARM, options.RUN_ROUNDS) <= 45 * 60


def test_the_allocation_before_issue_30_misses_it(plan):
    """The test can fail: 5 warm processes, as before, call a true 20% faster in about 70%."""
    assert variance.simulate(plan, 5, 6, trials=1000, seed=1, grouped=False, hsu=False)["power"] < 0.75


def test_vectorised_decisions_are_stats_family_decisions(plan):
    """The same simulated process medians through stats.Est, stats.ratio and a stats.Family
    grouped as the report groups it give the same decisions as variance.holm."""
    rng = np.random.default_rng(5)
    truth = np.array([c[5] for c in plan.comparisons])
    truth[plan.between_frameworks()] = -math.log(1.2)
    la, lb = variance.draw(plan, options.RUN_WARM, options.RUN_ROUNDS, truth, 25, rng)
    diff, se, df = variance.tests(plan, la, lb)
    rej, _ = variance.holm(2 * sps.t.sf(np.abs(diff) / se, df), [c[3] for c in plan.comparisons])
    groups = {c[0]: c[3] for c in plan.comparisons}
    for t in range(la.shape[0]):
        fam = stats.Family(group_of=lambda cases: groups[cases[0]])
        for _ in range(2):
            decided = []
            for k, c in enumerate(plan.comparisons):
                ta, tb = ("p", "p") if c[4] == "paired" else ("a", "b")     # paired: the same processes
                a = stats.Est.of({f"{ta}{i}": math.exp(x) for i, x in enumerate(la[t, k])})
                b = stats.Est.of({f"{tb}{i}": math.exp(x) for i, x in enumerate(lb[t, k])})
                decided.append(fam.judge(c[0], a, b, (c[0],)).decided)
            if not fam.closed:
                fam.close()
        assert decided == rej[t].tolist(), t


def test_a_folder_without_comparisons_is_one_line(tmp_path, capsys):
    assert variance.main(["--allocation", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "holds no comparison between two frameworks" in err

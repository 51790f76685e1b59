"""The report's statistics code paths, checked by simulation with fixed components
(tests.support.reports_fixtures: SB 4.3% between warm processes, SW 2.5% within a process per
round, cases of one process sharing 70% of their process effect) at the default allocation of
`fwbench run` (the allocation's power, error rate and coverage at the committed example's own
components: tests/test_allocation.py):

- a case's interval and a ratio's (Welch, paired) cover at least 93% (nominally 95%);
- two equally fast frameworks get a "faster"/"slower" anywhere in a report in at most 10% of
  simulated reports (Holm over the report's comparisons), also when their modes differ;
- one process tests nothing between processes: "not tested (fewer than 3 processes)";
and the verdicts' words, the roles of cold and warm processes, invalid first calls, derived
numbers' intervals and the flags."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import reports
from reports.conclusions import compare, findings, replicates
from reports.measures import stats
from reports.rendering import document, parts
from tests.support.reports_fixtures import (
    SB,
    SHARED,
    SW,
    process_files,
    record,
    result_json,
    simulated_processes,
    times,
    write,
)
from workloads import options

COLD, WARM, ROUNDS = options.RUN_COLD, options.RUN_WARM, options.RUN_ROUNDS
DECIDED_WORDS = re.compile(r" is (faster|slower) than ")


def _process_medians(rng: np.random.Generator, mu: float, n: int, tag: str, effects: np.ndarray | None = None,
                     rounds: int = ROUNDS) -> dict[str, float]:
    """n warm processes' medians of `rounds` rounds: log-normal process effects (SB) and rounds (SW)."""
    eff = rng.normal(0.0, SB, n) if effects is None else effects
    return {f"{tag}{i}": float(np.median(np.exp(mu + eff[i] + rng.normal(0.0, SW, rounds)))) for i in range(n)}


def _location(rounds: int = ROUNDS) -> float:
    """The true location the intervals aim at: exp(E log median of `rounds` log-normal rounds)."""
    rng = np.random.default_rng(0)
    return float(np.exp(np.mean(np.log(np.median(np.exp(rng.normal(0.0, SW, (200000, rounds))), axis=1)))))


def test_margin_and_error_rate():
    """The allocation itself is checked against the committed example's own variance
    components in tests/test_allocation.py."""
    assert stats.MARGIN == 0.10 and stats.ALPHA == pytest.approx(0.05)


def test_case_interval_covers_95_percent_at_the_default_allocation():
    rng, truth = np.random.default_rng(1), _location()
    covered = []
    for t in range(4000):
        lo, hi = stats.Est.of(_process_medians(rng, 0.0, WARM, f"p{t}|")).interval()
        covered.append(lo <= truth <= hi)
    assert np.mean(covered) >= 0.93, np.mean(covered)


def test_ratio_intervals_cover_95_percent_welch_and_paired():
    rng = np.random.default_rng(2)
    welch, paired = [], []
    for t in range(3000):
        a = stats.Est.of(_process_medians(rng, 0.0, WARM, f"a{t}|"))
        b = stats.Est.of(_process_medians(rng, math.log(1.3), WARM, f"b{t}|"))
        r = stats.ratio(b, a)
        assert r.kind == "welch"
        lo, hi = r.interval()
        welch.append(lo <= 1.3 <= hi)
        # two cases of the same processes: shared process effects (r = SHARED), paired
        common = rng.normal(0.0, SB * math.sqrt(SHARED), WARM)
        own = lambda: common + rng.normal(0.0, SB * math.sqrt(1 - SHARED), WARM)   # noqa: E731
        c = stats.Est.of(_process_medians(rng, 0.0, WARM, f"c{t}|", own()))
        d = stats.Est.of(_process_medians(rng, math.log(2.0), WARM, f"c{t}|", own()))
        r = stats.ratio(d, c)
        assert r.kind == "paired"
        lo, hi = r.interval()
        paired.append(lo <= 2.0 <= hi)
    assert np.mean(welch) >= 0.93 and np.mean(paired) >= 0.93, (np.mean(welch), np.mean(paired))


def _report(rng: np.random.Generator, effects: dict[str, tuple[float, float]], t: int) -> list[stats.Judgement]:
    """A report's comparisons between frameworks A and B over the cases of `effects`
    ({case: (B's time over A's, compiled over eager)}), each case in eager and compiled mode:
    per case and mode A against B, the fastest of each framework against each other, each
    compiled mode against its eager (paired). Holm over all, as the report does."""
    fam = stats.Family()
    ests = {}
    for f in ("A", "B"):
        common = rng.normal(0.0, SB * math.sqrt(SHARED), WARM)
        for case, (slow_b, compiled) in effects.items():
            for mode in ("eager", "compiled"):
                mu = math.log(slow_b if f == "B" else 1.0) + (math.log(compiled) if mode == "compiled" else 0.0)
                eff = common + rng.normal(0.0, SB * math.sqrt(1 - SHARED), WARM)
                ests[f, case, mode] = stats.Est.of(_process_medians(rng, mu, WARM, f"{f}{t}|", eff))
    out: list[stats.Judgement] = []
    for _ in range(2):
        out = []
        for case in effects:
            for mode in ("eager", "compiled"):
                out.append(fam.judge(f"{case}|{mode}", ests["A", case, mode], ests["B", case, mode]))
                if mode == "compiled":
                    for f in ("A", "B"):
                        out.append(fam.judge(f"{f}|{case}|vs eager", ests[f, case, "compiled"], ests[f, case, "eager"]))
        if not fam.closed:
            fam.close()
    return out


CASES = [f"task{i}" for i in range(12)]        # 12 cases x 2 modes: 48 comparisons, as a gpt + diffusion report


@pytest.mark.parametrize("compiled", [1.0, 0.5], ids=["modes-equal", "compiled-2x"])
def test_equal_frameworks_get_no_faster_or_slower_in_90_percent_of_reports(compiled):
    rng = np.random.default_rng(3)
    false = 0
    for t in range(400):
        js = _report(rng, {c: (1.0, compiled) for c in CASES}, t)
        between = [j for j in js if not j.key.endswith("vs eager")]
        within = [j for j in js if j.key.endswith("vs eager")]
        false += any(j.decided for j in between) or (compiled == 1.0 and any(j.decided for j in within))
        # Holm's intervals and its decisions agree: excludes 1 exactly when decided (an
        # equivalence shows its two one-sided tests' interval, at 1 - 2 alpha')
        assert all((j.lo > 1 or j.hi < 1) == j.decided for j in js if j.verdict != stats.EQUIVALENT)
    assert false / 400 <= 0.10, false / 400


def _sim_folder(tmp: Path, slow_b: float, seed: int, cold: int = COLD, warm: int = WARM) -> Path:
    medians = {(w, t, m): 0.01 * (2.0 if m == "eager" else 1.0) * (1 + 0.1 * i)
               for w, ts in (("gpt", ("forward", "train_step", "generate")),
                             ("diffusion", ("forward", "train_step", "sample")))
               for i, t in enumerate(ts) for m in ("eager", "compiled")}
    simulated_processes(tmp, "torch", medians, cold=cold, warm=warm, rounds=ROUNDS, seed=seed)
    simulated_processes(tmp, "jax", {k: v * slow_b for k, v in medians.items()}, cold=cold, warm=warm,
                        rounds=ROUNDS, seed=seed + 10_000)
    return tmp


def _between_frameworks(df) -> list[str]:
    """The report's sentences that compare torch with jax (findings, both workloads)."""
    verdict = re.compile(r"^[^:]+: (torch|jax) \w+ (is |and |against )")
    return [ln for lines in findings.findings(df).values() for ln in lines
            if verdict.match(ln) and "torch" in ln and "jax" in ln]


def test_end_to_end_equal_frameworks_state_no_difference(tmp_path):
    """Through result files, reports.load, replicates.cases and the findings, at the defaults."""
    said = 0
    for t in range(40):
        c = replicates.cases(reports.load(_sim_folder(tmp_path / str(t), 1.0, t)))
        lines = _between_frameworks(c)
        assert len(lines) == 18 and not any("not tested" in ln for ln in lines)
        said += any(DECIDED_WORDS.search(ln) for ln in lines)
    assert said <= 4, said                       # at most 10% of 40 reports


def test_end_to_end_a_20_percent_slower_framework_is_found(tmp_path):
    found = []
    for t in range(10):
        c = replicates.cases(reports.load(_sim_folder(tmp_path / str(t), 1.2, 100 + t)))
        found += [bool(re.search(r"torch \w+ is faster than jax", ln)) for ln in _between_frameworks(c)]
    assert np.mean(found) >= 0.80, np.mean(found)


def test_one_process_comparisons_are_not_tested(tmp_path):
    """`--quick`: one cold and one warm process per framework. No verdict between processes,
    none between a framework's modes either (one process: no interval over processes)."""
    c = replicates.cases(reports.load(_sim_folder(tmp_path, 1.5, 7, cold=1, warm=1)))
    fam = findings.prepare(c)
    assert fam.judged and all(j.verdict == stats.NOT_TESTED for j in fam.judged.values())
    lines = [ln for lines in findings.findings(c).values() for ln in lines]
    between = _between_frameworks(c)
    assert between and all("not tested (fewer than 3 processes)" in ln for ln in between)
    assert not any(DECIDED_WORDS.search(ln) for ln in lines)
    text = " ".join(str(b[1]) for b in document.build(c, {}, dict(findings.DEFAULT_WEIGHTS), []) if b[0] == "p")
    assert "Indicative only" in text
    t = compare.compare(tmp_path, tmp_path)
    assert set(t["verdict"]) == {stats.ONE_PROCESS}


def test_verdict_words_follow_the_interval_and_the_margin():
    m = 0.10
    assert stats.verdict(0.70, 0.85, m) == stats.FASTER_M          # whole interval below 1/1.1
    assert stats.verdict(0.88, 0.97, m) == stats.FASTER            # excludes 1, reaches inside the margin
    assert stats.verdict(0.95, 1.05, m) == stats.EQUIVALENT
    assert stats.verdict(0.85, 1.05, m) == stats.INCONCLUSIVE      # contains 1, reaches beyond 1/1.1
    assert stats.verdict(1.07, 1.32, m) == stats.SLOWER            # the "1.13x [1.07, 1.32]"
    assert stats.verdict(1.12, 1.40, m) == stats.SLOWER_M
    assert stats.verdict(math.nan, math.nan, m) == stats.NOT_TESTED
    for v in (stats.FASTER_M, stats.FASTER, stats.EQUIVALENT, stats.SLOWER, stats.SLOWER_M, stats.INCONCLUSIVE,
              stats.NOT_TESTED):
        assert "significant" not in stats.words(v, m)


def test_bounds_far_from_one_print_short():
    """An interval at df = 1 and a Holm level spans many decades: its bounds print with an
    exponent (a fixed-point bound ran to 300 digits and off the page)."""
    assert stats.fmt_x(1.314) == "1.31" and stats.fmt_x(0.05) == "0.05"
    assert stats.fmt_x(3.26e95) == "3.3e+95" and stats.fmt_x(2.1e-96) == "2.1e-96"
    assert stats.fmt_x(float("inf")) == "inf" and stats.fmt_x(0.0) == "0.00"
    assert stats.fmt_ratio(1.0, 1e-300, 1e300) == "1.00x [1.0e-300, 1.0e+300]"
    j = stats.Judgement(key="k", ratio=0.3, lo=1e-40, hi=9e200, level=0.9996, verdict=stats.INCONCLUSIVE, kind="welch")
    assert len(j.interval_text()) < 60


def test_times_print_in_a_unit_chosen_by_size():
    """Issue 41: '1.41e+03 ms', '495 us', '19416 s' for 5.4 h. One formatter for every report and the
    paper: \u00b5s, ms, s, minutes, hours by size, chosen after rounding, never an exponent; a bound takes
    its point's unit; counts and their nouns agree."""
    import re
    assert [stats.fmt_seconds(s) for s in (4.95e-4, 0.0034, 0.9996, 74.3, 1914.0, 19416.0)] == \
        ["495 \u00b5s", "3.4 ms", "1 s", "74.3 s", "31.9 min", "5.39 h"]
    assert stats.fmt_seconds(1409.7e-3) == "1.41 s" and stats.fmt_seconds(119.96) == "2 min"
    assert stats.fmt_time_ci(1914.0, 1760.0, 2078.0) == "31.9 min [29.3, 34.6]"
    assert stats.fmt_time_range(0.137, 0.130, 0.144) == "137 ms (range 130-144)"
    for s in np.geomspace(1e-7, 1e7, 400):
        text = stats.fmt_seconds(s) + stats.fmt_time_ci(s, s / 2, s * 2)
        assert not re.search(r"e[+-]\d\d|\bus\b", text), text
    assert stats.fmt_x(472.47) == "472" and stats.fmt_x(32.21) == "32.2" and stats.fmt_x(1.314) == "1.31"
    assert (stats.plural(1, "process"), stats.plural(7, "process"), stats.plural(0, "case")) == \
        ("1 process", "7 processes", "0 cases")


def test_no_report_text_says_no_significant_difference():
    src = "\n".join(p.read_text() for p in Path(reports.__file__).parent.glob("*.py"))
    assert "no significant" not in src.lower()


def test_two_process_comparisons_stay_out_of_the_family_and_print_no_interval():
    """Two processes on a side (df = 1): a 95% interval spans +-12.7 standard errors (issue 28:
    "137 ms [8.67e-07, 21607127537]"). Such a comparison is not tested, takes no Holm step from
    the testable ones, and its case shows the processes' min-max, never an interval."""
    fam = stats.Family()
    two_a, two_b = stats.Est.of({"a1": 1.0, "a2": 1.3}), stats.Est.of({"b1": 2.0, "b2": 2.1})
    three_a = stats.Est.of({"a1": 1.0, "a2": 1.01, "a3": 0.99})
    three_b = stats.Est.of({"b1": 2.0, "b2": 2.02, "b3": 1.98})
    for _ in range(2):
        j2, j2p, j3 = (fam.judge("two", two_b, two_a), fam.judge("two-paired", two_a, stats.Est.of({"a1": 2, "a2": 2})),
                       fam.judge("three", three_b, three_a))
        if not fam.closed:
            fam.close()
    assert fam.m == 1 and set(fam.pvalues) == {"three"}          # the 2-process ones take no Holm step
    assert j3.level == pytest.approx(0.95) and j3.decided
    for j in (j2, j2p):
        assert j.verdict == stats.NOT_TESTED and "[" not in j.interval_text() and "indicative" in j.interval_text()
    assert all(math.isnan(x) for x in two_a.interval()) and two_a.draws("x") is None
    assert stats.fmt_est(two_a) == "1.14 s (range 1-1.3)"
    assert "[" in stats.fmt_est(three_a) and "range" not in stats.fmt_est(three_a)


def test_level_labels_print_the_level_used():
    """A Holm level of 99.375% reads 99.375%, not '99%' (a reader who recomputes a 99% interval
    would find a contradiction)."""
    assert stats.level_text(0.95) == "95%" and stats.level_text(0.99375) == "99.375%"
    assert stats.level_text(1 - 0.05 / 119) == "99.958%" and stats.level_text(0.998) == "99.8%"
    assert float(stats.level_text(1 - 1e-7)[:-1]) < 100


def test_holm_levels_step_down():
    fam = stats.Family()
    a = stats.Est.of({"a1": 1.0, "a2": 1.01, "a3": 0.99})
    big = stats.Est.of({"b1": 2.0, "b2": 2.02, "b3": 1.98})
    same = stats.Est.of({"c1": 1.0, "c2": 1.03, "c3": 0.98})
    for _ in range(2):
        j1, j2 = fam.judge("big", big, a), fam.judge("same", same, a)
        if not fam.closed:
            fam.close()
    assert fam.m == 2 and j1.decided and not j2.decided
    assert j1.level == pytest.approx(1 - 0.05 / 2) and fam.levels["same"] == pytest.approx(1 - 0.05 / 1)
    # equivalence: two one-sided tests at the same alpha' = 0.05, the 90% interval inside +-10%
    assert j2.verdict == stats.EQUIVALENT and j2.level == pytest.approx(0.90)


def test_groups_share_alpha_and_a_finished_group_passes_its_share():
    """Comparisons against op-by-op eager modes are a Holm group of their own (20% of alpha);
    once all are stated, the other group tests at the full 5%; a group that cannot finish
    keeps the other at its 80% share."""
    groups = {"e1": stats.OP_BY_OP, "e2": stats.OP_BY_OP, "f1": stats.MAIN, "f2": stats.MAIN}
    levels, stops = stats.holm_levels({"e1": 1e-9, "e2": 1e-8, "f1": 0.015, "f2": 0.5}, groups, stats.GROUP_SHARES)
    assert levels["e1"] == pytest.approx(1 - 0.01 / 2) and levels["e2"] == pytest.approx(1 - 0.01)
    assert levels["f1"] == pytest.approx(1 - 0.05 / 2) and stops[stats.MAIN] == pytest.approx(1 - 0.05)
    levels, stops = stats.holm_levels({"e1": 1e-9, "e2": 0.3, "f1": 0.015, "f2": 0.5}, groups, stats.GROUP_SHARES)
    assert levels["f1"] == pytest.approx(1 - 0.04 / 2) and stops[stats.OP_BY_OP] == pytest.approx(1 - 0.01)


def test_steady_state_comes_from_warm_processes_only(tmp_path):
    """A cold process 50% slower moves neither the step nor its interval; its ratio is shown
    (from two cold processes without an interval: fewer than stats.MIN_TESTED)."""
    process_files(tmp_path, "torch", 0.01, [0.5, 0.5, 0.01, -0.01, 0.02, 0.0, -0.02], n=6, spread=0.01,
                  roles=["cold", "cold", "warm", "warm", "warm", "warm", "warm"])
    r = replicates.cases(reports.load(tmp_path)).iloc[0]
    assert r["n_processes"] == 5 and r["n_cold"] == 2 and r["n_warm"] == 5 and r["steady_from"] == "warm processes"
    assert r["median_s"] == pytest.approx(0.01, rel=0.02) and r["median_hi_s"] < 0.0105
    assert r["cold_over_warm"] == pytest.approx(1.5, rel=0.03) and math.isnan(r["cold_over_warm_lo"])


def test_first_calls_by_role_and_invalid_ones_left_out(tmp_path):
    process_files(tmp_path, "torch", 0.01, [0.0] * 5, n=6, first_call_s=(30.0, 5.0),
                  roles=["cold", "cold", "cold", "warm", "warm"], first_call_valid=[True, True, False, True, True],
                  first_calls=[30.0, 33.0, 0.14, 5.0, 5.5])
    r = replicates.cases(reports.load(tmp_path)).iloc[0]
    assert r["n_first_cold"] == 2 and r["first_call_invalid"] == 1
    assert r["first_call_cold_s"] == pytest.approx(math.sqrt(30.0 * 33.0))
    # two valid cold first calls of a single case: no df = 1 interval and nothing to pool
    # with, the table shows their values, not tested
    assert math.isnan(r["first_call_cold_lo_s"]) and math.isnan(r["compile_latency_lo_s"])
    assert r["first_call_warm_s"] == pytest.approx(math.sqrt(5.0 * 5.5))
    assert r["compile_latency_s"] == pytest.approx(r["first_call_cold_s"] - r["median_s"])
    ct = document.compile_table(replicates.cases(reports.load(tmp_path)))
    assert ct["invalid first calls"].iloc[0] == "1"
    assert ct["first call, cold"].iloc[0] == "30 s, 33 s (n=2, not tested)"


def test_an_old_record_whose_compiled_case_compiled_nothing_is_invalid(tmp_path):
    """The issue's case: torch's default compiled train step after a variant, 0 Dynamo graphs."""
    process_files(tmp_path, "torch", 0.14, [0.0, 0.01], n=6, first_call_s=(0.14, 0.13), compilations=0)
    r = replicates.cases(reports.load(tmp_path)).iloc[0]
    assert r["first_call_invalid"] == 2 and math.isnan(r["first_call_s"]) and math.isnan(r["compile_latency_s"])


def test_eager_modes_have_no_compile_latency(tmp_path):
    process_files(tmp_path, "jax", 0.01, [0.0, 0.01, -0.01], mode="eager", first_call_s=(0.5, 0.2))
    r = replicates.cases(reports.load(tmp_path)).iloc[0]
    assert math.isnan(r["compile_latency_s"]) and r["first_call_cold_s"] == 0.5


def test_break_even_has_an_interval_from_the_same_draws(tmp_path):
    for mode, med, first in (("eager", 0.020, 0.5), ("compiled", 0.010, 20.0)):
        simulated = {("gpt", "train_step", mode): med}
        simulated_processes(tmp_path / mode, "torch", simulated, seed=len(mode), cold=3)   # 3: an interval
    files = sorted((tmp_path / "eager").glob("*.json"))
    # one file per process holding both modes: merge the two simulations process by process
    import json
    for f in files:
        a, b = json.loads(f.read_text()), json.loads((tmp_path / "compiled" / f.name).read_text())
        a["benchmarks"] += b["benchmarks"]
        write(tmp_path / "both" / f.name, a)
    c = replicates.cases(reports.load(tmp_path / "both"))
    fam = findings.prepare(c)
    r = c[c["mode"] == "compiled"].iloc[0]
    n, lo, hi = findings.break_even(c, r, fam)
    assert r["vs_eager_verdict"].startswith("faster by at least") and lo <= n <= hi and math.isfinite(hi)
    assert (r["break_even_steps"], r["break_even_lo"], r["break_even_hi"]) == (n, lo, hi)


def test_a_claim_carried_by_one_process_is_flagged(tmp_path):
    """jax is 5% slower in four warm processes and 5% faster in the fifth: the fifth makes the
    pair 'equivalent'; without it jax is slower. The claim rests on one process: flagged."""
    warm = ["warm"] * 5
    process_files(tmp_path, "torch", 0.010, [0.0, 0.002, -0.002, 0.001, -0.001], n=6, spread=0.002, seed=1,
                  roles=warm)
    process_files(tmp_path, "jax", 0.010, [0.045, 0.05, 0.055, 0.05, -0.05], n=6, spread=0.002, seed=2,
                  run_id="r2", roles=warm)
    c = replicates.cases(reports.load(tmp_path))
    fam = findings.prepare(c)
    flagged = c[c["flags"].str.contains(stats.ONE_CARRIES, regex=False)]
    assert len(flagged) == 2 and set(flagged["framework"]) == {"torch", "jax"}
    assert any(stats.ONE_CARRIES in " ".join(v) for v in fam.key_flags.values())
    table = parts.flag_table(c, fam)
    assert table["flag"].tolist() == [stats.ONE_CARRIES] and table["cases"].tolist() == [2]


def test_a_process_that_timed_a_case_on_a_busy_machine_is_left_out_and_flagged(tmp_path):
    """Its median (here 10x the others') enters no estimate: the case rests on the other two."""
    process_files(tmp_path, "torch", 0.01, [0.0, 9.0, -0.01, 0.01], busy=[False, True, False, False],
                  other_cpu=[0.0, 1.4, 0.0, 0.0], steal_frac=[0.0] * 4, load_avg=[2.0, 3.5, 2.0, 2.0])
    c = replicates.cases(reports.load(tmp_path))
    findings.prepare(c)
    r = c.iloc[0]
    assert bool(r["busy"]) is False and r["busy_left_out"] == 1 and r["n_processes"] == 2
    assert r["median_s"] == pytest.approx(0.01, rel=0.03)           # the busy process's 0.1 s left out
    assert "1.40 CPUs" in r["busy_note"] and findings.BUSY in r["flags"]
    assert any("Machine state: 1 measurement of 1 case was timed while other processes" in ln
               for ln in parts.stability_lines(c))


def test_a_warm_spread_above_the_margin_is_warned_about(tmp_path):
    process_files(tmp_path, "torch", 0.01, [0.0, 0.3, -0.1, 0.2], roles=["warm"] * 4)
    c = replicates.cases(reports.load(tmp_path))
    assert c.attrs["warm_spread"] > 0.10
    assert any("WARNING" in ln and "10% margin" in ln for ln in parts.stability_lines(c, findings.prepare(c)))


def test_one_process_interval_says_so_and_is_the_order_statistic_interval(tmp_path):
    data = times(0.01, n=9, seed=4)
    write(tmp_path / "r.json", result_json([(record("torch", "forward", "eager"), data)]))
    r = replicates.cases(reports.load(tmp_path)).iloc[0]
    assert "one process" in r["interval_note"]
    lo, hi, cov = stats.order_interval(data)
    assert (r["median_lo_s"], r["median_hi_s"]) == (lo, hi) and cov >= 0.95


def test_median_interval_of_one_process_covers_95_percent_at_7_rounds():
    """The order-statistic interval at n = 7 covers exactly 1 - 2/128 = 98.4% under any
    continuous distribution."""
    rng = np.random.default_rng(11)
    x = np.sort(rng.lognormal(0.0, 0.5, (20000, 7)), axis=1)          # true median 1
    lo, hi, cov = stats.order_ranks(7)
    assert ((x[:, lo - 1] <= 1.0) & (1.0 <= x[:, hi - 1])).mean() >= 0.95 and cov >= 0.95
    assert stats.order_ranks(5) == (1, 5, 1 - 2 / 32)  # no 95% interval below 6 rounds: min-max, 93.75%


def test_ranking_has_no_compile_floor(tmp_path):
    """First calls of 0.2 s and 0.5 s are not both 'the best' (the old 1 s floor made them so)."""
    for fw, first in (("torch", 0.2), ("jax", 0.5)):
        write(tmp_path / f"{fw}.json", result_json([(record(fw, "forward", "compiled", first_call_s=first),
                                                     times(0.01, seed=len(fw)))], frameworks=[fw]))
    s = findings.scores(reports.load(tmp_path))
    assert s.loc["torch", "compile"] == 1.0 and s.loc["jax", "compile"] == pytest.approx(0.4)


def test_sensitivity_names_who_ranks_first_under_which_weights(tmp_path):
    from tests.support.reports_fixtures import plausible_run
    write(tmp_path / "torch.json", plausible_run("torch"))
    write(tmp_path / "jax.json", plausible_run("jax"))
    rank, _ = findings.ranking(reports.load(tmp_path), dict(findings.DEFAULT_WEIGHTS))
    sens = findings.sensitivity(rank)
    assert set(sens.index) == {"torch", "jax"} and sens["ranks first under"].between(0, 1).all()
    assert sens["ranks first under"].sum() >= 1.0                      # every weighting has a first
    lines = findings.deciding_sentences(sens)
    assert lines and ("every weighting" in lines[0] or "turns on" in lines[-1])
    dominated = rank.copy()
    dominated.loc["jax", ["throughput", "compile", "coverage"]] = 0.01
    assert findings.sensitivity(dominated).loc["torch", "ranks first under"] == 1.0


def test_the_40_percent_claim_counts_torch_compiled_only(tmp_path):
    """JAX compiled is 3x its op-by-op eager; torch compiled only 1.1x torch eager: the claim
    line counts torch's case alone and finds it unmet."""
    medians = {"torch": {"eager": 0.011, "compiled": 0.010}, "jax": {"eager": 0.030, "compiled": 0.010}}
    for fw, modes in medians.items():
        simulated_processes(tmp_path, fw, {("gpt", "forward", m): t for m, t in modes.items()}, seed=len(fw))
    lines = findings.findings(reports.load(tmp_path))["gpt"]
    claim = [ln for ln in lines if "40%" in ln and "claim" in ln]
    assert len(claim) == 1 and "0 of 1 torch compiled" in claim[0]


def test_a_variant_eager_mode_lacks_is_compared_with_the_default_eager(tmp_path):
    """torch's train-step recipes exist only in compiled mode: their speedup is over the
    eager case of the default strategy; a strategy eager mode has is compared with its own."""
    timed = [(record("torch", "train_step", "eager"), times(0.010, seed=1)),
             (record("torch", "train_step", "compiled"), times(0.008, seed=2)),
             (record("torch", "train_step", "compiled", strategy="compiled-adamw"), times(0.005, seed=3)),
             (record("torch", "train_step", "eager", strategy="bucketed"), times(0.020, seed=4)),
             (record("torch", "train_step", "compiled", strategy="bucketed"), times(0.010, seed=5))]
    c = replicates.cases(reports.load(write(tmp_path / "r.json", result_json(timed))))
    speed = {(m, s if isinstance(s, str) else None): v
             for m, s, v in zip(c["mode"], c["strategy"], c["speedup_vs_eager"])}
    assert speed[("compiled", "compiled-adamw")] == pytest.approx(2.0, rel=0.05)
    assert speed[("compiled", None)] == pytest.approx(1.25, rel=0.05)
    assert speed[("compiled", "bucketed")] == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("flags, speaks", [(["avx512f", "amx_bf16"], True), (["avx512f"], False), (None, False)])
def test_bf16_over_fp32_is_a_finding_only_where_the_cpu_has_bf16(tmp_path, flags, speaks):
    """bf16 at half fp32's time in the same processes: a verdict (faster by the margin) with
    its interval where the CPU multiplies bf16 natively; elsewhere the times and why no
    finding is stated. bf16 cases stay out of the framework comparisons and the choice."""
    from reports.measures import precision
    medians = {("gpt", t, m, p): (0.01 if p == "fp32" else 0.005) * (2 if m == "eager" else 1)
               for t in ("forward", "train_step") for m in ("eager", "compiled") for p in ("fp32", "bf16")}
    simulated_processes(tmp_path / "r", "torch", medians, cold=1, warm=4, seed=3, cpu_flags=flags)
    c = replicates.cases(reports.load(tmp_path / "r"))
    fam = findings.prepare(c)
    t = precision.table(c, fam).set_index("mode")
    assert set(t.index) == {"eager", "compiled"} and (t["tasks"] == 2).all()
    if speaks:
        assert t.loc["compiled", "verdict"] == "bf16 " + stats.words(stats.FASTER_M, fam.margin)
        text = t.loc["compiled", "bf16 / fp32 step time (geo. mean)"]
        assert text.startswith("ratio ") and abs(float(text.split()[1].rstrip("x")) - 0.5) < 0.05, text
    else:
        why = precision.why_silent(c)
        assert t.loc["compiled", "verdict"] == why
        assert ("emulated" in why) if flags else ("did not record" in why)
    assert len(precision.per_task(c)) == 4
    assert (c[c["precision"] == "bf16"]["speedup_vs_eager"].notna()).all()   # over bf16 eager, not fp32
    fp32 = c[c["precision"] == "fp32"].copy()
    fp32.attrs = dict(c.attrs)
    assert findings.scores(c).equals(findings.scores(fp32))           # the choice reads fp32 only

"""fwbench compare: verdicts from the round data."""
from __future__ import annotations

import pytest

from reports import cli, compare, stats
from tests.reports_fixtures import benchmark_entry, plausible_run, record, result_json, times, write


def _verdicts(t):
    return dict(zip(t["case"], t["verdict"]))


def test_injected_2x_slowdown_is_flagged_and_nothing_else(tmp_path):
    old = write(tmp_path / "old" / "torch.json", plausible_run("torch", seed=0))
    new_doc = plausible_run("torch", seed=1)              # fresh noise, same distributions
    slowed = new_doc["benchmarks"][0]                      # torch eager forward, twice as slow
    slowed_case = f"gpt/{slowed['params']['task']}/torch/{slowed['params']['mode']}/-/tiny/cpu"
    doubled = [2.0 * t for t in slowed["stats"]["data"]]
    new_doc["benchmarks"][0] = benchmark_entry(slowed["extra_info"], doubled)
    new = write(tmp_path / "new" / "torch.json", new_doc)
    t = compare.compare(old, new)
    v = _verdicts(t)
    assert v[slowed_case] == "slower"
    row = t[t["case"] == slowed_case].iloc[0]
    assert row["ratio"] == pytest.approx(2.0, rel=0.05) and row["ratio_lo"] > 1.5
    timed_others = [c for c, verdict in v.items() if c != slowed_case and "graph" not in c]
    assert timed_others and all(v[c] == "no significant change" for c in timed_others)
    assert all(v[c].startswith("not timed in either") for c in v if "/graph/" in c)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_two_runs_of_the_same_distribution_are_not_flagged(tmp_path, seed):
    old = write(tmp_path / "old.json", plausible_run("jax", seed=0))
    new = write(tmp_path / "new.json", plausible_run("jax", seed=seed))
    t = compare.compare(old, new)
    timed = t[t["ratio"].notna()]
    assert len(timed) == 6 and (timed["verdict"] == "no significant change").all()


def test_the_same_file_against_itself_is_no_change(tmp_path):
    f = write(tmp_path / "a.json", plausible_run("torch"))
    t = compare.compare(f, f)
    timed = t[t["ratio"].notna()]
    assert (timed["ratio"] == 1.0).all() and (timed["verdict"] == "no significant change").all()


def test_faster_status_changes_and_unmatched_cases(tmp_path):
    old = write(tmp_path / "old.json", result_json([
        (record("torch", "forward", "eager"), times(0.02, seed=1)),
        (record("torch", "train_step", "eager"), times(0.05, seed=2))],
        [record("torch", "generate", "compiled", status="failed", reason="boom")]))
    new = write(tmp_path / "new.json", result_json([
        (record("torch", "forward", "eager"), times(0.01, seed=3)),
        (record("torch", "generate", "compiled"), times(0.03, seed=4)),
        (record("torch", "generate", "eager"), times(0.03, seed=5))]))
    v = _verdicts(compare.compare(old, new))
    assert v["gpt/forward/torch/eager/-/tiny/cpu"] == "faster"
    assert v["gpt/generate/torch/compiled/-/tiny/cpu"] == "status failed -> ok"
    assert v["gpt/train_step/torch/eager/-/tiny/cpu"] == "only in OLD (ok)"
    assert v["gpt/generate/torch/eager/-/tiny/cpu"] == "only in NEW (ok)"


def test_verdict_rule():
    assert stats.verdict(1.5, 1.3, 1.7) == "slower"
    assert stats.verdict(1.05, 1.02, 1.08) == "no significant change"     # real but below the minimum effect
    assert stats.verdict(1.5, 0.9, 2.0) == "no significant change"       # interval includes 1
    assert stats.verdict(0.5, 0.45, 0.55) == "faster"
    assert stats.verdict(1.05, 1.02, 1.08, min_effect=0.01) == "slower"


def test_cli_compare_prints_table_and_exits_0(tmp_path, capsys):
    old = write(tmp_path / "old.json", plausible_run("torch", seed=0))
    new = write(tmp_path / "new.json", plausible_run("torch", seed=0, slow=2.0))
    rc = cli.main(["compare", str(old), str(new), "--csv", str(tmp_path / "c.csv")])
    out = capsys.readouterr().out
    assert rc == 0 and "6 slower" in out and "new/old [95% CI]" in out
    assert (tmp_path / "c.csv").read_text().startswith("case,old_median_s")

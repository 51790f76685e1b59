"""fwbench compare: the report's verdicts between two runs (warm processes, Welch intervals,
one error rate over the table)."""
from __future__ import annotations

import json

import pytest

from reports.commands import cli
from reports.conclusions import compare
from reports.measures import stats
from tests.support.reports_fixtures import (
    benchmark_entry,
    plausible_processes,
    plausible_run,
    record,
    result_json,
    simulated_processes,
    write,
)

SLOWER, FASTER = stats.words(stats.SLOWER_M, stats.MARGIN), stats.words(stats.FASTER_M, stats.MARGIN)


def _verdicts(t):
    return dict(zip(t["case"], t["verdict"]))


def test_injected_2x_slowdown_is_flagged_and_nothing_else(tmp_path):
    old = plausible_processes(tmp_path / "old", "torch", seed=0)
    new = plausible_processes(tmp_path / "new", "torch", seed=1)           # fresh noise, same distributions
    slowed_case = "gpt/forward/torch/eager/-/tiny/cpu"
    for f in new.glob("*.json"):                                           # torch eager forward, twice as slow
        doc = json.loads(f.read_text())
        for i, b in enumerate(doc["benchmarks"]):
            if b["params"]["task"] == "forward" and b["params"]["mode"] == "eager":
                doc["benchmarks"][i] = benchmark_entry(b["extra_info"], [2.0 * t for t in b["stats"]["data"]])
        write(f, doc)
    t = compare.compare(old, new)
    v = _verdicts(t)
    assert v[slowed_case] == SLOWER
    row = t[t["case"] == slowed_case].iloc[0]
    assert row["ratio"] == pytest.approx(2.0, rel=0.1) and row["ratio_lo"] > 1.5 and row["level"] > 0.95
    others = [c for c in v if c != slowed_case]
    assert len(others) == 5 and not any(v[c].startswith(("slower", "faster")) for c in others)
    assert compare.slower(t) == 1


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_two_runs_of_the_same_distribution_are_not_flagged(tmp_path, seed):
    old = plausible_processes(tmp_path / "old", "jax", seed=0)
    new = plausible_processes(tmp_path / "new", "jax", seed=seed)
    t = compare.compare(old, new)
    timed = t[t["ratio"].notna()]
    assert len(timed) == 6 and not timed["verdict"].str.startswith(("slower", "faster")).any()
    assert t.attrs["comparisons"] == 6


def test_the_same_folder_against_itself_is_no_change(tmp_path):
    f = plausible_processes(tmp_path / "a", "torch")
    t = compare.compare(f, f)
    timed = t[t["ratio"].notna()]
    assert timed["ratio"].tolist() == pytest.approx([1.0] * 6)
    assert timed["verdict"].isin([stats.words(v, stats.MARGIN) for v in (stats.EQUIVALENT, stats.INCONCLUSIVE)]).all()


def test_faster_status_changes_and_unmatched_cases(tmp_path):
    simulated_processes(tmp_path / "old", "torch", {("gpt", "forward", "eager"): 0.02,
                                                    ("gpt", "train_step", "eager"): 0.05}, seed=1)
    write(tmp_path / "old" / "failed.json", result_json(
        [], [record("torch", "generate", "compiled", status="failed", reason="boom")]))
    simulated_processes(tmp_path / "new", "torch", {("gpt", "forward", "eager"): 0.01,
                                                    ("gpt", "generate", "compiled"): 0.03,
                                                    ("gpt", "generate", "eager"): 0.03}, seed=2)
    v = _verdicts(compare.compare(tmp_path / "old", tmp_path / "new"))
    assert v["gpt/forward/torch/eager/-/tiny/cpu"] == FASTER
    assert v["gpt/generate/torch/compiled/-/tiny/cpu"] == "status failed -> ok"
    assert v["gpt/train_step/torch/eager/-/tiny/cpu"] == "only in OLD (ok)"
    assert v["gpt/generate/torch/eager/-/tiny/cpu"] == "only in NEW (ok)"


def test_one_process_on_a_side_is_not_tested(tmp_path):
    old = write(tmp_path / "old.json", plausible_run("torch", seed=0))
    new = write(tmp_path / "new.json", plausible_run("torch", seed=1, slow=2.0))
    t = compare.compare(old, new)
    assert set(t.loc[t["ratio"].notna(), "verdict"]) == {stats.ONE_PROCESS} and compare.slower(t) == 0


def test_cli_compare_prints_table_and_exits_0(tmp_path, capsys):
    old = plausible_processes(tmp_path / "old", "torch", seed=0)
    new = plausible_processes(tmp_path / "new", "torch", seed=0, slow=2.0)
    rc = cli.main(["compare", str(old), str(new), "--csv", str(tmp_path / "c.csv"), "--margin", "0.2"])
    out = capsys.readouterr().out
    assert rc == 0 and "6 slower by at least the 20% margin" in out and "new/old [interval]" in out
    assert "6 comparisons share a 5% chance" in out
    assert (tmp_path / "c.csv").read_text().startswith("case,old_median_s")


@pytest.mark.parametrize("bad", ["0", "1", "-0.1", "nan", "ten"])
def test_a_bad_margin_is_one_line(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as e:
        cli.main(["compare", str(tmp_path), str(tmp_path), "--margin", bad])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--margin" in err and "0.10 = 10%" in err and len(err.strip().splitlines()) == 1

"""reports.load: validation of result files, the tidy frame and its derived columns."""
from __future__ import annotations

import math

import pytest

import reports
from reports.measures import data, stats
from tests.support.reports_fixtures import plausible_run, record, result_json, times, write
from workloads.base import FwbenchError


def exact_run(path, eager=(0.1, 0.010), compiled=(2.0, 0.004), gemm=1e11):
    """torch forward eager and compiled with constant round times, so medians are exact."""
    e = record("torch", "forward", "eager", first_call_s=eager[0])
    c = record("torch", "forward", "compiled", first_call_s=compiled[0])
    return write(path, result_json([(e, [eager[1]] * 9), (c, [compiled[1]] * 9)], gemm_flops=gemm))


def test_load_rows_columns_and_order(tmp_path):
    write(tmp_path / "torch.json", plausible_run("torch"))
    write(tmp_path / "jax.json", plausible_run("jax"))
    df = reports.load([tmp_path])
    assert df.attrs["problems"] == []
    assert len(df) == 18                    # 6 timed + 3 unsupported per framework
    assert set(df["status"]) == {"ok", "unsupported"}
    for col in ("median_s", "median_lo_s", "throughput", "utilisation", "speedup_vs_eager",
                "compile_latency_s", "break_even_steps", "gemm_flops", "run_file", "times"):
        assert col in df.columns
    assert list(df["framework"].unique()) == ["torch", "jax"]      # known order, not alphabetical
    first = df[(df["framework"] == "torch") & (df["task"] == "forward")]
    assert list(first["mode"]) == ["eager", "graph", "compiled"]
    assert df.loc[df["status"] == "unsupported", "median_s"].isna().all()


def test_derived_columns_by_hand(tmp_path):
    df = reports.load(exact_run(tmp_path / "r.json"))
    e = df[df["mode"] == "eager"].iloc[0]
    c = df[df["mode"] == "compiled"].iloc[0]
    assert c["median_s"] == pytest.approx(0.004)
    assert c["throughput"] == pytest.approx(256 / 0.004)                 # items / median
    assert c["utilisation"] == pytest.approx(1e9 / 0.004 / 1e11)         # flops / median / gemm
    assert c["speedup_vs_eager"] == pytest.approx(0.010 / 0.004)
    assert c["compile_latency_s"] == pytest.approx(2.0 - 0.004)          # first call - the same mode's step
    # first n with 2.0 + (n-1)*0.004 < 0.1 + (n-1)*0.010: (n-1) > 316.67, so n = 318
    assert c["break_even_steps"] == 318
    assert 2.0 + 317 * 0.004 < 0.1 + 317 * 0.010 and not 2.0 + 316 * 0.004 < 0.1 + 316 * 0.010
    assert e["speedup_vs_eager"] == 1.0 and e["compile_latency_s"] == pytest.approx(0.1 - 0.010)
    # constant rounds: the order-statistic interval collapses onto the median
    assert c["median_lo_s"] == pytest.approx(0.004) and c["median_hi_s"] == pytest.approx(0.004)


def test_runs_on_one_machine_share_the_best_gemm_rate(tmp_path):
    """Each framework's process measures the GEMM rate; a busy moment lowers one of them.
    Utilisation divides by the best of the runs with the same set-up, and only those."""
    a = exact_run(tmp_path / "a.json", gemm=2e11)
    b = write(tmp_path / "b.json", result_json([(record("jax", "forward", "eager"), [0.010] * 9)],
                                               frameworks=("jax",), gemm_flops=1e11))
    other = write(tmp_path / "c.json", result_json([(record("tensorflow", "forward", "eager", threads=1), [0.010] * 9)],
                                                   frameworks=("tensorflow",), gemm_flops=1e11, threads=1))
    df = reports.load([a, b, other]).set_index("framework")
    assert df.loc["jax", "run_gemm_flops"] == 1e11 and df.loc["jax", "gemm_flops"] == 2e11
    assert df.loc["jax", "utilisation"] == pytest.approx(1e9 / 0.010 / 2e11)
    assert df.loc["tensorflow", "gemm_flops"] == 1e11                     # another set-up: its own
    assert (df.loc["torch", "gemm_flops"] == 2e11).all()


def test_break_even_edge_cases():
    assert data.break_even(5.0, 0.02, 0.1, 0.01) == math.inf       # compiled step slower: never
    assert data.break_even(0.05, 0.005, 0.1, 0.01) == 1.0          # cheaper first call and faster steps
    assert data.break_even(1.0, 0.5, 1.0, 1.0) == 2.0              # equal first call: ahead from step 2


def test_speedup_pairs_within_the_same_run_file(tmp_path):
    a = exact_run(tmp_path / "a.json", eager=(0.1, 0.010), compiled=(2.0, 0.005))
    b = write(tmp_path / "b.json", result_json([(record("torch", "forward", "compiled", preset="small"),
                                                 [0.001] * 5)]))
    df = reports.load([a, b])
    lone = df[df["run_file"] == "b.json"].iloc[0]
    assert math.isnan(lone["speedup_vs_eager"])            # no eager in its own run (and another preset)
    compiled = df[(df["run_file"] == "a.json") & (df["mode"] == "compiled")]
    assert compiled["speedup_vs_eager"].iloc[0] == pytest.approx(2.0)


def test_one_process_speedup_interval_is_from_its_rounds():
    x, y = times(0.01, n=25, spread=0.1, seed=1), times(0.02, n=25, spread=0.1, seed=2)
    lo, hi = stats.rounds_ratio(y, x)
    assert lo < 2.0 < hi and (lo, hi) == stats.rounds_ratio(y, x)
    assert all(math.isnan(v) for v in stats.rounds_ratio(None, x))


def test_load_twice_gives_identical_intervals(tmp_path):
    write(tmp_path / "jax.json", plausible_run("jax"))
    a, b = reports.load(tmp_path), reports.load(tmp_path)
    cols = ["median_lo_s", "median_hi_s", "speedup_lo", "speedup_hi"]
    assert a[cols].equals(b[cols])


def _one_problem(df, path, phrase):
    probs = [p for p in df.attrs["problems"] if str(path) in p]
    assert len(probs) == 1, df.attrs["problems"]
    assert phrase in probs[0] and "\n" not in probs[0]


def test_bad_inputs_each_give_one_line_and_valid_files_still_load(tmp_path):
    good = write(tmp_path / "good" / "torch.json", plausible_run("torch"))
    malformed = write(tmp_path / "bad" / "malformed.json", '{"benchmarks": [')
    foreign_doc = result_json([])
    del foreign_doc["machine_info"]["fwbench"], foreign_doc["fwbench"]
    foreign_doc["benchmarks"] = [{"group": None, "name": "test_sort", "fullname": "t.py::test_sort", "params": None,
                                  "param": None, "extra_info": {}, "options": {},
                                  "stats": {"min": 1.0, "max": 1.0, "mean": 1.0, "stddev": 0, "rounds": 1,
                                            "median": 1.0, "iqr": 0, "data": [1.0]}}]
    foreign = write(tmp_path / "bad" / "foreign.json", foreign_doc)
    broken = plausible_run("jax")
    del broken["benchmarks"][0]["extra_info"]["flops"]
    partly = write(tmp_path / "bad" / "partly.json", broken)
    not_pb = write(tmp_path / "bad" / "list.json", "[1, 2]")
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    nowhere = tmp_path / "nowhere.json"
    df = reports.load([good, tmp_path / "bad", empty_dir, nowhere])
    _one_problem(df, malformed, "malformed JSON")
    _one_problem(df, foreign, "no fwbench records")
    _one_problem(df, partly, "missing field(s) flops")
    _one_problem(df, not_pb, "not a pytest-benchmark JSON")
    _one_problem(df, empty_dir, "folder has no .json result files")
    _one_problem(df, nowhere, "no such file or folder")
    assert len(df.attrs["problems"]) == 6
    # the valid file and the valid records of the partly broken one are all there
    assert set(df["run_file"]) == {"torch.json", "partly.json"}
    assert len(df[df["run_file"] == "partly.json"]) == 8


def test_strict_raises_the_first_problem(tmp_path):
    bad = write(tmp_path / "bad.json", "not json")
    with pytest.raises(FwbenchError, match="malformed JSON"):
        reports.load(bad, strict=True)


def test_empty_input_gives_empty_frame_with_columns(tmp_path):
    df = reports.load([tmp_path / "nothing"])
    assert df.empty and "median_s" in df.columns and len(df.attrs["problems"]) == 1


def test_missing_frameworks_are_reported(tmp_path):
    write(tmp_path / "torch.json", plausible_run("torch", missing={"tensorflow": "tensorflow is not installed"}))
    df = reports.load(tmp_path)
    assert data.missing_frameworks(df) == {"tensorflow": "tensorflow is not installed"}


def test_runner_knows_the_registry_frameworks():
    import frameworks
    from workloads.case import FRAMEWORKS
    assert FRAMEWORKS == frameworks.names()


def test_one_gpu_is_one_device_and_cases_never_reached_leave_coverage(tmp_path):
    """torch names the GPU cuda, JAX gpu: one device for the report; a case whose process
    ended before it (runner's not_reached) is unknown, not a failure of the framework."""
    from reports.conclusions import findings, replicates, summary
    from workloads.record import not_reached
    gpu = lambda rec: {**rec, "device": "gpu" if rec["framework"] == "jax" else "cuda"}  # noqa: E731
    torch_doc = result_json([(gpu(record("torch", t, m)), times(0.01)) for t in ("forward", "train_step")
                             for m in ("eager", "compiled")], frameworks=("torch",), device="cuda")
    jax_doc = result_json([(gpu(record("jax", "forward", m)), times(0.01)) for m in ("eager", "compiled")],
                          not_run=[gpu(record("jax", "train_step", m, status="failed", device="cuda",
                                              reason=not_reached("jax", "timed out after 85 s (--timeout-s)")))
                                   for m in ("eager", "compiled")], frameworks=("jax",), device="cuda")
    write(tmp_path / "torch.json", torch_doc)
    write(tmp_path / "jax.json", jax_doc)
    df = reports.load([tmp_path])
    assert set(df["device"]) == {"cuda"}
    c = replicates.cases(df)
    table = summary.framework_table(c)
    assert set(table.loc[table["framework"] == "jax", "pass rate"]) == {"1/1 (1 not reached)"}
    assert findings.scores(c).at["jax", "coverage"] == 1.0
    # a case that ran and failed still counts against the framework
    jax_doc["fwbench"]["records"][0]["reason"] = "RuntimeError: something broke"
    write(tmp_path / "jax.json", jax_doc)
    c = replicates.cases(reports.load([tmp_path]))
    assert findings.scores(c).at["jax", "coverage"] < 1.0


def test_a_case_a_later_process_never_reached_keeps_its_measurement(tmp_path):
    """The runner's placeholder for a case its process never started (shape n/a, no matmul
    precision) joins the measured configuration instead of replacing it as the newest."""
    from reports.conclusions import replicates
    from workloads.record import not_reached
    write(tmp_path / "jax-0.json", result_json([(record("jax", "forward", "compiled"), times(0.01))],
                                               frameworks=("jax",), date="2025-01-01T00:00:00+00:00"))
    blank = record("jax", "forward", "compiled", status="failed", shape="n/a", matmul_precision=None,
                   reason=not_reached("jax", "timed out after 85 s (--timeout-s)"))
    write(tmp_path / "jax-1.json", result_json([], not_run=[blank], frameworks=("jax",),
                                               date="2025-01-01T00:10:00+00:00"))
    c = replicates.cases(reports.load([tmp_path]))
    row = c[c["mode"] == "compiled"].iloc[0]
    assert row["status"] == "ok" and math.isclose(row["median_s"], 0.01, rel_tol=0.05)
    assert not any("another configuration" in n for n in c.attrs["notes"])

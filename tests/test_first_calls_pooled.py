"""Issue 30 (3): cold first calls with usable intervals. The spread of the cold processes'
first calls is pooled over the cases of one framework and mode (stats.pooled; a case whose
own spread departs from the others' is left out and not tested), so two cold processes a
case give a t interval with the pooled degrees of freedom; an interval wider than hi/lo = 3
is not printed: the processes' values and "not tested" are."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import reports
from reports.conclusions import replicates
from reports.measures import stats
from reports.rendering import document

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "measurements" / "lone-cpu-2core"   # the lone design
INTERVAL = re.compile(r"^[0-9.]+ (\u00b5s|ms|s|min|h) \[([0-9.]+), ([0-9.]+)\] "
                      r"\(n=(\d+); spread pooled over \d+ cases, df \d+\)$")
VALUES = re.compile(r"^([0-9.]+ (\u00b5s|ms|s|min|h)(, )?)+ \(n=(\d+), not tested\)$")


@pytest.fixture(scope="module")
def cases():
    return replicates.cases(reports.load(EXAMPLE))


def test_every_printed_cold_first_call_interval_is_usable(cases):
    shown = document.compile_table(cases)["first call, cold"]
    with_interval = 0
    for text in shown[shown != "-"]:
        m = INTERVAL.match(text)
        if m:
            lo, hi = float(m.group(2)), float(m.group(3))
            assert hi / lo <= replicates.MAX_FIRST_RATIO, text
            with_interval += 1
        else:
            v = VALUES.match(text)
            assert v, text
            assert text.split(" (n=")[0].count(",") == int(v.group(4)) - 1, text     # every process's value
    # the example's two cold processes a case: nearly every case has its interval now (issue
    # 30: before, n = 2 gave t(1) = 12.7 and hi/lo up to 8e5, then only the range)
    assert with_interval >= 40, with_interval
    # torch's compiled gpt forward paid the compiler start-up in one of its processes in the
    # example before issue 30 (12.3 s against 4.21 s): its spread departed from the other torch
    # compiled cases', so it was not tested. With the start-up measured apart it is pooled.
    gf = cases[(cases["case"] == "gpt/forward/torch/compiled/-/small/cpu")].iloc[0]
    assert gf["est_first_cold"].tested and math.isfinite(gf["first_call_cold_lo_s"])


def test_pooled_spread_is_the_usual_pooled_variance():
    a, b, c = (stats.Est.of({"p1": x, "p2": y}) for x, y in ((1.0, 1.1), (2.0, 2.1), (5.0, 5.4)))
    sd, df, out = stats.pooled([a, b, c])
    d = [math.log(1.1), math.log(2.1 / 2.0), math.log(5.4 / 5.0)]
    assert out == set() and df == 3 and sd == pytest.approx(math.sqrt(sum(x * x / 2 for x in d) / 3))
    wild = stats.Est.of({"p1": 4.2, "p2": 12.3})
    same = [stats.Est.of({"p1": 1.0 * k, "p2": 1.01 * k}) for k in range(1, 9)]
    assert stats.pooled([*same, wild])[2] == {8}


def _groups(cases) -> list[tuple[float, int]]:
    """(pooled log SD, cases) of each framework and mode of the example."""
    out = []
    for _, g in cases.groupby(["framework", "mode"]):
        ests = [e for e in g["est_first_cold"] if isinstance(e, stats.Est) and e.n >= 2]
        if len(ests) >= 2:
            sd, _, _ = stats.pooled([stats.Est(e.logs) for e in ests])
            out.append((sd, len(ests)))
    return out


def test_pooled_intervals_cover_95_percent_at_the_example_spreads(cases):
    """Two cold processes per case, each group's cases at the example's pooled spread: the
    printed intervals hold the true first call in 93.5-96.5% of cases."""
    rng = np.random.default_rng(3)
    hit, printed, total = 0, 0, 0
    for sd, k in _groups(cases):
        for t in range(300):
            rows = [{"framework": "f", "mode": "eager", "device": "cpu", "preset": "p", "first_call_s": math.nan,
                     "est_first_cold": stats.Est({f"c{t}.{i}.0": x0, f"c{t}.{i}.1": x1})}
                    for i, (x0, x1) in enumerate(rng.normal(0.0, sd, (k, 2)))]
            replicates._pool_first_cold(rows)
            for r in rows:
                total += 1
                if math.isfinite(r["first_call_cold_lo_s"]):
                    printed += 1
                    hit += r["first_call_cold_lo_s"] <= 1.0 <= r["first_call_cold_hi_s"]
    assert printed / total >= 0.9, printed / total
    assert 0.935 <= hit / printed <= 0.965, hit / printed

"""Page 1's recommendation (summary.recommendation, issue 40), recomputed by another route: the
committed example's cases.csv read with pandas and its result files' compiler start-ups read with
json, job costs summed by hand (start-up + cold first call + N x step), and every number and
name the sentence states compared with them."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "measurements" / "lone-cpu-2core"   # the lone design
pytestmark = pytest.mark.skipif(not (EXAMPLE / "cases.csv").exists(), reason="no committed example")
NS = (100, 100_000)          # the default jobs of a model task (reports.conclusions.jobs.SHORT, LONG)


def _sentence() -> str:
    lines = (EXAMPLE / "report.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# fwbench report" and lines[1] == ""
    assert lines[2].startswith("Recommendation for "), "the recommendation is not first on page 1"
    return lines[2].replace("\\", "")


def _startups() -> dict[tuple[str, str], float]:
    """The geometric mean of every process's compiler start-up, per framework and mode."""
    vals: dict[tuple[str, str], list[float]] = {}
    for f in sorted(EXAMPLE.glob("*.json")):
        for key, s in (json.loads(f.read_text())["machine_info"]["fwbench"].get("compiler_startup") or {}).items():
            fw, _, mode = key.partition("/")
            vals.setdefault((fw, mode), []).append(s)
    return {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in vals.items()}


def _jobs() -> dict[tuple[str, int], pd.DataFrame]:
    """Per (task, N): each framework's cheapest configuration and its cost, cheapest first."""
    c = pd.read_csv(EXAMPLE / "cases.csv")
    c = c[c["status"].isin(["ok", "fallback"]) & c["median_s"].notna() & c["first_call_cold_s"].notna()
          & c["workload"].isin(["gpt", "diffusion"]) & c["precision"].fillna("fp32").eq("fp32")]
    su = _startups()
    c = c.assign(configuration=c["framework"] + " " + c["mode"] + c["strategy"].map(
        lambda s: f" {s}" if isinstance(s, str) and s != "default" else ""),
        startup=[su.get((f, m), 0.0) if m != "eager" else 0.0 for f, m in zip(c["framework"], c["mode"])])
    out = {}
    for (w, t), g in c.groupby(["workload", "task"]):
        for n in NS:
            cost = g.assign(cost=g["startup"] + g["first_call_cold_s"] + n * g["median_s"])
            out[(f"{w} {t}", n)] = (cost.sort_values("cost").drop_duplicates("framework")
                                    [["framework", "configuration", "cost"]].reset_index(drop=True))
    return out


def test_the_recommendation_follows_from_the_job_costs():
    s = _sentence()
    jobs = _jobs()
    m = re.search(r"each job in a fresh process with empty compile caches: (\w+) for (\d+) of the (\d+) jobs, (.*) "
                  r"\(([^()]*)\), ([\d.]+)x \[[\d.]+, [\d.]+\] to ([\d.]+)x \[[\d.]+, [\d.]+\] cheaper than the next "
                  r"framework's cheapest configuration", s)
    assert m, s
    fw, k, total, named, configs, lo, hi = m.groups()
    assert int(total) == len(jobs)
    # the jobs it names: "diffusion forward (100 and 100,000 calls), ..."
    listed = [(t, int(n.replace(",", ""))) for t, ns in re.findall(r"(\w+ \w+) \(([\d, and]+) \w+\)", named)
              for n in ns.split(" and ")]
    assert len(listed) == int(k)
    ratios = []
    for job in listed:
        best = jobs[job]
        assert best.iloc[0]["framework"] == fw, (job, best)           # cheapest by the point estimates
        ratios.append(best.iloc[1]["cost"] / best.iloc[0]["cost"])   # the next framework's over its own
    assert (float(lo), float(hi)) == (round(min(ratios), 2), round(max(ratios), 2))
    # which configuration at which count: "torch eager at 100, torch compiled at 100,000"
    found = re.findall(r"(\w+ \w+(?: [\w-]+)?) at ([\d, and]+?)(?=, \w+ \w+ at |$)", configs)
    assert found and {int(n.replace(",", "")) for _, ns in found for n in ns.split(" and ")} == {n for _, n in listed}
    for conf, ns in found:
        for n in ns.split(" and "):
            assert {jobs[j].iloc[0]["configuration"] for j in listed if j[1] == int(n.replace(",", ""))} == {conf}
    # the jobs left unresolved, and who is cheapest there by the point estimates
    rest = [j for j in jobs if j not in listed]
    tally = re.search(r"where the cheapest by the point estimates is (.*?)\. How sure", s).group(1)
    counts = dict((f, int(n)) for f, n in re.findall(r"(\w+) for (\d+)", tally))
    assert counts == pd.Series([jobs[j].iloc[0]["framework"] for j in rest]).value_counts().to_dict()
    assert "How sure: each 'cheaper' holds at 98.333% per job" in s          # three frameworks: 1 - 5%/3

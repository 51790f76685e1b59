"""Scale: a report over many records and many distinct cases stays fast and small; figures
that would have too many panels to read are skipped with a note. The full-size check
(10,000 records of 1,000 cases) is in docs/ARCHITECTURE.md with its command."""
from __future__ import annotations

import resource
import time

import reports
from reports import figures
from tests.reports_fixtures import synthetic_folder


def test_2000_records_of_200_cases_render_quickly(tmp_path):
    folder = synthetic_folder(tmp_path / "in", records=2000, cases=200)
    t0 = time.monotonic()
    df = reports.load(folder)
    paths = reports.render(df, tmp_path / "out")
    elapsed = time.monotonic() - t0
    assert len(df) == 2000 and df.attrs["problems"] == []
    assert elapsed < 60, f"{elapsed:.1f} s"                # about 9 s on the 2-core development machine
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 2 * 1024 ** 2      # KiB: under 2 GiB
    md = paths["md"].read_text()
    assert "The throughput figure is not drawn: it would have 34 panels (more than 24 can be read)" in md
    assert (tmp_path / "out" / "figures" / "capability.png").exists()          # 67 rows: still drawn
    assert md.count("| gpt/") == 0 and md.count("| task0") >= 30          # every case is in the tables


def test_too_big_counts_what_would_be_drawn():
    import pandas as pd
    small = pd.DataFrame({"workload": ["gpt"] * 4, "task": ["a", "b", "a", "b"], "mode": ["eager", "eager",
                          "compiled", "compiled"], "strategy": [None] * 4, "preset": ["t"] * 4, "device": ["cpu"] * 4})
    assert all(figures.too_big(n, small) is None for n in figures.FIGURES)
    big = pd.concat([small.assign(task=f"t{i}") for i in range(30)])
    assert "30 panels" in figures.too_big("throughput", big)
    assert figures.too_big("speedup", big) is None                             # 30 bar groups
    assert figures.too_big("capability", big) is None                          # 60 rows
    bigger = pd.concat([small.assign(task=f"t{i}") for i in range(50)])
    assert "100 rows" in figures.too_big("capability", bigger)
    assert "50 bar groups" in figures.too_big("speedup", bigger)

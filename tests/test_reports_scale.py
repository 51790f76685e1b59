"""Scale: a report over many records and many distinct cases stays fast and small; figures
that would have too many panels to read are skipped with a note. The full-size check
(10,000 records of 1,000 cases) is in docs/ARCHITECTURE.md with its command."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reports.rendering import figures
from tests.support.reports_fixtures import synthetic_folder

ROOT = Path(__file__).resolve().parent.parent


def test_2000_records_of_200_cases_render_quickly(tmp_path):
    """In a fresh process, so its peak memory is the report's alone."""
    folder = synthetic_folder(tmp_path / "in", records=2000, cases=200)
    # Peak memory from /proc's VmHWM (this process's own address space): getrusage's
    # ru_maxrss survives exec on Linux, so a child of a big pytest process reports the parent's.
    code = ("import re, sys, time, reports; t0 = time.monotonic(); df = reports.load(sys.argv[1]); "
            "reports.render(df, sys.argv[2]); "
            "hwm = re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1); "
            "print(len(df), len(df.attrs['problems']), time.monotonic() - t0, hwm)")
    out = subprocess.run([sys.executable, "-c", code, str(folder), str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rows, problems, elapsed, peak_kib = out.stdout.split()
    assert (int(rows), int(problems)) == (2000, 0)
    # 11 s on one CPU of the 2-core AMD EPYC (42 s before the Pareto figures kept the panel rule, a
    # rendering remembered its job outcomes and leader_changes read each row's costs once)
    assert float(elapsed) < 60, elapsed
    assert int(peak_kib) < 2 * 1024 ** 2, peak_kib      # under 2 GiB (about 0.25 GiB here)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "The throughput figure is not drawn: it would have 34 panels (more than 24 can be read)" in md
    assert "The cold_warm figure is not drawn: it would have 34 panels" in md
    assert "The pareto_gpt figure is not drawn: it would have 34 panels" in md     # the same rule, choice.py
    assert not (tmp_path / "out" / "figures" / "pareto_gpt.png").exists()
    assert md.count("| task0") >= 30                                           # every case is in the tables


def test_a_pareto_figure_past_the_panel_limit_is_a_note_and_the_paper_cites_no_job_figure(tmp_path, monkeypatch):
    """The Pareto figures (a panel per task) keep the rule of every other figure: at 1,000 cases
    the job figure had 167 panels and took half of the report's 118 s to measure its labels."""
    import reports
    monkeypatch.setattr(figures, "MAX_PANELS", 2)
    folder = synthetic_folder(tmp_path / "in", records=60, cases=30)
    reports.render(reports.load(str(folder)), tmp_path / "out", pdf=False)
    md = (tmp_path / "out" / "report.md").read_text()
    for name in ("pareto_gpt", "pareto_jobs"):
        assert f"The {name} figure is not drawn: it would have " in md and "(more than 2 can be read)" in md
        assert not (tmp_path / "out" / "figures" / f"{name}.png").exists()
    tex = (tmp_path / "out" / "paper.tex").read_text()
    assert "fig:fwbench-pareto_jobs" not in tex and r"ratio (Section~\ref{sec:results})." in tex


def test_too_big_counts_what_would_be_drawn():
    import pandas as pd
    small = pd.DataFrame({"workload": ["gpt"] * 4, "task": ["a", "b", "a", "b"], "mode": ["eager", "eager",
                          "compiled", "compiled"], "strategy": [None] * 4, "preset": ["t"] * 4, "device": ["cpu"] * 4})
    assert all(figures.too_big(n, small) is None for n in figures.FIGURES)
    big = pd.concat([small.assign(task=f"t{i}") for i in range(30)])
    assert "30 panels" in figures.too_big("throughput", big)
    assert figures.too_big("speedup", big) is None                             # 30 bar groups
    bigger = pd.concat([small.assign(task=f"t{i}") for i in range(50)])
    assert "50 bar groups" in figures.too_big("speedup", bigger)

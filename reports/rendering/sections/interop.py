"""The interop section's drawing half (its judging half: reports.sections.interop).

    tables   matrix: program x framework/mode, each program as written: the outcome
             (interop_outcome, else from the status) and the record's own reason, shortened
             (full text in the appendix); rewrites: each framework's idiomatic rewrite of the
             programs its compiler does not take as written, with what it uses and the lines
             it changes
"""
from __future__ import annotations

from typing import Callable

import pandas as pd

from reports.measures import stats
from reports.measures.data import TIMED, finite, framework_order, mode_order
from reports.rendering.sections.common import Drawing, Table
from reports.sections.common import Lacking, has_mode, short
from reports.sections.interop import as_written, outcome, rewritten_cases


def _cell(r: pd.Series) -> str:
    why = short(r["reason"])
    took = f" ({stats.fmt_seconds(r['median_s'])})" if r["status"] in TIMED and finite(r["median_s"]) else ""
    return outcome(r) + took + (f": {why}" if why else "")


def _matrix(d: pd.DataFrame, cell: Callable[[pd.Series], str]) -> pd.DataFrame:
    cols = [f"{f} {m}" for f in framework_order(d["framework"])
            for m in mode_order(d.loc[d["framework"] == f, "mode"])]
    rows = []
    for task, g in d.groupby("task", sort=True):
        row = {"program": task}
        for _, r in g.iterrows():
            row[f"{r['framework']} {r['mode']}"] = cell(r)
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=["program", *cols])


def matrix(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame:
    """program x framework/mode, each program as written: the outcome, the median call where
    it ran, and the record's reason, shortened."""
    d = as_written(d[has_mode(d, lacking)])
    if d.empty:
        return pd.DataFrame()
    return _matrix(d, _cell).fillna("not run")


def rewrites(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame:
    """program x framework/accelerated mode, each framework's idiomatic rewrite (strategy
    `idiomatic`): the outcome, its median call, what it uses and the lines it changes; "-"
    where the framework has none (it compiles the program as written, or has no such mode)."""
    d = rewritten_cases(d[has_mode(d, lacking)])
    if d.empty:
        return pd.DataFrame()

    def cell(r: pd.Series) -> str:
        n = r.get("rewrite_lines")
        how = f"{r.get('rewrite_uses')}, {int(n)} line{'s' if n != 1 else ''}" if finite(n) else ""
        return _cell(r) + (f" [{how}]" if how else "")
    return _matrix(d, cell).fillna("-")


TABLES = (
    Table(matrix, "Outcome of each program per framework and mode, from the records, with the framework's own reason "
          "(shortened; full text under failed and unsupported cases and in the appendix): compiled, graph_breaks (ran "
          "correctly, partly in Python), wrong (ran, but outputs or side effects differ from eager), refused (the "
          "framework's error).", "interop"),
    Table(rewrites, "Each framework's idiomatic rewrite of the programs its compiler does not take as written, per "
          "accelerated mode: the outcome, its median call, [what it uses, lines changed against the program as "
          "written]; - : no rewrite (the program compiles as written).", "interop-rewrites"),
)


METHOD = (
    "Python interop: each program runs every input twice under the mode before timing; outcome compiled "
    "(outputs and side effects as eager, no graph break), graph_breaks (as eager, with Dynamo's breaks), wrong "
    "(runs, but an output or side-effect count differs: a print or append at trace time only, a frozen branch "
    "or random value; failed, never timed), refused (the framework's own error; unsupported). The matrix "
    "cells hold the record's own reason.",
    "interop, idiomatic rewrites: where a framework's compiler does not take a program as written, the program "
    "is also run as that framework's documentation tells a user to write it for its compiler (jax.debug.print, "
    "lax.cond, jax.pure_callback, tf.print, tf.numpy_function, torch.cond, a torch.library.custom_op, ...), "
    "probed and timed the same way; the lines it changes are counted against the program as written (a "
    "replaced run counts its longer side; helpers and configuration lines count in full). The programs are "
    "what the frameworks' idioms make of them, so times compare the rewrites as their users would run them, "
    "not identical programs (a host callback in a compiled program against a Python call in eager). tf.print "
    "writes from native code, so its rewrite's calls capture file descriptor 1 (a few system calls each) where "
    "every other call redirects Python's sys.stdout: its time includes them.",
)


DRAWING = Drawing(name="interop", title="What could not be compiled (Python interop)", tables=TABLES, method=METHOD)

"""The serving section's drawing half (its judging half: reports.sections.serving).

    tables   exports: the export matrix, framework x path (mode, strategy) x task: the
             exporter, the dynamic dimensions and the artefact's size where it exported and
             served, the exporter's (or the serving process's) own words where it did not;
             serving: per task and path, the cold start, latency p50/p90/p99 at batch 1 (over
             processes, with the interval from 3), the best offline throughput and its batch, the
             serving process's memory, the check's error and whether it imported model code;
             claim 6: its pieces per framework and task (reports.sections.serving.claim6)
    figures  serve_latency: latency percentiles (p50 bar, p90 and p99 markers) per path, a
             panel per task, log scale
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from reports.measures import stats
from reports.measures.data import TIMED, finite, framework_order, mode_order
from reports.measures.verdicts import procs
from reports.rendering import figures as F
from reports.rendering.sections.common import Drawing, Plot, Table
from reports.sections.common import Lacking, short
from reports.sections.serving import MEASURES, claim6, kind, served


def path_label(r: pd.Series) -> str:
    s = r.get("strategy")
    return f"{r['mode']}" + (f" ({s})" if isinstance(s, str) else "")


def _order(d: pd.DataFrame) -> pd.DataFrame:
    fws, modes = framework_order(d["framework"]), mode_order(d["mode"])
    return d.assign(_f=d["framework"].map(fws.index), _m=d["mode"].map(modes.index),
                    _s=d["strategy"].map(lambda s: s if isinstance(s, str) else "")).sort_values(
        ["_f", "_m", "_s"], kind="stable").drop(columns=["_f", "_m", "_s"])


def _size(n: float) -> str:
    return f"{n / 2 ** 20:.1f} MiB" if finite(n) else ""


def exports(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame:
    """framework x path x task: ok [exporter; dynamic dimensions; size; export time], or the
    status and the record's reason (the exporter's words for a refusal), shortened."""
    d = d[[(f, m) not in lacking for f, m in zip(d["framework"], d["mode"])]]
    if d.empty:
        return pd.DataFrame()
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for _, r in _order(d).iterrows():
        row = rows.setdefault((r["framework"], path_label(r)), {"framework": r["framework"], "path": path_label(r),
                                                                "kind": kind(r)})
        if r["status"] in TIMED:
            what = r.get("exporter") if isinstance(r.get("exporter"), str) else "the model, built from its weights"
            extra = [x for x in (r.get("dynamic_dims") if isinstance(r.get("dynamic_dims"), str) else "",
                                 _size(r.get("artefact_bytes")),
                                 f"export {stats.fmt_seconds(r['export_s'])}" if finite(r.get("export_s")) else "")
                     if x]
            row[r["task"]] = f"ok: {what}" + (f" [{'; '.join(extra)}]" if extra else "")
        else:
            row[r["task"]] = f"{'refused' if r['status'] == 'unsupported' else r['status']}: {short(r['reason'], 120)}"
    return pd.DataFrame(list(rows.values())).fillna("not run")


def _over(r: pd.Series, fld: str, fmt=stats.fmt_seconds) -> str:
    """A per-process scalar: its value over processes, with the 95% interval from 3 processes."""
    e = stats.Est.of(procs(r, fld))
    if not e.n:
        return ""
    if not e.tested:
        return fmt(e.value) + (f" ({e.n} processes)" if e.n > 1 else "")
    lo, hi = e.interval()
    return f"{fmt(e.value)} [{fmt(lo)}, {fmt(hi)}]"


def serving(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame:
    """A row per task and path that served; one timed only on a busy machine says so."""
    t = d[d["status"].isin(TIMED)]
    if t.empty or "latency_p50_s" not in t.columns:
        return pd.DataFrame()
    rows = []
    kept = set(served(t).index)
    for i, r in _order(t).sort_values("task", kind="stable").iterrows():
        if i not in kept:
            rows.append({"task": r["task"], "framework": r["framework"], "path": path_label(r), "kind": kind(r),
                         "cold start": short(r["reason"], 80) if isinstance(r.get("reason"), str) else "left out"})
            continue
        rate = _over(r, "serve_throughput", lambda v: f"{v:.4g}")
        batch = r.get("serve_throughput_batch")
        rows.append({
            "task": r["task"], "framework": r["framework"], "path": path_label(r), "kind": kind(r),
            "engine": r.get("serve_engine") if isinstance(r.get("serve_engine"), str) else "",
            "cold start": _over(r, "cold_start_s"),
            "p50": _over(r, "latency_p50_s"), "p90": _over(r, "latency_p90_s"), "p99": _over(r, "latency_p99_s"),
            "best throughput": (f"{rate} {r['unit']}/s" if rate else "")
            + (f" at batch {batch:.0f}" if finite(batch) else ""),
            "memory": _size(r.get("peak_memory_bytes")),
            "check (rel. error)": f"{r['check_rel_err']:.1e}" if finite(r.get("check_rel_err")) else "",
            "model code": {True: "imported", False: "none"}.get(r.get("model_code_imported"), ""),
        })
    return pd.DataFrame(rows)


def claim_table(d: pd.DataFrame, lacking: Lacking) -> pd.DataFrame:
    """Claim 6's pieces (reports.sections.serving.claim6) at the report's 95% level (the
    Findings state the same comparisons at their Holm levels)."""
    c = claim6(d, stats.Family())
    if c.table.empty:
        return pd.DataFrame()
    rows = []
    for _, r in c.table.iterrows():
        for fld, words, _ in MEASURES:
            def one(label: str) -> str:
                s, lo, hi = (r.get(f"{label} {fld} {x}") for x in ("speed", "lo", "hi"))
                if not finite(s):
                    return ""
                iv = f" [{stats.fmt_x(lo)}, {stats.fmt_x(hi)}]" if finite(lo) else " (indicative)"
                return f"{stats.fmt_x(s)}x{iv}"
            rows.append({"framework": r["framework"], "task": r["task"], "measure": words,
                         "development": r.get(f"development {fld}") or "",
                         "best artefact": r.get(f"artefact {fld}") or "",
                         "ONNX Runtime": r.get(f"onnxruntime {fld}") or "",
                         "best other engine": r.get(f"other {fld}") or "",
                         "artefact / development": one("artefact/development"),
                         "ONNX Runtime / artefact": one("onnxruntime/artefact"),
                         "other / artefact": one("other/artefact")})
    return pd.DataFrame(rows)


MARKS = (("latency_p90_s", "_"), ("latency_p99_s", "x"))     # the percentiles drawn as markers


def latency(d: pd.DataFrame) -> Figure | None:
    """Per task a panel: per path (x, grouped by framework) the p50 latency as a bar, p90 and
    p99 as markers above it; log scale."""
    t = served(d)
    if t.empty:
        return None
    tasks = sorted(t["task"].unique())
    col = F.colours(t["framework"])
    with F._style():
        fig, axes = F.panel_grid(len(tasks), 2, w=6.5, h=3.4)
        for ax, task in zip(axes, tasks):
            g = _order(t[t["task"] == task])
            xs = np.arange(len(g))
            ax.bar(xs, g["latency_p50_s"] * 1e3, color=[col[f] for f in g["framework"]], alpha=0.85)
            for q, m in MARKS:
                if q in g.columns:
                    ax.scatter(xs, g[q] * 1e3, marker=m, color="black", s=40, zorder=3)
            ax.set_xticks(xs, [f"{f} {path_label(r)}" for f, (_, r) in zip(g["framework"], g.iterrows())],
                          rotation=60, ha="right", fontsize=7)
            ax.set_yscale("log")
            ax.set_ylabel("latency per request (ms, log scale)")
            ax.set_title(f"{task}, batch 1")
        handles = [Patch(color="grey", alpha=0.85, label="p50 (bar; colour: framework)"),
                   *(Line2D([], [], marker=m, color="black", linestyle="", label=q[8:11]) for q, m in MARKS)]
        fig.legend(handles=handles, loc="outside upper right", frameon=False, ncols=3)
    return fig



TABLES = (
    Table(exports, "Export matrix: per framework and path (mode, and the artefact as strategy) and task, ok with the "
          "exporter, the dimensions exported dynamic, the artefact's size and the export time; or refused with the "
          "exporter's own message, or failed (the artefact did not load, or its answers differed from the eager "
          "model's), shortened (full text in the appendix).", "serving-exports"),
    Table(serving, "Serving per task and path, in a process of its own that loads only the artefact (the development "
          "path builds the model): cold start (process start to the first answer, with the compile caches the "
          "steady-state processes had: warm where the run had warm ones; an empty-cache first call is the job "
          "table's), latency per request at batch 1 over the stream of prompt lengths (p50, p90, p99; over the "
          "steady-state processes, as the step times, [95% interval] from 3), the best offline "
          "throughput and its batch, the serving process's peak memory, the relative error against the eager model "
          "and whether the process imported model code.", "serving"),
    Table(claim_table, "Claim 6's pieces per framework, task and measure: the best development path, the best "
          "artefact, ONNX Runtime on the framework's ONNX export and the best other engine; speeds (> 1: the first "
          "faster) with their 95% intervals over processes (indicative from one process).", "serving-claim"),
)

FIGURES = (
    Plot("serve_latency", latency, ("latency_p50_s",),
         "Latency per request at batch 1 over the stream of prompt lengths: p50 (bar), p90 and p99 (markers), per "
         "framework and serving path, log scale."),
)

METHOD = (
    "Serving: each framework's deployable form of the model (torch.export + AOTInductor, jax.export, jax2tf to a "
    "SavedModel, TensorFlow's SavedModel with and without jit_compile, ONNX in ONNX Runtime) is exported in the "
    "benchmark process with the batch and the prompt length dynamic where the exporter allows, then loaded by a "
    "process of its own that imports no model code (checked from its modules) and never compiles anything fwbench "
    "can cache (persistent compile caches off); the development path is served the same way by a process that "
    "builds the model from its weights. Before anything is timed, its answers to two requests (batch 1, and batch 2 "
    "at another length) must match the framework's eager model (greedy tokens exactly, every step's logits and "
    "DDIM's x_0 within the workload's tolerance). The request loop (prefill then KV-cached decode steps, each token "
    "read back; the DDIM sampler's steps) is the serving process's and the same for every path. Latency is the "
    "client's round trip per request over a pipe (its own cost, the transport, measured apart); throughput the "
    "serving process's own clock.",
)


DRAWING = Drawing(name="serving", title="Serving: deployable artefacts against the development path (claim 6)",
                  tables=TABLES, figures=FIGURES, method=METHOD)

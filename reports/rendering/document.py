"""The report document: one list of blocks, in the order a reader meets them, rendered three
ways (reports.rendering.formats).

    report.md     Markdown, figures linked from figures/*.png (PDF beside each)
    report.html   self-contained: CSS inline, figures embedded as base64 PNG
    tables.tex    every table as a booktabs `table` environment, ready for \\input
    paper.tex     the article (reports.rendering.latex)
    data.csv      the tidy frame (without the per-round times): same JSON in, same bytes out
    cases.csv     one row per case, its processes pooled (reports.conclusions.replicates.cases)

The blocks come from the registered sections (reports.rendering.sections, each drawing half
beside its judging half in reports.sections), the report's generic parts
(reports.rendering.parts), the Method (reports.rendering.method) and, here, the appendices
(set-up, every case, first calls and compilations, capability, full reasons).

Nothing rendered depends on the time of rendering, so `fwbench report` on committed JSON
reproduces committed outputs.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from reports import sections
from reports.conclusions import claims, findings, narrative, replicates, summary
from reports.conclusions.jobs import Job, remembering
from reports.measures import controls, peers, stats
from reports.measures import data as rdata
from reports.measures.data import TIMED, finite
from reports.rendering import bibliography, choice, figures, latex
from reports.rendering import paper as paper_
from reports.rendering import sections as drawings
from reports.rendering.formats import html_doc, latex_tables, markdown, write_csv
from reports.rendering.method import COUNTERS, method_lines
from reports.rendering.parts import (
    COMPILATION,
    RESULTS,
    _uniq,
    choice_blocks,
    findings_blocks,
    intro_blocks,
    missing_blocks,
    model_blocks,
    short_reasons,
    stability_blocks,
    summary_blocks,
    without_empty_columns,
)
from reports.rendering.sections.common import Block
from reports.util import atomic
from workloads.base import is_accelerator
from workloads.precision import cpu_flags as precision_flags

# ----------------------------------------------------------------------------- tables


def setup_table(df: pd.DataFrame) -> pd.DataFrame:
    runs = df.attrs.get("runs", [])
    gemm = [g for g in df["gemm_flops"] if finite(g)]
    measured = [r["gemm_flops"] for r in runs if finite(r["gemm_flops"])]
    versions = {}
    for r in runs:
        for name, info in sorted(r["frameworks"].items()):
            versions.setdefault(name, set()).add(str(info.get("version")))
    for _, r in df.drop_duplicates("framework").iterrows():
        versions.setdefault(r["framework"], set()).add(str(r["framework_version"]))
    rows = [
        ("CPU", _uniq(r["cpu"] for r in runs)),
        *([(f"CPU's reduced-precision instructions (of {', '.join(precision_flags())})",
            _uniq(", ".join(r["cpu_flags"]) or "none" for r in runs if r.get("cpu_flags") is not None))]
          if any(r.get("cpu_flags") is not None for r in runs) else []),
        ("accelerator", _uniq(r["accelerator"] for r in runs) if any(r["accelerator"] for r in runs) else "none"),
        ("device", _uniq(df["device"])),
        ("intra-op threads", _uniq(df["threads"])),
        ("fp32 GEMM rate (utilisation's denominator at fp32)",
         ", ".join(f"{g / 1e9:.1f} GFLOP/s" for g in sorted(set(gemm))) or "not measured"),
        ("GEMM measurement", _gemm_text(runs, measured)),
        ("matmul precision", _uniq(df["matmul_precision"])),
        ("C heap (malloc)", _uniq(r.get("allocator") or "not recorded" for r in runs)),
        ("frameworks", "; ".join(f"{n} {', '.join(sorted(v))}" for n, v in
                                 sorted(versions.items(),
                                        key=lambda kv: rdata.framework_order(versions).index(kv[0])))),
        ("workloads", _uniq(df["workload"])),
        ("presets", "; ".join(f"{w} {p}: {s}" for w, p, s in sorted(set(zip(df["workload"], df["preset"], df["shape"])))
                              if s != "n/a")),
        ("dtype", _uniq(df["param_dtype"])),
        ("compile cache before first call", _uniq(df["compile_cache"])),
        *_run_rows(runs),
        ("date of runs", _uniq(r["date"] for r in runs)),
        ("fwbench commit", _uniq(r["fwbench_commit"] for r in runs)),
        ("Python", _uniq(r["python"] for r in runs)),
        ("result files", _uniq(r["run_file"] for r in runs)),
    ]
    return pd.DataFrame(rows, columns=["", "value"])


def _gemm_text(runs: list[dict[str, Any]], measured: list[float]) -> str:
    """How the GEMM rate was measured: each library's best over the runs where the runs
    recorded them (gemm_rates), else the runs' own notes; and each run's best."""
    rates: dict[str, float] = {}
    for r in runs:
        for src, g in (r.get("gemm_rates") or {}).items():
            rates[src] = max(rates.get(src, 0.0), g)
    # the size each run measured at, from its note (2048, the default; a test run's smaller)
    sizes = sorted({int(m.group(1)) for r in runs if (m := re.search(r"(\d+)x\1 matmul", str(r.get("gemm_note"))))})
    if rates:
        text = (f"float32 {' and '.join(f'{n}x{n}' for n in sizes) or 'n x n'} matmul at the thread count in force, "
                "best of 5, before the first case and after "
                "the last of every process, by numpy's BLAS and each framework; best per library: "
                + ", ".join(f"{src} {g / 1e9:.1f}" for src, g in sorted(rates.items(), key=lambda kv: -kv[1]))
                + " GFLOP/s")
    else:
        text = _uniq(r["gemm_note"] for r in runs)
    if len(measured) > 1:
        text += ("; each run's best: " + ", ".join(f"{g / 1e9:.1f}" for g in measured)
                 + " GFLOP/s; a report uses the best of the runs on the same machine set-up")
    return text


def _jobs_text(runs: list[dict[str, Any]]) -> str:
    """Each result file's scheduler job (machine_info.fwbench.job: fwbench run --launcher slurm or
    submitit), in time order: 'torch-0.json: job 12 on node3, 2025-01-01 10:00:01 - 10:03:12 UTC'."""
    def when(t: Any) -> str:
        return str(t or "?")[:19].replace("T", " ")
    jobs = sorted(((r.get("job") or {}).get("start") or "", r["run_file"], r["job"]) for r in runs if r.get("job"))
    return "; ".join(f"{f}: job {j.get('job_id') or '?'} on {j.get('host') or '?'}, {when(j.get('start'))} - "
                     f"{when(j.get('end'))[11:]} UTC" for _, f, j in jobs) or "n/a"


def _run_rows(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Set-up rows from machine_info.fwbench's run keys (record.RUN_INFO), where recorded."""
    pads = [r.get("env_pad_bytes") for r in runs if isinstance(r.get("env_pad_bytes"), int)]
    envs = [r.get("env_bytes") for r in runs if isinstance(r.get("env_bytes"), int)]
    rows = [("sets (cold + warm)" if any(isinstance(r.get("set"), int) for r in runs) else "processes per framework",
             _uniq(f"{r['cold']} cold + {r['warm']} warm" if isinstance(r.get("cold"), int)
                                              and isinstance(r.get("warm"), int) else r.get("repeats") for r in runs)),
            ("environment padding (per process, random)",
             f"{min(pads)}-{max(pads)} bytes; environments of {min(envs)}-{max(envs)} bytes" if pads and envs
             else "n/a"),
            ("case order", _uniq(r.get("case_order") for r in runs)),
            ("Python garbage collector", _uniq(r.get("gc") for r in runs)),
            ("compile cache folders", _uniq(f"{f}: {d}" for r in runs for f, d in sorted((r.get("compile_cache_dirs")
                                                                                          or {}).items()))),
            ("scheduler jobs (result file: job id on host, start - end)", _jobs_text(runs))]
    settings: dict[str, set[str]] = {}
    for r in runs:
        for fw, kv in sorted((r.get("settings") or {}).items()):
            if isinstance(kv, dict):
                settings.setdefault(fw, set()).update(f"{k}={v}" for k, v in kv.items())
    rows += [(f"{fw} runtime settings", "; ".join(sorted(v)) or "defaults")
             for fw, v in sorted(settings.items(), key=lambda kv: rdata.framework_order(settings).index(kv[0]))]
    return [(k, v) for k, v in rows if v != "n/a"] or [("run settings", "not recorded (older result files)")]


def _counter(r: pd.Series) -> str:
    return COUNTERS.get(r["framework"]) or (str(r["compile_counter"])[:40] if isinstance(r["compile_counter"], str)
                                            else "counter")


def results_table(w: pd.DataFrame) -> pd.DataFrame:
    """A row per case: steady step (over warm processes, or over sets), throughput, speedup over
    eager (paired), the cold processes' (sets') step over the warm ones', and the case's flags
    (findings.annotate) where a report added them. First calls, compile latency,
    break-even and the compile counters are in compile_table."""
    rows = []
    lacking = rdata.lacking_modes(w)
    u = rdata.unit(w)
    for _, r in w.iterrows():
        timed = r["status"] in TIMED and finite(r["median_s"])
        n = r.get("n_processes", 1)
        rows.append({
            "task": r["task"] + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else ""),
            "framework": r["framework"], "mode": r["mode"],
            "status": "n/a" if (r["framework"], r["mode"]) in lacking else r["status"],
            f"{u} (cold+warm)": f"{_n(r, 'n_cold')}+{_n(r, 'n_warm')}" if timed else "",
            "step [95% CI]": ((stats.fmt_est(r["est"], r["median_s"]) if n == 2 else
                               stats.fmt_time_ci(r["median_s"], r["median_lo_s"], r["median_hi_s"]))
                              + ("*" if n == 1 else "")) if timed else "",
            "throughput": f"{stats.fmt_count(r['throughput'])} {r['unit']}/s" if timed else "",
            "vs eager [95% CI]": (stats.fmt_ratio(r["speedup_vs_eager"], r["speedup_lo"], r["speedup_hi"])
                                  + (" (op-by-op)" if r["framework"] in rdata.OP_BY_OP_EAGER else "")
                                  if timed and r["mode"] != "eager" and finite(r["speedup_vs_eager"]) else ""),
            "cold/warm step": stats.fmt_ratio(r["cold_over_warm"], r["cold_over_warm_lo"], r["cold_over_warm_hi"])
                              if timed and finite(r.get("cold_over_warm")) else "",
            "flags": r.get("flags") if timed and isinstance(r.get("flags"), str) else "",
        })
    return pd.DataFrame(rows)


def _pct(x: Any) -> str:
    return f"{100 * x:.2g}%" if finite(x) else "n/a"


def mfu_table(d: pd.DataFrame) -> pd.DataFrame:
    """A row per timed case of one device: step time, throughput in the workload's unit (tokens,
    images), and MFU = model FLOPs per step / step / the peak GEMM rate at the case's precision,
    measured and the vendor's (n/a where none is known)."""
    rows = []
    for _, r in d.iterrows():
        if r["status"] not in TIMED or not finite(r["median_s"]):
            continue
        rows.append({"workload": r["workload"], "preset": r["preset"],
                     "task": r["task"] + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else ""),
                     "framework": r["framework"], "mode": r["mode"], "precision": r["precision"] or "fp32",
                     "step": stats.fmt_seconds(r["median_s"]),
                     "throughput": f"{stats.fmt_count(r['throughput'])} {r['unit']}/s",
                     "MFU (measured peak)": _pct(r.get("mfu")),
                     "MFU (vendor peak)": _pct(r.get("mfu_vendor")),
                     "peak": (f"{stats.fmt_count(r['peak_flops'])} FLOP/s {r['peak_precision']}"
                              if finite(r.get("peak_flops")) else "not measured")})
    return pd.DataFrame(rows)


def _results_caption(wl: str, w: pd.DataFrame) -> str:
    """The caption of a workload's case table, in the words of the run's design (sets or lone processes)."""
    sets = rdata.side_by_side(w)
    step = f", {rdata.steady_source(w)}" if sets else " over warm processes"
    paired, cold = (("by set", "the cold sets' step over the warm sets'") if sets else
                    ("over processes", "the cold processes' step over the warm ones'"))
    return (f"{wl}: step time{step} (* one {rdata.unit(w, one=True)}: the interval covers {rdata.noise(w)} noise "
            f"only), throughput, speedup over the same framework's eager mode (paired {paired}; op-by-op: JAX's and "
            f"TensorFlow's eager), {cold}, and the case's flags (see Replication and stability).")


def mfu_blocks(model: pd.DataFrame) -> list[Block]:
    """Throughput and MFU, a table per device (a GPU table where the placement is cuda)."""
    if model.empty or "mfu" not in model:
        return []
    b: list[Block] = []
    for device, d in model.groupby(model["device"].astype(str).str.split(":").str[0], sort=True):
        t = mfu_table(d)
        if t.empty:
            continue
        kind = "GPU" if is_accelerator(device) else device.upper()
        b += [("h", 3, f"Throughput and MFU on the {kind}"),
              ("table", t, f"{kind}: step time ({rdata.steady_source(d)}), throughput, and MFU = model FLOPs "
               "per step (the workload's formula, forward + backward = 3x forward for a train step) / step time / "
               "the peak GEMM rate at the case's precision (bf16, fp32, or TF32), measured by the framework before "
               "the first case (on the CPU at fp32: the best of numpy's and the frameworks'), and the vendor's "
               "dense peak where the GPU is in the table (n/a on a CPU).", f"mfu-{device}")]
    return b


def _n(r: pd.Series, col: str) -> str:
    return f"{r[col]:.0f}" if finite(r.get(col)) else "0"


def _first(r: pd.Series, role: str) -> str:
    """'2.95 s [2.7, 3.2] (n=2)' for a role's first calls; '-' where none was measured."""
    m = r.get(f"first_call_{role}_s")
    if not finite(m):
        return "-"
    e = r.get(f"est_first_{role}")
    n = e.n if isinstance(e, stats.Est) else None
    lo, hi = r.get(f"first_call_{role}_lo_s"), r.get(f"first_call_{role}_hi_s")
    if isinstance(e, stats.Est) and e.pool is not None:
        if e.tested and finite(lo) and finite(hi):       # the spread pooled over the framework's cases of this mode
            return stats.fmt_time_ci(m, lo, hi) + f" (n={n}; spread pooled over {e.pool[2]} cases, df {e.pool[1]:.0f})"
        return stats.fmt_values(e) + f" (n={n}, not tested)"
    if n == 2:              # no df = 1 interval: the two processes' min-max
        return stats.fmt_est(e, m) + " (n=2)"
    return stats.fmt_time_ci(m, lo, hi) + (f" (n={n})" if n else "")


def _timed_compiles(r: pd.Series) -> str:
    """Compilations during the timed rounds, said where there were some (a flag too)."""
    if r.get("recompiled_during_timing") is True:
        n = f"{r['compilations_timed']:.0f} " if finite(r.get("compilations_timed")) else ""
        return f"; RECOMPILED {n}in the timed rounds"
    return ""


def compile_table(d: pd.DataFrame) -> pd.DataFrame:
    """First calls by role per timed case (cold: every cache empty for the case; warm: the
    run's cache filled by the cold processes; each with its t interval and n), first calls
    left out as invalid, the framework's compile timer, compile latency (non-eager: cold
    first call minus the same mode's steady step), break-even against eager and the
    framework's own compilation counter (a compilation during the timed rounds is a flag)."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    return pd.DataFrame([{
        "case": f"{r['workload']} {r['task']}" + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else ""),
        "framework": r["framework"], "mode": r["mode"],
        "first call, cold": _first(r, "cold"),
        "first call, warm": _first(r, "warm"),
        "invalid first calls": f"{r['first_call_invalid']:.0f}" if finite(r.get("first_call_invalid"))
                               and r["first_call_invalid"] > 0 else "",
        "compile timer": stats.fmt_seconds(r["compile_s"]) if finite(r["compile_s"]) else "-",
        "compile latency": stats.fmt_time_ci(r["compile_latency_s"], r.get("compile_latency_lo_s"),
                                             r.get("compile_latency_hi_s")) if finite(r["compile_latency_s"]) else "-",
        "break-even": _steps(r.get("break_even_steps"), r.get("break_even_lo"), r.get("break_even_hi"))
                      if r["mode"] != "eager" else "",
        "compilations": f"{int(r['compilations'])} {_counter(r)}" + _timed_compiles(r)
                        if not pd.isna(r["compilations"]) else "",
    } for _, r in t.iterrows()])


def startup_table(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """The compiler's start-up per framework, compiled mode and process role (machine_info's
    compiler_startup: a throw-away program compiled before the mode's first case in each
    process), each process's seconds and their geometric mean: a row of its own, in no case's
    first call, no verdict and no choice."""
    rows: dict[tuple[str, str, str], list[float]] = {}
    for r in runs:
        role = r.get("cache_role") or r.get("compile_cache") or "-"
        for key, s in sorted((r.get("compiler_startup") or {}).items()):
            fw, _, mode = key.partition("/")
            rows.setdefault((fw, mode, role), []).append(s)
    order = rdata.framework_order({fw for fw, _, _ in rows})
    return pd.DataFrame([{"framework": fw, "mode": mode, "processes": role, "n": len(v),
                          "start-up, geometric mean": stats.fmt_seconds(stats.geomean(v)),
                          "each process": ", ".join(stats.fmt_seconds(x) for x in v)}
                         for (fw, mode, role), v in sorted(rows.items(), key=lambda kv: (
                             order.index(kv[0][0]), kv[0][1], kv[0][2]))])


def position_line(pos: dict[str, tuple[float, int]]) -> str | None:
    """What the compiler start-up apart leaves in a process's first case of a compiled mode
    (replicates.first_position), in words; None without cases seen in both positions."""
    if not pos:
        return None
    return ("What it leaves in the first case: a case's cold first call when it was its process's first case of "
            "the mode, over the same case's when it came later (geometric mean over the cases run in both "
            "positions; 1.00x: the position does not matter): "
            + "; ".join(f"{k.replace('/', ' ')} {r:.2f}x ({n} case{'s' if n != 1 else ''})"
                        for k, (r, n) in pos.items())
            + ". Where it is above 1, the first case of the mode still carries part of the one-off cost.")


def _steps(n: float | None, lo: float | None = None, hi: float | None = None) -> str:
    """'848 [630, 950]', 'never', '' (no break-even: the steps do not differ by the verdicts)."""
    if n is None or pd.isna(n):
        return ""
    if math.isinf(n):
        return "never"
    one = lambda x: "never" if math.isinf(x) else f"{x:,.0f}"   # noqa: E731
    return f"{n:,.0f}" + (f" [{one(lo)}, {one(hi)}]" if lo is not None and not pd.isna(lo) else "")


# ----------------------------------------------------------------------------- blocks

def controls_and_margin(records: pd.DataFrame, margin: float) -> tuple[pd.DataFrame, float]:
    """The A/A controls (controls.aa, at `margin`) and the report's equivalence margin: never
    smaller than what the controls show of the method itself (controls.spread)."""
    ctrl = controls.aa(records, margin)
    return ctrl, max(margin, controls.spread(ctrl))


def build(df: pd.DataFrame, figs: dict[str, tuple[Path, str]], weights: dict[str, float],
          notes: list[str], margin: float = stats.MARGIN, jobs: list[Job] | None = None,
          records: pd.DataFrame | None = None, judged: pd.DataFrame | None = None) -> list[Block]:
    """The document's blocks from replicates.cases (records are aggregated first). The
    report's comparisons are judged first, as one family (findings.report_family); the
    verdict-dependent columns (break-even, flags) are added to the frame in place. Its
    parts in the order a reader meets them: the introduction, the Summary, each section's
    workload, the model workloads' results, replication, compilation, findings, the choice
    per job, what did not run, the method and the appendices (the weighted concerns last).
    jobs: the reader's own (--job), else conclusions.jobs' defaults; records: the records before
    aggregation (the side-by-side blocks, the A/A controls), where df is already aggregated;
    judged: the cases of the report's family as render prepared them for the figures (at the
    report's margin), made here otherwise."""
    records = df if records is None else records
    ctrl, margin = controls_and_margin(records, margin)
    df = replicates.cases(df)
    every = df
    # scale-out's data-parallel cases: its own family and section
    df = sections.judged_in_report(every) if judged is None else judged
    fam = findings.prepare(df, margin)
    missing = rdata.missing_frameworks(df)
    # the model workloads at every case axis' baseline: the generic tables (the variants: their sections)
    model = sections.baseline(df[~df["workload"].isin(sections.WORKLOADS)])
    b = intro_blocks(df, fam, missing, margin, summary.recommendation(df, fam, jobs),
                     narrative.provenance(df, rendered_by()))
    b += control_alarm(ctrl)
    b += summary_blocks(df, every, fam, choice.page_one(df, fam, jobs, every))
    b += drawings.blocks(df, every, figs, fam)
    b += model_blocks(model, figs, *RESULTS)
    b += mfu_blocks(model)
    b += stability_blocks(df, fam)
    b += model_blocks(model, figs, *COMPILATION)
    b += findings_blocks(df)
    b += choice.section(df, figs, jobs)
    short, appendix = short_reasons(df)
    b += missing_blocks(df, missing, short, notes)
    b += [("h", 2, "Method"), ("ul", method_lines(df, fam))]
    b += side_blocks(records, ctrl, margin)
    b += peer_blocks(df)
    return without_empty_columns(b + appendix_blocks(df, missing, appendix) + choice_blocks(df, weights))


def control_alarm(ctrl: pd.DataFrame) -> list[Block]:
    """Page 1's line where an A/A control was called faster or slower: the method itself then
    shows a difference where none exists, and the reader should know before any verdict."""
    called = ctrl[ctrl["verdict"].map(lambda v: stats.coarse(v) in ("faster", "slower"))] if not ctrl.empty else ctrl
    if called.empty:
        return []
    which = "; ".join(f"{r['framework']} {r['mode']} {r['workload']} {r['task']}: "
                      f"{stats.fmt_ratio(r['ratio'], r['lo'], r['hi'])}" for _, r in called.iterrows())
    return [("p", f"A/A control called different: {len(called)} of {len(ctrl)} controls (the same configuration "
                  f"in two processes of one set) read as faster or slower at 95% ({which}). A difference of that "
                  "size between frameworks may be the method's own; the equivalence margin is set to at least "
                  "the controls' spread. See \"Side by side\" after the Method.")]


def _set_walls(sets: pd.DataFrame) -> str:
    """' The sets took ... ': the sets' own wall times (start of the first process to the end of
    the last), in all and per role; '' where the files do not carry them."""
    if "set_wall_s" not in sets.columns:
        return ""
    per = sets.dropna(subset=["set_wall_s"]).groupby("set").agg(wall=("set_wall_s", "max"), role=("set_role", "first"))
    if per.empty:
        return ""
    by_role = "; ".join(f"{role} sets {stats.fmt_seconds(g['wall'].min())}" + (
        f" to {stats.fmt_seconds(g['wall'].max())}" if len(g) > 1 else "") for role, g in per.groupby("role"))
    return f" The sets took {stats.fmt_seconds(per['wall'].sum())} of wall time in all ({by_role})."


def side_blocks(records: pd.DataFrame, ctrl: pd.DataFrame, margin: float) -> list[Block]:
    """The side-by-side design's own checks (reports.measures.controls): the A/A controls, the
    false alarms among them and the position effect; nothing for files from before sets."""
    if "set" not in records.columns or not records["set"].map(rdata.finite).any():
        return []
    sets = records[records["set"].map(rdata.finite)]
    n_sets = sets["set"].nunique()
    roles = sets.drop_duplicates("set")["set_role"].value_counts().to_dict()
    cycles = max((b["cycle"] for bl in sets["blocks"] if isinstance(bl, list) for b in bl), default=-1) + 1
    b: list[Block] = [("h", 3, "Side by side: A/A controls and the position effect"),
                      ("p", f"{n_sets} sets ({', '.join(f'{n} {k}' for k, n in sorted(roles.items()))}): each set "
                            "ran one process per framework, and a second process of one framework (the control), "
                            "all alive together; task by task each process measured its cases in turn (first "
                            f"calls, warm-up, its own rounds), then the task's configurations took turns in {cycles} "
                            "cycles, each a block of every configuration (about the same wall time each) in an "
                            "order drawn per cycle, one block at a time. A configuration's steady time is the "
                            "geometric mean of its blocks per set, and a ratio between two configurations is "
                            "paired by set (t over sets)." + _set_walls(sets))]
    if not ctrl.empty:
        k, n = controls.false_alarms(ctrl)
        t = ctrl.assign(configuration=ctrl["framework"] + " " + ctrl["mode"] + ctrl["strategy"].map(
            lambda x: f" ({x})" if isinstance(x, str) else ""), task=ctrl["workload"] + " " + ctrl["task"],
            ratio=[stats.fmt_ratio(r, lo, hi) for r, lo, hi in zip(ctrl["ratio"], ctrl["lo"], ctrl["hi"])],
            spread=ctrl["sd_per_set"].map(lambda x: f"{100 * x:.1f}%" if rdata.finite(x) else "n/a"))
        b += [("table", t[["task", "configuration", "sets", "ratio", "verdict", "spread"]],
               "A/A controls: the same configuration in the set's two processes of one framework, the control "
               "process's time over the primary's (which started first drawn per set), paired by cycle and over "
               "sets; 95% "
               "interval, verdict against the margin, and the per-set SD of the log ratio (spread).", "controls"),
              ("p", f"{k} of {n} tested controls read faster or slower at 95%: with no difference, about "
                    f"{0.05 * n:.1f} would by chance. The margin used for every verdict is "
                    f"{100 * margin:.0f}% (at least the controls' spread).")]
    pos = controls.position(records)
    if pos is not None:
        b.append(("p", f"Position effect: a block run right after another process's block took "
                       f"{stats.fmt_ratio(pos['ratio'], pos['lo'], pos['hi'])} the time of one run right after a "
                       f"block of its own process ({pos['pairs']} configuration-set pairs, 95% t interval)."))
    return b


def peer_blocks(df: pd.DataFrame) -> list[Block]:
    """Fairness as a number: per framework, its implementations against their peers, from the
    latest peers table for each device kind of the run (reports.measures.peers)."""
    b: list[Block] = []
    fws = rdata.framework_order(df["framework"])
    for device in sorted(set(df["device"].dropna())):
        table = peers.latest(device)
        kind = "GPU" if is_accelerator(device) else device.upper()
        if table is None:
            b.append(("p", f"Fairness on the {kind}: no peers table for this device kind (python -m "
                           "frameworks.peers --record measures one); how fwbench's implementations compare with "
                           "the ones a user would pick instead is not stated here."))
            continue
        t = peers.per_framework(table, fws)
        if t.empty:
            continue
        b += [("h", 3, f"Fairness on the {kind}: fwbench against its peers"), ("p", peers.sentence(table)),
              ("table", t, f"{kind}: per framework, the median ratio fwbench/peer of its pairs (GPT and DDPM, "
                           "forward and train step, every mode), the highest with its 95% interval, and the pairs "
                           "without a time with the reason.", f"peers-{device}")]
    return b


def appendix_blocks(df: pd.DataFrame, missing: dict[str, str], reasons: list[str]) -> list[Block]:
    """Set-up details, every case's numbers, the compile table, the capability matrix and the
    full reasons: complete, after the argument (cases.csv and data.csv hold the same)."""
    b: list[Block] = [("h", 2, "Appendix A: set-up"),
                      ("table", setup_table(df), "Machine, software and run settings of the runs.", "setup")]
    model = df[~df["workload"].isin(sections.WORKLOADS)]
    if not model.empty:
        b.append(("h", 2, "Appendix B: every case"))
        for wl, w in model.groupby("workload", sort=True):
            b.append(("h", 3, f"Workload {wl}"))
            b.append(("table", results_table(w), _results_caption(wl, w), f"results-{wl}"))
        ct = compile_table(model)
        if not ct.empty:
            b.append(("h", 2, "Appendix C: first calls and compilations"))
            b.append(("table", ct, "First call with every compile cache empty for the case (cold processes) and with "
                      "the run's cache filled by them (warm processes), geometric mean [95% t interval] over processes "
                      "(n), first calls that compiled nothing left out and counted, the framework's own compile timer, "
                      "compile latency = cold first call - the same mode's steady step (non-eager modes), break-even "
                      "steps against eager [95% interval] where the steps differ by the verdicts, and the compilations "
                      "each framework's own counter saw over the case.", "compile"))
        st = startup_table(df.attrs.get("runs", []))
        if not st.empty:
            b.append(("table", st, "Compiler start-up: in each process, before the first case of each compiled "
                      "mode, a throw-away program (its own function and shapes, a forward and its gradient) compiled "
                      "from empty caches, none of it kept where a case could find it; the one-off cost of the "
                      "compiler stack (imports, first compile, code generator) lands here instead of in the first "
                      "call of whichever case ran first. In no verdict and no choice.", "compiler-startup"))
        pos = position_line(df.attrs.get("first_position") or {})
        if pos:
            b.append(("p", pos))
    cap = figures.capability_table(df, missing)
    if not cap.empty:
        b.append(("h", 2, "Appendix D: capability matrix"))
        b.append(("table", cap, "Status of each case per framework, from the records (n/a: the framework has no "
                  "such mode).", "capability"))
    if reasons:
        b.append(("h", 2, "Appendix E: full reasons"))
        b.append(("ul", reasons))
    return b


def render(df: pd.DataFrame, out_dir: Path | str, weights: dict[str, float] | None = None,
           margin: float | None = None, pdf: bool | None = None, jobs: list[Job] | None = None,
           meta: paper_.Meta | None = None) -> dict[str, Path]:
    """Write figures, report.md, report.html, tables.tex, data.csv and cases.csv into out_dir:
    first into a hidden staging folder there, then moved into place together (running.atomic),
    so an interrupted render leaves the previous report whole."""
    final = Path(out_dir)
    margin = stats.MARGIN if margin is None else margin
    with atomic.staged(final) as staging, remembering():
        groups = rdata.machine_groups(df)
        if len(groups) > 1:
            paths = _render_machines(df, groups, staging, weights, margin, pdf, jobs)
        else:
            paths = _render(df, staging, weights, margin, pdf, jobs, meta)
        return {k: final / p.relative_to(staging) if isinstance(p, Path) else p for k, p in paths.items()}


def _render_machines(df: pd.DataFrame, groups: dict[str, pd.DataFrame], out_dir: Path,
                     weights: dict[str, float] | None, margin: float, pdf: bool | None,
                     jobs: list[Job] | None = None) -> dict[str, Path]:
    """Results from several machines: a whole report per machine in machine-<k>/,
    and an index that lists the machines with each one's summary table, side by side but
    never divided: a ratio between numbers of different machines is not stated anywhere."""
    blocks: list[Block] = [
        ("h", 1, f"fwbench: results from {len(groups)} machines"),
        ("p", "These results come from machines that differ in CPU, instruction set, cores, accelerator, driver or "
              "framework versions (frameworks.harness.machine.machine_fingerprint). Each machine has a report of "
              "its own, whose every ratio and verdict compares numbers of that machine only; this page shows their "
              "summaries one after the other and states no ratio between machines, since a difference between "
              "them mixes the machines with the frameworks.")]
    paths: dict[str, Any] = {}
    figure_problems: dict[str, list[str]] = {}
    for k, (mid, sub) in enumerate(groups.items(), start=1):
        folder = out_dir / f"machine-{k}"
        folder.mkdir(parents=True, exist_ok=True)
        sub_paths = _render(sub, folder, weights, margin, pdf, jobs)
        paths.update({f"machine-{k}:{n}": p for n, p in sub_paths.items()})
        figure_problems.update({f"machine-{k}/{n}": p for n, p in sub_paths["figure_problems"].items()})
        runs = sub.attrs.get("runs", [])
        r0 = runs[0] if runs else {}
        hosts = sorted({str(r.get("host")) for r in runs if r.get("host")})
        versions = sorted({f"{n} {v.get('version')}" for r in runs for n, v in (r.get("frameworks") or {}).items()
                           if isinstance(v, dict)})
        blocks += [("h", 2, f"Machine {k}: {r0.get('cpu') or 'CPU not recorded'}"),
                   ("p", f"machine_id {mid}; hosts {', '.join(hosts) or 'not recorded'}; "
                         f"{r0.get('cores') or '?'} CPUs; accelerator {r0.get('accelerator') or 'none'}; "
                         f"{', '.join(versions) or 'versions n/a'}; {len(runs)} result files. "
                         f"Its report: machine-{k}/report.md.")]
        ft = summary.framework_table(replicates.cases(sections.judged_in_report(sub)))
        if not ft.empty:
            blocks.append(("table", ft, f"Machine {k}, per framework and mode (speed relative to the fastest on "
                                        f"this machine).", f"machine-{k}"))
    paths.update({"md": out_dir / "report.md", "html": out_dir / "report.html", "tex": out_dir / "tables.tex",
                  "csv": out_dir / "data.csv", "paper": out_dir / "report.md", "figure_problems": figure_problems})
    paths["md"].write_text(markdown(blocks, out_dir), encoding="utf-8")
    paths["html"].write_text(html_doc(blocks), encoding="utf-8")
    paths["tex"].write_text(latex_tables(blocks), encoding="utf-8")
    write_csv(df, paths["csv"])
    return paths


def paper_text(cases: pd.DataFrame, blocks: list[Block], jobs: list[Job] | None = None,
               judged: pd.DataFrame | None = None) -> paper_.Text:
    """What paper.tex says beyond the report's blocks (reports.conclusions.narrative), for this run;
    judged: the report's family's cases as build prepared them (the paper's verdicts are the
    report's), made here otherwise."""
    df = sections.judged_in_report(cases) if judged is None else judged
    fam = findings.family_of(df)
    ct = next((b[1] for b in blocks if b[0] == "table" and b[3] == "claims"), None)
    key = next((b[1] for b in blocks if b[0] == "ul"), [])          # the Summary's sentences (its first list)
    wls = [w for w in ("gpt", "diffusion", "dynamic", "interop", "derivatives") if w in set(cases["workload"])]
    device = "an accelerator" if claims.on_gpu(cases) else (
        f"a {narrative.cores(cases)}-core CPU" if narrative.cores(cases) else "a CPU")
    return paper_.Text(
        abstract=narrative.abstract(df, fam, jobs, ct), provenance=narrative.provenance(cases, rendered_by()),
        work=narrative.work(cases), workloads=wls, workloads_table=narrative.workloads_table(cases),
        machine=narrative.machine(cases), versions=narrative.versions(cases),
        method=paper_.method_paragraph(df, fam), results=narrative.results(df, fam, key, jobs),
        job_why=narrative.job_why(df, jobs), discussion=narrative.discussion(df, fam, jobs),
        limitations=narrative.limitations(df, fam), reproducibility=narrative.reproducibility(cases, rendered_by()),
        conclusion=narrative.conclusion(df, fam, jobs, ct),
        title=f"Which framework for which job? PyTorch, JAX and TensorFlow on equal work on {device}",
        date=narrative.run_date(cases), authors=narrative.authors(), sets=rdata.side_by_side(cases))


def rendered_by() -> str | None:
    """The commit of the code rendering the report ('-dirty' with uncommitted changes to tracked files)."""
    from workloads.base import git_commit
    return git_commit()


def paper(cases: pd.DataFrame, blocks: list[Block], out_dir: Path, pdf: bool | None,
          jobs: list[Job] | None = None, meta: paper_.Meta | None = None,
          judged: pd.DataFrame | None = None) -> dict[str, Any]:
    """paper.tex and references.bib (the works it cites), and paper.pdf where a LaTeX engine is on
    the PATH (pdf None: unless FWBENCH_PDF=0). Returns the paths written, `paper_problems`, and where
    compiled `paper_pages` and `paper_fonts` (each figure's place, main or appendix, and smallest
    printed font in points: latex.printed_figures)."""
    import os
    tex, bib = out_dir / "paper.tex", out_dir / "references.bib"
    text = paper_text(cases, blocks, jobs, judged)
    body = paper_.article(blocks, text, meta)
    tex.write_text(body, encoding="utf-8")
    years = [d.year for d in narrative.dates(cases)]
    commit = ", ".join(narrative.commits(cases))
    bib.write_text(bibliography.bibtex(bibliography.cited(body), max(years) if years else None,
                                       f"commit {commit}" if commit else ""), encoding="utf-8")
    out: dict[str, Any] = {"paper": tex, "bib": bib, "paper_problems": []}
    if pdf is None:
        pdf = os.environ.get("FWBENCH_PDF", "1") != "0"
    if pdf:
        pages: dict[str, int] = {}
        fonts: dict[str, tuple[str, float]] = {}
        made, problems = latex.compile_pdf(tex, pages=pages, fonts=fonts)
        out["paper_problems"], out["paper_pages"], out["paper_fonts"] = problems, pages, fonts
        if made is not None:
            out["pdf"] = made
    return out


def _render(df: pd.DataFrame, out_dir: Path, weights: dict[str, float] | None, margin: float,
            pdf: bool | None = None, jobs: list[Job] | None = None, meta: paper_.Meta | None = None
            ) -> dict[str, Path]:
    weights = weights or dict(findings.DEFAULT_WEIGHTS)
    cases = replicates.cases(df)
    one = sections.judged_in_report(cases)       # the figures draw one-device cases
    # verdicts first, at the report's margin (build's): figures show break-even and flags
    findings.prepare(one, controls_and_margin(df, margin)[1])
    with figures.problems_of_saved() as figure_problems:
        figs = figures.draw_all(one, rdata.missing_frameworks(one), out_dir / "figures")
        figs.update(drawings.draw(one, out_dir / "figures"))
        figs.update(choice.draw(one, out_dir / "figures", jobs))
    blocks = build(cases, figs, weights, cases.attrs["notes"], margin, jobs, records=df, judged=one)
    paths = {"md": out_dir / "report.md", "html": out_dir / "report.html", "tex": out_dir / "tables.tex",
             "csv": out_dir / "data.csv", "cases_csv": out_dir / "cases.csv"}
    paths["md"].write_text(markdown(blocks, out_dir), encoding="utf-8")
    paths["html"].write_text(html_doc(blocks), encoding="utf-8")
    paths["tex"].write_text(latex_tables(blocks), encoding="utf-8")
    paths.update(paper(cases, blocks, out_dir, pdf, jobs, meta, one))
    write_csv(df, paths["csv"])
    write_csv(cases.drop(columns=replicates.process_columns(cases)).assign(times=None), paths["cases_csv"])
    paths.update({f"fig:{k}": v[0] for k, v in figs.items() if v[0] is not None})
    paths["figure_problems"] = {k: v for k, v in figure_problems.items() if v}
    return paths

"""The report document: one list of blocks rendered three ways.

    report.md     Markdown, figures linked from figures/*.png (PDF beside each)
    report.html   self-contained: CSS inline, figures embedded as base64 PNG
    tables.tex    every table as a booktabs `table` environment, ready for \\input
    data.csv      the tidy frame (without the per-round times): same JSON in, same bytes out
    cases.csv     one row per case, its processes pooled (reports.analysis.replicates.cases)

Nothing rendered depends on the time of rendering, so `fwbench report` on committed JSON
reproduces committed outputs.
"""
from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reports import sections
from reports.analysis import data as rdata
from reports.analysis import findings, precision, replicates, scaleout, stats, summary
from reports.analysis.data import TIMED, finite
from reports.rendering import escape, figures, latex
from reports.running import atomic
from reports.sections.common import has, missing_note
from workloads.framework_facts import FACTS

# ("h", level, text) | ("p", text) | ("ul", [text]) | ("table", df, caption, label) | ("fig", name, png, caption)
Block = tuple

# What each framework's `compilations` counter counts (the record's compile_counter has the details).
COUNTERS = {name: f.counter for name, f in FACTS.items()}
SHORT_REASON = 90          # characters of a reason shown in a table or list; the appendix has the rest

# The report's method text: facts of fwbench's code that make the frameworks' work differ,
# said once here (the set-up table adds each run's recorded settings).
METHOD = {
    "compiled mode": "What `compiled` compiles differs per framework. torch: torch.compile compiles the model "
                     "(forward, and backward through AOTAutograd); the fused AdamW update runs eagerly in the "
                     "default compiled case, so a torch train step compiles less than the others do. JAX "
                     "(jax.jit) and TensorFlow (tf.function with jit_compile=True) compile forward + backward + "
                     "gradient clipping + AdamW as one program.",
    "eager mode": "JAX's and TensorFlow's eager modes run op by op (JAX compiles each primitive on first use); "
                  "nobody uses them for speed, so a speedup over them is labelled 'op-by-op eager', and the "
                  "\"up to 40%\" claim is tested on torch.compile against torch eager only.",
    "generate": "torch decodes in a Python loop around a compiled step; JAX (lax.fori_loop) and TensorFlow "
                "(tf.while_loop) compile the whole decode loop.",
    "sample": "torch compiles one sampler step (t, a, b as tensors) and loops in Python; JAX (lax.scan) and "
              "TensorFlow (tf.while_loop) compile the whole sampling loop.",
    "layouts": "JAX and TensorFlow run the GPT's dense layers on flat (B*T, C) rows; torch keeps (B, T, C). "
               "Layout conversions happen once, when parameters are loaded.",
    "runtime": "Every framework runs in its own process with the same intra-op thread count and C heap policy; "
               "other runtime settings (XLA flags, allocators) are listed per framework in the set-up table.",
}


# ----------------------------------------------------------------------------- tables

def _uniq(values: Any) -> str:
    v = sorted({str(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))
                and str(x) != "nan"})
    return ", ".join(v) if v else "n/a"


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
        *([("CPU's bf16 instructions (of avx512f, avx512_bf16, amx_bf16, amx_tile, avx_vnni, avx512_fp16)",
            _uniq(", ".join(r["cpu_flags"]) or "none" for r in runs if r.get("cpu_flags") is not None))]
          if any(r.get("cpu_flags") is not None for r in runs) else []),
        ("accelerator", _uniq(r["accelerator"] for r in runs) if any(r["accelerator"] for r in runs) else "none"),
        ("device", _uniq(df["device"])),
        ("intra-op threads", _uniq(df["threads"])),
        ("fp32 GEMM rate (utilisation's denominator)",
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
        ("dtype", _uniq(df["dtype"])),
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
    if rates:
        text = ("float32 2048x2048 matmul at the thread count in force, best of 5, before the first case and after "
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
    rows = [("processes per framework", _uniq(f"{r['cold']} cold + {r['warm']} warm" if isinstance(r.get("cold"), int)
                                              and isinstance(r.get("warm"), int) else r.get("repeats") for r in runs)),
            ("environment padding (per process, random)",
             f"{min(pads)}-{max(pads)} bytes; environments of {min(envs)}-{max(envs)} bytes" if pads and envs
             else "n/a"),
            ("case order", _uniq(r.get("case_order") for r in runs)),
            ("Python garbage collector", _uniq(r.get("gc") for r in runs)),
            ("compile cache folders", _uniq(f"{f}: {d}" for r in runs for f, d in sorted((r.get("compile_cache_dirs")
                                                                                          or {}).items()))),
            ("jobs (result file: job id on host, start - end)", _jobs_text(runs))]
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
    """A row per case: steady step over warm processes, throughput, speedup over eager
    (paired), the cold processes' step over the warm ones', and the case's flags
    (findings.annotate) where a report added them. First calls, compile latency,
    break-even and the compile counters are in compile_table."""
    rows = []
    lacking = rdata.lacking_modes(w)
    for _, r in w.iterrows():
        timed = r["status"] in TIMED and finite(r["median_s"])
        n = r.get("n_processes", 1)
        rows.append({
            "task": r["task"] + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else ""),
            "framework": r["framework"], "mode": r["mode"],
            "status": "n/a" if (r["framework"], r["mode"]) in lacking else r["status"],
            "processes (cold+warm)": f"{_n(r, 'n_cold')}+{_n(r, 'n_warm')}" if timed else "",
            "step [95% CI]": (stats.fmt_time_ci(r["median_s"], r["median_lo_s"], r["median_hi_s"])
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


def _n(r: pd.Series, col: str) -> str:
    return f"{r[col]:.0f}" if finite(r.get(col)) else "0"


def _first(r: pd.Series, role: str) -> str:
    """'2.95 s [2.7, 3.2] (n=2)' for a role's first calls; '-' where none was measured."""
    m = r.get(f"first_call_{role}_s")
    if not finite(m):
        return "-"
    e = r.get(f"est_first_{role}")
    n = e.n if isinstance(e, stats.Est) else None
    return stats.fmt_time_ci(m, r.get(f"first_call_{role}_lo_s"), r.get(f"first_call_{role}_hi_s")) + \
        (f" (n={n})" if n else "")


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


def stability_lines(d: pd.DataFrame, fam: stats.Family | None = None) -> list[str]:
    """Replication, the spread between warm processes, the cold processes, the machine's
    state and what the flags found, as the reader needs them before trusting a verdict."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    if t.empty:
        return []
    margin = fam.margin if fam is not None else stats.MARGIN
    one = int((t["n_processes"] == 1).sum())
    lines = [f"{len(t) - one} of {len(t)} timed cases have two steady-state processes or more"
             + (f"; {one} have one: nothing between processes is tested for them, and their intervals cover "
                "round-to-round noise only (marked * in the results)." if one else ".")]
    sd, spread = d.attrs.get("warm_sd", math.nan), d.attrs.get("warm_spread", math.nan)
    if finite(sd):
        p = int(t["n_processes"].median())
        res = stats.resolution(sd, p)
        lines.append(f"Warm processes of the same case differ by {100 * sd:.1f}% (SD of their median steps, median "
                     f"over cases; the largest over the smallest of a case's {p} is {100 * spread:.1f}% in median, a "
                     "range that grows with the number of processes). At that spread a ratio of two cases of "
                     f"{p} processes each has a 95% interval of about +-{100 * res:.1f}% (wider at the verdicts' Holm "
                     "levels)."
                     + (f" WARNING: that exceeds the {100 * margin:.0f}% margin: no comparison can be shown "
                        "equivalent, and differences near the margin stay inconclusive; measure on a quieter machine "
                        "or with more processes." if res > margin else ""))
    cold = d.attrs.get("cold_over_warm", math.nan)
    if finite(cold):
        lines.append(f"The cold processes' steady step over the warm ones' (median over cases): {cold:.3f}x; per case "
                     "in the compile table. The cold processes measure first calls and this ratio only: every "
                     "steady-state number, interval and verdict comes from warm processes.")
    busy = t[t["busy"] == True]    # noqa: E712 (bools and None)
    recorded = t["busy"].notna().sum() if "busy" in t.columns else 0
    lines.append(f"Machine state: {len(busy)} of {len(t)} timed cases ran a timed round while another process used "
                 "CPU or the hypervisor stole time (flagged)." if recorded else
                 "Machine state: not recorded (result files from before fwbench recorded load and steal time).")
    if fam is not None and fam.m:
        lines.append(f"{fam.m} tested comparisons share one error rate (Holm): the chance of any false 'faster' or "
                     f"'slower' in this report is at most {100 * fam.alpha:.0f}%; {fam.stated()} state a difference.")
    return lines


def flag_sentence(d: pd.DataFrame, fam: stats.Family) -> str:
    """What the flags imply for this run, in one sentence."""
    keys = {k for c in fam.flags.values() for ks in c.values() for k in ks}
    stated = {k for k, j in fam.judged.items() if j.decided or j.verdict == stats.EQUIVALENT}
    t = d[d["status"].isin(TIMED)]
    busy = int((t.get("busy", pd.Series(dtype=object)) == True).sum())   # noqa: E712
    if not keys and not busy:
        return ("No verdict of this report changes on the second half of the rounds or without its most deviant "
                "process, and no case ran on a busy machine: the verdicts do not rest on an unstable measurement.")
    return (f"{len(keys & stated)} of the {len(stated)} stated verdicts (faster, slower or equivalent) change under "
            "a check: they are marked [flagged] where stated and by a dashed outline in the bar figures; read them "
            "as provisional" + (f"; {busy} case(s) ran while the machine was busy" if busy else "") + ".")


def flag_table(d: pd.DataFrame, fam: stats.Family) -> pd.DataFrame:
    """One row per flag reason: how many cases and comparisons it touches, and what it means."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    rows = []
    for why, meaning in findings.FLAG_MEANING.items():
        n = int(sum(why in str(f) for f in t.get("flags", pd.Series(dtype=str)).fillna("")))
        keys = {k for c in fam.flags.values() for k in c.get(why, ())}
        if n:
            rows.append({"flag": why, "cases": n, "verdicts it could change": len(keys) if keys else "-",
                         "what it means": meaning})
    return pd.DataFrame(rows)


def _case_name(r: pd.Series) -> str:
    return (f"{r['workload']} {r['task']} {r['framework']} {r['mode']}"
            + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else ""))


def short_reasons(d: pd.DataFrame) -> tuple[list[str], list[str]]:
    """One short line per case that did not run normally, and the appendix of full reasons."""
    lines, appendix = [], []
    lacking = rdata.lacking_modes(d)
    na = rdata.not_applicable(d)
    same: dict[tuple[str, str, str, str], list[str]] = {}      # one line for the modes that share a reason
    for r in findings.reasons(d[~na]):
        if (r["framework"], r["mode"]) not in lacking:
            same.setdefault((r["framework"], r["case"], r["status"], r["reason"]), []).append(r["mode"])
    for (fw, case, status, reason), modes in same.items():
        head = " ".join(reason.split())
        who = f"{fw} {'/'.join(modes)} {case}"
        if len(head) > SHORT_REASON:
            appendix.append(f"E{len(appendix) + 1}. {who}: {reason}")
            head = head[:SHORT_REASON].rstrip() + f"... (full text: Appendix E, E{len(appendix)})"
        lines.append(f"{who}: {status}: {head}")
    if lacking:
        lines.append("n/a (the framework has no such mode): " + ", ".join(f"{f} {m}" for f, m in sorted(lacking)))
    other = d[na & ~np.array([(f, m) in lacking for f, m in zip(d["framework"], d["mode"])], dtype=bool)]
    if len(other):
        per = other.groupby("framework")["strategy"].agg(lambda s: ", ".join(sorted({str(x) for x in s.dropna()})))
        lines.append(f"n/a (another framework's API: a strategy this framework does not have, recorded so the "
                     f"matrix is complete): {len(other)} cases; " + "; ".join(f"{f}: {v}" for f, v in per.items()))
    return lines, appendix


def section_blocks(df: pd.DataFrame, figs: dict[str, tuple[Path | None, str]], fam: stats.Family) -> list[Block]:
    """The registered sections (reports.sections), each only where its workload has records:
    its title, tables, figures and findings; a table or figure without its fields is a
    one-line note."""
    b: list[Block] = []
    lacking = rdata.lacking_modes(df)
    for s in sections.SECTIONS:
        d = df[df["workload"] == s.workload]
        if d.empty:
            continue
        b.append(("h", 2, s.title))
        for t in s.tables:
            made = t.make(d, lacking)
            if isinstance(made, str):
                b.append(("p", made))
            elif t.keep_empty or not made.empty:
                b.append(("table", made, t.caption, t.label))
        for plot in s.figures:
            b += _figure(figs, plot.name)
        b.append(("ul", s.findings(d, fam, lacking) or [s.no_findings]))
    return b


def section_figures(cases: pd.DataFrame, out_dir: Path) -> dict[str, tuple[Path | None, str]]:
    """Each section's figures where its workload has records: (PNG, caption), or (None, a
    one-line note) when the records lack its fields or it has nothing to draw."""
    df = escape.mpl_frame(cases)
    done: dict[str, tuple[Path | None, str]] = {}
    for s in sections.SECTIONS:
        d = df[df["workload"] == s.workload]
        if d.empty:
            continue
        for plot in s.figures:
            if not has(d, *plot.needs):
                done[plot.name] = (None, missing_note(f"The {plot.name} figure", d, plot.needs))
                continue
            fig = plot.draw(d)
            if fig is None:
                done[plot.name] = (None, f"The {plot.name} figure: not drawn, no case has the values it plots.")
                continue
            png, _ = figures.save(fig, out_dir, plot.name)
            done[plot.name] = (png, plot.caption)
    return done



def _steps(n: float | None, lo: float | None = None, hi: float | None = None) -> str:
    """'848 [630, 950]', 'never', '' (no break-even: the steps do not differ by the verdicts)."""
    if n is None or pd.isna(n):
        return ""
    if math.isinf(n):
        return "never"
    one = lambda x: "never" if math.isinf(x) else f"{x:,.0f}"   # noqa: E731
    return f"{n:,.0f}" + (f" [{one(lo)}, {one(hi)}]" if lo is not None and not pd.isna(lo) else "")


# ----------------------------------------------------------------------------- blocks

def build(df: pd.DataFrame, figs: dict[str, tuple[Path, str]], weights: dict[str, float],
          notes: list[str], margin: float = stats.MARGIN) -> list[Block]:
    """The document's blocks from replicates.cases (records are aggregated first). The
    report's comparisons are judged first, as one family (findings.report_family); the
    verdict-dependent columns (break-even, flags) are added to the frame in place. Its
    parts in the order a reader meets them: the introduction, the Summary, each section's
    workload, the model workloads' results, replication, compilation, findings, the choice
    of framework, what did not run, the method and the appendices."""
    df = replicates.cases(df)
    every = df
    df = scaleout.split(df)[0]       # data-parallel cases: their own section (scaleout_blocks)
    fam = findings.prepare(df, margin)
    missing = rdata.missing_frameworks(df)
    # the model workloads at fp32: the generic tables (other precisions: precision_blocks)
    model = precision.default_only(df[~df["workload"].isin(sections.WORKLOADS)])
    b = intro_blocks(df, fam, missing, margin)
    b += summary_blocks(df, fam, weights, scaleout.sentence(every, margin), scaleout.scope(every))
    b += section_blocks(df, figs, fam)
    b += precision_blocks(df, fam)
    b += scaleout_blocks(every, margin)
    b += model_blocks(model, figs, "Results", "Steady-state speed, speedup over eager, first call against step and "
                      "utilisation per task; every case's numbers with their intervals and flags are in Appendix B "
                      "(and cases.csv), first calls and compilations in Appendix C.",
                      ("throughput", "speedup", "first_call", "utilisation"))
    b += stability_blocks(df, fam)
    b += model_blocks(model, figs, "Compilation: cold and warm first calls", "First call with every compile cache "
                      "empty for the case (cold processes) and with the run's cache filled by them (warm processes); "
                      "per case, with intervals, compile latency, break-even and the frameworks' own compilation "
                      "counters, in Appendix C.", ("cold_warm",))
    b += findings_blocks(df)
    b += choice_blocks(df, weights)
    short, appendix = short_reasons(df)
    b += missing_blocks(df, missing, short, notes)
    b += [("h", 2, "Method"), ("ul", method_lines(df, fam))]
    return b + appendix_blocks(df, missing, appendix)


def precision_blocks(df: pd.DataFrame, fam: stats.Family) -> list[Block]:
    """bf16 against fp32 where a run has both (reports.analysis.precision)."""
    t = precision.table(df, fam)
    if t.empty:
        return []
    native = precision.native(df)
    cpu = ("the CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16), so the ratios are findings"
           if native else precision.why_silent(df))
    return [("h", 2, "Precision: bf16 against fp32"),
            ("p", "bf16 is one explicit policy in every framework (workloads/precision.py): parameters, gradients "
                  "and optimizer state in fp32, no loss scaling; the inputs of every matrix product and convolution "
                  "in bf16, their results back to fp32; norms, softmax (the attention's included, written out "
                  "where a fused attention would run it in bf16), activations and the loss in fp32. Each case's "
                  "bf16 time is over the same case's fp32 time, paired over the processes that ran both; here "
                  f"{cpu}. bf16 cases stay out of the framework comparisons and the choice, which read fp32."),
            ("table", t, "bf16 over fp32 step time per framework and mode: geometric mean over the tasks "
                         "[interval at the verdict's level] and the verdict (below 1: bf16 faster).", "precision"),
            ("table", precision.per_task(df), "bf16 and fp32 step time of every case that ran both.",
             "precision-tasks")]


def scaleout_blocks(df: pd.DataFrame, margin: float) -> list[Block]:
    """Data-parallel train steps against one device (reports.analysis.scaleout)."""
    if not scaleout.has(df):
        return []
    weak = scaleout.judged(df, margin)
    b: list[Block] = [
        ("h", 2, "Scale-out: data parallel"),
        ("p", "Each framework's idiomatic data parallel: torch DistributedDataParallel (one process per device, "
              "gloo on CPUs, NCCL on CUDA), JAX's jitted step over a device mesh with the batch sharded and the "
              "parameters replicated (GSPMD inserts the all-reduce), TensorFlow's MirroredStrategy (a custom "
              "training loop with one batched all-reduce). Strategies beside it: 'sharded' (ZeRO-3 / FSDP: torch "
              "FSDP2 fully_shard per block; JAX parameters and optimizer state sharded on the mesh, gathered "
              "where the loss uses them; TensorFlow has none here: its parameter sharding is DTensor, not built) "
              "and the 'no-sync' probe (the same step with its gradient synchronisation left out: torch no_sync, "
              "JAX shard_map without the reduction, TensorFlow's step without its all-reduce). The idioms differ "
              "in what they communicate: FSDP2 gathers every parameter twice (forward and backward), JAX's "
              "compiled program keeps the first gather for the backward, and reduces gradients by all-reduce "
              "where the CPU backend has no reduce-scatter (collectives table). Weak scaling: every device keeps "
              "the preset's batch, "
              "so the ideal N-device step takes as long as the one-device step with the same threads per device. "
              "Before timing, every data-parallel case ran 3 AdamW steps beside a one-device model on the same "
              "global batches and had to match its parameters (table below). The verdicts are on t(N)/t(1) "
              "paired by round of the run, in a Holm family of this section's own. A case with more devices x "
              "threads than CPUs measures sharing and gets no efficiency. " + scaleout.CAVEAT),
        ("table", weak, "Weak scaling: one step on N devices against one device, the same per-device batch and "
                        "threads per device.", "scaleout") if len(weak) else
        ("p", "Weak scaling: no data-parallel case has a one-device twin in these results (run with --devices "
              "1,N to time both)."),
        ("table", scaleout.communication(df), "Exposed communication: the data-parallel step against the same "
                                             "step without gradient synchronisation (no-sync probe) and against "
                                             "the sharded form, paired within processes (95% t interval over "
                                             "them). A share near 0 means the synchronisation is hidden or cheap; "
                                             "the probe is no training step and is never compared with one "
                                             "device.", "scaleout-communication"),
        ("table", scaleout.collectives(df), "What one data-parallel step communicates, by each framework's own "
                                           "account where it gives one, as bytes per device on a ring (an "
                                           "all-reduce moves 2(N-1)/N of its tensor, an all-gather or a "
                                           "reduce-scatter (N-1)/N), against the analytic: every gradient "
                                           "all-reduced once for data parallel; for the sharded form the "
                                           "parameters all-gathered in the forward and again in the backward "
                                           "and the gradients reduce-scattered, 1.5x data parallel.",
         "scaleout-collectives"),
        ("table", scaleout.checks(df), "Equivalence with one device before timing, and how the devices were "
                                      "placed on CPUs.", "scaleout-checks"),
        ("table", scaleout.ANCHORS, "Published scale-out results, cited, not measured: orientation for what "
                                    "the same frameworks reach on accelerator clusters.", "scaleout-anchors")]
    return b


def intro_blocks(df: pd.DataFrame, fam: stats.Family, missing: dict[str, str], margin: float) -> list[Block]:
    """The title and what the report holds and how to read its verdicts; whether it is
    indicative only, what was not measured and which runs ended early."""
    fws = rdata.framework_order(df["framework"])
    m = f"{100 * margin:.0f}%"
    b: list[Block] = [("h", 1, "fwbench report")]
    b.append(("p", f"{len(df)} cases of {len(fws)} framework(s) ({', '.join(fws) or 'none'}) on the "
                   f"workload(s) {_uniq(df['workload'])}, up to {df.attrs.get('max_processes', 0)} steady-state "
                   "process(es) each. A case's step time is the geometric mean of its warm processes' median round "
                   "times, with a 95% t interval over those processes; cold processes (every cache empty for every "
                   "case) give the first calls. Each comparison reads faster or slower (by at least the "
                   f"{m} margin, or not), equivalent within +-{m}, inconclusive, or not tested (one process); "
                   + (f"the {fam.m} tested comparisons of this report share one 5% chance of any false faster/slower "
                      "(Holm), so each verdict's interval is shown at its own level." if fam.m else
                      "no comparison of this report could be tested.")))
    if df.attrs.get("max_processes", 0) <= 1 and not df[df["status"].isin(TIMED)].empty:
        b.append(("p", "Indicative only: every case has a single steady-state process (as `fwbench run --quick` "
                       "measures), so no comparison between processes is tested and no framework is found faster "
                       "than another; the intervals cover round-to-round noise only. Run without --quick for "
                       "findings."))
    if missing:
        b.append(("p", "Not measured (not installed or not loadable): " +
                       "; ".join(f"{n}: {why}" for n, why in missing.items())))

    ended = [f"{r['run_file']}: {r['ended_by']}" for r in df.attrs.get("runs", []) if r.get("ended_by")]
    if ended:       # a run that fwbench run rebuilt, or kept after a timeout, crash or interrupt
        b.append(("p", "Runs that ended early: " + "; ".join(ended) + "."))
    return b


def model_blocks(model: pd.DataFrame, figs: dict[str, tuple[Path | None, str]], title: str, text: str,
                 names: tuple[str, ...]) -> list[Block]:
    """A part on the model workloads (none where none ran): its heading, what it shows and
    where the numbers are, and its figures."""
    if model.empty:
        return []
    return [("h", 2, title), ("p", text), *(blk for name in names for blk in _figure(figs, name))]


def stability_blocks(df: pd.DataFrame, fam: stats.Family) -> list[Block]:
    """Replication and stability: processes, spread, the machine's state and the flags."""
    b: list[Block] = [("h", 2, "Replication and stability")]
    b.append(("ul", stability_lines(df, fam) or ["No timed cases."]))
    ft = flag_table(df, fam)
    if not ft.empty:
        b.append(("table", ft, "Flags, by reason: a case is flagged only where its instability could change a "
                  "verdict (or the machine was busy, or it recompiled while timed).", "flags"))
    b.append(("p", flag_sentence(df, fam)))
    return b


def findings_blocks(df: pd.DataFrame) -> list[Block]:
    """Findings: the comparisons of step times per workload (findings.findings)."""
    b: list[Block] = [("h", 2, "Findings")]
    found = findings.findings(df)
    if not found:
        b.append(("p", "No timed cases, so no findings."))
    for wl, lines in found.items():
        b.append(("h", 3, f"Workload {wl}"))
        b.append(("ul", lines))
    return b


def choice_blocks(df: pd.DataFrame, weights: dict[str, float]) -> list[Block]:
    """Choosing a framework: how each concern is scored (a section's own in its words), the
    scores, their sensitivity to the weights and what would change the choice."""
    b: list[Block] = [("h", 2, "Choosing a framework")]
    if df[df["status"].isin(TIMED)].empty:
        b.append(("p", "No timed cases, so no ranking."))
    else:
        rank, rnotes = findings.ranking(df, weights)
        sens = findings.sensitivity(rank)
        b.append(("p", "Each framework is scored per concern on [0, 1], 1 being the best framework in this "
                       "report, over the work two frameworks or more ran (a variant only one framework has, such "
                       "as torch's train-step recipes, is left out of these means): throughput (geometric mean "
                       "over tasks of its best mode's throughput relative to the best), compile (the cold first "
                       "call of its fastest accelerated mode, the wait before the first result, relative to the "
                       "lowest; no floor), coverage (share of eager and accelerated slots that ran; fallback counts "
                       "half; a mode a framework does not have is n/a). No single weighting is the verdict: the second "
                       "table says under what share of a grid of weightings (each concern weighted 0 to 3) each "
                       "framework ranks first, and which concerns it leads on."
                       + "".join(" " + s.scoring for s in sections.SECTIONS if s.concern in rank.columns)))
        b.append(("table", rank.reset_index().assign(rank=lambda t: t["rank"].map(lambda v: f"{v:.0f}")),
                  "Framework scores per concern, and overall for the weights given (higher is better).", "ranking"))
        b.append(("table", sens.reset_index().assign(**{"ranks first under": lambda t: t["ranks first under"].map(
                  lambda v: f"{100 * v:.0f}% of weightings")}),
                  "Sensitivity of the choice to the weights.", "sensitivity"))
        b.append(("ul", findings.deciding_sentences(sens) + findings.flip_sentences(rank, weights)
                  + findings.ranking_sentences(rank, weights) + rnotes))
    return b


def missing_blocks(df: pd.DataFrame, missing: dict[str, str], short: list[str], notes: list[str]) -> list[Block]:
    """Missing frameworks, failed and unsupported cases (one short line each), and the
    input's problems."""
    b: list[Block] = [("h", 2, "Missing frameworks, failed and unsupported cases")]
    lines = [f"{n} missing: {why}" for n, why in missing.items()] + short
    b.append(("ul", lines) if lines else ("p", "Every case ran."))
    if notes or df.attrs.get("problems"):
        b.append(("h", 2, "Input problems"))
        b.append(("ul", list(df.attrs.get("problems", [])) + notes))
    return b


def summary_blocks(df: pd.DataFrame, fam: stats.Family, weights: dict[str, float],
                   more: list[str] | tuple[str, ...] = (), scope_more: str = "") -> list[Block]:
    """The Summary: what the data support (analysis.summary, and `more` findings of sections
    that read other cases, such as scale-out's), then the scope of the run."""
    b: list[Block] = [("h", 2, "Summary")]
    key = summary.key_findings(df, fam) + list(more)
    b.append(("ul", key) if key else ("p", "No timed cases, so nothing to summarise."))
    ft = summary.framework_table(df)
    if not ft.empty:
        b.append(("table", ft, "Per framework and mode, over the model tasks (default strategies): the geometric mean "
                  "of the task's fastest time over this one's (1.00: fastest everywhere), cold and warm first calls "
                  "(geometric means), cases that ran of those the mode has, and the peak memory where the framework "
                  "measures it on this device.", "summary"))
    if not df[df["status"].isin(TIMED)].empty:
        rank, _ = findings.ranking(df, weights)
        b.append(("p", summary.choice_sentence(rank, findings.sensitivity(rank), weights)
                       + " Best per concern: " + "; ".join(summary.recommendations(rank))
                       + " (the scores, weights and what drives them under Choosing a framework)."))
    b.append(("p", "Scope: " + " ".join([*summary.scope(df), *([scope_more] if scope_more else [])])))
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
            b.append(("table", results_table(w), f"{wl}: step time over warm processes (* one process: the interval "
                      "covers round-to-round noise only), throughput, speedup over the same framework's eager mode "
                      "(paired over processes; op-by-op: JAX's and TensorFlow's eager), the cold processes' step over "
                      "the warm ones', and the case's flags (see Replication and stability).", f"results-{wl}"))
        ct = compile_table(model)
        if not ct.empty:
            b.append(("h", 2, "Appendix C: first calls and compilations"))
            b.append(("table", ct, "First call with every compile cache empty for the case (cold processes) and with "
                      "the run's cache filled by them (warm processes), geometric mean [95% t interval] over processes "
                      "(n), first calls that compiled nothing left out and counted, the framework's own compile timer, "
                      "compile latency = cold first call - the same mode's steady step (non-eager modes), break-even "
                      "steps against eager [95% interval] where the steps differ by the verdicts, and the compilations "
                      "each framework's own counter saw over the case.", "compile"))
    cap = figures.capability_table(df, missing)
    if not cap.empty:
        b.append(("h", 2, "Appendix D: capability matrix"))
        b.append(("table", cap, "Status of each case per framework, from the records (n/a: the framework has no "
                  "such mode).", "capability"))
    if reasons:
        b.append(("h", 2, "Appendix E: full reasons"))
        b.append(("ul", reasons))
    return b


def method_lines(df: pd.DataFrame, fam: stats.Family) -> list[str]:
    """The Method section: how every number of the report was made."""
    m = f"{100 * fam.margin:.0f}%"
    return [
        "Each framework ran in its own processes with the same intra-op thread count; timed callables "
        "synchronise with the device and with everything the step changed; Python's garbage collector is "
        "collected and switched off before the warm-up calls and stays off through the timed rounds; inputs "
        "rotate between rounds.",
        "Processes: each framework ran cold processes (every case starts from a fresh in-process compile state and, "
        "in torch and JAX, an empty cache folder of its own, so a first call compiles everything whatever ran "
        "before it; their caches are then merged into the run's) and warm processes (fresh in-process state, the "
        "run's filled cache). Steady state comes from warm processes only; cold processes give cold first calls "
        "and the cold/warm step ratio. TensorFlow's XLA cache keys its entries by tf.function's process-unique "
        "names, so a warm TensorFlow process mostly compiles again (its warm first calls say so).",
        "Intervals: a case's step is the geometric mean of its processes' medians with a Student-t interval on "
        "the log process medians (df = processes - 1); ratios between processes use Welch's t on the two log "
        "means, contrasts within the same processes (a mode against eager, a transform against its loop, a new- "
        "against a seen-shape request) a t interval on the per-process log ratios. Coverage was checked by "
        "simulation at the default allocation with the variance components measured on the development machine "
        "(tests/test_reports_stats.py). A case of one process shows the order-statistic interval of its rounds "
        "(round noise only) and is not tested against anything.",
        f"Verdicts against a margin of {m} (--margin): faster or slower by at least the margin (the whole interval "
        f"beyond it), faster or slower (the interval excludes 1 but reaches inside the margin), equivalent within "
        f"+-{m} (the interval contains 1 and lies inside the margin), inconclusive (the interval contains 1 and "
        "reaches beyond the margin), not tested (one process on a side). `fwbench compare` uses the same.",
        f"One error rate: the report's {fam.m} tested comparisons form one family under Holm's step-down procedure "
        f"at 5%: the chance that any 'faster' or 'slower' of this report is false is at most 5%, whatever the other "
        "comparisons' truth. Each interval is shown at the level of its Holm step (1 - 0.05 / (m - j + 1) for the "
        "j-th smallest p-value; those Holm keeps at the level where it stopped), so it excludes 1 exactly when a "
        "difference is stated. Tables show plain 95% intervals.",
        "Flags: every stated verdict is recomputed on the second half of each process's rounds and with each side's "
        "most deviant process replaced by the others' median; a case is flagged only where that changes a verdict's "
        "class, where the machine was busy during its timed rounds (other processes' CPU use or steal time, recorded "
        "per case), where it recompiled during the timed rounds, or where a first call compiled nothing.",
        "first call = wall time of the first call (trace + compile + run): cold in cold processes, warm in warm ones; "
        "a non-eager first call that compiled nothing reused code and is left out. compile latency = a non-eager "
        "mode's cold first call minus the same mode's steady step (eager modes have none); break-even = the first "
        "step count n at which first call + (n-1) x step is below eager's, stated when the steps are faster by the "
        "verdicts ('never' when slower); their intervals come from draws of the same t distributions.",
        "compilations count each framework's own events: " + "; ".join(f"{f}: {c}" for f, c in COUNTERS.items())
        + ". They are not comparable across frameworks; a compilation during the timed rounds is flagged.",
        *[f"{k}: {v}" for k, v in METHOD.items()],
        *[t for s in sections.SECTIONS if (df["workload"] == s.workload).any() for t in s.method],
        "utilisation = model FLOPs per step / step time / the machine's fp32 GEMM rate (measured with "
        "numpy on the CPU, with a framework on an accelerator).",
    ]


def _figure(figs: dict[str, tuple[Path | None, str]], name: str) -> list[Block]:
    """The figure's block; a note instead where figures.draw_all found it too large to read."""
    if name not in figs:
        return []
    png, text = figs[name]
    return [("fig", name, png, text)] if png is not None else [("p", text)]


# ----------------------------------------------------------------------------- renderers

def _text(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def _md_cell(x: Any) -> str:
    return escape.markdown(_text(x))


def markdown(blocks: list[Block], out_dir: Path) -> str:
    out = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            out.append("#" * blk[1] + " " + _md_cell(blk[2]))
        elif kind == "p":
            out.append(_md_cell(blk[1]))
        elif kind == "ul":
            out.append("\n".join(f"- {_md_cell(x)}" for x in blk[1]))
        elif kind == "table":
            t = blk[1]
            lines = ["| " + " | ".join(map(_md_cell, t.columns)) + " |", "|" + "---|" * len(t.columns)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in t.itertuples(index=False)]
            out.append("\n".join(lines) + f"\n\n*Table: {_md_cell(blk[2])}*")
        elif kind == "fig":
            png = Path(blk[2]).relative_to(out_dir).as_posix()
            out.append(f"![{_md_cell(blk[1])}]({png})\n\n*Figure: {_md_cell(blk[3])}* ([PDF]({png[:-4]}.pdf))")
    return "\n\n".join(out) + "\n"


def _html_cell(x: Any) -> str:
    return escape.html(_text(x))


def html_doc(blocks: list[Block]) -> str:
    css = (Path(__file__).parent / "report.css").read_text(encoding="utf-8")
    title = next((b[2] for b in blocks if b[0] == "h"), "fwbench report")
    h = _html_cell
    body = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            body.append(f"<h{blk[1]}>{h(blk[2])}</h{blk[1]}>")
        elif kind == "p":
            body.append(f"<p>{h(blk[1])}</p>")
        elif kind == "ul":
            body.append("<ul>\n" + "\n".join(f"<li>{h(x)}</li>" for x in blk[1]) + "\n</ul>")
        elif kind == "table":
            t = blk[1]
            head = "".join(f"<th>{_html_cell(c)}</th>" for c in t.columns)
            rows = "\n".join("<tr>" + "".join(f"<td>{_html_cell(v)}</td>" for v in row) + "</tr>"
                             for row in t.itertuples(index=False))
            body.append(f"<table>\n<caption>{h(blk[2])}</caption>\n<thead><tr>{head}</tr></thead>\n"
                        f"<tbody>\n{rows}\n</tbody>\n</table>")
        elif kind == "fig":
            data = base64.b64encode(Path(blk[2]).read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{h(blk[1])}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{h(blk[3])}</figcaption></figure>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{h(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def latex_tables(blocks: list[Block]) -> str:
    """tables.tex: every table, fitted to the line width (reports.rendering.latex)."""
    return latex.tables_file(blocks)


def threats(df: pd.DataFrame) -> list[str]:
    """Threats to validity of this run, for the article."""
    out = []
    if not df["device"].isin(["cuda", "gpu"]).any():
        out.append("CPU only: nothing here is evidence about GPUs, where kernels, fusion and memory behave "
                   "differently.")
    th = sorted({int(x) for x in df["threads"].dropna()})
    out.append(f"Small models at {', '.join(map(str, th))} intra-op thread(s): per-step overheads (dispatch, Python "
               "loops) weigh more than at training scale.")
    sd = df.attrs.get("warm_sd", math.nan)
    if finite(sd):
        out.append(f"Processes of the same code differ by {100 * sd:.1f}% (SD of warm process medians): "
                   "differences near the margin stay inconclusive, and equivalence within it needs more processes.")
    out += ["Idioms differ by design: torch loops over a compiled step where JAX and TensorFlow compile the loop "
            "(generate, sample); JAX's and TensorFlow's eager modes run op by op.",
            "TensorFlow's persistent XLA cache keys programs by the tf.function's process-unique name, so its "
            "warm first calls compile again: a property of TensorFlow, measured, not of the harness.",
            "Equal work is checked at float32 tolerances (ten times the error achieved against float64 "
            "references); a difference below them would go unseen."]
    return out


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """The tidy frame without the per-round times; fixed float format and line endings."""
    escape.csv_frame(df.drop(columns=["times"])).to_csv(path, index=False, float_format="%.9g", lineterminator="\n")


def render(df: pd.DataFrame, out_dir: Path | str, weights: dict[str, float] | None = None,
           margin: float | None = None, pdf: bool | None = None) -> dict[str, Path]:
    """Write figures, report.md, report.html, tables.tex, data.csv and cases.csv into out_dir:
    first into a hidden staging folder there, then moved into place together (running.atomic),
    so an interrupted render leaves the previous report whole."""
    final = Path(out_dir)
    margin = stats.MARGIN if margin is None else margin
    with atomic.staged(final) as staging:
        groups = rdata.machine_groups(df)
        if len(groups) > 1:
            paths = _render_machines(df, groups, staging, weights, margin, pdf)
        else:
            paths = _render(df, staging, weights, margin, pdf)
        return {k: final / p.relative_to(staging) if isinstance(p, Path) else p for k, p in paths.items()}


def _render_machines(df: pd.DataFrame, groups: dict[str, pd.DataFrame], out_dir: Path,
                     weights: dict[str, float] | None, margin: float, pdf: bool | None) -> dict[str, Path]:
    """Results from several machines (issue 21): a whole report per machine in machine-<k>/,
    and an index that lists the machines with each one's summary table, side by side but
    never divided: a ratio between numbers of different machines is not stated anywhere."""
    blocks: list[Block] = [
        ("h", 1, f"fwbench: results from {len(groups)} machines"),
        ("p", "These results come from machines that differ in CPU, instruction set, cores, accelerator, driver or "
              "framework versions (frameworks.harness.machine.machine_fingerprint). Each machine has a report of "
              "its own, whose every ratio and verdict compares numbers of that machine only; this page shows their "
              "summaries one after the other and states no ratio between machines, since a difference between "
              "them mixes the machines with the frameworks.")]
    paths: dict[str, Path] = {}
    for k, (mid, sub) in enumerate(groups.items(), start=1):
        folder = out_dir / f"machine-{k}"
        folder.mkdir(parents=True, exist_ok=True)
        sub_paths = _render(sub, folder, weights, margin, pdf)
        paths.update({f"machine-{k}:{n}": p for n, p in sub_paths.items()})
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
        ft = summary.framework_table(replicates.cases(scaleout.split(sub)[0]))
        if not ft.empty:
            blocks.append(("table", ft, f"Machine {k}, per framework and mode (speed relative to the fastest on "
                                        f"this machine).", f"machine-{k}"))
    paths.update({"md": out_dir / "report.md", "html": out_dir / "report.html", "tex": out_dir / "tables.tex",
                  "csv": out_dir / "data.csv", "paper": out_dir / "report.md"})
    paths["md"].write_text(markdown(blocks, out_dir), encoding="utf-8")
    paths["html"].write_text(html_doc(blocks), encoding="utf-8")
    paths["tex"].write_text(latex_tables(blocks), encoding="utf-8")
    write_csv(df, paths["csv"])
    return paths


def paper(cases: pd.DataFrame, blocks: list[Block], out_dir: Path, pdf: bool | None) -> dict[str, Any]:
    """paper.tex and references.bib, and paper.pdf where a LaTeX engine is on the PATH
    (pdf None: unless FWBENCH_PDF=0). Returns the paths written and `paper_problems`."""
    import os
    fam = findings.family_of(cases)
    abstract = summary.key_findings(cases, fam)[:4] + summary.scope(cases)[:1]
    tex, bib = out_dir / "paper.tex", out_dir / "references.bib"
    tex.write_text(latex.article(blocks, abstract, threats(cases)), encoding="utf-8")
    bib.write_text(latex.bibtex(), encoding="utf-8")
    out: dict[str, Any] = {"paper": tex, "bib": bib, "paper_problems": []}
    if pdf is None:
        pdf = os.environ.get("FWBENCH_PDF", "1") != "0"
    if pdf:
        made, problems = latex.compile_pdf(tex)
        out["paper_problems"] = problems
        if made is not None:
            out["pdf"] = made
    return out


def _render(df: pd.DataFrame, out_dir: Path, weights: dict[str, float] | None, margin: float,
            pdf: bool | None = None) -> dict[str, Path]:
    weights = weights or dict(findings.DEFAULT_WEIGHTS)
    cases = replicates.cases(df)
    one = scaleout.split(cases)[0]               # the figures draw one-device cases
    findings.prepare(one, margin)                # verdicts first: figures show break-even and flags
    figs = figures.draw_all(one, rdata.missing_frameworks(one), out_dir / "figures")
    figs.update(section_figures(one, out_dir / "figures"))
    blocks = build(cases, figs, weights, cases.attrs["notes"], margin)
    paths = {"md": out_dir / "report.md", "html": out_dir / "report.html", "tex": out_dir / "tables.tex",
             "csv": out_dir / "data.csv", "cases_csv": out_dir / "cases.csv"}
    paths["md"].write_text(markdown(blocks, out_dir), encoding="utf-8")
    paths["html"].write_text(html_doc(blocks), encoding="utf-8")
    paths["tex"].write_text(latex_tables(blocks), encoding="utf-8")
    paths.update(paper(cases, blocks, out_dir, pdf))
    write_csv(df, paths["csv"])
    write_csv(cases.drop(columns=replicates.process_columns(cases)).assign(times=None), paths["cases_csv"])
    paths.update({f"fig:{k}": v[0] for k, v in figs.items() if v[0] is not None})
    return paths

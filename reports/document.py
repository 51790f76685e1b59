"""The report document: one list of blocks rendered three ways.

    report.md     Markdown, figures linked from figures/*.png (PDF beside each)
    report.html   self-contained: CSS inline, figures embedded as base64 PNG
    tables.tex    every table as a booktabs `table` environment, ready for \\input
    data.csv      the tidy frame (without the per-round times): same JSON in, same bytes out

Nothing rendered depends on the time of rendering, so `fwbench report` on committed JSON
reproduces committed outputs.
"""
from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any

import pandas as pd

from reports import data as rdata
from reports import atomic, escape, figures, findings, stats
from reports.data import TIMED, finite

Block = tuple  # ("h", level, text) | ("p", text) | ("ul", [text]) | ("table", df, caption, label) | ("fig", name, png, caption)


# ----------------------------------------------------------------------------- tables

def _uniq(values: Any) -> str:
    v = sorted({str(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))})
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
        ("accelerator", _uniq(r["accelerator"] for r in runs) if any(r["accelerator"] for r in runs) else "none"),
        ("device", _uniq(df["device"])),
        ("intra-op threads", _uniq(df["threads"])),
        ("fp32 GEMM rate (utilisation's denominator)",
         ", ".join(f"{g / 1e9:.1f} GFLOP/s" for g in sorted(set(gemm))) or "not measured"),
        ("GEMM measurement", _uniq(r["gemm_note"] for r in runs)
         + ("; each run's best: " + ", ".join(f"{g / 1e9:.1f}" for g in measured)
            + " GFLOP/s; a report uses the best of the runs on the same machine set-up"
            if len(measured) > 1 else "")),
        ("matmul precision", _uniq(df["matmul_precision"])),
        ("C heap (malloc)", _uniq(r.get("allocator") or "not recorded" for r in runs)),
        ("frameworks", "; ".join(f"{n} {', '.join(sorted(v))}" for n, v in
                                 sorted(versions.items(), key=lambda kv: figures.framework_order(versions).index(kv[0])))),
        ("workloads", _uniq(df["workload"])),
        ("presets", "; ".join(f"{w} {p}: {s}" for w, p, s in sorted(set(zip(df["workload"], df["preset"], df["shape"])))
                              if s != "n/a")),
        ("dtype", _uniq(df["dtype"])),
        ("compile cache before first call", _uniq(df["compile_cache"])),
        ("date of runs", _uniq(r["date"] for r in runs)),
        ("fwbench commit", _uniq(r["fwbench_commit"] for r in runs)),
        ("Python", _uniq(r["python"] for r in runs)),
        ("result files", _uniq(r["run_file"] for r in runs)),
    ]
    return pd.DataFrame(rows, columns=["", "value"])


def results_table(w: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in w.iterrows():
        timed = r["status"] in TIMED and finite(r["median_s"])
        rows.append({
            "task": r["task"] + (f" [{r['strategy']}]" if isinstance(r["strategy"], str) else ""),
            "framework": r["framework"], "mode": r["mode"], "status": r["status"],
            "median step [95% CI]": stats.fmt_time_ci(r["median_s"], r["median_lo_s"], r["median_hi_s"]) if timed else "",
            "throughput": f"{stats.fmt_count(r['throughput'])} {r['unit']}/s" if timed else "",
            "vs eager": (stats.fmt_ratio(r["speedup_vs_eager"], r["speedup_lo"], r["speedup_hi"])
                         if timed and r["mode"] != "eager" and finite(r["speedup_vs_eager"]) else ""),
            "first call": stats.fmt_seconds(r["first_call_s"]) if finite(r["first_call_s"]) else "",
            "break-even": _steps(r["break_even_steps"]),
            "compilations": f"{int(r['compilations'])}" if timed and not pd.isna(r["compilations"]) else "",
        })
    return pd.DataFrame(rows)


def _steps(n: float) -> str:
    if n is None or pd.isna(n):
        return ""
    return "never" if math.isinf(n) else f"{n:,.0f}"


# ----------------------------------------------------------------------------- blocks

def build(df: pd.DataFrame, figs: dict[str, tuple[Path, str]], weights: dict[str, float],
          notes: list[str]) -> list[Block]:
    missing = rdata.missing_frameworks(df)
    fws = figures.framework_order(df["framework"])
    b: list[Block] = [("h", 1, "fwbench report")]
    b.append(("p", f"{len(df)} result records of {len(fws)} framework(s) ({', '.join(fws) or 'none'}) on the "
                   f"workload(s) {_uniq(df['workload'])}. Medians of per-round wall times; 95% confidence "
                   "intervals by bootstrap of the median from the round data; a difference is called "
                   "significant only when the interval of the ratio excludes 1."))
    if missing:
        b.append(("p", "Not measured (not installed or not loadable): " +
                       "; ".join(f"{n}: {why}" for n, why in missing.items())))

    ended = [f"{r['run_file']}: {r['ended_by']}" for r in df.attrs.get("runs", []) if r.get("ended_by")]
    if ended:       # a run that fwbench run rebuilt, or kept after a timeout, crash or interrupt
        b.append(("p", "Runs that ended early: " + "; ".join(ended) + "."))

    b += [("h", 2, "Setup"), ("table", setup_table(df), "Machine and software of the runs.", "setup")]

    b.append(("h", 2, "Results"))
    for wl, w in df.groupby("workload", sort=True):
        b.append(("h", 3, f"Workload {wl}"))
        b.append(("table", results_table(w), f"{wl}: median step time, throughput, speedup over the same "
                  "framework's eager mode, first call and break-even steps.", f"results-{wl}"))
    for name in ("throughput", "speedup", "first_call", "utilisation"):
        b += _figure(figs, name)

    b.append(("h", 2, "Findings"))
    found = findings.findings(df)
    if not found:
        b.append(("p", "No timed cases, so no findings."))
    for wl, lines in found.items():
        b.append(("h", 3, f"Workload {wl}"))
        b.append(("ul", lines))

    b.append(("h", 2, "Capability matrix"))
    cap = figures.capability_table(df, missing)
    if not cap.empty:
        b.append(("table", cap, "Status of each case per framework, from the records.", "capability"))
    b += _figure(figs, "capability")

    b.append(("h", 2, "Missing frameworks, failed and unsupported cases"))
    lines = [f"{n} missing: {why}" for n, why in missing.items()]
    lines += [f"{r['framework']} {r['mode']} {r['case']}: {r['status']}: {r['reason']}" for r in findings.reasons(df)]
    b.append(("ul", lines) if lines else ("p", "Every case ran."))

    b.append(("h", 2, "Choosing a framework"))
    if df[df["status"].isin(TIMED)].empty:
        b.append(("p", "No timed cases, so no ranking."))
    else:
        rank, rnotes = findings.ranking(df, weights)
        b.append(("p", "Each framework is scored per concern on [0, 1], 1 being the best framework in this "
                       "report: throughput (geometric mean over cases of its best mode's throughput relative to "
                       "the best), compile (lowest compile latency relative to its own, for its fastest non-eager "
                       "mode; latencies under 1 s count as 1 s), coverage (share of eager and accelerated slots that ran; fallback counts half). "
                       "Overall is the weighted mean of the concern scores; a concern with no data for a framework "
                       "(an empty cell) counts 0 for it."))
        b.append(("table", rank.reset_index().assign(rank=lambda t: t["rank"].map(lambda v: f"{v:.0f}")),
                  "Framework scores per concern and overall (higher is better).", "ranking"))
        b.append(("ul", findings.ranking_sentences(rank, weights) + rnotes))

    if notes or df.attrs.get("problems"):
        b.append(("h", 2, "Input problems"))
        b.append(("ul", list(df.attrs.get("problems", [])) + notes))
    b.append(("h", 2, "Method"))
    b.append(("ul", [
        "Each framework ran in its own process with the same intra-op thread count; timed callables "
        "synchronise with the device; warm-up rounds precede the timed rounds; inputs rotate between rounds.",
        "first call = wall time of the first call (trace + compile + run); compile latency = a mode's first "
        "call minus eager's first call; break-even = the first step count n at which first call + (n-1) x "
        "median step is below eager's.",
        f"Confidence intervals: percentile bootstrap of the median, {stats.N_BOOT} resamples with fixed seeds; "
        "ratios from independent bootstraps of both medians.",
        "utilisation = model FLOPs per step / median step time / the machine's fp32 GEMM rate (measured with "
        "numpy on the CPU, with a framework on an accelerator).",
    ]))
    return b


def _figure(figs: dict[str, tuple[Path | None, str]], name: str) -> list[Block]:
    """The figure's block; a note instead where figures.draw_all found it too large to read."""
    if name not in figs:
        return []
    png, text = figs[name]
    return [("fig", name, png, text)] if png is not None else [("p", text)]


# ----------------------------------------------------------------------------- renderers

def _text(x: Any) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else (f"{x:.2f}" if isinstance(x, float) else str(x))


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


def tex_escape(s: Any) -> str:
    return escape.latex(_text(s))


def latex(blocks: list[Block]) -> str:
    out = ["% fwbench tables: \\usepackage{booktabs} in the preamble, then \\input{tables.tex}", ""]
    for blk in blocks:
        if blk[0] != "table":
            continue
        t, caption, label = blk[1], blk[2], blk[3]
        spec = "l" * len(t.columns)
        lines = [r"\begin{table}[htbp]", r"\centering", r"\small", rf"\caption{{{tex_escape(caption)}}}",
                 rf"\label{{tab:fwbench-{escape.latex_label(label)}}}", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
                 " & ".join(tex_escape(c) for c in t.columns) + r" \\", r"\midrule"]
        lines += [" & ".join(tex_escape(v) for v in row) + r" \\" for row in t.itertuples(index=False)]
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
        out += lines
    return "\n".join(out)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """The tidy frame without the per-round times; fixed float format and line endings."""
    escape.csv_frame(df.drop(columns=["times"])).to_csv(path, index=False, float_format="%.9g", lineterminator="\n")


def render(df: pd.DataFrame, out_dir: Path | str, weights: dict[str, float] | None = None) -> dict[str, Path]:
    """Write figures, report.md, report.html, tables.tex and data.csv into out_dir: first into
    a hidden staging folder there, then moved into place together (reports.atomic), so an
    interrupted render leaves the previous report whole."""
    final = Path(out_dir)
    with atomic.staged(final) as staging:
        paths = _render(df, staging, weights)
        return {k: final / p.relative_to(staging) for k, p in paths.items()}


def _render(df: pd.DataFrame, out_dir: Path, weights: dict[str, float] | None) -> dict[str, Path]:
    weights = weights or dict(findings.DEFAULT_WEIGHTS)
    cases, notes = rdata.latest(df)
    figs = figures.draw_all(cases, rdata.missing_frameworks(cases), out_dir / "figures")
    blocks = build(cases, figs, weights, notes)
    paths = {"md": out_dir / "report.md", "html": out_dir / "report.html", "tex": out_dir / "tables.tex",
             "csv": out_dir / "data.csv"}
    paths["md"].write_text(markdown(blocks, out_dir), encoding="utf-8")
    paths["html"].write_text(html_doc(blocks), encoding="utf-8")
    paths["tex"].write_text(latex(blocks), encoding="utf-8")
    write_csv(df, paths["csv"])
    paths.update({f"fig:{k}": v[0] for k, v in figs.items() if v[0] is not None})
    return paths

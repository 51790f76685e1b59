"""The report's figures, drawn from the tidy frame of measures.data, each saved as PNG and PDF.

Every function serves every workload: panels are laid out by the record's fields (a row
of panels per workload, a panel per task), bars by mode and framework, labels from the
record's unit. Nothing here knows what GPT or diffusion is.

    throughput     throughput per task by framework and mode (unit/s, 95% CI)
    speedup        speedup of each non-eager mode over the same framework's eager (CI),
                   with the "as high as 40%" claim drawn at 1.4x
    first_call     first-call time against steady-state step time, break-even step counts
    utilisation    achieved FLOP/s as a share of the machine's matrix-multiply rate at the case's precision
    (no capability figure: a page of "ok" carries no information; the capability matrix is a
     table in the report's appendix)
    cold_warm      first call with the compile cache empty (cold) and filled (warm), per framework

Colours: one fixed colour per framework in every figure, from seaborn's colour-blind-safe
"colorblind" palette; mode and status are also told apart by hatching, markers or text,
never by colour alone.
"""
from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from reports.conclusions.findings import CLAIM
from reports.measures import data as rdata
from reports.measures.data import (
    OP_BY_OP_EAGER,
    TIMED,
    finite,
    framework_order,
    lacking_modes,
    mode_order,
    not_applicable,
)
from reports.util import escape
from workloads.framework_facts import FACTS
from workloads.record import MODES

CB = sns.color_palette("colorblind").as_hex()
# each framework's colour (workloads/framework_facts.py: torch vermillion, jax blue, tensorflow
# bluish green, not a second orange); a framework without one takes the next free colour
FIXED_COLOURS = {name: CB[f.colour] for name, f in FACTS.items() if f.colour is not None}
SPARE_COLOURS = [CB[i] for i in (4, 1, 5, 6, 9, 8)]
MODE_MARKERS = {"eager": "o", "graph": "s", "compiled": "^"}
MODE_HATCH = {"eager": "", "graph": "..", "compiled": ""}
PANEL_W, PANEL_H = 2.3, 2.0    # inches per panel: three to a row fill PRINT_WIDTH_IN
# A main-text figure of the paper is drawn at the width it prints at, the paper's \\linewidth (letter paper,
# 2 cm margins: 498 pt, reports.rendering.latex.PAPER_LINE_PT), so its font sizes are its printed sizes
# (figures 12 inches wide printed at 2 pt); PRINT_FONTS: its text in points, none below 6.5.
PRINT_WIDTH_IN = 6.9
PRINT_FONTS = {"font.size": 7.5, "axes.titlesize": 8.0, "axes.labelsize": 7.5, "xtick.labelsize": 7.0,
               "ytick.labelsize": 7.0, "legend.fontsize": 7.0, "figure.titlesize": 8.0}


def colours(names: Any) -> dict[str, str]:
    """The fixed colour of each framework name (stable across figures and reports)."""
    out = dict(FIXED_COLOURS)
    others = sorted(set(names) - set(out))
    for i, n in enumerate(others):
        out[n] = SPARE_COLOURS[i % len(SPARE_COLOURS)]
    return out


@contextlib.contextmanager
def _style() -> Iterator[None]:
    """Seaborn's look for the duration of one figure, without changing global settings, with the
    print sizes of PRINT_FONTS: a figure three panels (PANEL_W) wide prints at its own sizes in the
    paper, the appendix's figures too (they printed at 1.3 to 5 pt)."""
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", rc=PRINT_FONTS):
        yield


@contextlib.contextmanager
def print_style() -> Iterator[None]:
    """The same look at print size: a figure drawn PRINT_WIDTH_IN wide in it prints at PRINT_FONTS."""
    with sns.axes_style("whitegrid"), sns.plotting_context("paper", rc=PRINT_FONTS):
        yield


def _figure(nrows: int, ncols: int, w: float = PANEL_W, h: float = PANEL_H) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(max(w * ncols, 5.0), h * nrows + 0.8), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def panel_grid(n: int, ncols: int, w: float = PANEL_W, h: float = PANEL_H) -> tuple[Figure, list[Any]]:
    """A figure of n panels in rows of at most ncols (call inside _style()), the unused ones
    hidden; returns the figure and its n visible axes, in order."""
    ncols = max(1, min(ncols, n))
    fig, axes = _figure(math.ceil(n / ncols), ncols, w, h)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def line_grid(n: int, ncols: int, h: float = PANEL_H) -> tuple[Figure, list[Any]]:
    """panel_grid across the print line's width (PRINT_WIDTH_IN) however few the panels: fewer
    than ncols share it (a legend of four columns above two panels ran out of a narrower figure)."""
    return panel_grid(n, ncols, PRINT_WIDTH_IN / max(1, min(ncols, n)), h)


def _panels(df: pd.DataFrame, col: str) -> tuple[list[str], dict[str, list[str]]]:
    """Workloads (rows of panels) and, per workload, the values of `col` (one panel each)."""
    workloads = sorted(df["workload"].unique())
    per = {w: sorted(df.loc[df["workload"] == w, col].unique()) for w in workloads}
    return workloads, per


def _each_panel(df: pd.DataFrame, col: str, w: float = PANEL_W, h: float = PANEL_H
                ) -> tuple[Figure, Iterator[tuple[Any, str, str, pd.DataFrame]]]:
    workloads, per = _panels(df, col)
    ncols = max(len(v) for v in per.values())
    fig, axes = _figure(len(workloads), ncols, w, h)

    def it() -> Iterator[tuple[Any, str, str, pd.DataFrame]]:
        for r, wl in enumerate(workloads):
            for c in range(ncols):
                ax = axes[r, c]
                if c >= len(per[wl]):
                    ax.set_visible(False)
                    continue
                v = per[wl][c]
                yield ax, wl, v, df[(df["workload"] == wl) & (df[col] == v)]
    return fig, it()


def _log_if_wide(ax: Any, values: Any) -> None:
    """Log scale where the values span more than a decade, with plain tick numbers."""
    v = np.asarray([x for x in values if finite(x) and x > 0], dtype=float)
    if len(v) and v.max() / v.min() > 10:
        ax.set_yscale("log")
        _plain_ticks(ax.yaxis, v.max() / v.min())


def _headroom(ax: Any, values: Any) -> None:
    """Room above the tallest bar or reference line for its whisker and label."""
    v = [x for x in values if finite(x) and x > 0]
    if v:
        ax.set_ylim(top=max(v) * (2.0 if ax.get_yscale() == "log" else 1.12))


def _plain_ticks(axis: Any, span: float, few: bool = False) -> None:
    """Log-axis ticks as 0.01, 1, 100 rather than powers of ten; 1-2-5 steps where the axis
    spans only a few decades, so it carries more than one or two labels (few: a narrow panel
    at print size, 1-3 steps below 2 decades, decades beyond)."""
    if few:
        subs = (1.0, 2.0, 5.0) if span < 12 else (1.0, 3.0) if span < 100 else (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs))
    elif span < 300:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(NullLocator())     # unlabelled minor ticks only cost layout time


def _line_label(ax: Any, y: float, text: str) -> None:
    """A label sitting on a horizontal reference line at the left, readable over bars."""
    ax.annotate(text, xy=(0.01, y), xycoords=("axes fraction", "data"), xytext=(0, 2.5),
                textcoords="offset points", ha="left", va="bottom", fontsize=7, zorder=5,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 0.8})


def _bars(ax: Any, sub: pd.DataFrame, x: Callable[[pd.Series], str], xs: list[str], fws: list[str],
          y: str, lo: str, hi: str, col: dict[str, str], scale: float = 1.0) -> list[float]:
    """Grouped bars: a group per x category, a bar per framework, 95% CI whiskers;
    fallback cases hatched; a flagged case (findings.annotate: its instability could
    change a verdict, or it ran on a busy machine) outlined in a thick dashed line. Returns
    the plotted heights and bounds (for the log decision)."""
    width = 0.8 / max(len(fws), 1)
    values = []
    for j, fw in enumerate(fws):
        for _, r in sub[sub["framework"] == fw].iterrows():
            if not finite(r[y]):
                continue
            pos = xs.index(x(r)) - 0.4 + width * (j + 0.5)
            height = r[y] * scale
            hatch = "//" if r["status"] == "fallback" else MODE_HATCH.get(r["mode"], "")
            flagged = isinstance(r.get("flags"), str) and bool(r.get("flags"))
            ax.bar(pos, height, width * 0.92, color=col[fw], edgecolor="black", hatch=hatch,
                   linewidth=1.6 if flagged else 0.4, linestyle="--" if flagged else "-")
            values.append(height)
            if finite(r[lo]) and finite(r[hi]):
                # max(0, .): a point on its interval's end may differ from it by rounding
                ax.errorbar(pos, height, yerr=[[max(0.0, height - r[lo] * scale)], [max(0.0, r[hi] * scale - height)]],
                            fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
                values += [r[lo] * scale, r[hi] * scale]
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    return values


def _mode_label(r: pd.Series) -> str:
    """The x category of a bar: the mode, and the dynamic-shape strategy where there is one."""
    return r["mode"] + (f"\n{r['strategy']}" if isinstance(r["strategy"], str) else "")


def _mode_labels(sub: pd.DataFrame) -> list[str]:
    order = {m: i for i, m in enumerate(mode_order(sub["mode"]))}
    rows = sorted({(order[r["mode"]], _mode_label(r)) for _, r in sub.iterrows()})
    return [label for _, label in rows]


def _framework_legend(fig: Figure, fws: list[str], col: dict[str, str], extra: list[Any] = (),
                      ncols: int = 6) -> None:
    handles = [Patch(facecolor=col[f], edgecolor="black", linewidth=0.4, label=f) for f in fws]
    n = len(handles) + len(extra)
    fit = max(1, int(fig.get_figwidth() / 1.3))         # columns of about 1.3 inches fit the figure's width
    fig.legend(handles=handles + list(extra), loc="outside upper center", ncols=min(n, ncols, fit), frameon=False)


def _unit(sub: pd.DataFrame) -> str:
    return "/".join(sorted(set(sub["unit"].dropna()))) or "items"


def _timed(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"].isin(TIMED) & df["median_s"].notna()]


def _fallback_note(df: pd.DataFrame) -> list[Any]:
    """Legend entries for the bars' other encodings, where the figure uses them: hatching
    (TensorFlow graph mode, a fallback case) and the dashed outline of a flagged case."""
    out = []
    if (df["mode"] == "graph").any():
        out.append(Patch(facecolor="white", edgecolor="black", hatch=MODE_HATCH["graph"], label="graph mode"))
    if (df["status"] == "fallback").any():
        out.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="fallback (partly eager)"))
    if "flags" in df.columns and any(isinstance(f, str) and f for f in df["flags"]):
        out.append(Patch(facecolor="white", edgecolor="black", linestyle="--", linewidth=1.6,
                         label="flagged (see Replication)"))
    return out


def state_scales(fig: Figure) -> None:
    """Every panel's y axis says its scale where the figure mixes them or uses a log one
    (log and linear panels alternated unannounced); a label saying it already is
    left alone."""
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_ylabel()]
    scales = {ax.get_yscale() for ax in axes}
    if scales == {"linear"}:
        return
    for ax in axes:
        label = ax.get_ylabel()
        if "scale" not in label and "linear" not in label:
            scale = f"{'log' if ax.get_yscale() == 'log' else 'linear'} scale"
            ax.set_ylabel(f"{label[:-1]}, {scale})" if label.endswith(")") else f"{label} ({scale})")


# ----------------------------------------------------------------------------- figures

def throughput(df: pd.DataFrame) -> Figure | None:
    """Throughput (unit/s) per task: x = mode, bar = framework, whiskers = 95% CI."""
    d = _timed(df)
    if d.empty:
        return None
    col, fws = colours(d["framework"]), framework_order(d["framework"])
    with _style():
        fig, panels = _each_panel(d, "task")
        for ax, wl, task, sub in panels:
            xs = _mode_labels(sub)
            vals = _bars(ax, sub, _mode_label, xs, fws, "throughput", "throughput_lo", "throughput_hi", col)
            _log_if_wide(ax, vals)
            ax.set_title(f"{wl} {task}\n({_shape(sub)})")
            ax.set_xlabel("mode")
            ax.set_ylabel(f"{_unit(sub)}/s")
        _framework_legend(fig, fws, col, _fallback_note(d))
    return fig


def speedup(df: pd.DataFrame) -> Figure | None:
    """Speedup of each non-eager mode over the same framework's eager, per task; drawn at the paper's
    printed width (print_style), one panel per workload, as the main text shows it for claim 1."""
    d = _timed(df)
    d = d[(d["mode"] != "eager") & d["speedup_vs_eager"].notna()]
    if d.empty:
        return None
    col, fws = colours(d["framework"]), framework_order(d["framework"])
    with print_style():
        fig, panels = _each_panel(d, "workload", w=PRINT_WIDTH_IN, h=2.1)
        for ax, wl, _, sub in panels:
            several = sub["mode"].nunique() > 1 or sub["strategy"].notna().any()
            label = (lambda r: f"{r['task']}\n{_short_mode_label(r)}") if several else (lambda r: r["task"])
            xs = sorted({label(r) for _, r in sub.iterrows()})
            vals = _bars(ax, sub, label, xs, fws, "speedup_vs_eager", "speedup_lo", "speedup_hi", col)
            _log_if_wide(ax, vals + [1.0, CLAIM])
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.axhline(CLAIM, color="black", linewidth=1.0, linestyle="--")
            _headroom(ax, vals + [CLAIM])
            ax.set_title(f"{wl}: speedup over the same framework's eager mode"
                         + (f" ({', '.join(f for f in fws if f in OP_BY_OP_EAGER)}: op by op)"
                            if set(fws) & set(OP_BY_OP_EAGER) else ""))
            ax.set_ylabel("speedup (x)")
            ax.set_xlabel("task" + ("  /  mode (strategy)" if several else f" ({sub['mode'].iloc[0]})"))
        claim = Line2D([], [], color="black", linewidth=1.0, linestyle="--",
                       label='"as high as 40%" claim for torch.compile (1.4x)')
        _framework_legend(fig, fws, col, _fallback_note(d) + [claim], ncols=4)
    return fig


def _short_mode_label(r: pd.Series) -> str:
    """The mode, and a strategy below it in parentheses without the mode's own name ('compiled-adamw'
    under compiled reads '(adamw)'), so a bar group's label stays as narrow as its task's name."""
    s = r["strategy"]
    if not isinstance(s, str):
        return r["mode"]
    return f"{r['mode']}\n({s.removeprefix(r['mode'] + '-')})"


def first_call(df: pd.DataFrame) -> Figure | None:
    """First-call time (trace + compile + run) against the steady-state step time, log-log,
    with each compiled case's break-even step count written next to it."""
    d = _timed(df)
    d = d[d["first_call_s"].notna()]
    if d.empty:
        return None
    col, fws = colours(d["framework"]), framework_order(d["framework"])
    with _style():
        fig, panels = _each_panel(d, "task", h=PANEL_H + 0.2)
        for ax, wl, task, sub in panels:
            notes = []
            for _, r in sub.iterrows():
                ax.scatter(r["median_s"], r["first_call_s"], color=col[r["framework"]], s=30,
                           marker=MODE_MARKERS.get(r["mode"], "D"), edgecolor="black", linewidth=0.4, zorder=3)
                if r["mode"] != "eager" and not pd.isna(r["break_even_steps"]):
                    n = r["break_even_steps"]
                    notes.append(("never" if math.isinf(n) else f"{n:,.0f}", r["median_s"], r["first_call_s"],
                                  col[r["framework"]]))
            ax.set_xscale("log")
            ax.set_yscale("log")
            x0, x1, y0, y1 = _ratio_guides(ax, sub)
            _plain_ticks(ax.xaxis, x1 / x0)
            _plain_ticks(ax.yaxis, y1 / y0)
            _annotate_apart(ax, notes)
            ax.set_title(f"{wl} {task}")
            ax.set_xlabel("steady step (s)")
            ax.set_ylabel("first call (s)")
        modes = mode_order(d["mode"])
        marks = [Line2D([], [], marker=MODE_MARKERS.get(m, "D"), color="grey", linestyle="", label=m) for m in modes]
        marks.append(Line2D([], [], color="none", label="numbers: break-even steps vs eager"))
        _framework_legend(fig, fws, col, marks)
    return fig


def _annotate_apart(ax: Any, notes: list[tuple[str, float, float, str]]) -> None:
    """Each (text, x, y, colour) beside its point, moved down a line where it would sit on an earlier
    one (break-even counts of neighbouring points printed over each other)."""
    placed: list[tuple[float, float]] = []
    for text, x, y, colour in sorted(notes, key=lambda n: -n[2]):
        px, py = ax.transData.transform((x, y))
        dy = 3.0
        while any(abs(px - qx) < 40 and abs(py + dy - qy) < 9 for qx, qy in placed):
            dy -= 9.0
        placed.append((px, py + dy))
        ax.annotate(text, (x, y), xytext=(4, dy), textcoords="offset points", fontsize=6.5, color=colour)


def _ratio_guides(ax: Any, sub: pd.DataFrame) -> tuple[float, float, float, float]:
    """Faint lines first call = k x step (k = 1, 10, 100, ...): how many steps the first call costs."""
    xs = sub["median_s"].astype(float)
    ys = sub["first_call_s"].astype(float)
    x0, x1 = xs.min() / 2, xs.max() * 2
    y0, y1 = min(ys.min(), xs.min()) / 2, ys.max() * 2
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    for k in (1, 10, 100, 1000, 10000):
        if k * x0 < y1:
            ax.plot([x0, x1], [k * x0, k * x1], color="grey", linewidth=0.5, linestyle=":", zorder=1)
            xt = min(x1, y1 / k) / 1.15
            if xt > x0 * 1.5:
                ax.text(xt, k * xt, f"{k}x", fontsize=6.5, color="grey", ha="right", va="bottom")
    return x0, x1, y0, y1


def utilisation(df: pd.DataFrame) -> Figure | None:
    """Achieved model FLOP/s as a percentage of the machine's GEMM rate at the case's precision."""
    d = _timed(df)
    d = d[d["utilisation"].notna() & (d["flops"] > 0)].copy()
    if d.empty:
        return None
    scale = d["flops"] / d["util_peak_flops"]                # utilisation = scale / median
    d["util_lo"], d["util_hi"] = scale / d["median_hi_s"], scale / d["median_lo_s"]
    col, fws = colours(d["framework"]), framework_order(d["framework"])
    rates = d.groupby(d["peak_precision"].fillna("fp32"))["util_peak_flops"].median()
    gemm = (f"{rates.index[0]} GEMM rate, {rates.iloc[0] / 1e9:.0f} GFLOP/s" if len(rates) == 1 else
            "GEMM rate: " + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in rates.items()) + " GFLOP/s")
    with _style():
        fig, panels = _each_panel(d, "task")
        for ax, wl, task, sub in panels:
            xs = _mode_labels(sub)
            vals = _bars(ax, sub, _mode_label, xs, fws, "utilisation", "util_lo", "util_hi", col, scale=100)
            _log_if_wide(ax, vals + [100.0])
            ax.axhline(100, color="black", linewidth=1.0, linestyle="--")
            _line_label(ax, 100, "100%")
            _headroom(ax, vals + [100.0])
            ax.set_title(f"{wl} {task}")
            ax.set_xlabel("mode")
            ax.set_ylabel("% of the GEMM rate")
        full = Line2D([], [], color="black", linewidth=1.0, linestyle="--", label=f"100% = the {gemm}")
        _framework_legend(fig, fws, col, _fallback_note(d) + [full], ncols=4)
    return fig


def _own_strategies(df: pd.DataFrame) -> set[tuple[str, str, str]]:
    """(framework, workload, strategy) that a framework has: one record of it or more that is
    not n/a."""
    d = df[df["strategy"].notna() & ~not_applicable(df)]
    return set(zip(d["framework"], d["workload"], d["strategy"]))


def capability_table(df: pd.DataFrame, missing: dict[str, str]) -> pd.DataFrame:
    """Status per case (rows: workload, task, mode[, strategy][, preset][, device]) x framework."""
    if df.empty:
        return pd.DataFrame()
    keys = ["workload", "task", "mode"]
    keys += [k for k in ("strategy", "preset", "device") if df[k].nunique(dropna=True) > 1
             or (k == "strategy" and df[k].notna().any())]
    d = df.assign(**{k: df[k].fillna("-") for k in keys})
    fws = framework_order(list(d["framework"]) + list(missing))
    lacking = lacking_modes(df)
    own = _own_strategies(df)
    d = d.assign(status=d["status"].where(~not_applicable(df), "n/a"))
    rows = []
    for key, g in d.groupby(keys, sort=False):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        for fw in fws:
            s = g.loc[g["framework"] == fw, "status"]
            foreign = row.get("strategy", "-") != "-" and (fw, row["workload"], row["strategy"]) not in own
            row[fw] = ("missing" if fw in missing else "n/a" if (fw, row["mode"]) in lacking
                      else s.iloc[-1] if len(s) else "n/a" if foreign else "not run")
        rows.append(row)
    t = pd.DataFrame(rows)
    t = t.sort_values(keys, key=lambda c: c.map(lambda m: MODES.index(m) if m in MODES else 9)
                      if c.name == "mode" else c, kind="stable").reset_index(drop=True)
    return t


def cold_warm(df: pd.DataFrame) -> Figure | None:
    """First call per non-eager case with a cold and a warm compile cache: x = mode and cache
    state, bar = framework (from replicates.cases' first_call_cold_s / first_call_warm_s)."""
    if "first_call_cold_s" not in df.columns:
        return None
    t = _timed(df)
    t = t[t["mode"] != "eager"]
    long = pd.concat([t.assign(first=t[f"first_call_{c}_s"], cache=c,
                               first_lo=t.get(f"first_call_{c}_lo_s", math.nan),
                               first_hi=t.get(f"first_call_{c}_hi_s", math.nan)) for c in ("cold", "warm")])
    long = long[long["first"].notna()]
    if long.empty:
        return None
    col, fws = colours(long["framework"]), framework_order(long["framework"])

    def label(r: pd.Series) -> str:
        return f"{_mode_label(r)}\n{r['cache']} cache"

    def one_line(r: pd.Series) -> str:
        return " ".join(_mode_label(r).split()) + f", {r['cache']}"
    with _style():
        fig, panels = _each_panel(long, "task")
        for ax, wl, task, sub in panels:
            many = len({label(r) for _, r in sub.iterrows()}) > 4   # variants: torch's train-step recipes
            lab = one_line if many else label
            xs = sorted({lab(r) for _, r in sub.iterrows()})
            _log_if_wide(ax, _bars(ax, sub, lab, xs, fws, "first", "first_lo", "first_hi", col))
            if many:                 # one slanted line per bar group
                for tick in ax.get_xticklabels():
                    tick.set_rotation(35)
                    tick.set_horizontalalignment("right")
                    tick.set_fontsize(6.5)
            ax.set_title(f"{wl}: {task}")
            ax.set_ylabel("first call (s)")
        _framework_legend(fig, fws, col, _fallback_note(long))
    return fig


# name -> (drawing, caption); STEADY and UNIT in a caption are the report's design's words for where
# a steady step comes from and what its intervals are over (summary.steady_source, summary.unit)
FIGURES: dict[str, tuple[Callable[..., Figure | None], str]] = {
    "throughput": (throughput, "Throughput per task by framework and mode (from STEADY; whiskers: 95% t "
                               "interval over UNIT). JAX's and TensorFlow's eager modes run op by op. A dashed "
                               "outline marks a flagged case."),
    "speedup": (speedup, "Speedup of compiled (and TensorFlow graph) mode over the same framework's eager "
                         "(paired over the UNIT both ran in; whiskers: 95% interval). JAX's and TensorFlow's "
                         "eager modes run op by op. Solid line: no change; dashed: the \"as high as 40%\" claim "
                         "(1.4x), made for torch.compile over torch eager. A dashed bar outline marks a flagged case."),
    "first_call": (first_call, "First call (trace + compile + run) against the steady-state step time. Dotted "
                               "guides: first call = k steps. Numbers: steps after which the compiled mode has "
                               "cost less total time than eager."),
    "utilisation": (utilisation, "Achieved model FLOP/s as a share of the machine's matrix-multiply rate at the "
                                 "case's precision (dashed line: 100%; a dashed bar outline marks a flagged case)."),
    "cold_warm": (cold_warm, "First call of each non-eager case with every compile cache empty for the case "
                             "(cold processes) and with the run's cache filled by them (warm processes): geometric "
                             "mean over processes, whiskers: 95% t interval (two processes or more)."),

}


def _visible_texts(ax: Any) -> list[tuple[str, Any]]:
    """(kind, Text) of an axes' tick labels inside its view limits (matplotlib keeps labels of
    ticks beyond them, undrawn) and of its annotations and texts, where drawn."""
    out = []
    for kind, axis in (("x tick", ax.xaxis), ("y tick", ax.yaxis)):
        lo, hi = sorted(axis.get_view_interval())
        for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
            inside = lo - 1e-12 * abs(hi) <= tick.get_loc() <= hi * (1 + 1e-12) + 1e-300
            if tick.get_visible() and tick.label1.get_visible() and inside:
                out.append((kind, tick.label1))
    out += [("text", t) for t in ax.texts]
    return [(k, t) for k, t in out if t.get_visible() and t.get_text().strip()]


def _clash(ta, tb, ba, bb, tol: float) -> bool:
    """Do two texts overlap on the page? Horizontal ones: their boxes; two slanted tick
    labels (parallel bands): the gap between their anchors across the slant is below one
    line of text."""
    rot = ta.get_rotation() % 180
    if rot and rot == tb.get_rotation() % 180:
        right = ta.get_horizontalalignment() == "right"
        gap = abs((ba.x1 - bb.x1) if right else (ba.x0 - bb.x0)) * math.sin(math.radians(rot))
        return gap + tol < ta.get_fontsize() * ta.figure.dpi / 72 * 0.9
    w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
    h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
    return w > tol and h > tol


def _renderer(fig: Figure) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def label_problems(fig: Figure, r: Any = None) -> list[str]:
    """What would not read at print size: two tick labels of one axis, or two texts
    (annotations) of one panel, that overlap by more than 2 points; a text that runs out of
    the figure. matplotlib computes each text's box with the figure's renderer (`r`: one
    whose last draw placed the texts, at the figure's dpi; else the figure is drawn)."""
    r = r if r is not None else _renderer(fig)
    fb, tol = fig.bbox, 2 * fig.dpi / 72
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        texts = [(k, t, t.get_window_extent(r)) for k, t in _visible_texts(ax)]
        for a, (ka, ta, ba) in enumerate(texts):
            if ba.x0 < fb.x0 - 1 or ba.x1 > fb.x1 + 1 or ba.y0 < fb.y0 - 1 or ba.y1 > fb.y1 + 1:
                out.append(f"panel {i}: {ka} {ta.get_text()!r} runs out of the figure")
            for kb, tb, bb in texts[a + 1:]:
                if ka == kb and _clash(ta, tb, ba, bb, tol):
                    out.append(f"panel {i}: {ka} {ta.get_text()!r} overlaps {kb} {tb.get_text()!r}")
    legends = [t for lg in fig.legends for t in lg.get_texts()]
    for t in fig.texts:          # a figure's title over its legend
        if t.get_visible() and t.get_text().strip():
            bt = t.get_window_extent(r)
            for u in legends:
                bu = u.get_window_extent(r)
                if min(bt.x1, bu.x1) - max(bt.x0, bu.x0) > tol and min(bt.y1, bu.y1) - max(bt.y0, bu.y0) > tol:
                    out.append(f"{t.get_text()[:40]!r} overlaps the legend's {u.get_text()[:40]!r}")
    for t in fig.texts + legends + [x for ax in fig.axes if ax.get_visible()
                                    for x in (ax.xaxis.label, ax.yaxis.label, ax.title)]:
        if t.get_visible() and t.get_text().strip():
            bx = t.get_window_extent(r)
            if bx.x0 < fb.x0 - 1 or bx.x1 > fb.x1 + 1 or bx.y0 < fb.y0 - 1 or bx.y1 > fb.y1 + 1:
                out.append(f"{t.get_text()[:40]!r} runs out of the figure")
    # an axis label or title over another panel's text (a two-line y label ran into the
    # panel above's tick labels)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    for i, ax in enumerate(shown):
        own = [t for t in (ax.xaxis.label, ax.yaxis.label, ax.title) if t.get_visible() and t.get_text().strip()]
        for other in shown[:i] + shown[i + 1:]:
            theirs = [t for _, t in _visible_texts(other)] + [t for t in (other.xaxis.label, other.yaxis.label,
                                                                          other.title) if t.get_text().strip()]
            for t in own:
                bt = t.get_window_extent(r)
                for u in theirs:
                    bu = u.get_window_extent(r)
                    if min(bt.x1, bu.x1) - max(bt.x0, bu.x0) > tol and min(bt.y1, bu.y1) - max(bt.y0, bu.y0) > tol:
                        out.append(f"{t.get_text()[:40]!r} overlaps {u.get_text()[:40]!r} of another panel")
    return out


def _x_overlaps(ax: Any, r: Any) -> bool:
    texts = [(t, t.get_window_extent(r)) for k, t in _visible_texts(ax) if k == "x tick"]
    return any(_clash(ta, tb, ba, bb, 2) for i, (ta, ba) in enumerate(texts) for tb, bb in texts[i + 1:])


SLANTS = ((30, 7.0), (60, 6.5), (90, 6.5))      # x tick labels that overlap: each step steeper, never below 6.5 pt


def declutter(fig: Figure, dpi: float | None = None, redraw: Callable[[], Any] | None = None) -> bool:
    """Where a panel's x tick labels overlap (long mode and strategy names side by side),
    write them on one line, slanted and smaller; steeper and smaller still if they overlap.
    Each pass measures every panel's labels as the figure was last drawn, slants those that
    overlap one step further (SLANTS) and draws the figure again, until none overlaps or none
    can slant further. dpi: measure as drawn at that resolution (a log axis gets more ticks at
    more dots per inch); redraw: how to draw it (save's own PNG savefig, so the figure is not
    drawn once more to be measured; then it must have been drawn at dpi already), else a canvas
    draw, first too. Whether any label changed."""
    from matplotlib import cbook
    level: dict[Any, int] = {}
    with cbook._setattr_cm(fig, dpi=dpi or fig.dpi):
        if redraw is None:
            redraw = lambda: _renderer(fig)        # noqa: E731
            redraw()
        while True:
            r = _measurer(fig)
            over = [ax for ax in fig.axes if level.get(ax, 0) < len(SLANTS) and _x_overlaps(ax, r)]
            if not over:
                return bool(level)
            for ax in over:
                angle, size = SLANTS[level.get(ax, 0)]
                level[ax] = level.get(ax, 0) + 1
                lim = ax.get_xlim()       # set_xticks widens the view to every tick given (log: beyond the data)
                ax.set_xticks(ax.get_xticks(), [" ".join(t.get_text().split()) for t in ax.get_xticklabels()],
                              rotation=angle, ha="right" if angle < 90 else "center", fontsize=size,
                              rotation_mode="anchor")
                ax.set_xlim(lim)
            redraw()


def _measurer(fig: Figure) -> Any:
    """A renderer that measures the figure's texts where its last draw placed them (no drawing)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
    return canvas.get_renderer()


def plain_log_labels(fig: Figure) -> None:
    """Log axes labelled 0.01, 10, 1e-05 in the tick labels' own size, never as mathtext's 10^-2,
    whose exponent prints at 0.7 of it (4.9 pt in the appendix's figures)."""
    from matplotlib.ticker import LogFormatterSciNotation
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "log" and isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                lo, hi = sorted(axis.get_view_interval())
                _plain_ticks(axis, hi / lo if lo > 0 else 1e6)


PNG_DPI = 150
_SAVED_PROBLEMS: list[dict[str, list[str]]] = []       # problems_of_saved's open collections


@contextlib.contextmanager
def problems_of_saved() -> Iterator[dict[str, list[str]]]:
    """Every figure `save`d inside the block, by name: what of it would not read
    (label_problems), measured as its PNG drew it (PNG_DPI: a log axis's most ticks), after
    declutter. reports.render returns them as `figure_problems`; `fwbench report` prints them."""
    found: dict[str, list[str]] = {}
    _SAVED_PROBLEMS.append(found)
    try:
        yield found
    finally:
        _SAVED_PROBLEMS.remove(found)


def save(fig: Figure, out_dir: Path, name: str) -> tuple[Path, Path]:
    """PNG (PNG_DPI, for screens and HTML) and PDF (vector, for papers), without timestamps;
    each y axis states its scale (state_scales); overlapping x tick labels are slanted
    (declutter), measured as the PNG's drawing placed them (the most ticks a log axis gets:
    the PDF's 72 dpi gets fewer), and the PNG drawn again where any was. The PDF keeps the PNG's
    layout instead of computing it again (its panels moved by at most 0.4 % of the width when it
    did; a third of the PDF's drawing time). (Drawing a figure is most of its cost: a draw of its
    own to measure the labels was a third of the figures' time.)"""
    plain_log_labels(fig)
    state_scales(fig)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf = out_dir / f"{name}.png", out_dir / f"{name}.pdf"
    draw_png = lambda: fig.savefig(png, dpi=PNG_DPI, metadata={"Software": None})     # noqa: E731
    draw_png()
    declutter(fig, PNG_DPI, draw_png)
    if _SAVED_PROBLEMS:
        from matplotlib import cbook
        with cbook._setattr_cm(fig, dpi=PNG_DPI):
            _SAVED_PROBLEMS[-1][name] = label_problems(fig, _measurer(fig))
    engine = fig.get_layout_engine()
    fig.set_layout_engine("none")
    try:
        fig.savefig(pdf, metadata={"CreationDate": None, "Creator": None, "Producer": None})
    finally:
        fig.set_layout_engine(engine)
    return png, pdf


# Beyond these a figure cannot be read (and costs minutes and gigabytes to draw): it is
# skipped, and the report says so and points at the tables and data.csv.
MAX_PANELS = 24          # panels of a figure with a panel per (workload, task)
MAX_GROUPS = 40          # bar groups in one panel of the speedup figure


def too_big(name: str, df: pd.DataFrame) -> str | None:
    """Why figure `name` would be too large to read, or None."""
    if df.empty:
        return None
    if name == "speedup":
        d = df[df["mode"] != "eager"]
        n = int(d.groupby("workload")[["task", "mode", "strategy"]].apply(lambda g: len(g.drop_duplicates())).max()) \
            if len(d) else 0
        limit, what = MAX_GROUPS, "bar groups in a panel"
    else:
        n, limit, what = df["workload"].nunique() * int(df.groupby("workload")["task"].nunique().max()), \
            MAX_PANELS, "panels"
    return too_many(name, n, limit, what)


def too_many(name: str, n: int, limit: int | None = None, what: str = "panels") -> str | None:
    """Why figure `name`, of `n` panels (or `what`; limit: MAX_PANELS), would be too large to
    read, or None: the one rule and note for every figure of the report (too_big; the Pareto
    figures, choice.py)."""
    limit = MAX_PANELS if limit is None else limit
    if n <= limit:
        return None
    return (f"The {name} figure is not drawn: it would have {n} {what} (more than {limit} can be read); "
            "the tables and data.csv hold every case.")


def caption(name: str, df: pd.DataFrame) -> str:
    """FIGURES' caption of `name` in the words of the report's design (STEADY, UNIT)."""
    text = FIGURES[name][1]
    for token, words in (("STEADY", rdata.steady_source(df)), ("UNIT", rdata.unit(df))):
        text = text.replace(token, words)
    return text


def draw_all(df: pd.DataFrame, missing: dict[str, str], out_dir: Path) -> dict[str, tuple[Path | None, str]]:
    """Draw and save every figure that has data; name -> (PNG path, caption), or
    (None, why) for a figure too large to read (too_big). Text from the result files is
    escaped for matplotlib first (escape.mpl)."""
    df = escape.mpl_frame(df)
    missing = {escape.mpl(k): v for k, v in missing.items()}
    done: dict[str, tuple[Path | None, str]] = {}
    for name, (fn, _) in FIGURES.items():
        why = too_big(name, df)
        if why:
            done[name] = (None, why)
            continue
        fig = fn(df)
        if fig is None:
            continue
        png, _ = save(fig, out_dir, name)
        done[name] = (png, caption(name, df))
    return done


def _shape(sub: pd.DataFrame) -> str:
    shapes = sorted(set(sub["shape"].dropna()))
    return shapes[0] if len(shapes) == 1 else f"{len(shapes)} shapes"

"""The report's generic parts, the ones no section owns: the introduction, the Summary, the
model workloads' figures, replication and stability (with the flags), the Findings, choosing
a framework, what did not run, and page 1's caveats. Each returns the
document's blocks (reports.rendering.sections.common.Block) or their sentences; the
document (reports.rendering.document) puts them in the reader's order with the sections'.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reports import sections
from reports.conclusions import findings, summary
from reports.measures import bullets, stats
from reports.measures import data as rdata
from reports.measures.data import TIMED, finite
from reports.rendering.sections.common import Block, figure_block

DETAILS_LABEL = "summary-details"   # the table under the Summary's bullets (paper.article keeps it there)
# page 1's caveats, which the paper repeats in its main text (paper.article finds them by these words)
INDICATIVE, NOT_MEASURED, ENDED_EARLY = "Indicative only:", "Not measured (not installed or not loadable):", \
    "Runs that ended early:"
CAVEATS = (INDICATIVE, NOT_MEASURED, ENDED_EARLY)
SHORT_REASON = 90          # characters of a reason shown in a table or list; the appendix has the rest


def _uniq(values: Any) -> str:
    v = sorted({str(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))
                and str(x) != "nan"})
    return ", ".join(v) if v else "n/a"


def _spread_lines(d: pd.DataFrame, t: pd.DataFrame, fam: stats.Family | None, margin: float) -> list[str]:
    """How much the replicates (warm processes, or sets) of a case differ, and what interval that
    gives a ratio: in a run of sets the ratios are paired by set, so the figure is the paired
    comparisons' own (summary.resolution), the unpaired one beside it."""
    sd, spread = d.attrs.get("warm_sd", math.nan), d.attrs.get("warm_spread", math.nan)
    multi = t[t["n_processes"] >= 2]
    if not (finite(sd) and len(multi)):
        return []
    sets, u = rdata.side_by_side(d), rdata.unit(d)
    p = int(multi["n_processes"].median())
    warm = "steady_from" in multi.columns and multi["steady_from"].astype(str).str.startswith("warm").all()
    res = stats.resolution(sd, p) if p >= stats.MIN_TESTED else math.nan
    who, of = (("Sets", "per-set steps, each the geometric mean of the set's blocks") if sets else
               ("Warm processes" if warm else "Steady-state processes", "median steps"))
    text = (f"{who} of the same case differ by {100 * sd:.1f}% (SD of their {of}, median over the {len(multi)} "
            f"cases with two or more; the largest over the smallest of a case's {p} {u} is {100 * spread:.1f}% in "
            f"median, a range that grows with the number of {u}).")
    paired = summary.resolution(d, fam) if sets and fam is not None and finite(res) else None
    if paired is not None and paired["n_between"]:
        text += (f" Paired by set (the machine's state during a cycle falls on both sides), a ratio between two "
                 f"frameworks' configurations has a 95% interval of about +-{100 * paired['between_95']:.1f}% "
                 f"(median of {paired['n_between']} comparisons; +-{100 * res:.1f}% were the sets not paired; wider "
                 "at the verdicts' Holm levels).")
        res = paired["between_95"]
    elif finite(res):
        text += (f" At that spread a ratio of two cases of {p} {u} each has a 95% interval of about "
                 f"+-{100 * res:.1f}% (wider at the verdicts' Holm levels).")
    else:
        text += (f" Cases with fewer than {stats.MIN_TESTED} {u} on a side are not tested: their tables show the "
                 f"{u}' min-max, not an interval.")
    if finite(res) and res > margin:
        text += (f" WARNING: that exceeds the {100 * margin:.0f}% margin: no comparison can be shown equivalent, and "
                 f"differences near the margin stay inconclusive; measure on a quieter machine or with more {u}.")
    return [text]


def stability_lines(d: pd.DataFrame, fam: stats.Family | None = None) -> list[str]:
    """Replication, the spread between warm processes, the cold processes, the machine's
    state and what the flags found, as the reader needs them before trusting a verdict."""
    t = d[d["status"].isin(TIMED) & d["median_s"].notna()]
    if t.empty:
        return []
    margin = fam.margin if fam is not None else stats.MARGIN
    one = int((t["n_processes"] == 1).sum())
    sets, u, noise = rdata.side_by_side(d), rdata.unit(d), rdata.noise(d)
    lines = [f"{len(t) - one} of {len(t)} timed cases have two steady-state {u} or more"
             + (f"; {one} have one: nothing between {u} is tested for them, and their intervals cover "
                f"{noise} noise only (marked * in the results)." if one else ".")]
    lines += _spread_lines(d, t, fam, margin)
    cold = d.attrs.get("cold_over_warm", math.nan)
    if finite(cold) and sets:
        lines.append(f"The cold sets' steady step over the warm sets' (median over cases): {cold:.3f}x; per case in "
                     "the compile table. Side by side, every set's blocks, cold and warm, enter the steady-state "
                     "numbers, intervals and verdicts; the cold sets alone give the cold first calls.")
    elif finite(cold):
        lines.append(f"The cold processes' steady step over the warm ones' (median over cases): {cold:.3f}x; per case "
                     "in the compile table. The cold processes measure first calls and this ratio only: every "
                     "steady-state number, interval and verdict comes from warm processes.")
    lines += summary.busy_scope(d)
    if fam is not None and fam.m:
        lines.append(f"{fam.m} tested comparisons share one error rate (Holm, op-by-op eager ones a group of their "
                     f"own): the chance of any false 'faster' or "
                     f"'slower' in this report is at most {100 * fam.alpha:.0f}%; {fam.stated()} state a difference.")
    return lines


def flag_sentence(d: pd.DataFrame, fam: stats.Family) -> str:
    """What the flags imply for this run, in one sentence."""
    keys = {k for c in fam.flags.values() for ks in c.values() for k in ks}
    stated = {k for k, j in fam.judged.items() if j.decided or j.verdict == stats.EQUIVALENT}
    t = d[d["status"].isin(TIMED)]
    busy = int((t.get("busy_left_out", pd.Series(dtype=float)).fillna(0) > 0).sum())
    if not keys and not busy:
        return ("No verdict of this report changes on the second half of the rounds or without its most deviant "
                "process, and no case ran on a busy machine: the verdicts do not rest on an unstable measurement.")
    changed = len(keys & stated)
    head = (f"{changed} of the {len(stated)} stated verdicts (faster, slower or equivalent) change under a check: they "
            "are marked [flagged] where stated and by a dashed outline in the bar figures; read them as provisional"
            if changed else "No stated verdict (faster, slower or equivalent) changes under a check" if stated else
            "No verdict is stated, so no check could change one")
    return head + (f"; {stats.plural(busy, 'case')} lost processes timed on a busy machine (left out)"
                   if busy else "") + "."


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


EMPTY_CELLS = ("", "n/a", "not measured")     # a column of only these says nothing (an all-n/a MFU column)


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and v.strip() in EMPTY_CELLS)


def without_empty_columns(blocks: list[Block]) -> list[Block]:
    """Every table block without its columns whose every cell is empty, n/a or not measured (the
    caption may still name them: what a column would hold is said once, where it could)."""
    out = []
    for b in blocks:
        if b[0] == "table" and len(b[1]) and len(b[1].columns) > 1:
            keep = [c for c in b[1].columns if not all(_empty(v) for v in b[1][c])]
            b = (b[0], b[1][keep], *b[2:]) if keep and len(keep) < len(b[1].columns) else b
        out.append(b)
    return out


def intro_blocks(df: pd.DataFrame, fam: stats.Family, missing: dict[str, str], margin: float,
                 recommendation: str = "", provenance: str = "") -> list[Block]:
    """The title, the recommendation (summary.recommendation: first on page 1), what the report
    holds and how to read its verdicts, where it came from (narrative.provenance: a run measured
    from a modified working tree says so); whether it is indicative only, what was not measured
    and which runs ended early."""
    fws = rdata.framework_order(df["framework"])
    m = f"{100 * margin:.0f}%"
    b: list[Block] = [("h", 1, "fwbench report")] + ([("p", recommendation)] if recommendation else [])
    wls = sorted({str(w) for w in df["workload"].dropna()})
    sets = rdata.side_by_side(df)
    unit, units = rdata.unit(df, one=True), rdata.unit(df)
    design = ("timed side by side in process sets: a case's step time is the geometric mean over sets of its "
              "blocks' time per call, with a 95% t interval over sets, and two configurations compare paired by "
              "set; cold sets (every cache empty) give the cold first calls, warm sets the warm ones" if sets else
              "a case's step time is the geometric mean of its warm processes' median round times, with a 95% t "
              "interval over those processes; cold processes (every cache empty for every case) give the first "
              "calls")
    b.append(("p", f"{stats.plural(len(df), 'case')} of {stats.plural(len(fws), 'framework')} "
                   f"({', '.join(fws) or 'none'}) on the workload{'s' if len(wls) != 1 else ''} "
                   f"{', '.join(wls) or 'n/a'}, up to "
                   f"{stats.plural(int(df.attrs.get('max_processes', 0)), 'steady-state ' + unit)} each, "
                   f"{design}. Each comparison reads faster or slower (by at least the "
                   f"{m} margin, or not), equivalent within +-{m}, inconclusive, or not tested "
                   f"(fewer than 3 {units}); "
                   + (f"the {fam.m} tested comparisons of this report share one 5% chance of any false faster/slower "
                      "(a correction for testing many comparisons at once, Holm's procedure: Method), so each "
                      "verdict's interval is shown at its own level, wider than 95%." if fam.m else
                      "no comparison of this report could be tested.")))
    if provenance:
        b.append(("p", provenance))
    if df.attrs.get("max_processes", 0) <= 1 and not df[df["status"].isin(TIMED)].empty:
        b.append(("p", f"{INDICATIVE} every case has a single steady-state {unit} (as `fwbench run --quick` "
                       f"measures), so no comparison between {units} is tested and no framework is found faster "
                       f"than another; the intervals cover {rdata.noise(df)} noise only. Run without --quick for "
                       "findings."))
    if missing:
        b.append(("p", f"{NOT_MEASURED} " +
                       "; ".join(f"{n}: {why}" for n, why in missing.items())))

    ended = [f"{r['run_file']}: {r['ended_by']}" for r in df.attrs.get("runs", []) if r.get("ended_by")]
    if ended:       # a run that fwbench run rebuilt, or kept after a timeout, crash or interrupt
        b.append(("p", f"{ENDED_EARLY} " + "; ".join(ended) + "."))
    return b


# The model workloads' parts: heading, what it shows and where the numbers are, its figures.
RESULTS = ("Results", "Steady-state speed, speedup over eager, first call against step and utilisation per task; "
           "every case's numbers with their intervals and flags are in Appendix B (and cases.csv), first calls and "
           "compilations in Appendix C.", ("throughput", "speedup", "first_call", "utilisation"))
COMPILATION = ("Compilation: cold and warm first calls", "First call with every compile cache empty for the case "
               "(cold processes) and with the run's cache filled by them (warm processes); per case, with intervals, "
               "compile latency, break-even and the frameworks' own compilation counters, in Appendix C.",
               ("cold_warm",))


def model_blocks(model: pd.DataFrame, figs: dict[str, tuple[Path | None, str]], title: str, text: str,
                 names: tuple[str, ...]) -> list[Block]:
    """A part on the model workloads (none where none ran): its heading, what it shows and
    where the numbers are, and its figures."""
    if model.empty:
        return []
    return [("h", 2, title), ("p", text), *(blk for name in names for blk in figure_block(figs, name))]


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
    """The weighted concerns, an appendix (the recommendation is the choice per job): how each
    concern is scored (a section's own in its words), the scores, their sensitivity to the
    weights and what would change the ranking."""
    b: list[Block] = [("h", 2, "Appendix F: weighted concerns"),
                      ("p", "Not the recommendation (that is the choice per job, from deployable configurations): "
                            "kept for readers who weigh concerns themselves (--weights).")]
    if df[df["status"].isin(TIMED)].empty:
        b.append(("p", "No timed cases, so no ranking."))
    else:
        rank, rnotes = findings.ranking(df, weights)
        sens = findings.sensitivity(rank)
        b.append(("p", "Each framework is scored per concern on [0, 1], 1 being the best framework in this "
                       "report, over the work two frameworks or more ran (a variant only one framework has, such "
                       "as torch's train-step recipes, is left out of these means): throughput (geometric mean "
                       "over tasks of its best mode's throughput relative to the best), compile (the cold first "
                       "call of its fastest configuration, the wait before the first result, relative to the "
                       "lowest; no floor; the same configuration as throughput's, eager included), coverage (share of "
                       "eager and accelerated slots that ran; fallback counts "
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


def summary_blocks(df: pd.DataFrame, every: pd.DataFrame, fam: stats.Family, answer: list[Block]) -> list[Block]:
    """The Summary: what the data support (conclusions.summary, then the sentences of sections
    judged from every case in a family of their own, such as scale-out's), the answer (the
    choice per job and the claims: rendering.choice.page_one), the per-mode table, then the
    scope of the run."""
    b: list[Block] = [("h", 2, "Summary")]
    key = summary.key_findings(df, fam) + summary.section_sentences(every, fam, own_family=True)
    untested = "" if fam.m else " (none could be tested: each needs 3 steady-state processes or sets a side)"
    b.append(("ul", key) if key else ("p", "No timed cases, so nothing to summarise." if df.empty else
                                      f"Nothing to summarise: no finding from this run's comparisons{untested}."))
    details = bullets.details_table(key)
    if not details.empty:
        b.append(("table", details, "The figures behind the Summary's bullets: per bullet (finding), the task, stream "
                  "or framework they are of, and the figures.", DETAILS_LABEL))
    b += answer
    ft = summary.framework_table(df)
    if not ft.empty:
        b.append(("table", ft, "Per framework and mode, over the model tasks (default strategies): the geometric mean "
                  "of the task's fastest time over this one's (1.00: fastest everywhere), cold and warm first calls "
                  "(geometric means), cases that ran of those the mode has, and the memory of one call (median over "
                  f"the tasks) by {summary.memory_instrument(df)}.", "summary"))
    b.append(("p", "Scope: " + " ".join([*summary.scope(df), *summary.resolution_line(df, fam),
                                          *summary.section_scopes(every)])))
    return b

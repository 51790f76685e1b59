"""Variance components of a set of runs, and the allocation of processes and rounds they
imply (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013).

    python -m reports.analysis.variance RESULTS...   # components, and simulated power per allocation

Per case with two or more warm processes, on the log scale (so each is about a relative SD):

    within    SD of a process's round times around its own median (pooled over its processes)
    between   SD of the warm processes' median round times, less what the rounds alone explain
              (the sample median of n rounds has about pi/2 x the variance of their mean)
    cold      the cold processes' steady state over the warm ones' (log ratio)
    shared    correlation of the process effects of two cases of one framework measured in the
              same processes (what a paired comparison cancels)

within and between pooled over cases (the square root of their mean variance: a median of
per-case estimates of two or three processes would be biased low), cold and shared by their
median over cases. With rounds costing c_r seconds and a process
costing c_p seconds of its own (start-up, first call, warm-up) per case, the variance of a
case's mean over P processes of n rounds is between^2 / P + (pi/2) within^2 / (P n): the
rounds per process that minimise it for a given time are n* = sqrt(c_p (pi/2) within^2 /
(c_r between^2)) (Kalibera & Jones' optimum), and the rest of the time buys processes.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from reports.analysis import replicates, stats
from reports.analysis.data import TIMED


@dataclass
class Components:
    within: float          # relative SD of one round around its process's median
    between: float         # relative SD between warm processes' medians (rounds' share removed)
    cold: float            # log(cold steady / warm steady), median over cases
    shared: float          # correlation of one process's effects on two cases of a framework
    cases: int             # cases with two warm processes or more

    def rounds(self, process_cost: float, round_cost: float) -> float:
        """Kalibera-Jones: rounds per process minimising the variance for a given time."""
        if not (self.between > 0 and round_cost > 0):
            return math.inf
        return math.sqrt(process_cost * math.pi / 2 * self.within ** 2 / (round_cost * self.between ** 2))


def components(df: pd.DataFrame) -> Components:
    """The components of a records frame (reports.load), see the module docstring."""
    t = df[df["status"].isin(TIMED) & df["median_s"].notna()]
    within, between, cold, n_cases = [], [], [], 0
    effects: dict[tuple[str, str], dict[str, float]] = {}     # (framework, case) -> {process: log deviation}
    for case, g in t.groupby("case"):
        recs = g.to_dict("records")
        steady, c_recs, warm, _ = replicates.roles(recs)
        logs = {replicates.proc_key(r): math.log(r["median_s"]) for r in steady}
        if len(logs) < 2:
            continue
        n_cases += 1
        w = [np.var(np.log(r["times"]), ddof=1) for r in steady if isinstance(r["times"], list) and len(r["times"]) > 2]
        wv = float(np.mean(w)) if w else 0.0
        n = float(np.mean([len(r["times"]) for r in steady if isinstance(r["times"], list)] or [1]))
        bv = float(np.var(list(logs.values()), ddof=1)) - math.pi / 2 * wv / n
        within.append(wv)
        between.append(bv)
        if c_recs and warm:
            cold.append(float(np.mean([math.log(r["median_s"]) for r in c_recs]) - np.mean(list(logs.values()))))
        m = np.mean(list(logs.values()))
        effects[(g["framework"].iloc[0], case)] = {k: v - m for k, v in logs.items()}
    pooled = (lambda v: math.sqrt(max(float(np.mean(v)), 0.0)) if v else math.nan)   # noqa: E731
    return Components(pooled(within), pooled(between), _med(cold), _shared(effects), n_cases)


def _med(v: Sequence[float]) -> float:
    return float(np.median(v)) if len(v) else math.nan


def _shared(effects: dict[tuple[str, str], dict[str, float]]) -> float:
    """Median correlation of process effects between two cases of one framework measured
    in the same (three or more) processes."""
    rs = []
    by_fw: dict[str, list[dict[str, float]]] = {}
    for (fw, _), e in effects.items():
        by_fw.setdefault(fw, []).append(e)
    for es in by_fw.values():
        for i in range(len(es)):
            for j in range(i + 1, len(es)):
                keys = sorted(set(es[i]) & set(es[j]))
                if len(keys) >= 3:
                    a, b = np.array([es[i][k] for k in keys]), np.array([es[j][k] for k in keys])
                    if a.std() > 0 and b.std() > 0:
                        rs.append(float(np.corrcoef(a, b)[0, 1]))
    return _med(rs)


def simulate(c: Components, warm: int, rounds: int, comparisons: int = 48, effect: float = 1.2,
             trials: int = 400, seed: int = 0) -> dict[str, float]:
    """By simulation with these components, at `warm` processes of `rounds` rounds and Holm
    at 5% over `comparisons` comparisons: `false`, the chance of any false faster/slower
    between two equally fast frameworks; `found`, the share of true differences of `effect`
    found when every comparison has one; `alone`, the chance of finding a single true
    difference among otherwise equal comparisons (Holm's hardest case: it must pass 5% /
    comparisons)."""
    rng = np.random.default_rng(seed)

    def est(mu: float, tag: str) -> stats.Est:
        eff = rng.normal(0.0, c.between, warm)
        return stats.Est.of({f"{tag}{i}": float(np.median(np.exp(mu + eff[i] + rng.normal(0.0, c.within, rounds))))
                             for i in range(warm)})
    out = {}
    for name in ("false", "found", "alone"):
        hits = []
        for t in range(trials):
            fam = stats.Family()
            mus = {"false": [0.0] * comparisons, "found": [math.log(effect)] * comparisons,
                   "alone": [math.log(effect)] + [0.0] * (comparisons - 1)}[name]
            pairs = [(est(0.0, f"a{t}.{k}."), est(mu, f"b{t}.{k}.")) for k, mu in enumerate(mus)]
            for _ in range(2):
                js = [fam.judge(str(k), a, b) for k, (a, b) in enumerate(pairs)]
                if not fam.closed:
                    fam.close()
            hits.append({"false": any(j.decided for j in js), "found": np.mean([j.decided for j in js]),
                         "alone": js[0].decided}[name])
        out[name] = float(np.mean(hits))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from reports.analysis.data import load  # not reports.load: analysis imports nothing above it
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__.split("\n\n")[1])
        return 2
    c = components(load(args))
    print(f"{c.cases} cases with two warm processes or more: within {100 * c.within:.1f}% per round, between "
          f"{100 * c.between:.1f}%, cold/warm {math.exp(c.cold):.3f}x, shared process effect r = {c.shared:.2f}")
    print("warm x rounds: any false faster/slower among 48 comparisons of equal frameworks; a 20% difference "
          "found (every comparison differs; one alone among 48)")
    for warm in (3, 4, 5, 6, 8):
        for rounds in (3, 6, 12):
            s = simulate(c, warm, rounds, trials=200)
            print(f"  {warm} x {rounds:2d}: {100 * s['false']:5.1f}%   {100 * s['found']:5.1f}%   "
                  f"{100 * s['alone']:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


"""Variance components of a set of runs, and the allocation of processes and rounds they
imply (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013).

    python -m reports.conclusions.variance RESULTS...           # the components
    python -m reports.conclusions.variance --allocation FOLDER  # simulated reports per allocation

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
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from reports.conclusions import findings, replicates
from reports.measures import stats
from reports.measures.data import TIMED, load
from workloads import options

GAP_S = 0.1     # the coordinator's pause before each block (reports.commands.coordinator.GAP_S; running sits above)


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


# ----------------------------------------------------------------------------- the report, simulated

@dataclass
class Plan:
    """The components of one report measured on a run (`plan`): per case its framework, the
    log SD between warm processes (the rounds' share removed) and within a process per round;
    per comparison of the report's family its two cases, group (stats.MAIN or stats.OP_BY_OP),
    kind (paired, welch) and measured log ratio; `shared`, the correlation of two cases'
    process effects within a framework; per framework and role a process's wall time and one
    round of all its cases (seconds), for the run-time estimate."""
    between: dict[str, float]
    within: dict[str, float]
    framework: dict[str, str]
    comparisons: list[tuple[str, str, str, str, str, float]]     # key, a, b, group, kind, log ratio
    shared: float
    rounds: int
    wall: dict[tuple[str, str], float]
    round_cost: dict[tuple[str, str], float]

    def between_frameworks(self) -> list[int]:
        """Indices of the comparisons between two frameworks in the main group (one per task
        and mode class the report words: the ones "calls a true 20% difference faster" is about)."""
        return [i for i, c in enumerate(self.comparisons)
                if c[3] == stats.MAIN and self.framework[c[1]] != self.framework[c[2]]]

    def run_time(self, cold: Mapping[str, int] | int, warm: int, rounds: int) -> float:
        """Seconds of processes a run at this allocation takes (the example's mean process wall
        time per framework and role, its rounds' share moved to `rounds`); nan without logs."""
        fws = sorted({f for f, _ in self.wall})
        if not fws:
            return math.nan
        out = 0.0
        for f in fws:
            c = cold.get(f, 0) if isinstance(cold, Mapping) else cold
            for role, n in (("cold", c), ("warm", warm)):
                if n and (f, role) not in self.wall:
                    return math.nan
                if n:
                    out += n * (self.wall[f, role] + (rounds - self.rounds) * self.round_cost[f, role])
        return out


def _log_wall(folder: Path, run_file: str) -> float:
    """A process's wall time from its log's pytest summary line ('... in 385.70s'); nan without one."""
    log = folder / "logs" / f"{Path(run_file).stem}.log"
    if not log.is_file():
        return math.nan
    hits = re.findall(r" in ([0-9.]+)s", log.read_text(errors="replace"))
    return float(hits[-1]) if hits else math.nan


def plan(df: pd.DataFrame, folder: Path | None = None) -> Plan:
    """The report's plan from a run's records (reports.load): its family as the report builds
    it (findings.report_family), the per-case components and, from `folder`'s logs, the
    process costs."""
    t = df[df["status"].isin(TIMED) & df["median_s"].notna()]
    between, within, framework = {}, {}, {}
    for case, g in t.groupby("case"):
        steady, _, _, _ = replicates.roles(g.to_dict("records"))
        logs = [math.log(r["median_s"]) for r in steady]
        rt = [np.log(r["times"]) for r in steady if isinstance(r["times"], list) and len(r["times"]) > 2]
        if len(logs) < 2 or not rt:
            continue
        wv = float(np.mean([np.var(x, ddof=1) for x in rt]))
        n = float(np.mean([len(x) for x in rt]))
        between[case] = math.sqrt(max(float(np.var(logs, ddof=1)) - math.pi / 2 * wv / n, 0.0))
        within[case] = math.sqrt(wv)
        framework[case] = str(g["framework"].iloc[0])
    fam = findings.report_family(df)
    comps = []
    for key in fam.pvalues:
        cs = fam.members.get(key, ())
        j = fam.judged.get(key)
        if len(cs) == 2 and all(c in between for c in cs) and j is not None:
            comps.append((key, cs[0], cs[1], fam.groups[key], j.kind, math.log(j.ratio)))
    wall: dict[tuple[str, str], list[float]] = {}
    rc: dict[tuple[str, str], list[float]] = {}
    if folder is not None:
        for (fw, role, run_file), g in t.groupby(["framework", "compile_cache", "run_file"]):
            w = _log_wall(Path(folder), str(run_file))
            if math.isfinite(w):
                wall.setdefault((fw, role), []).append(w)
                rc.setdefault((fw, role), []).append(float(g["median_s"].sum()))
    rounds = int(np.median(t["rounds"].dropna())) if t["rounds"].notna().any() else 6
    return Plan(between, within, framework, comps, components(df).shared, rounds,
                {k: float(np.mean(v)) for k, v in wall.items()}, {k: float(np.mean(v)) for k, v in rc.items()})


def draw(pl: Plan, warm: int, rounds: int, truth: np.ndarray, trials: int,
         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Simulated log process medians of each comparison's two sides, (trials, K, warm) each:
    process effects N(0, between) (within a framework correlated by `shared`, for a paired
    comparison's two cases), each process's median of `rounds` rounds N(0, within), side a
    shifted by `truth` (the true log ratio a/b)."""
    k = len(pl.comparisons)
    ba = np.array([pl.between[c[1]] for c in pl.comparisons])[None, :, None]
    bb = np.array([pl.between[c[2]] for c in pl.comparisons])[None, :, None]
    wa = np.array([pl.within[c[1]] for c in pl.comparisons])[None, :, None, None]
    wb = np.array([pl.within[c[2]] for c in pl.comparisons])[None, :, None, None]
    r = np.array([pl.shared if c[4] == "paired" else 0.0 for c in pl.comparisons])[None, :, None]
    r = np.clip(np.nan_to_num(r), 0.0, 1.0)
    z1, z2 = rng.standard_normal((2, trials, k, warm))
    la = truth[None, :, None] + ba * z1 + np.median(wa * rng.standard_normal((trials, k, warm, rounds)), axis=-1)
    lb = bb * (r * z1 + np.sqrt(1 - r ** 2) * z2) + np.median(wb * rng.standard_normal((trials, k, warm, rounds)),
                                                              axis=-1)
    return la, lb


def tests(pl: Plan, la: np.ndarray, lb: np.ndarray, hsu: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log ratio, its standard error, df) of each simulated comparison, as stats.ratio
    computes them: paired over the processes, Welch between them (Hsu's df; hsu=False: the
    Welch-Satterthwaite df, liberal in the tails Holm's first steps use at unequal spreads)."""
    n = la.shape[-1]
    paired = np.array([c[4] == "paired" for c in pl.comparisons])[None, :]
    d = la - lb
    diff = la.mean(-1) - lb.mean(-1)
    va, vb = la.var(-1, ddof=1) / n, lb.var(-1, ddof=1) / n
    se = np.where(paired, d.std(-1, ddof=1) / math.sqrt(n), np.sqrt(va + vb))
    df = np.full(se.shape, n - 1.0)            # paired: P - 1; Welch with Hsu's df: min(P_a, P_b) - 1
    if not hsu:
        with np.errstate(invalid="ignore", divide="ignore"):
            df = np.where(paired, df, (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (n - 1)))
    return diff, se, df


def holm(p: np.ndarray, groups: Sequence[str], shares: Mapping[str, float] = stats.GROUP_SHARES,
         alpha: float = stats.ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """stats.holm_levels over simulated reports at once: p (trials, K) -> (rejected, alpha'
    of each comparison's level), both (trials, K)."""
    trials, _ = p.shape
    names = sorted(set(groups))
    idx = {g: np.array([i for i, x in enumerate(groups) if x == g]) for g in names}
    weight = {g: shares.get(g, 1.0) for g in names}
    budget = {g: np.full(trials, alpha * w / sum(weight.values())) for g, w in weight.items()}
    rejected = np.zeros(p.shape, bool)
    level_alpha = np.zeros(p.shape)
    open_ = {g: np.ones(trials, bool) for g in names}
    for _ in range(len(names)):
        finished = {}
        for g in names:
            pg = p[:, idx[g]]
            m = pg.shape[1]
            order = np.argsort(pg, axis=1, kind="stable")
            sp = np.take_along_axis(pg, order, 1)
            steps = budget[g][:, None] / (m - np.arange(m))[None, :]
            nrej = np.cumprod(sp <= steps, axis=1).sum(1)
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, np.arange(m)[None, :].repeat(trials, 0), 1)
            rej = rank < nrej[:, None]
            a_at = np.where(rej, budget[g][:, None] / (m - rank),
                            budget[g][:, None] / (m - np.minimum(nrej, m - 1))[:, None])
            upd = open_[g]
            rejected[np.ix_(upd, idx[g])] = rej[upd]
            level_alpha[np.ix_(upd, idx[g])] = a_at[upd]
            finished[g] = upd & (nrej == m)
        rest = {g: open_[g] & ~finished[g] for g in names}
        n_rest = sum(rest[g].astype(int) for g in names)
        moved = False
        for g in names:
            give = finished[g] & (n_rest > 0)
            if give.any():
                moved = True
                for o in names:
                    if o != g:
                        budget[o] = budget[o] + np.where(give & rest[o], budget[g] / np.maximum(n_rest, 1), 0.0)
                budget[g] = np.where(give, 0.0, budget[g])
        open_ = rest
        if not moved:
            break
    return rejected, level_alpha


def _scenarios(measured: np.ndarray, bf: np.ndarray, main: np.ndarray, effect: float):
    """The two truths a simulation draws from: "power", every comparison between frameworks at a
    true `effect` (the others as measured); "null", every comparison of the main family equal."""
    power = measured.copy()
    power[bf] = -math.log(effect)
    null = measured.copy()
    null[main] = 0.0
    return (("power", power), ("null", null))


def simulate(pl: Plan, warm: int, rounds: int, effect: float = 1.2, trials: int = 1000, seed: int = 0,
             grouped: bool = True, margin: float = stats.MARGIN, per_comparison: bool = False,
             hsu: bool = True) -> dict[str, Any]:
    """Simulated reports of this plan at `warm` processes of `rounds` rounds. Two scenarios:
    `power`: every comparison between frameworks (Plan.between_frameworks) with a true
    difference of `effect` (a faster), the others at their measured ratios: `power` the share
    of those called faster (any verdict of faster), `power_m` faster by at least the margin,
    `coverage` the share of 95% ratio intervals and `case_coverage` of 95% case intervals
    that hold the truth. `null`: every main-group comparison at a true ratio of 1 (equal
    frameworks, compiled as fast as eager), the op-by-op ones at their measured ratios:
    `false`, the share of reports with any false faster/slower. grouped=False: one Holm
    family over all, hsu=False: Welch-Satterthwaite df (the design Hsu's df replaced)."""
    rng = np.random.default_rng(seed)
    measured = np.array([c[5] for c in pl.comparisons])
    main = np.array([c[3] == stats.MAIN for c in pl.comparisons])
    groups = [c[3] if grouped else stats.MAIN for c in pl.comparisons]
    bf = np.array(pl.between_frameworks(), int)
    out: dict[str, float] = {}
    for scenario, truth in _scenarios(measured, bf, main, effect):
        la, lb = draw(pl, warm, rounds, truth, trials, rng)
        diff, se, df = tests(pl, la, lb, hsu)
        p = 2 * sps.t.sf(np.abs(diff) / se, df)
        rej, a_at = holm(p, groups)
        if scenario == "power":
            hi = diff + sps.t.ppf(1 - a_at / 2, df) * se
            out["power"] = float(np.mean(rej[:, bf] & (diff[:, bf] < 0)))
            out["power_m"] = float(np.mean(rej[:, bf] & (hi[:, bf] < -math.log(1 + margin))))
            half = sps.t.ppf(0.975, df) * se
            out["coverage"] = float(np.mean(np.abs(diff - truth[None, :]) <= half))
            case_half = sps.t.ppf(0.975, warm - 1) * la.std(-1, ddof=1) / math.sqrt(warm)
            out["case_coverage"] = float(np.mean(np.abs(la.mean(-1) - truth[None, :]) <= case_half))
            if per_comparison:
                out["per_comparison"] = (rej[:, bf] & (diff[:, bf] < 0)).mean(0).tolist()
        else:
            wrong = rej & ((truth[None, :] == 0) | (np.sign(diff) != np.sign(truth[None, :])))
            out["false"] = float(np.mean(wrong.any(axis=1)))
    return out


ALLOCATIONS: tuple[tuple[str, Mapping[str, int] | int, int, int, bool, bool], ...] = (
    # (label, cold per framework, warm, rounds, grouped family, Hsu's df)
    ("2 cold + 5 warm, one Holm family, Satterthwaite df (the earlier design)", 2, 5, 6, False, False),
    ("2 cold + 5 warm", 2, 5, 6, True, True),
    ("2 cold + 6 warm", 2, 6, 6, True, True),
    ("2 cold + 7 warm", 2, 7, 6, True, True),
    ("2 cold + 7 warm, 4 rounds", 2, 7, 4, True, True),
    ("1 cold + 8 warm", 1, 8, 6, True, True),
    ("1 cold + 9 warm", 1, 9, 6, True, True),
    ("2 cold (TensorFlow 1) + 7 warm (not offered: --cold is one number for every framework)",
     {"torch": 2, "jax": 2, "tensorflow": 1}, 7, 6, True, True),
)


def allocation_table(pl: Plan, trials: int = 1000, seed: int = 0) -> list[str]:
    """The options, as markdown table lines."""
    out = ["| allocation | rounds | true 20% called faster (mean over tasks) | faster by the margin | "
           "any false faster/slower, equal speeds | 95% coverage, ratios | 95% coverage, cases | "
           "est. run time |", "|---|---|---|---|---|---|---|---|"]
    for label, cold, warm, rounds, grouped, hsu in ALLOCATIONS:
        s = simulate(pl, warm, rounds, trials=trials, seed=seed, grouped=grouped, hsu=hsu)
        t = pl.run_time(cold, warm, rounds)
        if (cold, warm, rounds, grouped, hsu) == (options.RUN_COLD, options.RUN_WARM, options.RUN_ROUNDS, True, True):
            label = f"**{label} (the defaults)**"
        out.append(f"| {label} | {rounds} | {100 * s['power']:.1f}% | {100 * s['power_m']:.1f}% | "
                   f"{100 * s['false']:.1f}% | {100 * s['coverage']:.1f}% | {100 * s['case_coverage']:.1f}% | "
                   + (f"{t / 60:.1f} min |" if math.isfinite(t) else "n/a |"))
    return out


def allocation_report(folder: str, trials: int = 4000) -> list[str]:
    """What `--allocation FOLDER` prints: the components, the options' table, per task the
    power at the defaults, and how it was made."""
    from workloads.base import FwbenchError
    df = load([folder])
    if "set" in df.columns and df["set"].notna().any():      # a run of sets: their own components
        return side_allocation_report(df, folder, trials)
    pl = plan(df, Path(folder))
    if not pl.between_frameworks():
        raise FwbenchError(f"{folder} holds no comparison between two frameworks with {stats.MIN_TESTED} or more warm "
                           "processes a side: the allocation is simulated from a full run's components (e.g. "
                           "reports/examples/cpu-2core)")
    c = components(df)
    out = [f"Components of {folder} ({c.cases} cases with two warm processes or more; pooled): within a process "
           f"{100 * c.within:.1f}% per round, between warm processes {100 * c.between:.1f}%, cold over warm "
           f"{math.exp(c.cold):.3f}x, shared process effect r = {c.shared:.2f}; the simulation uses each case's own "
           f"between and within SDs. {trials} simulated reports of the example's {len(pl.comparisons)} comparisons "
           f"per option (seed 0).", "", *allocation_table(pl, trials), ""]
    s = simulate(pl, options.RUN_WARM, options.RUN_ROUNDS, trials=trials, per_comparison=True)
    out.append(f"Per task at the defaults ({options.RUN_COLD} cold + {options.RUN_WARM} warm, {options.RUN_ROUNDS} "
               "rounds), "
               "a true 20% difference called faster:")
    for i, pw in zip(pl.between_frameworks(), s["per_comparison"]):
        key, a, b = pl.comparisons[i][:3]
        out.append(f"- {a} against {b} (between {100 * pl.between[a]:.1f}% and {100 * pl.between[b]:.1f}%): "
                   f"{100 * pw:.0f}%")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--allocation"]:
        if len(args) != 2 or not Path(args[1]).is_dir():
            print("usage: python -m reports.conclusions.variance --allocation RUN_FOLDER (a folder of result JSON "
                  "with its logs/, e.g. reports/examples/cpu-2core)")
            return 2
        from workloads.base import FwbenchError
        try:
            print("\n".join(allocation_report(args[1])))
        except FwbenchError as e:
            print(f"python -m reports.conclusions.variance --allocation: {e}", file=sys.stderr)
            return 2
        return 0
    if not args:
        print(__doc__.split("\n\n")[1])
        return 2
    c = components(load(args))
    print(f"{c.cases} cases with two warm processes or more: within {100 * c.within:.1f}% per round, between "
          f"{100 * c.between:.1f}%, cold/warm {math.exp(c.cold):.3f}x, shared process effect r = {c.shared:.2f}")
    return 0


# ----------------------------------------------------------------------------- side by side

@dataclass
class SidePlan:
    """The components of a run timed side by side (reports.commands.sets), per comparison of the
    report's family (key, a, b, group, measured log ratio, SD of one cycle's log ratio within a
    set, SD of a set's mean log ratio beyond its cycles'), and the run's costs: a set's wall time
    outside its cycles and one cycle's (every task's), from the run's own clock."""
    comparisons: list[tuple[str, str, str, str, float, float, float]]
    framework: dict[str, str]
    sets: int
    cycles: int
    set_fixed_s: float
    cycle_s: float

    def between_frameworks(self) -> list[int]:
        return [i for i, c in enumerate(self.comparisons)
                if c[3] == stats.MAIN and self.framework[c[1]] != self.framework[c[2]]]

    def run_time(self, sets: int, cycles: int) -> float:
        """Seconds a run of `sets` sets of `cycles` cycles takes at this run's costs."""
        return sets * (self.set_fixed_s + cycles * self.cycle_s)


def _cycle_logs(recs: list[dict[str, Any]]) -> dict[int, dict[int, float]]:
    """set -> cycle -> log seconds per call, of a case's primary (non-control) processes."""
    out: dict[int, dict[int, float]] = {}
    for r in recs:
        if r.get("control") is True or not isinstance(r.get("blocks"), list) or not math.isfinite(r.get("set") or
                                                                                                     math.nan):
            continue
        out[int(r["set"])] = {b["cycle"]: math.log(b["s"]) for b in r["blocks"] if b["s"] > 0}
    return out


def side_plan(df: pd.DataFrame, wall_s: float | None = None) -> SidePlan:
    """The side-by-side plan of a run's records (reports.load): its family as the report builds
    it, each comparison's components from its blocks, and, from the run's wall time (`wall_s`,
    default: the sum of its sets' own, set_wall_s), the cost of a set and of a cycle."""
    t = df[df["status"].isin(TIMED)]
    logs = {case: _cycle_logs(g.to_dict("records")) for case, g in t.groupby("case")}
    framework = {case: str(g["framework"].iloc[0]) for case, g in t.groupby("case")}
    fam = findings.report_family(df)
    comps = []
    for key in fam.pvalues:
        cs = fam.members.get(key, ())
        j = fam.judged.get(key)
        if len(cs) != 2 or j is None or not (logs.get(cs[0]) and logs.get(cs[1])):
            continue
        a, b = logs[cs[0]], logs[cs[1]]
        per_set = []
        for s in sorted(set(a) & set(b)):
            cyc = sorted(set(a[s]) & set(b[s]))
            if len(cyc) >= 2:
                per_set.append(np.array([a[s][c] - b[s][c] for c in cyc]))
        if len(per_set) < 2:
            continue
        within = math.sqrt(float(np.mean([x.var(ddof=1) for x in per_set])))
        means = np.array([x.mean() for x in per_set])
        c_bar = float(np.mean([len(x) for x in per_set]))
        between = math.sqrt(max(float(means.var(ddof=1)) - within ** 2 / c_bar, 0.0))
        comps.append((key, cs[0], cs[1], fam.groups[key], math.log(j.ratio), within, between))
    sets = int(t["set"].dropna().nunique()) if "set" in t else 0
    cycles = max((b["cycle"] for bl in t.get("blocks", []) if isinstance(bl, list) for b in bl), default=-1) + 1
    # one cycle: every block of every set's processes (controls too), and the coordinator's gap before each
    timed_blocks = [b for bl in t.get("blocks", []) if isinstance(bl, list) for b in bl]
    cycle_s = (sum(b["seconds"] for b in timed_blocks) + GAP_S * len(timed_blocks)) / max(sets * cycles, 1)
    if wall_s is None:          # every set's own wall time (reports.commands.sets writes it)
        walls = t.dropna(subset=["set"]).groupby("set")["set_wall_s"].max() if "set_wall_s" in t else pd.Series()
        wall_s = float(walls.sum()) if len(walls) else math.nan
    fixed = (wall_s - sets * cycles * cycle_s) / sets if sets else math.nan
    return SidePlan(comps, framework, sets, cycles, fixed, cycle_s)


def simulate_side(sp: SidePlan, sets: int, cycles: int, effect: float = 1.05, trials: int = 4000, seed: int = 0,
                  margin: float = stats.MARGIN) -> dict[str, float]:
    """Simulated reports of this plan at `sets` sets of `cycles` cycles: per comparison and set,
    the mean log ratio over its cycles (truth + between x z + within x mean of `cycles` z), a t
    test over sets, the report's Holm groups. `power`: every comparison between frameworks at a
    true `effect` (a faster), the share called faster; `half95`, `half_holm`: the median over
    those comparisons of the 95% and the Holm-level half-widths (as a fraction); `coverage`: the
    share of 95% intervals holding the truth; `false`: with every main-group comparison at 1, the
    share of reports with any false faster/slower."""
    rng = np.random.default_rng(seed)
    measured = np.array([c[4] for c in sp.comparisons])
    within = np.array([c[5] for c in sp.comparisons])[None, :, None]
    between = np.array([c[6] for c in sp.comparisons])[None, :, None]
    main = np.array([c[3] == stats.MAIN for c in sp.comparisons])
    groups = [c[3] for c in sp.comparisons]
    bf = np.array(sp.between_frameworks(), int)
    out: dict[str, float] = {}
    for scenario, truth in _scenarios(measured, bf, main, effect):
        k = len(sp.comparisons)
        d = (truth[None, :, None] + between * rng.standard_normal((trials, k, sets))
             + within * rng.standard_normal((trials, k, sets)) / math.sqrt(cycles))
        diff, se = d.mean(-1), d.std(-1, ddof=1) / math.sqrt(sets)
        df = float(sets - 1)
        p = 2 * sps.t.sf(np.abs(diff) / se, df)
        rej, a_at = holm(p, groups)
        if scenario == "power":
            out["power"] = float(np.mean(rej[:, bf] & (diff[:, bf] < 0)))
            half = sps.t.ppf(0.975, df) * se
            out["coverage"] = float(np.mean(np.abs(diff - truth[None, :]) <= half))
            out["half95"] = float(np.median(np.expm1(half[:, bf])))
            out["half_holm"] = float(np.median(np.expm1(sps.t.ppf(1 - a_at[:, bf] / 2, df) * se[:, bf])))
        else:
            wrong = rej & ((truth[None, :] == 0) | (np.sign(diff) != np.sign(truth[None, :])))
            out["false"] = float(np.mean(wrong.any(axis=1)))
    return out


# (sets, cycles) a side-by-side allocation table offers
SIDE_ALLOCATIONS: tuple[tuple[int, int], ...] = (
    (3, 10), (3, 30), (4, 20), (6, 10), (6, 20), (8, 10), (8, 20), (12, 10))


def side_allocation_report(df: pd.DataFrame, folder: str, trials: int = 4000) -> list[str]:
    """What `--allocation FOLDER` prints for a run of sets: its components (per comparison between
    frameworks, the SD of a cycle's log ratio and of a set's mean beyond its cycles'), then per
    (sets, cycles) the simulated power at a true 5% and 10% difference, the median half-widths at
    95% and at the Holm levels, coverage, the false-claim rate and the run time at the run's costs."""
    from workloads.base import FwbenchError
    sp = side_plan(df)
    bf = sp.between_frameworks()
    if not bf or sp.sets < 2:
        raise FwbenchError(f"{folder} holds no comparison between two frameworks over 2 sets or more: the "
                           "allocation is simulated from a run of sets (fwbench run --cold 1 --warm 2 or more)")
    w = [sp.comparisons[i][5] for i in bf]
    b = [sp.comparisons[i][6] for i in bf]
    out = [f"Components of {folder} ({sp.sets} sets of {sp.cycles} cycles; {len(sp.comparisons)} comparisons, "
           f"{len(bf)} between frameworks): a cycle's log ratio SD {100 * float(np.median(w)):.1f}% (median; "
           f"{100 * min(w):.1f}-{100 * max(w):.1f}%), a set's mean beyond its cycles' {100 * float(np.median(b)):.1f}% "
           f"({100 * min(b):.1f}-{100 * max(b):.1f}%); a set costs {sp.set_fixed_s / 60:.1f} min outside its "
           f"cycles and {sp.cycle_s:.0f} s a cycle. {trials} simulated reports per option (seed 0).", "",
           "| sets | cycles | true 5% called faster | true 10% called faster | half-width 95% | half-width at "
           "Holm levels | coverage 95% | any false faster/slower | est. run time |",
           "|---|---|---|---|---|---|---|---|---|"]
    for sets, cycles in SIDE_ALLOCATIONS:
        s5 = simulate_side(sp, sets, cycles, 1.05, trials)
        s10 = simulate_side(sp, sets, cycles, 1.10, trials)
        t = sp.run_time(sets, cycles)
        mark = "**" if (sets, cycles) == (options.SETS_COLD + options.SETS_WARM, options.RUN_CYCLES) else ""
        out.append(f"| {mark}{sets}{mark} | {cycles} | {100 * s5['power']:.1f}% | {100 * s10['power']:.1f}% | "
                   f"+-{100 * s5['half95']:.1f}% | +-{100 * s5['half_holm']:.1f}% | {100 * s5['coverage']:.1f}% | "
                   f"{100 * s5['false']:.1f}% | " + (f"{t / 60:.1f} min |" if math.isfinite(t) else "n/a |"))
    return out


if __name__ == "__main__":
    raise SystemExit(main())

"""Statistics of the report: intervals over processes, ratios, verdicts against a margin, and
one error rate over a report's comparisons.

The process is the unit of replication (docs/design/statistics.md; Kalibera & Jones,
"Rigorous Benchmarking in Reasonable Time", ISMM 2013). A quantity measured once per process
(a process's median round time, a cold first call, a stream's cold pass) is an `Est`: one
value per process, analysed on the log scale, where the spread between processes of the same
code is about proportional to the time (4.3% between warm processes, measured).

    Est          location = exp(mean of the log values) (the geometric mean of the process
                 values); 95% interval = exp(mean +- t_{P-1} sd / sqrt(P)), a Student-t
                 interval over the P processes. Three processes make the percentile bootstrap
                 of their median a range (it covered about 80%); the t interval covers 95% when
                 the process values are about log-normal, which is checked by simulation with
                 the variance components measured here (tests/test_reports_stats.py). One
                 process has no interval over processes: the order-statistic interval of its
                 rounds (round-to-round noise only) is shown as indicative.
    Ratio        a / b of two Ests. Measured in the same processes (a framework's modes and
                 strategies, a new- against a seen-shape request): paired, a t interval on the
                 per-process log ratios (df = P - 1), so the process effect they share (r about
                 0.7 between one framework's cases) cancels. In different processes: Welch's t
                 on the difference of the log means, with Hsu's conservative df min(P_a, P_b) - 1
                 (the Welch-Satterthwaite df was liberal in the tails at unequal spreads). Below
                 MIN_TESTED processes on a side a ratio between processes is not tested.
    verdict      against a declared margin m (default MARGIN = 10%), on a time ratio a/b:
                   faster (slower) by at least the margin  the whole interval below 1/(1+m)
                                                            (above 1+m)
                   faster (slower)                          the interval excludes 1 but reaches
                                                            inside the margin
                   equivalent within +-m                    the interval contains 1 and lies
                                                            inside [1/(1+m), 1+m]
                   inconclusive                             the interval contains 1 and reaches
                                                            beyond the margin
                   not tested (one process)                 no interval over processes
    Family       a report states dozens of verdicts; at 5% each, two equally fast frameworks
                 would get a false "faster" somewhere in most reports. Holm's step-down
                 procedure controls the chance of any false "faster"/"slower" in the report
                 (the family-wise error rate) at ALPHA, whatever the other comparisons' truth,
                 in groups that share ALPHA (GROUP_SHARES, holm_levels: comparisons against an
                 op-by-op eager mode in a group of their own; a group all of whose comparisons
                 are stated passes its share on). Each comparison's difference is read on the
                 interval at the level of its Holm step (1 - alpha' / (m - j + 1) for the j-th
                 smallest p-value of its group; the comparisons Holm keeps at the level of the
                 step where it stopped), so an interval excludes 1 exactly when Holm states the
                 difference; equivalence is two one-sided tests at the same alpha' (the interval
                 at 1 - 2 alpha' inside the margin, shown with that level). The report states
                 every verdict in two passes: the first collects the p-values, the second words
                 them.

Derived numbers (compile latency, break-even) take their intervals from draws of the same t
distributions (`Est.draws`, `Ratio.draws`), seeded from the quantity's name, so a report
rendered twice from the same JSON says the same.
"""
from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
from scipy import stats as sps

LEVEL = 0.95
ALPHA = 1.0 - LEVEL        # the family-wise error rate of a report's stated differences
MARGIN = 0.10              # default equivalence margin (--margin): +-10% of the time
N_DRAWS = 4000             # draws behind a derived number's interval

# Verdicts (keys); their words are in PHRASES.
FASTER_M, FASTER, EQUIVALENT, SLOWER, SLOWER_M, INCONCLUSIVE, NOT_TESTED = (
    "faster_m", "faster", "equivalent", "slower", "slower_m", "inconclusive", "not_tested")
DECIDED = (FASTER_M, FASTER, SLOWER, SLOWER_M)
# A report's comparisons fall into groups that share ALPHA (stats.holm_levels): comparisons
# against an op-by-op eager mode (JAX's, TensorFlow's: differences of 2-12x, never in doubt)
# in a group of their own, so how strict the comparisons between frameworks and torch's
# modes are does not depend on how many of those a report holds; once all of a group are
# stated, its share passes to the other.
MAIN, OP_BY_OP = "main", "against op-by-op eager"
GROUP_SHARES = {MAIN: 0.8, OP_BY_OP: 0.2}
MIN_TESTED = 3             # processes a side needs before a comparison is tested (df >= 2)


def not_tested(unit: str = "processes") -> str:
    """NOT_TESTED in words, for values of processes or of sets (Est.unit)."""
    return f"not tested (fewer than {MIN_TESTED} {unit})"


ONE_PROCESS = not_tested()      # the words of NOT_TESTED


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


@functools.lru_cache(maxsize=4096)
def t_quantile(df: float, level: float = LEVEL) -> float:
    """Two-sided Student-t quantile: the half-width of a `level` interval in standard errors
    (remembered: a report asks for the same few degrees of freedom and Holm levels thousands
    of times, and scipy's quantile costs about 40 us a call)."""
    return float(sps.t.ppf(0.5 + level / 2.0, df))


# ----------------------------------------------------------------------------- one quantity

def _logs(values: Mapping[str, float]) -> dict[str, float]:
    return {str(k): math.log(float(v)) for k, v in values.items()
            if v is not None and isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(v) and v > 0}



def exp_bound(x: float) -> float:
    """exp(x), inf past the float range: an interval bound at df = 1 and a Holm-adjusted level
    can lie beyond it (two processes, many comparisons), which reads "unbounded", not an error."""
    return math.exp(x) if x < 709.0 else math.inf

@dataclass
class Est:
    """One value per process (keyed by process), on the log scale. `halves` holds each
    process's value from the second half of its rounds (for the stability check); `rounds`
    the rounds of a single process (its indicative interval)."""
    logs: dict[str, float]
    halves: dict[str, float] | None = None
    rounds: tuple[float, ...] | None = None
    pool: tuple[float, float, int] | None = None   # (log SD, its df, cases) pooled over cases (`pooled`)
    unit: str = "processes"     # what a value is of, in words: processes, or sets (a run side by side)

    @classmethod
    def of(cls, values: Mapping[str, float], halves: Mapping[str, float] | None = None,
           rounds: Sequence[float] | None = None, unit: str = "processes") -> "Est":
        h = _logs(halves) if halves else None
        return cls(_logs(values), h if h and set(h) == set(_logs(values)) else None,
                   tuple(float(x) for x in rounds) if rounds is not None and len(rounds) else None, unit=unit)

    @property
    def n(self) -> int:
        return len(self.logs)

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.logs.values()))) if self.logs else math.nan

    @property
    def value(self) -> float:
        return math.exp(self.mean) if self.logs else math.nan

    @property
    def sd(self) -> float:
        if self.pool is not None:
            return self.pool[0]
        return float(np.std(list(self.logs.values()), ddof=1)) if self.n >= 2 else math.nan

    @property
    def se(self) -> float:
        return self.sd / math.sqrt(self.n) if self.n >= 2 or (self.pool and self.n) else math.nan

    @property
    def df(self) -> float:
        if self.pool is not None:
            return self.pool[1]
        return float(self.n - 1) if self.n >= 2 else math.nan

    @property
    def tested(self) -> bool:
        """Enough processes for an interval over processes (MIN_TESTED: at two, df = 1 and a 95%
        interval spans +-12.7 standard errors, up to a hundred decades at a Holm level), or a
        spread pooled over cases with the degrees of freedom of MIN_TESTED processes or more."""
        if self.pool is not None:
            return self.n >= 1 and self.pool[1] >= MIN_TESTED - 1
        return self.n >= MIN_TESTED

    def range(self) -> tuple[float, float]:
        """Smallest and largest process value (nan below two processes)."""
        if self.n < 2:
            return math.nan, math.nan
        v = list(self.logs.values())
        return math.exp(min(v)), math.exp(max(v))

    def spread(self) -> float:
        """Largest over smallest process value, minus 1 (nan below two processes)."""
        if self.n < 2:
            return math.nan
        v = list(self.logs.values())
        return math.exp(max(v) - min(v)) - 1.0

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """t interval over processes (MIN_TESTED or more); one process: the order-statistic
        interval of its rounds (round noise only, see `note`); nan otherwise (two processes:
        no interval is printed, `range` is shown instead)."""
        if self.tested:
            h = t_quantile(self.df, level) * self.se
            return exp_bound(self.mean - h), exp_bound(self.mean + h)
        if self.n == 1 and self.rounds:
            lo, hi, _ = order_interval(self.rounds, level)
            return lo, hi
        return math.nan, math.nan

    def note(self) -> str:
        if self.tested:
            return f"{self.n} processes: t interval over processes"
        if self.n == 2:
            return "2 processes: their min-max, no interval (not tested)"
        if self.n == 1 and self.rounds:
            cov = order_ranks(len(self.rounds))[2]
            return ("one process: interval covers round-to-round noise only (indicative)"
                    + ("" if cov >= LEVEL else f"; {len(self.rounds)} rounds allow no 95% interval: min-max, "
                       f"{100 * cov:.1f}% coverage"))
        return "one value: no interval" if self.n == 1 else "no value"

    def draws(self, name: str, n: int = N_DRAWS) -> np.ndarray | None:
        """Draws of the log location from its t distribution (None below MIN_TESTED processes)."""
        if not self.tested:
            return None
        rng = np.random.default_rng(seed_of("est|" + name))
        return self.mean + self.se * rng.standard_t(self.df, n)

    def second_half(self) -> "Est | None":
        return Est(dict(self.halves)) if self.halves else None

    def tempered(self) -> "Est | None":
        """The most deviant process replaced by the median of the others (same n, same df):
        whether one process carries a verdict (None below three processes)."""
        if self.n < 3:
            return None
        keys = list(self.logs)
        v = np.array([self.logs[k] for k in keys])
        dev = [abs(v[i] - np.median(np.delete(v, i))) for i in range(len(v))]
        i = int(np.argmax(dev))
        out = dict(self.logs)
        out[keys[i]] = float(np.median(np.delete(v, i)))
        return Est(out)


POOL_OUTLIER = 0.05         # a case whose spread departs from the others' at this level (Bonferroni) is not pooled


def pooled(ests: Sequence[Est]) -> tuple[float, float, set[int]]:
    """(log SD, df, left out) of several quantities' process values pooled on the log scale,
    assuming one spread for all (as for one framework's cold first calls of one mode):
    sqrt(sum of squared deviations from each one's own mean / sum of (n_i - 1)), df = that
    sum. A quantity whose own spread is larger than the others' pooled one by an F test at
    POOL_OUTLIER / (quantities) is left out (its index returned): the assumption fails for it."""
    ss = [float(np.sum((np.array(list(e.logs.values())) - e.mean) ** 2)) if e.n >= 2 else 0.0 for e in ests]
    dfs = [max(e.n - 1, 0) for e in ests]
    k = sum(d > 0 for d in dfs)
    out: set[int] = set()
    for i, (s, d) in enumerate(zip(ss, dfs)):
        rest_ss, rest_df = sum(ss) - s, sum(dfs) - d
        if d and rest_df and rest_ss > 0 and sps.f.sf((s / d) / (rest_ss / rest_df), d, rest_df) < POOL_OUTLIER / k:
            out.add(i)
    ss_in = sum(s for i, s in enumerate(ss) if i not in out)
    df_in = sum(d for i, d in enumerate(dfs) if i not in out)
    return (math.sqrt(ss_in / df_in) if df_in else math.nan), float(df_in), out


# ----------------------------------------------------------------------------- ratios

@dataclass
class Ratio:
    """a / b on the log scale: `diff` = log(a/b), with its standard error and df. kind:
    'paired' (same processes), 'welch' (different processes), 'one-sample' (a against 1),
    or 'untested' (one process on a side: no interval over processes)."""
    diff: float
    se: float
    df: float
    kind: str

    @property
    def value(self) -> float:
        return math.exp(self.diff) if math.isfinite(self.diff) else math.nan

    @property
    def tested(self) -> bool:
        return self.kind != "untested" and math.isfinite(self.se) and math.isfinite(self.df)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        if not self.tested:
            return math.nan, math.nan
        h = t_quantile(self.df, level) * self.se
        return exp_bound(self.diff - h), exp_bound(self.diff + h)

    def p(self) -> float:
        """Two-sided p-value of a/b = 1."""
        if not self.tested:
            return math.nan
        if self.se == 0:
            return 0.0 if self.diff != 0 else 1.0
        return float(2.0 * sps.t.sf(abs(self.diff) / self.se, self.df))

    def draws(self, name: str, n: int = N_DRAWS) -> np.ndarray | None:
        if not self.tested:
            return None
        rng = np.random.default_rng(seed_of("ratio|" + name))
        return self.diff + self.se * rng.standard_t(self.df, n)


def ratio(a: Est, b: Est | None = None) -> Ratio:
    """a / b (b None: a against 1, a's values being per-process ratios): paired when both
    were measured in the same MIN_TESTED or more processes, Welch when each has MIN_TESTED
    or more, else untested (no p-value: out of the report's Holm family)."""
    if b is None:
        return Ratio(a.mean, a.se, a.df, "one-sample" if a.tested else "untested")
    diff = a.mean - b.mean
    if a.tested and set(a.logs) == set(b.logs):
        d = np.array([a.logs[k] - b.logs[k] for k in a.logs])
        return Ratio(float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))), float(len(d) - 1), "paired")
    if a.tested and b.tested:
        # Welch's statistic with Hsu's conservative df, min(df_a, df_b): the lower bound of the
        # Welch-Satterthwaite df, whose approximation made the tails Holm's first steps use
        # liberal at unequal spreads (0.0045 against 0.0031 at alpha/16)
        se = math.sqrt(a.se ** 2 + b.se ** 2)
        return Ratio(diff, se, float(min(a.df, b.df)), "welch")
    return Ratio(diff, math.nan, math.nan, "untested")


def rounds_ratio(ta: Sequence[float] | None, tb: Sequence[float] | None,
                 level: float = LEVEL) -> tuple[float, float]:
    """Interval of median_a / median_b from two cases' rounds in one process (round noise
    only: Welch's t on the log rounds); nan without rounds."""
    if not _seq(ta) or not _seq(tb) or len(ta) < 2 or len(tb) < 2:
        return math.nan, math.nan
    a, b = np.log(np.asarray(ta, float)), np.log(np.asarray(tb, float))
    if len(a) < MIN_TESTED or len(b) < MIN_TESTED:
        return math.nan, math.nan
    return ratio(Est({str(i): x for i, x in enumerate(a)}), Est({str(i): x for i, x in enumerate(b)})).interval(level)


# ----------------------------------------------------------------------------- verdicts

def inside_margin(lo: float, hi: float, margin: float = MARGIN) -> bool:
    """Whether the interval [lo, hi] of a time ratio lies within [1/(1+margin), 1+margin]."""
    return math.isfinite(lo) and math.isfinite(hi) and 1.0 / (1.0 + margin) <= lo and hi <= 1.0 + margin


def verdict(lo: float, hi: float, margin: float = MARGIN) -> str:
    """The verdict on a time ratio a/b whose interval is [lo, hi] (see the module docstring)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return NOT_TESTED
    top, bottom = 1.0 + margin, 1.0 / (1.0 + margin)
    if hi < bottom:
        return FASTER_M
    if lo > top:
        return SLOWER_M
    if hi < 1.0:
        return FASTER
    if lo > 1.0:
        return SLOWER
    return EQUIVALENT if inside_margin(lo, hi, margin) else INCONCLUSIVE


def coarse(v: str) -> str:
    """faster / slower / equivalent / inconclusive / not tested: a verdict's class, which the
    stability checks compare (a change between 'faster' and 'faster by the margin' is no flip)."""
    return {FASTER_M: FASTER, SLOWER_M: SLOWER}.get(v, v)


def words(v: str, margin: float, faster: str = "faster", slower: str = "slower") -> str:
    """A verdict in words, e.g. 'faster by at least the 10% margin'."""
    m = f"{100 * margin:.0f}%"
    return {FASTER_M: f"{faster} by at least the {m} margin", FASTER: f"{faster}, not surely by the {m} margin",
            SLOWER_M: f"{slower} by at least the {m} margin", SLOWER: f"{slower}, not surely by the {m} margin",
            EQUIVALENT: f"equivalent within +-{m}", INCONCLUSIVE: "inconclusive", NOT_TESTED: ONE_PROCESS}[v]


@dataclass
class Judgement:
    """One comparison's outcome: the time ratio a/b, its interval at `level` and the verdict."""
    key: str
    ratio: float
    lo: float
    hi: float
    level: float
    verdict: str
    kind: str
    unit: str = "processes"     # what its sides' values are of (Est.unit): the words of 'not tested'

    @property
    def decided(self) -> bool:
        return self.verdict in DECIDED

    def speed(self) -> tuple[float, float, float]:
        """b/a: how many times faster a is than b, with the interval."""
        return 1.0 / self.ratio, (1.0 / self.hi if self.hi else math.nan), (1.0 / self.lo if self.lo else math.nan)

    def interval_text(self, speed: bool = True, label: str | None = None) -> str:
        """'speed 1.31x [1.20, 1.43], 99.8% interval' (b/a), or with speed=False the ratio a/b."""
        x, lo, hi = self.speed() if speed else (self.ratio, self.lo, self.hi)
        label = label or ("speed" if speed else "ratio")
        if self.verdict == NOT_TESTED:
            return f"{label} {fmt_x(x)}x, indicative"
        return f"{label} {fmt_x(x)}x [{fmt_x(lo)}, {fmt_x(hi)}], {level_text(self.level)} interval"


def resolution(sd: float, processes: int, level: float = LEVEL) -> float:
    """Half-width (as a fraction) of the `level` interval of a ratio of two cases of
    `processes` processes each whose log process medians have SD `sd` (Welch with equal
    variances): the smallest difference such a comparison can place on one side of 1."""
    if not (processes >= 2 and math.isfinite(sd)):
        return math.nan
    return exp_bound(t_quantile(2 * processes - 2, level) * sd * math.sqrt(2.0 / processes)) - 1.0


def level_text(level: float) -> str:
    """The level as used: '95%', '99.375%', '99.958%' (to three decimals, more where that would
    read 100%): a reader who recomputes the interval at the printed level finds the printed one."""
    p = 100 * level
    for d in range(0, 7):
        s = f"{p:.{d}f}"
        if float(s) < 100 and (abs(float(s) - p) < 5e-4 or d >= 3):
            return (s.rstrip("0").rstrip(".") if "." in s else s) + "%"
    return f"{p}%"


@dataclass
class Family:
    """Every comparison a report states a verdict on, under one error rate (Holm; see the
    module docstring). A comparison is named by its key: the same key is the same comparison.
    Pass 1 (`closed` False) registers each comparison's p-value; `close()` gives each its
    Holm level; pass 2 returns the final judgements, and re-checks each verdict on the second
    half of every process's rounds and with the most deviant process of a side replaced by
    the others' median: where the verdict's class changes, the comparison (`key_flags`) and
    the cases involved (`flags`: case -> {reason: keys}) get that flag."""
    alpha: float = ALPHA
    margin: float = MARGIN
    closed: bool = False
    group_of: Callable[[tuple[str, ...]], str] | None = None   # a comparison's cases -> its group (None: MAIN)
    shares: Mapping[str, float] = field(default_factory=lambda: dict(GROUP_SHARES))
    groups: dict[str, str] = field(default_factory=dict)        # key -> group
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)   # key -> the cases it compares
    pvalues: dict[str, float] = field(default_factory=dict)
    levels: dict[str, float] = field(default_factory=dict)
    stop_level: float = LEVEL
    flags: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    key_flags: dict[str, set[str]] = field(default_factory=dict)
    judged: dict[str, Judgement] = field(default_factory=dict)
    _provisional: dict[str, Judgement] = field(default_factory=dict)

    def judge(self, key: str, a: Est, b: Est | None = None, cases: Iterable[str] = ()) -> Judgement:
        """The verdict on a / b (b None: a's per-process ratios against 1)."""
        cache = self.judged if self.closed else self._provisional
        if key in cache:
            return cache[key]
        r = ratio(a, b)
        if not self.closed and r.tested:
            self.pvalues[key] = r.p()
            self.members[key] = tuple(cases)
            self.groups[key] = self.group_of(tuple(cases)) if self.group_of is not None else MAIN
        level = self.levels.get(key, self.stop_level) if self.closed and r.tested else LEVEL
        v, lo, hi, shown = self.verdict_of(r, level)
        j = Judgement(key, r.value, lo, hi, shown, v, r.kind, a.unit)
        cache[key] = j
        if self.closed and r.tested:
            self._stability(key, j, a, b, tuple(cases), level)
        return j

    def _stability(self, key: str, j: Judgement, a: Est, b: Est | None, cases: tuple[str, ...],
                   level: float) -> None:
        """Flag a claim (faster, slower, equivalent) whose class changes under a check;
        'inconclusive' claims nothing, so nothing can overturn it."""
        if coarse(j.verdict) not in (FASTER, SLOWER, EQUIVALENT):
            return
        ta, tb = a.tempered(), (b.tempered() if b is not None else None)
        checks = [(HALF, a.second_half(), b.second_half() if b is not None else None,
                   b is not None and b.halves is None),
                  (ONE_CARRIES, ta, b, ta is None), (ONE_CARRIES, a, tb, tb is None)]
        for reason, x, y, skip in checks:
            if x is None or skip:
                continue
            r = ratio(x, y)
            if r.tested and coarse(self.verdict_of(r, level)[0]) != coarse(j.verdict):
                self.key_flags.setdefault(key, set()).add(reason)
                for c in cases:
                    self.flags.setdefault(c, {}).setdefault(reason, set()).add(key)

    def verdict_of(self, r: "Ratio", level: float) -> tuple[str, float, float, float]:
        """(verdict, lo, hi, the level of the interval shown) of a ratio at its Holm level. A
        difference is read on the interval at `level` (it excludes 1 exactly when Holm states
        it). Equivalence is a TOST at the same alpha' = 1 - level (both one-sided tests at
        alpha'): the interval at 1 - 2 alpha', shown with that level, inside the margin."""
        lo, hi = r.interval(level)
        v = verdict(lo, hi, self.margin)
        if v in (EQUIVALENT, INCONCLUSIVE) and level > 0.5:
            eq = 1.0 - 2.0 * (1.0 - level)
            elo, ehi = r.interval(eq)
            if inside_margin(elo, ehi, self.margin):
                return EQUIVALENT, elo, ehi, eq
        return v, lo, hi, level

    def close(self) -> None:
        """Holm's levels from pass 1's p-values, per group (`holm_levels`); the next pass words
        the verdicts."""
        self.levels, stops = holm_levels(self.pvalues, self.groups, self.shares, self.alpha)
        self.stop_level = min(stops.values(), default=1.0 - self.alpha / max(self.m, 1))
        self.closed = True

    @property
    def m(self) -> int:
        return len(self.pvalues)

    def stated(self) -> int:
        return sum(j.decided for j in self.judged.values())


def holm_levels(pvalues: Mapping[str, float], groups: Mapping[str, str], shares: Mapping[str, float],
                alpha: float = ALPHA) -> tuple[dict[str, float], dict[str, float]]:
    """Holm within each group of comparisons, the groups sharing `alpha` by `shares` (a
    graphical procedure, Bretz et al. 2009: Holm is its equal-weight case): a group starts
    with alpha x its share of the groups that have comparisons (a group without a share in
    `shares` weighs 1); once every comparison of a group is rejected, its alpha passes to the
    groups still open, equally. The chance of any false
    rejection in all the groups together stays at most `alpha`. Returns each key's level
    (1 - its alpha'/(m - j) at its step; those not rejected at the level where their group
    stopped) and each group's stop level."""
    by: dict[str, list[tuple[str, float]]] = {}
    for k, p in pvalues.items():
        by.setdefault(groups.get(k, MAIN), []).append((k, p))
    names = sorted(by)                  # a group without comparisons passes its share at once
    weight = {g: shares.get(g, 1.0) for g in names}
    budget = {g: alpha * w / sum(weight.values()) for g, w in weight.items()}
    levels: dict[str, float] = {}
    stops: dict[str, float] = {}
    open_ = list(names)
    while open_:
        finished = []
        for g in open_:
            items = sorted(by.get(g, []), key=lambda kv: (kv[1], kv[0]))
            m, a = len(items), budget[g]
            stops[g] = 1.0 - a / max(m, 1)
            rejected = 0
            for j, (key, p) in enumerate(items):
                if p > a / (m - j):
                    stops[g] = 1.0 - a / (m - j)
                    break
                levels[key] = 1.0 - a / (m - j)
                rejected += 1
            for key, _ in items[rejected:]:
                levels[key] = stops[g]
            if rejected == m:
                finished.append(g)
        rest = [g for g in open_ if g not in finished]
        if not finished or not rest:
            break
        for g in finished:              # its alpha passes on; its levels stand
            for o in rest:
                budget[o] += budget[g] / len(rest)
        open_ = rest
    return levels, stops


HALF = "verdict changes on the second half of the rounds"
ONE_CARRIES = "verdict changes without its most deviant process"


def sentence(j: Judgement, a: str, b: str, margin: float, label: str | None = None, speed: bool = True,
             faster: str = "faster", slower: str = "slower", flags: Iterable[str] = ()) -> str:
    """'a is faster than b by at least the 10% margin (speed 1.31x [1.20, 1.43], 99.8%
    interval)' and the like for every verdict; speed=False shows the ratio a/b (a size, a
    latency) under `label`."""
    x = j.interval_text(speed, label)
    m = f"{100 * margin:.0f}%"
    v = j.verdict
    if v in (FASTER_M, SLOWER_M):
        s = f"{a} is {faster if v == FASTER_M else slower} than {b} by at least the {m} margin ({x})"
    elif v in (FASTER, SLOWER):
        s = f"{a} is {faster if v == FASTER else slower} than {b}, not surely by the {m} margin ({x})"
    elif v == EQUIVALENT:
        s = f"{a} and {b} are equivalent within +-{m} ({x}: two one-sided tests)"
    elif v == INCONCLUSIVE:
        s = f"{a} against {b} is inconclusive: the interval contains 1 and reaches beyond +-{m} ({x})"
    else:
        s = f"{a} against {b}: {not_tested(j.unit)}, {x}"
    fl = sorted(set(flags))
    return s + (f" [flagged: {'; '.join(fl)}]" if fl else "")


# ----------------------------------------------------------------------------- one process

def _seq(x: object) -> bool:
    return isinstance(x, (list, tuple, np.ndarray)) and len(x) > 0


def binom_half_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2.0 ** n if k >= 0 else 0.0


def order_ranks(n: int, level: float = LEVEL) -> tuple[int, int, float]:
    """1-based ranks (lo, hi) of the order-statistic interval of a median of n values and
    its exact coverage under any continuous distribution. Below the level (n < 6 at 95%)
    there is no such interval: (1, n) and its coverage 1 - 2^(1-n)."""
    best = (1, n, 1.0 - 2.0 * binom_half_cdf(0, n))
    for k in range(2, n // 2 + 1):
        cov = 1.0 - 2.0 * binom_half_cdf(k - 1, n)
        if cov < level:
            break
        best = (k, n + 1 - k, cov)
    return best


def order_interval(data: Sequence[float] | None, level: float = LEVEL) -> tuple[float, float, float]:
    """(lo, hi, coverage) of the order-statistic interval of the median of `data` (one
    process's rounds: round-to-round noise only); nan without data."""
    if not _seq(data):
        return math.nan, math.nan, math.nan
    x = np.sort(np.asarray(data, dtype=np.float64))
    lo, hi, cov = order_ranks(len(x), level)
    return float(x[lo - 1]), float(x[hi - 1]), cov


def second_half_median(data: Sequence[float] | None) -> float:
    """Median of the second half of a process's rounds (nan below 4 rounds)."""
    if not _seq(data) or len(data) < 4:
        return math.nan
    return float(np.median(np.asarray(data, float)[len(data) // 2:]))


def percentile_interval(draws: np.ndarray | None, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of draws of a derived number (inf allowed); nan without draws."""
    if draws is None or len(draws) == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def geomean(values: Iterable[float]) -> float:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=np.float64)
    return float(np.exp(np.mean(np.log(v)))) if len(v) else math.nan


# ----------------------------------------------------------------------------- formatting

def fmt_x(v: float) -> str:
    """A ratio or interval bound: two decimals below 10 ('1.31'), one below 100 ('32.2'), none
    below 10,000 ('472'); far from 1 in two significant digits with an exponent, '3.3e+95' or
    '2.1e-05' (an interval at df = 1 and a Holm level can span a hundred decades, which fixed
    decimals print as a hundred digits); 'inf' past the float range."""
    if not np.isfinite(v):
        return "inf" if v > 0 else "-inf" if v < 0 else "n/a"
    if v != 0 and (abs(v) >= 1e4 or abs(v) < 5e-3):
        return f"{v:.1e}"
    return f"{v:.2f}" if abs(v) < 9.995 else f"{v:.1f}" if abs(v) < 99.95 else f"{v:.0f}"


def fmt_ratio(r: float, lo: float, hi: float) -> str:
    """'1.31x [1.25, 1.37]', or '1.31x' without an interval."""
    if not np.isfinite(r):
        return "n/a"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{fmt_x(r)}x"
    return f"{fmt_x(r)}x [{fmt_x(lo)}, {fmt_x(hi)}]"


# A time's unit by its size, the one formatter of every report and paper: no exponent,
# no "us"; a bound of an interval takes its point's unit. (name, seconds per unit, up to): a value
# whose 3 significant digits reach the next unit's threshold takes the next unit.
TIME_UNITS = (("\u00b5s", 1e-6, 1e-3), ("ms", 1e-3, 1.0), ("s", 1.0, 120.0), ("min", 60.0, 7200.0),
              ("h", 3600.0, math.inf))


def time_unit(s: float) -> tuple[str, float]:
    """(unit, seconds per unit) for a time of `s` seconds: \u00b5s below 1 ms, ms below 1 s, s below
    2 minutes, minutes below 2 hours, hours beyond; chosen after rounding to 3 significant digits,
    so 999.96 ms reads 1 s, not 1000 ms."""
    a = abs(s)
    for name, per, upto in TIME_UNITS:
        if a < upto and float(_num(a / per)) * per < upto:
            return name, per
    return TIME_UNITS[-1][0], TIME_UNITS[-1][1]


def fmt_seconds(s: float | None) -> str:
    """A time with a unit a reader takes in at a glance: 812 \u00b5s, 3.41 ms, 2.07 s, 31.9 min, 5.4 h."""
    if s is None or not np.isfinite(s):
        return "n/a"
    if s < 0:
        return "-" + fmt_seconds(-s)
    unit, per = time_unit(s)
    return f"{_num(s / per)} {unit}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 process', '2 processes', '0 cases': a count and its noun, never 'process(es)'."""
    return f"{n:,} {word if n == 1 else many or (word + 'es' if word.endswith(('s', 'x', 'ch', 'sh')) else word + 's')}"


def fmt_count(x: float) -> str:
    """Large counts with SI prefixes: 1.2M tokens/s."""
    if x is None or not np.isfinite(x):
        return "n/a"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def _num(x: float) -> str:
    """3 significant digits without exponents: 0.451, 45.1, 451, 1900 (0 as 0)."""
    if abs(x) >= 99.95:
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2g}" if abs(x) >= 1e-4 else "0"


def fmt_time_range(m: float, lo: float, hi: float) -> str:
    """Two processes: the value and the processes' min-max, '137 ms (range 130-144)', never an interval."""
    if m is None or not np.isfinite(m):
        return "n/a"
    unit, per = time_unit(m)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{_num(m / per)} {unit}"
    return f"{_num(m / per)} {unit} (range {_num(lo / per)}-{_num(hi / per)})"


def fmt_values(e: "Est") -> str:
    """Every process's value in the unit of their geometric mean: '12.3 s, 4.21 s'."""
    return ", ".join(fmt_seconds(math.exp(v)) for v in sorted(e.logs.values())) or "n/a"


def fmt_est(e: "Est", m: float | None = None) -> str:
    """A time over processes: with its t interval from MIN_TESTED processes, with the
    processes' min-max from two, alone from one (its rounds' interval is the caller's)."""
    m = e.value if m is None else m
    if e.tested:
        return fmt_time_ci(m, *e.interval())
    if e.n == 2:
        return fmt_time_range(m, *e.range())
    return fmt_time_ci(m, math.nan, math.nan)


def fmt_time_ci(m: float, lo: float | None, hi: float | None) -> str:
    """A time with its interval in the time's unit: '3.97 ms [3.92, 4.02]'."""
    if m is None or not np.isfinite(m):
        return "n/a"
    unit, per = time_unit(m)
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{_num(m / per)} {unit}"
    return f"{_num(m / per)} {unit} [{_num(lo / per)}, {_num(hi / per)}]"

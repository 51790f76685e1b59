"""Statistics of the report: bootstrap confidence intervals of medians and of ratios of
medians, and the verdict rule used by findings and by `fwbench compare`.

A benchmark case gives n per-round times t_1..t_n (pytest-benchmark's `stats.data`).
Its location is the sample median m = median(t). The 95% interval for m is the
percentile bootstrap: draw B resamples t* of size n with replacement, take m* = median(t*)
for each, and report the 2.5% and 97.5% quantiles of the B values of m*.

A ratio of two cases' medians (a speedup, or new/old in a comparison) gets its interval
from independent bootstraps of the two: r* = m*_a / m*_b for the B paired draws, then the
same percentiles. The two cases ran independently, so their resamples are independent.

Every resample is seeded from the case's identity (a CRC of a string naming it), so a
report rendered twice from the same JSON has the same intervals, and a case keeps the same
bootstrap distribution whatever it is compared with.

The percentile bootstrap of a median covers less than it claims at few rounds (about 89%
at n = 7), so the interval of one process's median is the distribution-free order-statistic
interval instead (order_interval): [t_(k), t_(n-k+1)] of the sorted rounds, with k the
largest rank whose coverage 1 - 2 P(Binomial(n, 1/2) <= k-1) is still at least 95%. Below
n = 6 no such k exists and the interval is the min-max, with its actual coverage
1 - 2^(1-n) stated.

The process is the unit of replication (DESIGN.md, "Measurement rules"). A case measured by
P processes is located by the median of the P process medians, and its interval is the
hierarchical bootstrap (hier_boot): draw P processes with replacement, then for each drawn
process one bootstrap median of its own rounds, and take the median of the P values; the
percentile interval of those B values contains process-to-process variation as well as
round-to-round noise. A ratio of two cases takes the paired draws of both, as above.

A difference is stated only when the ratio's interval excludes 1 and the ratio is at least
1 + min_effect (or at most 1 / (1 + min_effect)): verdict() for `fwbench compare`, decided()
for the report's findings and break-even. The minimum effect is MIN_EFFECT, or the spread
observed between processes of the same code in the data at hand when that is larger
(effective_min_effect).

Per process, the rounds are tested for a drift (instability): a monotone trend (Spearman's
rank correlation of time with round index) and a step change (the largest standardised
Mann-Whitney statistic over every split of the rounds into a before and an after). Both are
rank statistics, so under i.i.d. rounds their distribution depends only on n: the p-values
come from a seeded table of random permutations per n (NULL_PERMUTATIONS), calibrated
whatever the distribution of the times.
"""
from __future__ import annotations

import functools
import math
import zlib
from typing import Sequence

import numpy as np

N_BOOT = 2000
LEVEL = 0.95
# The smallest relative difference the report and `fwbench compare` state (a ratio of at
# least 1 + MIN_EFFECT, or at most 1 / (1 + MIN_EFFECT)), on top of an interval that excludes
# 1. It must be at least the spread between processes running the same code on the machine
# that produced the results (the largest over the smallest process median of one case), so
# that a difference between two processes of one framework is never a finding; a report
# also measures that spread in its own data and uses it instead where it is larger
# (effective_min_effect). Measured on the 2-core development machine (2026-12-03, the
# example run in reports/examples/cpu-2core: 46 timed cases at the small presets, three
# processes each): the median spread was 14.5% (quartiles 10% and 27%); between the two
# warm processes alone 4.2%; the cold process, which also runs in the run's first round,
# was 9% slower in median than the warm ones. A session before measured 5-14% for torch's
# train steps. Hence 15%.
MIN_EFFECT = 0.15
# Instability: a process's rounds are flagged when the trend or the step test rejects at
# this level, Bonferroni-corrected over the two tests and the case's processes, so that a
# case of i.i.d. rounds is flagged in about this share of reports.
UNSTABLE_ALPHA = 0.05
NULL_PERMUTATIONS = 4000
MIN_ROUNDS_TESTED = 6      # fewer rounds: no trend or step test (too few splits to tell)


def seed_of(name: str) -> int:
    """A fixed seed for the bootstrap of the case called `name`."""
    return zlib.crc32(name.encode("utf-8"))


def boot_medians(data: Sequence[float] | None, name: str, n_boot: int = N_BOOT) -> np.ndarray | None:
    """B bootstrap medians of `data` (None when there is no round data)."""
    if not isinstance(data, (list, tuple, np.ndarray)) or len(data) == 0:
        return None
    raw = np.asarray(data, dtype=np.float64)
    n = len(raw)
    order = np.argsort(raw, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    x = raw[order]
    rng = np.random.default_rng(seed_of(name))
    idx = rank[rng.integers(0, n, size=(n_boot, n))]         # (B, n) resample, as positions in sorted x
    # x is sorted, so a resample's i-th order statistic is x[j] for the smallest j with more
    # than i draws at or below j: counts and a cumulative sum instead of a sort per resample
    counts = np.bincount((idx + n * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * n)
    cum = counts.reshape(n_boot, n).cumsum(axis=1)
    lo, hi = (cum > (n - 1) // 2).argmax(axis=1), (cum > n // 2).argmax(axis=1)
    return (x[lo] + x[hi]) / 2                               # (B,) medians


def interval(boot: np.ndarray | None, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap values; (nan, nan) without them."""
    if boot is None:
        return math.nan, math.nan
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def ratio_interval(boot_a: np.ndarray | None, boot_b: np.ndarray | None,
                   level: float = LEVEL) -> tuple[float, float]:
    """Interval of median_a / median_b from independent bootstraps of a and b."""
    if boot_a is None or boot_b is None:
        return math.nan, math.nan
    return interval(boot_a / boot_b, level)


def significant(lo: float, hi: float) -> bool:
    """A ratio differs from 1 when its whole interval lies on one side of 1."""
    return not (math.isnan(lo) or math.isnan(hi)) and (lo > 1.0 or hi < 1.0)


def verdict(ratio: float, lo: float, hi: float, min_effect: float = MIN_EFFECT) -> str:
    """Verdict on a time ratio new/old: 'slower' when the interval lies above 1 and the
    ratio is at least 1 + min_effect, 'faster' when it lies below 1 and the ratio is at
    most 1 / (1 + min_effect), else 'no significant change' (also without round data)."""
    if not significant(lo, hi):
        return "no significant change"
    if lo > 1.0 and ratio >= 1.0 + min_effect:
        return "slower"
    if hi < 1.0 and ratio <= 1.0 / (1.0 + min_effect):
        return "faster"
    return "no significant change"


def decided(ratio: float, lo: float, hi: float, min_effect: float = MIN_EFFECT) -> bool:
    """A ratio (either way round) is a finding: its interval excludes 1 and it is at least
    1 + min_effect away from 1 in that direction (verdict's rule)."""
    return verdict(ratio, lo, hi, min_effect) != "no significant change"


def effective_min_effect(observed_spread: float | None, floor: float = MIN_EFFECT) -> float:
    """The minimum effect in force: `floor`, or the spread observed between processes of
    the same code where that is larger (nan observed: the floor)."""
    if observed_spread is None or not np.isfinite(observed_spread):
        return floor
    return max(floor, float(observed_spread))


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
    """(lo, hi, coverage) of the order-statistic interval of the median of `data`;
    nan without data."""
    if not isinstance(data, (list, tuple, np.ndarray)) or len(data) == 0:
        return math.nan, math.nan, math.nan
    x = np.sort(np.asarray(data, dtype=np.float64))
    lo, hi, cov = order_ranks(len(x), level)
    return float(x[lo - 1]), float(x[hi - 1]), cov


def hier_boot(proc_boots: Sequence[np.ndarray], name: str) -> np.ndarray | None:
    """Hierarchical bootstrap of the median of process medians from each process's own
    bootstrap medians (boot_medians, all of one length B): per draw, P processes with
    replacement, for each a random one of its B round-level draws, then their median.
    One process: its own draws (the interval then covers round-to-round noise only)."""
    boots = [b for b in proc_boots if b is not None]
    if not boots:
        return None
    if len(boots) == 1:
        return boots[0]
    m = np.stack(boots)                                        # (P, B)
    rng = np.random.default_rng(seed_of("hier|" + name))
    shape = (m.shape[1], m.shape[0])                           # (B, P)
    return np.median(m[rng.integers(0, m.shape[0], shape), rng.integers(0, m.shape[1], shape)], axis=1)


def process_boot(values: Sequence[float], name: str, n_boot: int = N_BOOT) -> np.ndarray | None:
    """Bootstrap medians of one value per process (a quantity measured once per process,
    such as a stream's cold pass): the processes resampled with replacement. None below two
    processes, so that a ratio built on it has no interval and states no finding: one
    process says nothing about the variation between processes."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if len(v) < 2:
        return None
    rng = np.random.default_rng(seed_of("proc|" + name))
    return np.median(v[rng.integers(0, len(v), size=(n_boot, len(v)))], axis=1)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1..n) along the last axis; ties share their mean rank."""
    order = np.argsort(x, axis=-1, kind="stable")
    r = np.empty_like(x, dtype=np.float64)
    np.put_along_axis(r, order, np.arange(1, x.shape[-1] + 1, dtype=np.float64) * np.ones_like(r), axis=-1)
    if x.ndim == 1 and len(np.unique(x)) < len(x):             # ties (observed data only)
        _, inv, cnt = np.unique(x, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=r)
        r = (sums / cnt)[inv]
    return r


def drift_statistics(ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|Spearman rho| of rank vs round index and the largest |z| of the Mann-Whitney
    statistic over the splits after round 2 .. n-2, for ranks of shape (..., n)."""
    n = ranks.shape[-1]
    idx = np.arange(1, n + 1, dtype=np.float64)
    rc = ranks - ranks.mean(axis=-1, keepdims=True)
    ic = idx - idx.mean()
    den = np.sqrt((rc ** 2).sum(axis=-1) * (ic ** 2).sum())
    rho = np.abs(np.divide((rc * ic).sum(axis=-1), den, out=np.zeros(ranks.shape[:-1]), where=den > 0))
    k = np.arange(2, n - 1, dtype=np.float64)                  # size of the "before" segment
    u = np.cumsum(ranks, axis=-1)[..., 1:n - 2] - k * (k + 1) / 2
    z = np.abs(u - k * (n - k) / 2) / np.sqrt(k * (n - k) * (n + 1) / 12)
    return rho, z.max(axis=-1)


@functools.lru_cache(maxsize=256)
def _null(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted null distributions of drift_statistics for n i.i.d. rounds (random permutations)."""
    rng = np.random.default_rng(n)
    perms = np.argsort(rng.random((NULL_PERMUTATIONS, n)), axis=1).astype(np.float64) + 1.0
    rho, z = drift_statistics(perms)
    return np.sort(rho), np.sort(z)


def drift_pvalues(data: Sequence[float] | None) -> tuple[float, float]:
    """(p of a monotone trend, p of a step change) of one process's rounds, in round order;
    (nan, nan) below MIN_ROUNDS_TESTED rounds."""
    if not isinstance(data, (list, tuple, np.ndarray)) or len(data) < MIN_ROUNDS_TESTED:
        return math.nan, math.nan
    rho, z = drift_statistics(_ranks(np.asarray(data, dtype=np.float64)))
    null_rho, null_z = _null(len(data))
    m = len(null_rho)
    # share of the null at least as extreme (with the observed one counted: never 0)
    p = [(1 + m - np.searchsorted(null, obs - 1e-12)) / (m + 1) for null, obs in ((null_rho, rho), (null_z, z))]
    return float(p[0]), float(p[1])


def lag1_autocorrelation(data: Sequence[float] | None) -> float:
    """Lag-1 autocorrelation of the rounds in order (nan below 3 rounds or without spread)."""
    if not isinstance(data, (list, tuple, np.ndarray)) or len(data) < 3:
        return math.nan
    x = np.asarray(data, dtype=np.float64) - np.mean(data)
    den = float((x ** 2).sum())
    return float((x[:-1] * x[1:]).sum() / den) if den > 0 else math.nan


def geomean(values: Sequence[float]) -> float:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x) and x > 0], dtype=np.float64)
    return float(np.exp(np.mean(np.log(v)))) if len(v) else math.nan


def fmt_ratio(r: float, lo: float, hi: float) -> str:
    """'1.31x [1.25, 1.37]', or '1.31x' without an interval."""
    if math.isnan(lo):
        return f"{r:.2f}x"
    return f"{r:.2f}x [{lo:.2f}, {hi:.2f}]"


def fmt_seconds(s: float | None) -> str:
    """A time with a unit a reader takes in at a glance: 812 us, 3.41 ms, 2.07 s."""
    if s is None or not np.isfinite(s):
        return "n/a"
    if s < 0:
        return "-" + fmt_seconds(-s)
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1.0:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def fmt_count(x: float) -> str:
    """Large counts with SI prefixes: 1.2M tokens/s."""
    if x is None or not np.isfinite(x):
        return "n/a"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def fmt_time_ci(m: float, lo: float, hi: float) -> str:
    """A median with its interval in the median's unit: '3.97 ms [3.92, 4.02]'."""
    if m is None or not np.isfinite(m):
        return "n/a"
    scale, unit = (1e6, "us") if m < 1e-3 else (1e3, "ms") if m < 1.0 else (1.0, "s")
    if lo is None or not np.isfinite(lo):
        return f"{m * scale:.3g} {unit}"
    return f"{m * scale:.3g} {unit} [{lo * scale:.3g}, {hi * scale:.3g}]"

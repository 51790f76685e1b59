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
"""
from __future__ import annotations

import math
import zlib
from typing import Sequence

import numpy as np

N_BOOT = 2000
LEVEL = 0.95
# `fwbench compare`: a change must exceed this relative size as well as being outside the
# noise, so shared-machine drift between runs of the same code is not called a regression.
MIN_EFFECT = 0.10


def seed_of(name: str) -> int:
    """A fixed seed for the bootstrap of the case called `name`."""
    return zlib.crc32(name.encode("utf-8"))


def boot_medians(data: Sequence[float] | None, name: str, n_boot: int = N_BOOT) -> np.ndarray | None:
    """B bootstrap medians of `data` (None when there is no round data)."""
    if not isinstance(data, (list, tuple, np.ndarray)) or len(data) == 0:
        return None
    x = np.asarray(data, dtype=np.float64)
    rng = np.random.default_rng(seed_of(name))
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))   # (B, n) resample indices
    return np.median(x[idx], axis=1)                         # (B,)


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

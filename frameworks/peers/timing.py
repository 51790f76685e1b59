"""How a pair is measured: fwbench's call and its peer's built in one process, their outputs
compared first, then interleaved rounds, and the ratio fwbench/peer with its interval.

Each round times one block of `calls` calls of each side, in a random order per round (seeded),
waiting at the end of a block for everything the calls changed (a train step's parameters and
optimizer state too). The block length is sized from the warm-up so that the slower side's
block lasts about `block_s`. The ratio of a round is fwbench's block time over the peer's: the
two blocks ran seconds apart, so the machine's slow drift (docs/measurements/regimes.txt) falls
on both. The estimate is the median of the per-round ratios; its 95% interval is the
distribution-free interval of a median from order statistics (median_interval).
"""
from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Side:
    """One side of a pair: `call()` does one unit of work (a forward, a train step) on the pair's
    fixed inputs and returns its value (logits, eps, the loss), which `sync` waits for together
    with everything the call changed; `numpy` turns that value into numpy for the check."""
    label: str
    call: Callable[[], Any]
    sync: Callable[[Any], None]
    numpy: Callable[[Any], np.ndarray]     # a call's returned value (logits, eps, loss) as numpy
    note: str = ""


@dataclass
class Result:
    """One pair's outcome: the ratio fwbench/peer (median of the rounds, its 95% interval),
    both sides' median block times per call (seconds), and the output check."""
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    fwbench_s: float | None = None
    peer_s: float | None = None
    rounds: int = 0
    calls: int = 0
    error: float | None = None        # the check's measured difference
    tolerance: float | None = None
    ratios: list[float] = field(default_factory=list)


def timed_block(side: Side, calls: int) -> float:
    """Seconds per call over one block of `calls` calls, waiting for the last one's result."""
    t0 = time.perf_counter()
    out = None
    for _ in range(calls):
        out = side.call()
    side.sync(out)
    return (time.perf_counter() - t0) / calls


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): the median of `values` and the distribution-free interval of the
    median from order statistics (the sign test's): [x_(k), x_(n+1-k)] with the largest k such
    that P(Binomial(n, 1/2) < k) <= (1 - level) / 2. It covers the median of the distribution the
    values come from with probability at least `level` whatever that distribution (heavy tails,
    a slow block or two: docs/measurements/regimes.txt), at 12 rounds 96.1%
    (tests/test_peers.py checks it by simulation). With too few values for any k (n < 6 at 95%)
    the interval is the whole range."""
    v = np.sort(np.asarray(values, float))
    n = v.size
    cdf = np.cumsum([math.comb(n, i) for i in range(n + 1)]) / 2.0 ** n      # P(Bin(n, 1/2) <= i)
    k = max([i + 1 for i in range(n) if cdf[i] <= (1 - level) / 2] or [1])   # 1-based order statistic
    return float(np.median(v)), float(v[k - 1]), float(v[n - k])


def interleaved(ours: Side, peer: Side, rounds: int, block_s: float, warmup: int = 3, seed: int = 0,
                max_calls: int = 64) -> Result:
    """Warm both sides up, size the block, then `rounds` rounds of one block each in a random
    order per round; the Result with the per-round ratios and both sides' times."""
    for _ in range(warmup):
        for side in (ours, peer):
            side.sync(side.call())
    per_call = max(timed_block(ours, 1), timed_block(peer, 1))
    calls = max(1, min(max_calls, round(block_s / max(per_call, 1e-9))))
    order = random.Random(seed)
    times: dict[str, list[float]] = {"ours": [], "peer": []}
    for _ in range(rounds):
        pair = [("ours", ours), ("peer", peer)]
        order.shuffle(pair)
        for key, side in pair:
            times[key].append(timed_block(side, calls))
    ratios = [a / b for a, b in zip(times["ours"], times["peer"])]
    med, lo, hi = median_interval(ratios)
    return Result(ratio=med, low=lo, high=hi, fwbench_s=statistics.median(times["ours"]),
                  peer_s=statistics.median(times["peer"]), rounds=rounds, calls=calls, ratios=ratios)


def first_outputs(side: Side, n: int) -> list[np.ndarray]:
    """The values of a fresh side's first `n` calls, as float64 numpy (a train step's losses:
    the second one shows the first update)."""
    out = []
    for _ in range(n):
        v = side.call()
        side.sync(v)
        out.append(np.asarray(side.numpy(v), np.float64))
    return out


def difference(ours: list[np.ndarray], peer: list[np.ndarray]) -> float:
    """The largest difference between the two sides' outputs, relative to the peer's largest
    magnitude: max |a - b| / max |b| over the calls compared."""
    return max(float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30)) for a, b in zip(ours, peer))

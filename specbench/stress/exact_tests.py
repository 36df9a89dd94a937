"""Exact binomial statistics in pure Python (no scipy on the GPU image): the Clopper-Pearson interval of a rate and
McNemar's exact test on paired pass/fail outcomes. Counts here are small (tens to hundreds of requests per
condition), where normal approximations say "0 ± 0" at a rate of 0 and mislead most."""

from __future__ import annotations

import math


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1)))


def _bisect(increasing, target: float) -> float:
    """The p in [0, 1] where the increasing function increasing(p) reaches target."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if increasing(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """(low, high) exact interval of a rate of k events in n trials; (nan, nan) without trials. Never outside
    [0, 1]; at k = 0 the high end is about 3.7/n (the "rule of three"), not 0."""
    if n <= 0:
        return math.nan, math.nan
    if not 0 <= k <= n:
        raise ValueError(f"{k} events in {n} trials")
    tail = (1 - confidence) / 2
    # low: P(X >= k | p) = tail; high: P(X <= k | p) = tail (1 - cdf rises with p; cdf falls with it)
    low = 0.0 if k == 0 else _bisect(lambda p: 1 - binom_cdf(k - 1, n, p), tail)
    high = 1.0 if k == n else _bisect(lambda p: 1 - binom_cdf(k, n, p), 1 - tail)
    return low, high


def mcnemar_exact(only_on_fails: int, only_off_fails: int) -> float:
    """Two-sided exact p-value that speculation on and off fail equally often, from the discordant pairs only (a
    prompt that fails with speculation on but passes off, and the reverse); 1.0 without discordant pairs."""
    n = only_on_fails + only_off_fails
    if n == 0:
        return 1.0
    k = min(only_on_fails, only_off_fails)
    return min(1.0, 2 * binom_cdf(k, n, 0.5))

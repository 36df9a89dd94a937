"""The Wilson score interval of a proportion: it stays inside [0, 1] (a normal interval p +/- z*se crosses 0 or 1
when p is near either end or n is small)."""

from __future__ import annotations

import math

Z_95 = 1.959964  # two-sided 95% normal quantile


def wilson_interval(p: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """(low, high) of the 95% Wilson interval of a proportion p observed over n trials; (nan, nan) without trials."""
    if not n or n <= 0 or math.isnan(p):
        return math.nan, math.nan
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)

"""The verdict on one delta: improved / regressed when the change is beyond noise, else within noise (or n/a)."""

from __future__ import annotations

import enum

from specbench.compare.bootstrap import Interval


class Verdict(enum.Enum):
    IMPROVED = "improved"
    REGRESSED = "regressed"
    WITHIN_NOISE = "within noise"
    NOT_AVAILABLE = "n/a"  # a side is missing, or too few requests/repeats for an interval


def decide(
    delta: float | None,
    interval: Interval | None,
    p_value: float | None,
    higher_is_better: bool,
    confidence: float,
    min_change: float,
) -> Verdict:
    """Beyond noise: the interval excludes 0 (paired metrics: the exact test's p < 1 - confidence), and
    |delta| >= min_change (same units as delta). The sign and the metric's direction of goodness give the label."""
    if delta is None:
        return Verdict.NOT_AVAILABLE
    if p_value is not None:
        significant = p_value < 1 - confidence
    elif interval is not None:
        significant = interval.low > 0 or interval.high < 0
    else:
        return Verdict.NOT_AVAILABLE
    if not significant or abs(delta) < min_change or delta == 0:
        return Verdict.WITHIN_NOISE
    return Verdict.IMPROVED if (delta > 0) == higher_is_better else Verdict.REGRESSED

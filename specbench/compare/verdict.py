"""The verdict on one delta: improved / regressed when its deciding interval excludes 0, else within noise (or n/a)."""

from __future__ import annotations

import enum

from specbench.compare.noise import Evidence, NoiseBasis


class Verdict(enum.Enum):
    IMPROVED = "improved"
    REGRESSED = "regressed"
    WITHIN_NOISE = "within noise"
    NOT_AVAILABLE = "n/a"  # a side is missing, or too few requests/questions for an interval
    NO_RUN_ESTIMATE = "no run-to-run estimate"  # a speed metric with < 2 repeats a side (or no spread between them)


def decide(delta: float | None, evidence: Evidence | None, higher_is_better: bool, min_change: float) -> Verdict:
    """Beyond noise <=> the deciding interval excludes 0 and |delta| >= min_change (delta units). The interval's
    side and the metric's direction of goodness give the label. Nothing else decides: the printed interval is it."""
    if delta is None or evidence is None:
        return Verdict.NOT_AVAILABLE
    interval = evidence.interval
    if interval is None:
        return Verdict.NO_RUN_ESTIMATE if evidence.basis is NoiseBasis.RUNS else Verdict.NOT_AVAILABLE
    if not (interval.low > 0 or interval.high < 0) or abs(delta) < min_change:
        return Verdict.WITHIN_NOISE
    return Verdict.IMPROVED if (interval.low > 0) == higher_is_better else Verdict.REGRESSED

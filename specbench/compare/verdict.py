"""The verdict on one delta: improved / regressed when its deciding interval excludes 0, else within noise (or n/a)."""

from __future__ import annotations

import enum

from specbench.compare.noise import Evidence, NoiseBasis


class Verdict(enum.Enum):
    IMPROVED = "improved"
    REGRESSED = "regressed"
    WITHIN_NOISE = "within noise"
    # A speed change the k = 0 control cells made too (compare/noise.py): the load's, as far as two runs can tell
    WITHIN_DRIFT = "within drift"
    NOT_AVAILABLE = "n/a"  # a side is missing, or too few requests/questions for an interval
    NO_RUN_ESTIMATE = "no run-to-run estimate"  # a speed metric with < 2 repeats a side (or no spread between them)
    # A greedy cell whose outputs differ from k = 0 (runs/greedy_divergence.py): its speed and acceptance measure
    # a broken engine, so they are not compared
    NOT_COMPARABLE = "not comparable: outputs differ"


JUDGED = (Verdict.IMPROVED, Verdict.REGRESSED, Verdict.WITHIN_NOISE, Verdict.WITHIN_DRIFT)


def _side(low: float, high: float) -> int:
    """+1 above 0, -1 below, 0 straddling."""
    return 1 if low > 0 else -1 if high < 0 else 0


def decide(delta: float | None, evidence: Evidence | None, higher_is_better: bool, min_change: float) -> Verdict:
    """Beyond noise <=> the deciding interval excludes 0 and |delta| >= min_change (delta units); a speed change
    across runs also needs its change net of the k = 0 control cells' beyond noise on the same side, else it is
    within drift. The interval's side and the metric's direction of goodness give the label."""
    if delta is None or evidence is None:
        return Verdict.NOT_AVAILABLE
    interval = evidence.interval
    if interval is None:
        return Verdict.NO_RUN_ESTIMATE if evidence.basis is NoiseBasis.RUNS else Verdict.NOT_AVAILABLE
    side = _side(interval.low, interval.high)
    if not side or abs(delta) < min_change:
        return Verdict.WITHIN_NOISE
    net = evidence.net_of_control
    if net is not None and _side(net.low, net.high) != side:
        return Verdict.WITHIN_DRIFT
    return Verdict.IMPROVED if (side > 0) == higher_is_better else Verdict.REGRESSED

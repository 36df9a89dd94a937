"""Per-position test of an acceptance drop on accepted / drafted counts (one-sided Fisher exact, Bonferroni)."""

from __future__ import annotations

from dataclasses import dataclass

from scipy import stats

DETECT_POWER = 0.8  # the stated detectable drop is the one found with this probability


@dataclass(frozen=True)
class PositionTest:
    position: int  # 1-based draft position
    baseline_rate: float
    rate: float
    p_value: float  # one-sided: acceptance now lower than in the baseline
    is_drop: bool  # p_value below alpha / num positions
    detectable_drop: float  # smallest drop from baseline_rate found with DETECT_POWER (normal approximation)


def position_tests(base_accepted, base_drafted, accepted, drafted, alpha: float) -> list[PositionTest]:
    """Counts per position ([k] each) -> one test per position with drafts in both runs."""
    out = []
    level = alpha / max(len(base_drafted), 1)
    for i, (ba, bd, a, d) in enumerate(zip(base_accepted, base_drafted, accepted, drafted)):
        base_rate, rate = ba / max(bd, 1), a / max(d, 1)
        if bd == 0 or d == 0:
            out.append(PositionTest(i + 1, base_rate, rate, 1.0, False, 1.0))
            continue
        p = float(stats.fisher_exact([[ba, bd - ba], [a, d - a]], alternative="greater").pvalue)
        out.append(PositionTest(i + 1, base_rate, rate, p, p < level, _detectable_drop(base_rate, bd, d, level)))
    return out


def _detectable_drop(rate: float, n_base: int, n_now: int, level: float) -> float:
    """Two-proportion z approximation: drop delta with z_level * se0 + z_power * se1 = delta."""
    z_a, z_b = stats.norm.isf(level), stats.norm.isf(1 - DETECT_POWER)
    lo, hi = 0.0, rate
    for _ in range(40):  # bisection on delta in [0, rate]
        delta = (lo + hi) / 2
        p_now = rate - delta
        se = (rate * (1 - rate) / n_base + p_now * (1 - p_now) / n_now) ** 0.5
        if delta >= z_a * se + z_b * se:
            hi = delta
        else:
            lo = delta
    return hi

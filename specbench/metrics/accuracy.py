"""GSM8K accuracy with lm-eval's stderr, its interval, and answer agreement with the no-speculation baseline cell.

The interval every report prints (sweep and gsm8k summaries, the gate) is `accuracy_interval`: the Wilson score
interval (Wilson 1927; Brown, Cai & DasGupta 2001 recommend it over the normal one for small n). Unlike mean +-
stderr it stays meaningful at 0 and 1: at 0 of 6 correct the stderr is 0 (`0.000±0.000`, as if certain) while the
95% Wilson interval is [0, 0.39].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from specbench.workloads.base import Score


class Accuracy(NamedTuple):
    strict: float | None  # mean exact_match, strict-match filter; None without scores
    strict_stderr: float | None  # sample std (ddof=1) / sqrt(n); None for n < 2
    flexible: float | None
    flexible_stderr: float | None
    n: int


Z_95 = 1.959964  # two-sided 95% normal quantile


def accuracy_interval(fraction: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion `fraction` over `n` trials (n >= 1), clipped to [0, 1]."""
    if n < 1:
        raise ValueError("accuracy_interval needs n >= 1")
    z2 = z * z
    center = (fraction + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(fraction * (1 - fraction) / n + z2 / (4 * n * n))
    # at 0 (1) the lower (upper) end is exactly 0 (1); rounding would leave 1e-17
    low = 0.0 if fraction <= 0 else max(0.0, center - half)
    high = 1.0 if fraction >= 1 else min(1.0, center + half)
    return low, high


def interval_stderr(fraction: float, n: int) -> float:
    """A standard error that stays > 0 at 0 and 1: the 95% Wilson interval's width / (2 x 1.96)."""
    low, high = accuracy_interval(fraction, n)
    return (high - low) / (2 * Z_95)


def format_accuracy(fraction: float, n: int | None, digits: int = 3) -> str:
    """'0.000 [0.000, 0.390]': the accuracy and its 95% Wilson interval (the value alone without a count)."""
    value = f"{fraction:.{digits}f}"
    if not n or n < 1:
        return value
    low, high = accuracy_interval(fraction, n)
    return f"{value} [{low:.{digits}f}, {high:.{digits}f}]"


class AnswerAgreement(NamedTuple):
    num_pairs: int
    strict: float | None  # fraction with equal normalised strict answers; None without scored pairs
    flexible: float | None
    text: float | None  # fraction with identical completion texts; None without pairs


def _mean_stderr(values: Sequence[bool]) -> tuple[float | None, float | None]:
    n = len(values)
    if n == 0:
        return None, None
    mean = sum(values) / n
    if n < 2:
        return mean, None
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(variance / n)


def accuracy(scores: Sequence[Score]) -> Accuracy:
    strict, strict_stderr = _mean_stderr([s.is_strict_match for s in scores])
    flexible, flexible_stderr = _mean_stderr([s.is_flexible_match for s in scores])
    return Accuracy(strict, strict_stderr, flexible, flexible_stderr, len(scores))


def answer_agreement(
    scores: Sequence[Score | None],
    baseline_scores: Sequence[Score | None],
    texts: Sequence[str],
    baseline_texts: Sequence[str],
) -> AnswerAgreement:
    """Position i of every sequence must be the same request (sample and turn) in both cells."""
    n = len(texts)
    if not (len(scores) == len(baseline_scores) == n == len(baseline_texts)):
        raise ValueError("answer_agreement needs four sequences of equal length, aligned by request")
    scored = [(s, b) for s, b in zip(scores, baseline_scores) if s is not None and b is not None]
    strict = sum(s.strict_normalized == b.strict_normalized for s, b in scored) / len(scored) if scored else None
    flexible = sum(s.flexible_normalized == b.flexible_normalized for s, b in scored) / len(scored) if scored else None
    text = sum(t == b for t, b in zip(texts, baseline_texts)) / n if n else None
    return AnswerAgreement(n, strict, flexible, text)

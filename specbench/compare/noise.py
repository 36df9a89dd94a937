"""Which noise a metric's verdict is judged against, the interval that decides it, and its minimum detectable effect.

A before/after is exposed to run-to-run noise. Speed metrics (throughput, latency, goodput, speedup: values set by
the machine's timing) are therefore judged on RUNS: with >= 2 repeats on both sides, a Student t interval over the
per-repeat values (delta method for a relative delta). Resampling the requests of one run says nothing about that
noise (one prefill batch gives every request the same TTFT: a zero-width interval), so with one run per side, or
no spread between repeats, a speed metric gets no verdict. Acceptance varies with the sampled requests (bootstrap
over requests as clusters of their rounds); accuracy and agreement with the sampled questions (paired bootstrap).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specbench.compare.bootstrap import Interval
from specbench.compare.metrics_catalog import Delta, Metric, Resampling

MIN_RUNS = 2  # repeats per side for a run-to-run estimate


class NoiseBasis(enum.Enum):
    RUNS = "runs"  # between-repeat variance (pooled t)
    REQUESTS = "requests"  # bootstrap over requests (acceptance: clusters of draft rounds) and repeats
    QUESTIONS = "questions"  # paired bootstrap over the questions both runs answered


_BASIS = {Resampling.REQUESTS: NoiseBasis.RUNS, Resampling.SPEEDUP: NoiseBasis.RUNS,
          Resampling.ROUNDS: NoiseBasis.REQUESTS, Resampling.PAIRED: NoiseBasis.QUESTIONS}


def basis_of(metric: Metric) -> NoiseBasis:
    """REQUESTS-resampled metrics are the timing ones (throughput, latency, goodput)."""
    return _BASIS[metric.resampling]


@dataclass(frozen=True)
class Evidence:
    """What a verdict is decided from: the interval of the delta (None: no estimate of the relevant noise)."""

    basis: NoiseBasis
    interval: Interval | None
    mde: float | None  # smallest |delta| this interval's test could call (delta units); None with no interval
    spread: float | None = None  # RUNS: pooled between-run sd (relative, or stored units for absolute deltas)


def run_evidence(before: Sequence[float], after: Sequence[float], delta: Delta, confidence: float) -> Evidence:
    """Student t interval of the delta from per-repeat values, the two sides' between-run variances pooled (the
    same machine and settings: one run-to-run noise; with 2-3 repeats a side, Welch's degrees of freedom would
    fall to ~1). Relative deltas by the delta method on after/before - 1: SE = (A/B) cv sqrt(1/n_a + 1/n_b), cv
    the pooled coefficient of variation. No interval with < 2 finite repeats on a side, or no spread at all
    (a zero-width interval)."""
    b, a = _finite(before), _finite(after)
    if b.size < MIN_RUNS or a.size < MIN_RUNS:
        return Evidence(NoiseBasis.RUNS, None, None)
    mean_b, mean_a = float(b.mean()), float(a.mean())
    if delta is Delta.RELATIVE:
        if mean_b == 0 or mean_a == 0:
            return Evidence(NoiseBasis.RUNS, None, None)
        b, a = b / mean_b, a / mean_a  # spread as a fraction of each side's mean
        point, scale = mean_a / mean_b - 1, mean_a / mean_b
    else:
        point, scale = mean_a - mean_b, 1.0
    df = b.size + a.size - 2
    spread = math.sqrt((((b - b.mean()) ** 2).sum() + ((a - a.mean()) ** 2).sum()) / df)  # pooled sd
    if not spread > 0:
        return Evidence(NoiseBasis.RUNS, None, None, spread)
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * scale * spread * math.sqrt(1 / b.size + 1 / a.size)
    return Evidence(NoiseBasis.RUNS, Interval(point - half, point + half), half, spread)


def bootstrap_evidence(basis: NoiseBasis, interval: Interval | None, num_questions: int = 0,
                       confidence: float = 0.95) -> Evidence:
    """REQUESTS / QUESTIONS: the percentile interval decides; MDE = its half-width. QUESTIONS: at least the
    smallest one-way discordance k/n the paired bootstrap can call, (1 - k/n)^n < (1 - confidence) / 2 (the
    chance that a resample draws none of the k changed questions)."""
    if interval is None:
        return Evidence(basis, None, None)
    mde = (interval.high - interval.low) / 2
    if basis is NoiseBasis.QUESTIONS and num_questions:
        mde = max(mde, smallest_discordance(num_questions, confidence) / num_questions)
    return Evidence(basis, interval, mde)


def smallest_discordance(num_questions: int, confidence: float) -> int:
    tail = (1 - confidence) / 2
    for k in range(1, num_questions + 1):
        if (1 - k / num_questions) ** num_questions < tail:
            return k
    return num_questions


def _finite(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)  # [num_repeats]
    return array[np.isfinite(array)]

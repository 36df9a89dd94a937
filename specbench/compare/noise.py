"""Which noise a metric's verdict is judged against, the interval that decides it, and its minimum detectable effect.

A before/after is exposed to run-to-run noise. Speed metrics (throughput, latency, goodput, speedup: values set by
the machine's timing) are therefore judged on RUNS, on the log of the per-repeat values (a ratio: the interval is
symmetric in log space, never past -100%, and swapping the runs mirrors it, so the verdict does not depend on the
argument order). Three records estimate the noise between two runs (compare/load.py): the spread of the repeats
(pooled t over >= 2 repeats a side), the drift probes (their log drift variance is added: load changes the
repeats of one run share), and the k = 0 control cells: a speed change that the control cells made too is the
load's, not the engine's, so a verdict holds only when the change net of the control's is beyond noise as well
("within drift" otherwise). Resampling the requests of one run says nothing about run-to-run noise (one prefill
batch gives every request the same TTFT: a zero-width interval), so with one run per side, or no spread between
repeats, a speed metric gets no verdict. Acceptance varies with the sampled requests (bootstrap over the
requests of all repeats pooled, each a cluster of its rounds); accuracy and agreement with the sampled questions
(paired bootstrap).
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
    spread: float | None = None  # RUNS: pooled between-repeat sd (log units; absolute deltas: stored units)
    # RUNS: the delta net of the k = 0 control cells' own change (delta units), None without a control
    net_of_control: Interval | None = None
    control_delta: float | None = None  # RUNS: how far the control cells moved between the runs (delta units)
    probe_sd: float | None = None  # RUNS: between-run sd the drift probes add (log units)


@dataclass(frozen=True)
class _Shift:
    point: float  # transformed after - transformed before
    variance: float  # of the point, from the repeats' spread
    spread: float  # pooled sd of one repeat (transformed)
    df: int


def _shift(before: Sequence[float], after: Sequence[float], delta: Delta) -> _Shift | None:
    """The change in log (relative deltas) or stored units (absolute), with its repeat-to-repeat variance; the
    two sides' variances pooled (the same machine and settings; with 2-3 repeats a side, Welch's degrees of freedom
    would fall to ~1). None with < 2 usable repeats on a side."""
    b, a = _transformed(before, delta), _transformed(after, delta)
    if b.size < MIN_RUNS or a.size < MIN_RUNS:
        return None
    df = b.size + a.size - 2
    spread = math.sqrt((((b - b.mean()) ** 2).sum() + ((a - a.mean()) ** 2).sum()) / df)
    # repeats equal on both sides leave rounding in their mean's deviations (4e-16, found by hypothesis): no spread
    if spread <= 1e-12 * max(1.0, float(np.abs(b).max()), float(np.abs(a).max())):
        spread = 0.0
    return _Shift(float(a.mean() - b.mean()), spread**2 * (1 / b.size + 1 / a.size), spread, df)


def _back(value: float, delta: Delta) -> float:
    return math.expm1(value) if delta is Delta.RELATIVE else value


def run_evidence(before: Sequence[float], after: Sequence[float], delta: Delta, confidence: float,
                 probe_variance: float | None = None,
                 control: tuple[Sequence[float], Sequence[float]] | None = None) -> Evidence:
    """Student t interval of the change from per-repeat values (relative deltas: of the log ratio of the
    geometric means, exponentiated), its variance the repeats' plus the drift probes' (relative deltas only: drift
    is a fraction). `control`: the per-repeat values of the same metric in the k = 0 cells of both runs (the cell
    itself for a k = 0 cell: all its change is then the control's). No interval with < 2 finite repeats on a side,
    or no spread at all (a zero-width interval)."""
    shift = _shift(before, after, delta)
    if shift is None:
        return Evidence(NoiseBasis.RUNS, None, None)
    if not shift.spread > 0:
        return Evidence(NoiseBasis.RUNS, None, None, shift.spread)
    extra = (probe_variance or 0.0) if delta is Delta.RELATIVE else 0.0
    quantile = float(stats.t.ppf(0.5 + confidence / 2, shift.df))
    half = quantile * math.sqrt(shift.variance + extra)
    interval = Interval(_back(shift.point - half, delta), _back(shift.point + half, delta))
    net = control_delta = None
    reference = _shift(*control, delta) if control is not None else None
    if reference is not None:
        # The control's own repeat noise counts once more; with no spread of its own, the cell's stands in.
        variance = reference.variance if reference.spread > 0 else shift.variance
        net_half = quantile * math.sqrt(shift.variance + variance + extra)
        net_point = shift.point - reference.point
        net = Interval(_back(net_point - net_half, delta), _back(net_point + net_half, delta))
        control_delta = _back(reference.point, delta)
    return Evidence(NoiseBasis.RUNS, interval, _back(half, delta), shift.spread, net, control_delta,
                    math.sqrt(extra) if extra else None)


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


def _transformed(values: Sequence[float], delta: Delta) -> np.ndarray:
    """[num_usable_repeats]: log of the positive finite values (relative deltas), else the finite values."""
    array = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)  # [num_repeats]
    if delta is Delta.RELATIVE:
        return np.log(array[np.isfinite(array) & (array > 0)])
    return array[np.isfinite(array)]

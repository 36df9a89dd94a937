"""The verdict of an interleaved A/B (bench/ab.py): the two engines alternate cell by cell in one invocation, so a
pair of adjacent cells (A then B, or B then A) shares the machine's load, and the noise that matters is the spread
of the per-pair log ratios: a paired t interval over the repeats. Load that drifts slowly cancels within each
pair; the alternating order (ABBA) cancels a steady trend too. No noise model across runs is needed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from specbench.compare.bootstrap import Interval
from specbench.compare.noise import MIN_RUNS, Evidence, NoiseBasis
from specbench.compare.verdict import Verdict, decide
from specbench.metrics.specs import over_repeats


@dataclass(frozen=True)
class PairedSpeed:
    a: float | None  # geometric mean over repeats (metrics/specs.over_repeats)
    b: float | None
    delta: float | None  # B / A - 1: the geometric mean of the per-pair ratios, minus 1
    interval: Interval | None  # of delta; None with < MIN_RUNS pairs or no spread
    spread: float | None  # sd of the per-pair log ratios
    num_pairs: int
    verdict: Verdict


def paired_speed(a: Sequence[float | None], b: Sequence[float | None], higher_is_better: bool,
                 confidence: float = 0.95) -> PairedSpeed:
    """a, b: [num_repeats] one value per repeat of each side, repeat i of A and of B adjacent in time."""
    pairs = [(x, y) for x, y in zip(a, b) if x and y and math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0]
    logs = np.array([math.log(y / x) for x, y in pairs])  # [num_pairs]
    mean_a, mean_b = over_repeats([x for x, _ in pairs]), over_repeats([y for _, y in pairs])
    if not pairs:
        return PairedSpeed(mean_a, mean_b, None, None, None, 0, Verdict.NOT_AVAILABLE)
    delta = math.expm1(float(logs.mean()))
    spread = float(logs.std(ddof=1)) if logs.size >= MIN_RUNS else None
    interval = None
    if spread:
        half = float(stats.t.ppf(0.5 + confidence / 2, logs.size - 1)) * spread / math.sqrt(logs.size)
        interval = Interval(math.expm1(logs.mean() - half), math.expm1(logs.mean() + half))
    evidence = Evidence(NoiseBasis.RUNS, interval, None, spread)
    return PairedSpeed(mean_a, mean_b, delta, interval, spread, int(logs.size),
                       decide(delta, evidence, higher_is_better, 0.0))

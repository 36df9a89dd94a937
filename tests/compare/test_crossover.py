"""The crossover concurrency where speculation stops paying (compare/crossover.py)."""

from __future__ import annotations

import math

import pytest

from specbench.compare.crossover import crossovers, first_crossing, format_crossovers, speedup_point


def _cells(speedups: dict[int, list[float]], k: int = 2) -> list[dict]:
    return [{"workload": "w", "method": "ngram", "temperature": 0.0, "num_steps": k, "concurrency": c,
             "speedup": s, "repeat": r} for c, values in speedups.items() for r, s in enumerate(values)]


def test_first_crossing_interpolates_in_log_concurrency():
    assert first_crossing([1, 4], [2.0, 0.5]) == pytest.approx(2.0)  # log s: +ln2 -> -ln2, midway in log c
    assert first_crossing([1, 2], [0.9, 0.8]) == -math.inf
    assert first_crossing([1, 2], [1.2, 1.0]) == math.inf


def test_speedup_point_interval_needs_repeats():
    one = speedup_point(1, [1.5])
    assert one.speedup == 1.5 and one.low is None
    two = speedup_point(1, [1.0, 4.0])
    assert two.speedup == pytest.approx(2.0) and two.low < 2.0 < two.high
    assert speedup_point(1, [1.3, 1.3]).low is None  # no spread: no interval


def test_crossover_with_interval_and_summary_lines():
    rows = _cells({1: [2.1, 2.0, 2.2], 2: [1.5, 1.45, 1.55], 4: [1.05, 1.0, 1.1], 8: [0.77, 0.75, 0.8]})
    (crossover,) = crossovers(rows)
    assert 4 < crossover.concurrency < 8
    assert crossover.low <= crossover.concurrency <= crossover.high
    text = format_crossovers(rows)
    assert "stops paying above c≈" in text and "95% CI" in text
    paying = format_crossovers(_cells({1: [2.0, 2.1, 2.05], 8: [1.2, 1.25, 1.22]}))
    assert "pays at every measured concurrency (c=1..8; lowest 1.22x at c=8)" in paying
    assert "within noise" not in paying
    assert "within noise of 1 at c=8" in format_crossovers(_cells({1: [2.0, 2.1], 8: [1.2, 0.95]}))
    assert "never pays" in format_crossovers(_cells({1: [0.9], 2: [0.8]}))
    assert "no interval" in format_crossovers(_cells({1: [2.0], 8: [0.5]}))
    assert format_crossovers(_cells({1: [2.0]})) == ""  # one concurrency: nothing to cross


def test_interval_end_beyond_the_measured_range():
    rows = _cells({1: [1.3, 1.5], 2: [0.9, 1.05]})  # the upper curve never drops below 1
    (crossover,) = crossovers(rows)
    assert crossover.high == math.inf
    assert crossover.low == -math.inf
    assert "[95% CI <1, >2]" in format_crossovers(rows)

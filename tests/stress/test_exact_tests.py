"""Exact binomial statistics against published values (Clopper-Pearson 1934 tables; scipy's binomtest agrees)."""

from __future__ import annotations

import math

import pytest

from specbench.stress.exact_tests import binom_cdf, clopper_pearson, mcnemar_exact


@pytest.mark.parametrize("k, n, low, high", [
    (0, 10, 0.0, 0.30850),  # a rate of 0 still has a high end (the "rule of three": about 3.7/n at 95%)
    (3, 10, 0.06674, 0.65245),
    (10, 10, 0.69150, 1.0),
    (1, 100, 0.000253, 0.054460),
    (50, 100, 0.39832, 0.60168),
])
def test_clopper_pearson_matches_the_tables(k, n, low, high):
    got_low, got_high = clopper_pearson(k, n)
    assert got_low == pytest.approx(low, abs=2e-5) and got_high == pytest.approx(high, abs=2e-5)


def test_intervals_stay_inside_zero_one_and_refuse_impossible_counts():
    for n in (1, 2, 7, 30):
        for k in range(n + 1):
            low, high = clopper_pearson(k, n)
            assert 0.0 <= low <= k / n <= high <= 1.0
    assert all(math.isnan(x) for x in clopper_pearson(0, 0))
    with pytest.raises(ValueError):
        clopper_pearson(5, 4)


def test_mcnemar_uses_only_the_discordant_pairs():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 0) == pytest.approx(2 * 0.5**5)  # 0.0625: five one-sided failures are not yet 5%
    assert mcnemar_exact(6, 0) == pytest.approx(2 * 0.5**6) and mcnemar_exact(6, 0) < 0.05
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 6) == mcnemar_exact(6, 0)
    assert binom_cdf(2, 4, 0.5) == pytest.approx(11 / 16)

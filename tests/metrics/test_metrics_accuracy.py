"""GSM8K accuracy with stderr, and answer agreement with the baseline cell."""

from __future__ import annotations

import pytest

from specbench.metrics import accuracy, answer_agreement
from specbench.workloads.gsm8k_scoring import score_completion

GOLD = "x\n#### 12"


def test_accuracy_and_stderr():
    scores = [
        score_completion("#### 12", GOLD),  # strict and flexible
        score_completion("the answer is 12", GOLD),  # flexible only
        score_completion("#### 13", GOLD),  # neither
        score_completion("#### 12.", GOLD),  # both
    ]
    result = accuracy(scores)
    assert result.n == 4
    assert result.strict == pytest.approx(0.5)
    assert result.strict_stderr == pytest.approx((1 / 3 / 4) ** 0.5)  # values 1,0,0,1: var(ddof=1) = 1/3
    assert result.flexible == pytest.approx(0.75)
    assert result.flexible_stderr == pytest.approx(0.25)  # values 1,1,0,1: var(ddof=1) = 1/4


def test_accuracy_edge_cases():
    assert accuracy([]) == (None, None, None, None, 0)
    single = accuracy([score_completion("#### 12", GOLD)])
    assert (single.strict, single.strict_stderr) == (1.0, None)


def test_answer_agreement():
    spec = [score_completion("#### 12", GOLD), score_completion("so $1,000.", GOLD), score_completion("#### 4", GOLD)]
    base = [score_completion("#### 12", GOLD), score_completion("#### 1000", GOLD), score_completion("#### 5", GOLD)]
    texts = ["#### 12", "so $1,000.", "#### 4"]
    base_texts = ["#### 12", "#### 1000", "#### 5"]
    result = answer_agreement(spec, base, texts, base_texts)
    assert result.num_pairs == 3
    assert result.strict == pytest.approx(1 / 3)  # "12" == "12"; "[invalid]" != "1000"; "4" != "5"
    assert result.flexible == pytest.approx(2 / 3)  # "$1,000." and "1000" both normalise to "1000"
    assert result.text == pytest.approx(1 / 3)


def test_answer_agreement_without_scores_and_misaligned_inputs():
    result = answer_agreement([None, None], [None, None], ["a", "b"], ["a", "c"])
    assert (result.strict, result.flexible, result.text) == (None, None, 0.5)
    with pytest.raises(ValueError, match="equal length"):
        answer_agreement([None], [None, None], ["a"], ["a"])


def test_the_accuracy_interval_stays_meaningful_at_0_and_1():
    """Issue 40: 0 of n correct printed 0.000±0.000 (a binomial stderr of 0, as if certain); the Wilson interval
    keeps a width there, and agrees with the normal one in the middle."""
    from specbench.metrics.accuracy import accuracy_interval, format_accuracy, interval_stderr

    low, high = accuracy_interval(0.0, 6)
    assert low == 0.0 and high == pytest.approx(0.390, abs=1e-3)
    low, high = accuracy_interval(1.0, 6)
    assert high == 1.0 and low == pytest.approx(0.610, abs=1e-3)
    low, high = accuracy_interval(0.5, 400)  # large n: close to 0.5 +- 1.96 x 0.025
    assert (low, high) == (pytest.approx(0.451, abs=1e-3), pytest.approx(0.549, abs=1e-3))
    assert interval_stderr(0.0, 6) > 0.09 and interval_stderr(0.5, 400) == pytest.approx(0.025, abs=1e-3)
    assert format_accuracy(0.0, 6) == "0.000 [0.000, 0.390]"
    assert format_accuracy(0.25, None) == "0.250"

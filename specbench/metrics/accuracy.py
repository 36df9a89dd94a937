"""GSM8K accuracy with lm-eval's stderr, and answer agreement with the no-speculation baseline cell."""

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

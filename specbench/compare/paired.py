"""Paired comparison of per-question outcomes (accuracy, agreement with k=0) on the questions both runs answered.

A question is (sample_id, turn); its outcome in a run is the mean over repeats of a 0/1 value. The test is the
exact two-sided sign test on the questions whose outcome changed: with one repeat that is McNemar's exact test
(discordant pairs b vs c, Binomial(b + c, 1/2)). The interval is a paired bootstrap of the mean difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

QUESTION = ["sample_id", "turn"]
OUTCOMES = ("is_strict_match", "is_flexible_match", "same_strict", "same_flexible", "same_text")


def request_outcomes(requests: pd.DataFrame, baseline: pd.DataFrame | None, outcome: str) -> pd.Series:
    """0/1 per request row of one cell repeat, indexed by question; unscored requests are left out.

    `baseline`: the num-steps 0 cell of the same run and repeat (needed by the same_* outcomes)."""
    if outcome in ("is_strict_match", "is_flexible_match"):
        scored = requests[requests["gold_answer"].notna()]
        return scored.set_index(QUESTION)[outcome].astype(float)
    if baseline is None:
        return pd.Series(dtype=float)
    field = {"same_strict": "strict_normalized", "same_flexible": "flexible_normalized", "same_text": "output_text"}
    column = field[outcome]
    needed = QUESTION + ["gold_answer", column]
    pairs = requests[needed].merge(baseline[needed], on=QUESTION, suffixes=("", "_baseline"))
    if outcome != "same_text":
        pairs = pairs[pairs["gold_answer"].notna() & pairs["gold_answer_baseline"].notna()]
    else:
        pairs = pairs.assign(output_text=pairs["output_text"].fillna(""),
                             output_text_baseline=pairs["output_text_baseline"].fillna(""))
    same = (pairs[column] == pairs[f"{column}_baseline"]).astype(float)
    return pd.Series(same.to_numpy(), index=pd.MultiIndex.from_frame(pairs[QUESTION]))


def question_means(per_repeat: list[pd.Series]) -> pd.Series:
    """Mean outcome per question over the repeats that have it."""
    if not per_repeat:
        return pd.Series(dtype=float)
    return pd.concat(per_repeat).groupby(level=[0, 1]).mean()


@dataclass(frozen=True)
class PairedResult:
    num_pairs: int  # questions answered in both runs
    num_better: int  # questions whose outcome rose
    num_worse: int  # questions whose outcome fell
    p_value: float | None  # exact two-sided sign test; None without pairs
    replicates: np.ndarray  # [num_resamples] paired bootstrap of mean(after - before) over questions


def sign_test(num_better: int, num_worse: int) -> float:
    """Two-sided exact binomial test of num_better vs num_worse under p = 1/2 (1.0 when nothing changed)."""
    n, k = num_better + num_worse, min(num_better, num_worse)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_compare(before: pd.Series, after: pd.Series, num_resamples: int, rng: np.random.Generator) -> PairedResult:
    joined = pd.concat([before.rename("before"), after.rename("after")], axis=1, join="inner")
    diff = (joined["after"] - joined["before"]).to_numpy()  # [num_pairs]
    if diff.size == 0:
        return PairedResult(0, 0, 0, None, np.full(num_resamples, np.nan))
    better, worse = int((diff > 0).sum()), int((diff < 0).sum())
    counts = rng.multinomial(diff.size, np.full(diff.size, 1 / diff.size), size=num_resamples)
    return PairedResult(diff.size, better, worse, sign_test(better, worse), counts @ diff / diff.size)

"""Prompt-lookup n-gram drafting: longest match, earliest occurrence, bounds, truncation, bad arguments."""

from __future__ import annotations

import time

import numpy as np
import pytest

from specbench.errors import SpecbenchError
from specbench.speculation.drafters.ngram_lookup import propose_ngram


def _propose(tokens: list[int], min_n: int = 1, max_n: int = 3, k: int = 3) -> list[int]:
    return propose_ngram(np.array(tokens), min_n=min_n, max_n=max_n, num_draft_tokens=k).tolist()


def _brute_force(tokens: np.ndarray, min_n: int, max_n: int, k: int) -> list[int]:
    n_tokens = len(tokens)
    for n in range(min(max_n, n_tokens - 1), min_n - 1, -1):
        suffix = tokens[n_tokens - n :].tolist()
        for start in range(n_tokens - n):  # every start before the suffix's own
            if tokens[start : start + n].tolist() == suffix:
                return tokens[start + n : start + n + k].tolist()
    return []


def test_longest_match_wins_over_shorter_earlier_match():
    # suffix "2 3": "3" alone occurs at index 1 (followed by 9), "2 3" occurs at 4..5 (followed by 7 8)
    assert _propose([5, 3, 9, 9, 2, 3, 7, 8, 2, 3], max_n=2, k=2) == [7, 8]
    assert _propose([5, 3, 9, 9, 2, 3, 7, 8, 2, 3], max_n=1, k=2) == [9, 9]


def test_earliest_occurrence_wins():
    assert _propose([1, 2, 10, 1, 2, 20, 1, 2], max_n=2, k=1) == [10]


def test_min_n_excludes_short_matches():
    tokens = [4, 7, 5, 6, 7]  # only the 1-gram "7" recurs
    assert _propose(tokens, min_n=1, max_n=3, k=2) == [5, 6]
    assert _propose(tokens, min_n=2, max_n=3, k=2) == []


def test_max_n_caps_match_length():
    tokens = [0, 2, 3, 5, 1, 2, 3, 6, 1, 2, 3]  # "1 2 3" first at 4 (-> 6); "2 3" first at 1 (-> 5)
    assert _propose(tokens, max_n=3, k=1) == [6]
    assert _propose(tokens, max_n=2, k=1) == [5]


def test_no_match_is_empty():
    out = propose_ngram(np.array([1, 2, 3, 4]), min_n=1, max_n=3, num_draft_tokens=4)
    assert out.shape == (0,) and out.dtype == np.array([1]).dtype
    assert _propose([]) == [] and _propose([7]) == []


def test_truncates_at_end_of_context():
    # earliest occurrence of the 2-gram "8 8" overlaps the suffix: only one token follows it
    assert _propose([8, 8, 8], min_n=2, max_n=2, k=5) == [8]
    assert _propose([3, 4, 5, 3, 4], max_n=2, k=5) == [5, 3, 4]


def test_zero_draft_tokens_is_empty():
    assert _propose([1, 2, 1, 2], k=0) == []


@pytest.mark.parametrize("min_n,max_n,k", [(0, 3, 2), (3, 2, 2), (1, 3, -1)])
def test_bad_arguments_raise(min_n, max_n, k):
    with pytest.raises(SpecbenchError):
        propose_ngram(np.array([1, 2, 1]), min_n=min_n, max_n=max_n, num_draft_tokens=k)


def test_matches_brute_force_on_random_contexts():
    rng = np.random.default_rng(0)
    for trial in range(400):
        vocab = int(rng.integers(2, 6))
        tokens = rng.integers(0, vocab, size=int(rng.integers(0, 40)))
        min_n = int(rng.integers(1, 4))
        max_n = min_n + int(rng.integers(0, 4))
        k = int(rng.integers(1, 6))
        got = propose_ngram(tokens, min_n=min_n, max_n=max_n, num_draft_tokens=k).tolist()
        assert got == _brute_force(tokens, min_n, max_n, k), (trial, tokens.tolist(), min_n, max_n, k)


def test_fast_on_long_context():
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 50, size=4000)
    tokens[-4:] = tokens[1000:1004]  # guarantees a 4-gram match
    start = time.perf_counter()
    for _ in range(100):
        out = propose_ngram(tokens, min_n=1, max_n=4, num_draft_tokens=5)
    per_call = (time.perf_counter() - start) / 100
    assert out.tolist() == _brute_force(tokens, 1, 4, 5)
    assert per_call < 5e-3, f"{per_call * 1e3:.2f} ms per call on 4000 tokens"

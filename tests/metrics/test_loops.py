"""Degenerate-loop detector (metrics/loops.py) on synthetic token streams."""

from __future__ import annotations

import random

from specbench.metrics.loops import LOOP_MIN_REPEATS, loop_columns, scan_loop, suffix_matches


def _brute_suffix(values, period):
    """Periodic suffix length of `period` by definition: the longest suffix with x[i] == x[i + period]."""
    n, length = len(values), period
    while length < n and values[n - length - 1] == values[n - length - 1 + period]:
        length += 1
    return min(length, n)


def test_suffix_matches_agrees_with_the_definition():
    rng = random.Random(0)
    for _ in range(50):
        values = [rng.randrange(3) for _ in range(rng.randrange(1, 40))]
        z = suffix_matches(values)
        for p in range(1, len(values)):
            assert p + z[p] == _brute_suffix(values, p)


def test_a_loop_until_max_tokens_is_flagged_with_its_period():
    rng = random.Random(1)
    prefix = [rng.randrange(1000, 2000) for _ in range(40)]
    block = [11, 12, 13, 14, 15, 16, 17]
    tokens = prefix + block * 12 + block[:3]  # stopped mid-block by max_tokens
    scan = scan_loop(tokens)
    assert scan.is_degenerate_loop
    assert scan.loop_period == 7
    assert scan.loop_coverage == (7 * 12 + 3) / len(tokens)


def test_natural_repetitive_text_is_not_a_loop():
    """A list repeats its template every line, but each line's item differs: no exact periodic suffix."""
    words = {w: i for i, w in enumerate("the cat dog bird fish sat on mat log tree pond and a".split())}
    text = ("the cat sat on the mat and the dog sat on the log and the bird sat on the tree and the fish sat "
            "on a pond and the cat sat on the log").split()
    scan = scan_loop([words[w] for w in text])
    assert not scan.is_degenerate_loop
    assert scan.loop_coverage < 0.5
    numbered = [t for i in range(1, 30) for t in (900, i, 901, 902, 903)]  # "1. item\n2. item\n..." counters
    assert not scan_loop(numbered).is_degenerate_loop


def test_a_short_or_minor_repeat_is_not_a_loop():
    assert not scan_loop([5] * 10).is_degenerate_loop  # below LOOP_MIN_TOKENS
    rng = random.Random(2)
    tokens = [rng.randrange(100, 5000) for _ in range(200)] + [7, 8] * 20  # 40 of 240: under half
    scan = scan_loop(tokens)
    assert scan.loop_period == 2 and not scan.is_degenerate_loop
    two_copies = [rng.randrange(100, 5000) for _ in range(30)]
    assert scan_loop(two_copies * 2).loop_period is None  # 2 < LOOP_MIN_REPEATS copies
    assert LOOP_MIN_REPEATS == 3


def test_loop_columns_fall_back_to_text_characters():
    assert loop_columns((), "ab" * 40)["is_degenerate_loop"] is True
    assert loop_columns((), "The answer is 42.")["is_degenerate_loop"] is False
    assert loop_columns((), None) == {"loop_period": None, "loop_coverage": None, "is_degenerate_loop": None}
    assert loop_columns((1, 2, 3), "ab" * 40)["is_degenerate_loop"] is False  # token ids win

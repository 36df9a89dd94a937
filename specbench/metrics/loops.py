"""Degenerate output loops: a request whose output ends in one block repeated over and over.

A drafter predicts a loop perfectly (an n-gram drafter copies it, a learned one follows it), so looping requests
accept nearly every draft; random prompts make small models loop until max_tokens, and such a cell reports an
acceptance no real traffic sees. The detector, from first principles:

A sequence x[0..n) has period p on a stretch when x[i] = x[i + p] throughout it. The periodic suffix of period p
is the longest suffix with period p; its length is L_p = p + z_p, z_p the number of consecutive matches
x[n-1-j] = x[n-1-j-p] for j = 0, 1, ... (the Z-function of the reversed sequence, all p in O(n)). A loop is the
longest such suffix holding at least LOOP_MIN_REPEATS full periods: L = max_p L_p over p with L_p >= R p (the
smallest such p on ties), `loop_coverage` = L / n, `loop_period` = that p. The request is a degenerate loop when
L >= LOOP_MIN_TOKENS and L / n >= LOOP_MIN_COVERAGE: the output's final half or more is one block repeated at
least R times. Natural repetitive text (lists, code, refrains) repeats n-grams but not one exact block over half
the output, so it stays below the coverage bound.

Token ids where the backend has them (embedded engine); over HTTP, the output text's characters (a token loop
is a character loop with a period of its characters).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LOOP_MIN_REPEATS = 3  # full periods in the suffix: two copies of a phrase are natural, three back to back are not
LOOP_MIN_TOKENS = 24  # units (tokens or characters) in the suffix: shorter ones are too short to inflate acceptance
LOOP_MIN_COVERAGE = 0.5  # fraction of the output the suffix covers


@dataclass(frozen=True)
class LoopScan:
    loop_period: int | None  # p of the longest periodic suffix with >= LOOP_MIN_REPEATS periods; None if none
    loop_coverage: float  # L / n (0 for an empty output or no such suffix)
    is_degenerate_loop: bool


def suffix_matches(values: Sequence[object]) -> list[int]:
    """[n] z[p] = number of j >= 0 with x[n-1-j] == x[n-1-j-p] consecutively from the end (z[0] = n): the
    Z-function of the reversed sequence."""
    rev = list(reversed(values))
    n = len(rev)
    z = [0] * n
    if n:
        z[0] = n
    left = right = 0  # [left, right): the rightmost window known to match a prefix
    for i in range(1, n):
        length = min(right - i, z[i - left]) if i < right else 0
        while i + length < n and rev[length] == rev[i + length]:
            length += 1
        z[i] = length
        if i + length > right:
            left, right = i, i + length
    return z


def scan_loop(values: Sequence[object]) -> LoopScan:
    n = len(values)
    z = suffix_matches(values)
    best_length, best_period = 0, None
    for period in range(1, n // LOOP_MIN_REPEATS + 1):
        length = period + z[period]
        if length >= LOOP_MIN_REPEATS * period and length > best_length:
            best_length, best_period = length, period
    coverage = best_length / n if n else 0.0
    is_loop = best_length >= LOOP_MIN_TOKENS and coverage >= LOOP_MIN_COVERAGE
    return LoopScan(best_period, coverage, is_loop)


def loop_columns(output_token_ids: Sequence[int], text: str | None) -> dict[str, object]:
    """requests.parquet's loop columns: over the token ids, else the text's characters; null without either."""
    values: Sequence[object] = output_token_ids or (text or "")
    if not values:
        return {"loop_period": None, "loop_coverage": None, "is_degenerate_loop": None}
    scan = scan_loop(values)
    return {"loop_period": scan.loop_period, "loop_coverage": scan.loop_coverage,
            "is_degenerate_loop": scan.is_degenerate_loop}

"""GSM8K answer extraction and exact_match, as in lm-eval's gsm8k task v3 (strict-match, flexible-extract)."""

from __future__ import annotations

import re

from specbench.workloads.base import INVALID_ANSWER, Score

STRICT_PATTERN = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_PATTERN = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
# exact_match(ignore_case=True, ignore_punctuation=False, regexes_to_ignore=...), applied to prediction and gold.
IGNORED_PATTERNS = tuple(re.compile(p) for p in (",", "\\$", "(?s).*#### ", "\\.$"))


def extract_strict(completion: str) -> str:
    """First `#### N` match; INVALID_ANSWER when there is none."""
    matches = STRICT_PATTERN.findall(completion)
    return matches[0].strip() if matches else INVALID_ANSWER


def extract_flexible(completion: str) -> str:
    """Last number-like match; of its two groups the first non-empty one."""
    matches = FLEXIBLE_PATTERN.findall(completion)
    if not matches:
        return INVALID_ANSWER
    groups = [g for g in matches[-1] if g]
    return groups[0].strip() if groups else INVALID_ANSWER


def normalize(text: str) -> str:
    for pattern in IGNORED_PATTERNS:
        text = pattern.sub("", text)
    return text.lower()


def truncate_at_stop(completion: str, stop_strings: tuple[str, ...]) -> str:
    """Text before the earliest stop string, as lm-eval's `until` leaves it (no-op if already cut)."""
    for stop in stop_strings:
        if stop:
            completion = completion.split(stop, 1)[0]
    return completion


def score_completion(completion: str, gold_solution: str) -> Score:
    strict, flexible = extract_strict(completion), extract_flexible(completion)
    gold = normalize(gold_solution)
    strict_norm, flexible_norm = normalize(strict), normalize(flexible)
    return Score(
        gold_answer=gold,
        strict_answer=strict,
        flexible_answer=flexible,
        strict_normalized=strict_norm,
        flexible_normalized=flexible_norm,
        is_strict_match=strict_norm == gold,
        is_flexible_match=flexible_norm == gold,
    )

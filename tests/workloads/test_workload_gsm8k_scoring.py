"""GSM8K strict/flexible extraction and exact_match normalisation (lm-eval gsm8k v3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specbench.workloads.base import INVALID_ANSWER, Sample
from specbench.workloads.gsm8k import Gsm8kWorkload
from specbench.workloads.gsm8k_scoring import (
    extract_flexible,
    extract_strict,
    normalize,
    score_completion,
    truncate_at_stop,
)

DATA_DIR = Path(os.environ.get("SPECBENCH_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data")


def _gsm8k_test_rows() -> list[dict]:
    path = DATA_DIR / "gsm8k" / "test.jsonl"
    if not path.is_file():
        pytest.skip(f"shared GSM8K data not found at {path}")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_gold_solutions_score_themselves_under_both_filters():
    rows = _gsm8k_test_rows()
    for row in rows:
        score = score_completion(row["answer"], row["answer"])
        final = row["answer"].rsplit("#### ", 1)[1]
        assert score.gold_answer == final.replace(",", "").replace("$", "").lower().rstrip(".")
        assert score.is_strict_match and score.is_flexible_match, row["answer"]


def test_real_answer_with_thousands_separator():
    rows = _gsm8k_test_rows()
    row = next(r for r in rows if "," in r["answer"].rsplit("#### ", 1)[1])
    number = row["answer"].rsplit("#### ", 1)[1]
    assert normalize(row["answer"]) == number.replace(",", "")
    assert score_completion(f"So the total is {number}.", row["answer"]).is_flexible_match


@pytest.mark.parametrize(
    ("completion", "strict", "flexible"),
    [
        ("3 + 4 = 7\n#### 7", "7", "7"),
        ("The total is #### 1,234.", "1,234.", "1,234."),
        ("She makes $18.", INVALID_ANSWER, "$18."),
        ("#### -5", "-5", "-5"),
        ("It drops by -12 degrees", INVALID_ANSWER, "-12"),
        ("#### 3.50", "3.50", "3.50"),
        ("#### 5\nwait, #### 6", "5", "6"),  # strict: first match; flexible: last
        ("x is 7", INVALID_ANSWER, "7"),  # single digit: the second group
        ("I do not know", INVALID_ANSWER, INVALID_ANSWER),
        ("", INVALID_ANSWER, INVALID_ANSWER),
    ],
)
def test_extraction(completion, strict, flexible):
    assert extract_strict(completion) == strict
    assert extract_flexible(completion) == flexible


@pytest.mark.parametrize(
    ("completion", "gold", "is_strict", "is_flexible"),
    [
        ("#### 1,234.", "blah\n#### 1234", True, True),  # comma and trailing period ignored
        ("She makes $18.", "x\n#### 18", False, True),  # `$` ignored; strict needs ####
        ("#### -5", "x\n#### -5", True, True),
        ("#### 5", "x\n#### -5", False, False),
        ("#### 3.50", "x\n#### 3.5", False, False),  # exact string match, no numeric equality
        ("#### 70,000", "x\n#### 70,000", True, True),
        ("nothing here", "x\n#### 3", False, False),
    ],
)
def test_exact_match(completion, gold, is_strict, is_flexible):
    score = score_completion(completion, gold)
    assert (score.is_strict_match, score.is_flexible_match) == (is_strict, is_flexible)


def test_invalid_answer_never_matches_and_is_kept():
    score = score_completion("no digits", "x\n#### 3")
    assert score.strict_answer == score.flexible_answer == INVALID_ANSWER
    assert score.strict_normalized == INVALID_ANSWER


def test_normalize_strips_everything_up_to_last_marker_and_lowercases():
    assert normalize("a\n#### b #### $1,000.") == "1000"
    assert normalize("ABC") == "abc"


def test_score_cuts_at_the_first_stop_string():
    workload = Gsm8kWorkload()
    sample = Sample("0", "gsm8k", turns=("q",), reference_answer="x\n#### 5")
    completion = "2 + 3 = 5\n#### 5\n\nQuestion: next one\nAnswer: #### 9"
    score = workload.score(sample, completion)
    assert score is not None
    assert (score.strict_answer, score.flexible_answer) == ("5", "5")
    assert truncate_at_stop("a</s>b<|im_end|>c", workload.stop_strings) == "a"

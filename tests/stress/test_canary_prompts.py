"""Canaries: their exact answers pass and near misses fail; prompts are token ids of exactly the asked length (block
edges need exactness), the same in every process, one shared filler where a condition shares its prefix."""

from __future__ import annotations

import pytest

from specbench.stress.canary import KINDS, canaries, make_canary
from specbench.stress.prompts import build_prompt


@pytest.mark.parametrize("kind", KINDS)
def test_each_canary_accepts_its_answer_and_refuses_a_near_miss(kind):
    canary = make_canary(kind, 7)
    assert canary.is_answered(canary.answer) and canary.is_answered(f" {canary.answer}\nmore text")
    if canary.answer.isdigit():  # a near miss: off by one, or one character changed before the end
        wrong = str(int(canary.answer) + 1)
    else:
        wrong = canary.answer[:-2] + ("0" if canary.answer[-2] != "0" else "1") + canary.answer[-1]
    assert not canary.is_answered(wrong)
    assert not canary.is_answered("")
    assert (canary.answer in canary.question) == kind.startswith("echo")  # echoes copy; the rest compute
    assert make_canary(kind, 7) == canary and make_canary(kind, 8) != canary


def test_arithmetic_and_count_answers_are_right():
    for seed in range(20):
        c = make_canary("arithmetic", seed)
        expr = c.question.rsplit("\n", 1)[1].rstrip(" =")
        a, rest = expr.split(" + ")
        b, m = rest.split(" * ")
        assert int(c.answer) == int(a) + int(b) * int(m)
        c = make_canary("count", seed)
        assert int(c.answer) == c.question.rsplit("List: ", 1)[1].split("\n")[0].split().count("apple")
    assert [c.kind for c in canaries(7, 0)] == [*KINDS, *KINDS[:2]]


@pytest.mark.parametrize("length", [95, 96, 97, 127, 128, 129, 500])
def test_prompts_have_exactly_the_asked_length(length):
    from tests.support.tiny_models import load_tiny_tokenizer

    tok = load_tiny_tokenizer()
    for canary in canaries(5, 3):
        built = build_prompt(canary, length, filler_seed=11, tokenizer=tok)
        assert built.is_exact and len(built.token_ids) == length
        assert tok.decode(built.token_ids).endswith(canary.question)  # the question ends the prompt, whole
        short = build_prompt(canary, 3, filler_seed=11, tokenizer=tok)  # shorter than the question: the question
        assert tok.decode(short.token_ids).strip() == canary.question


def test_a_shared_filler_is_one_prefix_and_text_without_a_tokenizer_is_about_the_length():
    from tests.support.tiny_models import load_tiny_tokenizer

    tok = load_tiny_tokenizer()
    a, b = (build_prompt(c, 200, filler_seed=5, tokenizer=tok) for c in canaries(2, 0))
    common = next(i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y)
    assert common > 120  # the filler (about 200 minus the question) is the same tokens
    text = build_prompt(make_canary("echo-id", 1), 300, filler_seed=5)
    assert not text.is_exact and 1000 <= len(text.text) <= 1300

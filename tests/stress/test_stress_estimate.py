"""The stress stage's time-left line (stress/runner.py): work counts sequential steps (waves of `concurrency`
requests, prompts weighed as prefill), and past the first condition the guess leaves that condition's warm-up out.
The H100 run that prompted it: "about 45.3 min more" after the first condition of a matrix that took 2.6 min."""

from __future__ import annotations

import pytest

from specbench.stress.conditions import Condition
from specbench.stress.runner import PREFILL_TOKENS_PER_STEP, StressSettings, _estimate_line, _work

SETTINGS = StressSettings(max_tokens=24, seed=0)


def test_work_counts_waves_of_concurrent_requests_not_their_tokens():
    serial = Condition("gentle", "", concurrency=1, prompt_tokens=96, num_requests=8)
    batched = Condition("c8", "", concurrency=8, prompt_tokens=96, num_requests=16)
    warm = Condition("warm", "", concurrency=1, prompt_tokens=96, num_requests=8, cache="warm")
    long = Condition("long", "", concurrency=1, prompt_tokens=2048, num_requests=4)
    step = 24 + 96 / PREFILL_TOKENS_PER_STEP
    assert _work(serial, SETTINGS) == pytest.approx(8 * step)
    assert _work(batched, SETTINGS) == pytest.approx(2 * step)  # 16 requests in 2 waves of 8
    assert _work(warm, SETTINGS) == pytest.approx(2 * 8 * step)  # two passes
    assert _work(long, SETTINGS) == pytest.approx(4 * (24 + 4))


def test_the_guess_leaves_the_first_conditions_warm_up_out_once_it_can():
    # the first condition: 100 steps in 40 s (30 s of them warm-up); the next three: 300 steps in 30 s
    first = (100.0, 40.0)
    only_first = _estimate_line(1, 100.0, 600.0, 40.0, first)
    assert only_first == ("stress: about 4.0 min more (a guess from the first condition's rate, its warm-up "
                          "included)")
    later = _estimate_line(4, 400.0, 600.0, 70.0, first)
    assert later == "stress: about 1.0 min more (a guess from the last 3 conditions' rate)"

"""The embedded greedy check in bf16: each first divergence is classified by the clean target's top-2 margin there;
a target-corrupting mutant is divergent (fails), near-ties pass, and the margin is the target's own log-prob gap."""

from __future__ import annotations

import math

import pytest

from specbench.check import greedy
from specbench.check.greedy import check_greedy, divergence_margins, reference_outputs
from specbench.check.engine_defaults import check_engine
from specbench.check.setup import CheckSetup, build_llm

PROMPTS = ((5, 9, 13, 2, 7, 11, 3, 8), (4, 6, 12, 10, 15, 1, 14, 2))


def _setup(sensitive_pairs, dtype: str, inject: str | None = None) -> CheckSetup:
    pair = sensitive_pairs(0)
    engine = check_engine(target=str(pair.target), method="draft", draft=str(pair.draft), max_num_steps=3, dtype=dtype)
    return CheckSetup(engine, PROMPTS, max_tokens=12, inject=inject)


def test_a_corrupting_mutant_in_bf16_is_divergent(sensitive_pairs):
    result = check_greedy(_setup(sensitive_pairs, "bf16", "bonus-from-wrong-row"))
    assert not result.passed and "divergent" in result.detail and "bf16" in result.detail, result.detail


def test_near_tied_divergences_pass_in_bf16(sensitive_pairs, monkeypatch):
    monkeypatch.setattr(greedy, "divergence_margins", lambda setup, prompts, refs, positions: [0.01] * len(positions))
    result = check_greedy(_setup(sensitive_pairs, "bf16", "bonus-from-wrong-row"))
    assert result.passed and "/ 0 divergent" in result.detail and "near-tie 0.010" in result.detail, result.detail


def test_the_margin_is_the_targets_top2_logprob_gap(sensitive_pairs):
    setup = _setup(sensitive_pairs, "fp32")
    reference = reference_outputs(setup)
    margins = divergence_margins(setup, [PROMPTS[0]], [reference[0]], [4])
    plain = build_llm(setup, speculative=False).engine.runner.model
    from specbench.check.target_probs import next_token_probs
    from specbench.sampling_params import SamplingParams

    probs = next(next_token_probs(plain, [PROMPTS[0]], [reference[0][:5]], SamplingParams(temperature=1.0),
                                  block_size=setup.engine.block_size))[0, 4]
    first, second = sorted(probs.tolist(), reverse=True)[:2]
    assert margins[0] == pytest.approx(math.log(first) - math.log(second), rel=1e-5)
    assert int(probs.argmax()) == reference[0][4]  # greedy chose the top candidate whose margin is measured

"""Acceptance is blind to a broken hybrid rollback (rMLX #436: a Gated DeltaNet rollback that kept the rejected
drafts' updates inflated every recorded acceptance rate). On the selftest's hybrid target under n-gram drafting
(prompts repeating the target's own continuation: ~80% of drafts accepted, a fifth rejected, so the rollback runs in
most rounds), `state-not-rolled-back` corrupts the output yet leaves it plausible at the token level (valid ids, no
token repeated back to back, as many distinct bigrams as the clean output) and its recorded acceptance rate no
lower than the clean engine's (one-sided Fisher exact test): a dashboard of acceptance and output shape raises no
alarm. The state oracle (INV-STATE) and greedy identity do. Measured rates and the search for a real inflation:
docs/hybrid-targets.md ("Acceptance under a broken rollback")."""

from __future__ import annotations

import itertools

import pytest
from scipy.stats import fisher_exact

from specbench import LLM, SamplingParams
from specbench.attention.invariant_violation import InvariantViolation
from specbench.check.engine_defaults import check_engine
from specbench.check.state_oracle import generate_checking_states
from specbench.faults import injection
from specbench.selftest.tiny_hybrid import build_hybrid_pair
from specbench.selftest.tiny_ngram import repeating_prompts

NUM_PROMPTS, MAX_TOKENS = 24, 24
MUTANT = "state-not-rolled-back"
ENGINE = {"dtype": "fp32", "device": "cpu", "block_size": 4, "max_concurrency": 8, "seed": 0, "method": "ngram",
          "ngram_min": 1, "ngram_max": 3, "max_num_steps": 3}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    target, _ = build_hybrid_pair(tmp_path_factory.mktemp("acceptance_blind"), seed=0)
    prompts = repeating_prompts(target, NUM_PROMPTS, 0, check_engine(target=target, max_concurrency=8, seed=0))
    return target, prompts


def _run(target, prompts, fault=None):
    """(accepted drafts, drafted tokens, outputs) of one engine over every prompt, greedy."""
    llm = LLM(target, fault=fault, **ENGINE)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    stats = llm.engine.step_stats
    return (sum(s.num_accepted_tokens for s in stats), sum(s.num_draft_tokens for s in stats),
            [list(o.output_token_ids) for o in outs])


def _distinct_bigrams(outputs: list[list[int]]) -> float:
    """Mean over requests of distinct bigrams / bigrams (1: no bigram repeats; a looping output falls toward 0)."""
    return sum(len(set(zip(t, t[1:]))) / (len(t) - 1) for t in outputs) / len(outputs)


def _longest_run(outputs: list[list[int]]) -> int:
    return max(len(list(group)) for t in outputs for _, group in itertools.groupby(t))


@pytest.mark.slow  # two engines over 24 prompts x 24 tokens, and the oracle over 3: ~40 s on 2 busy cores
def test_a_kept_draft_state_corrupts_plausibly_with_no_acceptance_alarm_and_the_oracle_flags_it(setup):
    target, prompts = setup
    clean_accepted, clean_drafted, clean = _run(target, prompts)
    accepted, drafted, bent = _run(target, prompts, injection(MUTANT))
    assert clean_drafted > 300 and drafted > 300  # enough drafts for the test below to see a drop of 6 points (p 0.04)
    # corrupt: greedy identity with the clean engine (itself HF's: tests/models/test_hybrid_vs_hf.py) fails
    assert sum(b != c for b, c in zip(bent, clean)) >= 2
    # plausible at the token level: what an output-shape check would pass
    vocab = LLM(target, **ENGINE).engine.vocab_size
    assert all(0 <= t < vocab for out in bent for t in out)
    assert _longest_run(bent) <= max(_longest_run(clean), 2)
    assert _distinct_bigrams(bent) >= 0.95 * _distinct_bigrams(clean)
    # acceptance raises no alarm: not significantly lower than the clean engine's
    table = [[accepted, drafted - accepted], [clean_accepted, clean_drafted - clean_accepted]]
    assert fisher_exact(table, alternative="less").pvalue > 0.05, (accepted, drafted, clean_accepted, clean_drafted)
    # the sentinel: INV-STATE after every step, clean first
    params = SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True)
    generate_checking_states(LLM(target, **ENGINE), prompts[:3], params)
    with pytest.raises(InvariantViolation, match="INV-STATE"):
        generate_checking_states(LLM(target, fault=injection(MUTANT), **ENGINE), prompts[:3], params)

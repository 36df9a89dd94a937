"""The prefix-hit snapshot mutant (faults/state_snapshot_wrong_block.py: a hit restores the previous block's
snapshot) on a hybrid target's shared-prefix and multi-turn waves (tests/support/hybrid_prefix.py): caught by greedy
identity with the clean engine (itself == HF transformers: tests/models/test_hybrid_prefix_vs_hf.py) and by the state
oracle (INV-STATE: the slot against a recomputation from the committed tokens, which a wrong snapshot does not
reproduce); inert without prefix hits."""

from __future__ import annotations

import pytest

from tests.support.hf_greedy import tiny_prompt_ids
from tests.support.hybrid_prefix import run_waves
from tests.support.hybrid_runs import NGRAM, PROMPT_LENGTHS, hybrid_llm
from tests.support.tiny_hybrid import build_tiny_hybrid

from specbench import SamplingParams
from specbench.faults import injection

NAME = "state-snapshot-wrong-block"


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_next_snapshot_mutant")
    build_tiny_hybrid(root / "target", seed=0)
    return root / "target"


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def clean(target, prompts):
    outs, worst, _ = run_waves(hybrid_llm(target, max_concurrency=8, **NGRAM), prompts)
    assert worst < 1e-4
    return [list(o.output_token_ids) for o in outs]


def test_greedy_identity_and_the_state_oracle_catch_it(target, prompts, clean):
    llm = hybrid_llm(target, fault=injection(NAME), max_concurrency=8, **NGRAM)
    outs, worst, num_checked = run_waves(llm, prompts)
    assert "hybrid.snapshot_restore" in llm.engine.paths_taken()
    assert num_checked > 0 and worst > 1e-2, worst
    assert [list(o.output_token_ids) for o in outs] != clean


def test_it_is_inert_without_prefix_hits(target, prompts):
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    clean = hybrid_llm(target, **NGRAM).generate(prompts, params)  # all admitted at once: nothing cached yet
    llm = hybrid_llm(target, fault=injection(NAME), **NGRAM)
    bent = llm.generate(prompts, params)
    assert "hybrid.snapshot_restore" not in llm.engine.paths_taken()
    assert [o.output_token_ids for o in bent] == [o.output_token_ids for o in clean]

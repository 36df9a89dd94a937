"""Sampled tree rounds are lossless: the first tokens a draft-LM tree engine samples (T < 1, top-k, top-p) fit the
target's teacher-forced conditionals under the sampled check's chi-square machinery (check/sampled.py), and a
verifier that tests every sibling against the full target distribution (no residual) fails the same test."""

from __future__ import annotations

from dataclasses import replace
from itertools import zip_longest

import pytest
import torch

from specbench import LLM
from specbench.check.engine_defaults import check_engine
from specbench.check.reference import build_reference_llm
from specbench.check.sampled import ALPHA, SAMPLED_PARAMS, _verdict
from specbench.check.setup import CheckSetup
from specbench.speculation.verify import tree_batched as tree_verify_batched
from specbench.speculation.draft_shape import DraftShape

NUM_SAMPLES = 400
NUM_POSITIONS = 4


def _tree_verdict(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    prompts = [prompt_ids[0], prompt_ids[2]]
    setup = CheckSetup(check_engine(target=target, method="draft", draft=draft, max_num_steps=2, dtype="fp32",
                                    device="cpu", block_size=4), tuple(tuple(p) for p in prompts))
    llm = LLM(target, method="draft", draft=draft, max_num_steps=2, dtype="fp32", device="cpu", block_size=4,
              max_concurrency=len(prompts) * NUM_SAMPLES, kv_cache_gb=0.05)
    llm.engine.set_draft_shape(DraftShape(3, 6))
    params = replace(SAMPLED_PARAMS, max_tokens=NUM_POSITIONS)
    batch = [p for p in prompts for _ in range(NUM_SAMPLES)]
    outs = llm.generate(batch, [replace(params, seed=7 + i) for i in range(len(batch))])
    assert all(o.stats.tree_counts is not None and o.stats.tree_counts.num_rounds > 0 for o in outs)
    model = build_reference_llm(setup.engine).engine.runner.model
    return _verdict(setup, model, outs, len(prompts), NUM_SAMPLES, params, tuple(range(NUM_POSITIONS))), outs


def test_sampled_tree_tokens_follow_the_target_law(tiny_pair, prompt_ids):
    verdict, outs = _tree_verdict(tiny_pair, prompt_ids)
    assert verdict.p_value >= ALPHA, verdict
    assert verdict.num_cells >= 6
    # siblings beyond the first are accepted (the recursive rule's residual is exercised)
    ranks = [sum(x) for x in zip_longest(*(o.stats.tree_counts.accepted_per_rank for o in outs), fillvalue=0)]
    assert len(ranks) > 1 and sum(ranks[1:]) > 0, ranks


def _stale_sibling_accept(child_probs: torch.Tensor, tree) -> torch.Tensor:
    """A wrong rule: every sibling is accepted with its full target probability p(c), not the residual's."""
    return child_probs


@pytest.mark.slow
def test_a_stale_residual_fails_the_same_test(tiny_pair, prompt_ids, monkeypatch):
    # the engine verifies with the batched rule (speculation/verify/tree_batched.py)
    monkeypatch.setattr(tree_verify_batched, "sibling_accept_probs", _stale_sibling_accept)
    verdict, _ = _tree_verdict(tiny_pair, prompt_ids)
    assert verdict.p_value < ALPHA, verdict

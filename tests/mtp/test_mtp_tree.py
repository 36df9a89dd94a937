"""The `mtp` proposer drafting trees (eagle_topk > 1) through the engine: greedy output == the plain engine's, with
and without preemption, on the dense target with Qwen3-Next's `mtp.*` module; tree counts add up."""

from __future__ import annotations

import pytest

from specbench import LLM, SamplingParams
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
from specbench.speculation.draft_shape import DraftShape
from tests.support.tree_checks import tree_matches_chain

MAX_TOKENS = 16
PREEMPTING_KV_BLOCKS = 14


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mtp-tree")
    base, _ = build_tiny_pair(root / "pair", seed=0)
    return build_mtp_target(base, root / "target", MTP_PREFIX)


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    return random_prompts(4, seed=0, vocab_size=500, max_len=30)


@pytest.fixture(scope="module")
def plain_outputs(target, prompts) -> list[list[int]]:
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, kv_cache_gb=0.05)
    return [list(o.output_token_ids) for o in llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS,
                                                                                    ignore_eos=True))]


@pytest.mark.parametrize(("topk", "budget", "is_preempting"), [(2, 4, True), (3, 8, False), (4, 8, True)])
def test_mtp_tree_greedy_matches_plain_engine(target, prompts, plain_outputs, topk, budget, is_preempting):
    pool = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.05}
    llm = LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, method="mtp", max_num_steps=3,
              debug_invariants=True, **pool)
    llm.engine.set_draft_shape(DraftShape(topk, budget))
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == plain_outputs
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    assert {"spec.tree_round", "verify.tree", "proposer.mtp"} <= llm.engine.paths_taken()
    for o in outs:
        tree = o.stats.tree_counts
        assert tree is not None and tree.num_rounds == o.stats.num_draft_rounds > 0
        assert sum(tree.acceptance_lengths) == tree.num_accepted == o.stats.num_accepted_tokens
        assert all(size == budget for size in tree.tree_sizes)


def test_mtp_tree_follows_its_chain_drafts(target, prompts):
    """At every node on the chain's branch the tree step's draft log-probs are the chain step's, from the same state:
    a tree step fed the wrong parent's hidden state, the wrong position or a sibling's KV gives others."""
    def make_llm():
        return LLM(target, dtype="fp32", device="cpu", block_size=4, method="mtp", max_num_steps=4,
                   kv_cache_gb=0.02, debug_invariants=True)

    matched = [tree_matches_chain(make_llm, p, topk=3, depth=4) for p in prompts[:3]]
    assert max(matched) == 4 and min(matched) >= 1, matched

"""EAGLE-1 and EAGLE-3 heads drafting trees (eagle_topk > 1) through the engine: greedy output == the plain
engine's, with and without preemption; the tree is accepted beyond its first child; tree counts add up."""

from __future__ import annotations

from itertools import zip_longest

import pytest
from tests.support.eagle_heads import MAX_TOKENS, PREEMPTING_KV_BLOCKS, VARIANTS, run_engine

from specbench import SamplingParams
from specbench.speculation.draft_shape import DraftShape
from tests.support.tree_checks import tree_matches_chain


@pytest.mark.parametrize(("variant", "topk", "budget", "is_preempting"), [
    ("eagle1-bias-bin", 2, 4, True), ("eagle1-nobias", 4, 8, False), ("eagle3-speculators", 4, 4, True),
])
def test_eagle_tree_greedy_is_token_identical(variant, topk, budget, is_preempting, head_dir, target_dir, prompt_ids,
                                              plain_outputs):
    v = VARIANTS[variant]
    pool = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {"kv_cache_gb": 0.02}
    llm, _ = run_engine(target_dir(v.target), prompt_ids[:1], method=v.method, draft=str(head_dir(variant)),
                        max_num_steps=3, debug_invariants=True, **pool)
    llm.engine.set_draft_shape(DraftShape(topk, budget))
    outs = llm.generate(prompt_ids[:4], SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert [list(o.output_token_ids) for o in outs] == plain_outputs(v.target)[:4]
    assert (sum(o.stats.num_preemptions for o in outs) > 0) == is_preempting
    assert {"spec.tree_round", "verify.tree", "eagle.eager"} <= llm.engine.paths_taken()
    for o in outs:
        tree = o.stats.tree_counts
        assert tree is not None and sum(tree.acceptance_lengths) == tree.num_accepted == o.stats.num_accepted_tokens
        assert sum(o.stats.num_accepted_per_pos) == o.stats.num_accepted_tokens
    ranks = [sum(x) for x in zip_longest(*(o.stats.tree_counts.accepted_per_rank for o in outs), fillvalue=0)]
    # fitted heads: more than one token accepted per round on average (a head drafting off the wrong hidden or the
    # wrong position lands far lower)
    rate = sum(o.stats.num_accepted_tokens for o in outs) / sum(o.stats.num_draft_rounds for o in outs)
    assert rate > 1.0 and ranks[0] > 0, (rate, ranks)


@pytest.mark.parametrize("variant", ["eagle1-bias-bin", "eagle3-speculators"])
def test_eagle_tree_follows_its_chain_drafts(variant, head_dir, target_dir, prompt_ids):
    """At every node on the chain's branch the tree step's draft log-probs are the chain step's, from the same state:
    a tree step fed the wrong parent's hidden state, the wrong position or a sibling's KV gives others."""
    from specbench import LLM

    v = VARIANTS[variant]

    def make_llm():
        return LLM(str(target_dir(v.target)), dtype="fp32", device="cpu", block_size=4, method=v.method,
                   draft=str(head_dir(variant)), max_num_steps=4, kv_cache_gb=0.02, allow_pickle=True,
                   debug_invariants=True)

    matched = [tree_matches_chain(make_llm, p, topk=3, depth=4) for p in prompt_ids[:3]]
    assert max(matched) == 4 and min(matched) >= 1, matched

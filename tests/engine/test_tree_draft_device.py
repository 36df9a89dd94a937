"""The draft LM's trees drafted on the device (speculation/tree_device.py) against the host reference
(tree_propose.grow_tree) from the same engine state: identical trees and draft KV; and on_tree_verified keeps the
accepted path's fed rows (found from the device's fed rows, one read per round) exactly as the branch lookup of the
reference would."""

from __future__ import annotations

import pytest
from tests.support.tree_checks import assert_same_tree_round, propose_first_tree

from specbench import LLM
from specbench.speculation import draft_model
from specbench.speculation.tree_propose import TreePlan, grow_tree_reference


def _llm(tiny_pair) -> LLM:
    return LLM(tiny_pair[0], method="draft", draft=tiny_pair[1], max_num_steps=4, dtype="fp32", device="cpu",
               block_size=4, max_concurrency=4, kv_cache_gb=0.02, debug_invariants=True)


@pytest.mark.parametrize("plan", [TreePlan(4, 4, 8), TreePlan(2, 3, 6)])
def test_draft_lm_device_tree_equals_host_reference(plan, tiny_pair, prompt_ids, monkeypatch):
    prompts = prompt_ids[:3]
    got_llm = _llm(tiny_pair)
    got = propose_first_tree(got_llm, prompts, plan)
    with monkeypatch.context() as mp:
        mp.setattr(draft_model, "grow_tree_on_device", grow_tree_reference)
        want_llm = _llm(tiny_pair)
        expected = propose_first_tree(want_llm, prompts, plan)
    assert_same_tree_round(got, expected)
    # Accept each request's first root child and its first child: the fed rows the proposer moves agree.
    paths = []
    for parents in got[0].parents.tolist():
        first = parents.index(-1)
        child = next((i for i, p in enumerate(parents) if p == first), None)
        paths.append((first,) if child is None else (first, child))
    ids = tuple(f"r{i}" for i in range(len(prompts)))
    for llm in (got_llm, want_llm):
        llm.engine.proposer.on_tree_verified(ids, tuple(paths))
    states = [[got_llm.engine.proposer._state[i].num_cached for i in ids],
              [want_llm.engine.proposer._state[i].num_cached for i in ids]]
    assert states[0] == states[1]
    for a, b in zip((*got_llm.engine.proposer.kv_cache.k, *got_llm.engine.proposer.kv_cache.v),
                    (*want_llm.engine.proposer.kv_cache.k, *want_llm.engine.proposer.kv_cache.v)):
        assert a.equal(b)

"""The draft LM's trees drafted on the device (speculation/tree/device.py) against the host reference
(tree.propose.grow_tree) from the same engine state: identical trees and draft KV; and on_tree_verified keeps the
accepted path's fed rows (found from the device's fed rows, one read per round) exactly as the branch lookup of the
reference would."""

from __future__ import annotations

import pytest
import torch
from tests.support.tree_checks import assert_same_tree_round, propose_first_tree

from specbench import LLM
from specbench.runtime.cuda_graph import GraphPlan
from specbench.speculation.drafters import draft_model
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.tree.propose import grow_tree_reference


def _llm(tiny_pair, **kw) -> LLM:
    return LLM(tiny_pair[0], method="draft", draft=tiny_pair[1], max_num_steps=4, dtype="fp32", device="cpu",
               block_size=4, max_concurrency=4, kv_cache_gb=0.02, debug_invariants=True, **kw)


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


def test_draft_lm_tree_graph_buffers_equal_eager(tiny_pair, prompt_ids):
    """The draft LM's tree graph path on its static buffers (rerun off CUDA; tests/engine/test_tree_draft_graphs_cuda.py
    replays real graphs), 3 requests padded to a bucket of 4: the trees, fed rows and draft KV eager drafting gives."""
    pytest.importorskip("triton")
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if torch.cuda.is_available():  # the interpreted Triton backend on CPU is what this test runs
        pytest.skip("on CUDA, tests/engine/test_tree_draft_graphs_cuda.py replays the real graphs")
    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    plan = TreePlan(4, 3, 8)
    prompts = prompt_ids[:3]
    eager_llm = _llm(tiny_pair, attention_backend="triton")
    expected = propose_first_tree(eager_llm, prompts, plan)
    llm = _llm(tiny_pair, attention_backend="triton")
    proposer = llm.engine.proposer
    proposer.enable_cuda_graphs(GraphPlan(max_num_reqs=4, max_blocks_per_req=64, max_positions=256, block_size=4,
                                          device=llm.engine.device))  # off CUDA: runners rerun on their buffers
    proposer.prepare_tree_draft_graphs(plan)
    proposer.tree_graphs[plan].buckets = (4,)  # one padding request
    got = propose_first_tree(llm, prompts, plan)
    assert proposer.tree_graphs[plan].num_replays == 1 and "draft.tree_graph" in llm.engine.paths_taken()
    assert_same_tree_round(got, expected)
    ids = tuple(f"r{i}" for i in range(len(prompts)))
    for p in (proposer, eager_llm.engine.proposer):
        assert [p._state[i].tree_round.fed_row[p._state[i].tree_round.row].tolist() for i in ids] == [
            eager_llm.engine.proposer._state[i].tree_round.fed_row[r].tolist() for r, i in enumerate(ids)]

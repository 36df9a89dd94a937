"""MTP trees drafted on the device (speculation/tree/device.py, the EAGLE proposer's code) against the host reference,
and through the tree draft graphs' static buffers (rerun off CUDA; tests/eagle/test_eagle_tree_graphs.py replays
real graphs): identical trees and draft KV from the same engine state."""

from __future__ import annotations

import pytest

from specbench import LLM
from specbench.runtime.cuda_graph import GraphPlan
from specbench.selftest.tiny import build_tiny_pair, random_prompts
from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target
from specbench.speculation.drafters.eagle import proposer as eagle_proposer
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.tree.propose import grow_tree_reference
from tests.support.tree_checks import assert_same_tree_round, propose_first_tree

PLAN = TreePlan(4, 3, 8)


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mtp-tree-device")
    base, _ = build_tiny_pair(root / "pair", seed=0)
    return build_mtp_target(base, root / "target", MTP_PREFIX)


def _llm(target: str, **kw) -> LLM:
    return LLM(target, dtype="fp32", device="cpu", block_size=4, max_concurrency=4, method="mtp", max_num_steps=4,
               kv_cache_gb=0.02, debug_invariants=True, **kw)


def test_mtp_device_tree_equals_host_reference(target, monkeypatch):
    prompts = random_prompts(3, seed=1, vocab_size=500, max_len=20)
    got = propose_first_tree(_llm(target), prompts, PLAN)
    monkeypatch.setattr(eagle_proposer, "grow_tree_on_device", grow_tree_reference)
    assert_same_tree_round(got, propose_first_tree(_llm(target), prompts, PLAN))


def test_mtp_tree_graph_buffers_equal_eager(target):
    pytest.importorskip("triton")
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    prompts = random_prompts(3, seed=1, vocab_size=500, max_len=20)
    expected = propose_first_tree(_llm(target, attention_backend="triton"), prompts, PLAN)
    llm = _llm(target, attention_backend="triton")
    proposer = llm.engine.proposer
    proposer.enable_cuda_graphs(GraphPlan(max_num_reqs=4, max_blocks_per_req=64, max_positions=256, block_size=4,
                                          device=llm.engine.device))  # off CUDA: runners rerun on their buffers
    proposer.prepare_tree_draft_graphs(PLAN)
    proposer.tree_graphs[PLAN].buckets = (4,)  # one padding request
    got = propose_first_tree(llm, prompts, PLAN)
    assert proposer.tree_graphs[PLAN].num_replays == 1 and "eagle.tree_graph" in llm.engine.paths_taken()
    assert_same_tree_round(got, expected)

"""EAGLE trees drafted on the device (speculation/tree/device.py) against the host reference (tree.propose.grow_tree)
from the same engine state: identical trees and identical draft KV rows written; and the tree draft graphs' static
buffers (speculation/tree/graph.py, rerun off CUDA: everything but the capture itself) against eager, padding
requests included. tests/eagle/test_eagle_tree_graphs.py replays real CUDA graphs."""

from __future__ import annotations

import pytest
from tests.support.eagle_heads import VARIANTS
from tests.support.tree_checks import assert_same_tree_round, propose_first_tree

from specbench import LLM
from specbench.runtime.cuda_graph import GraphPlan
from specbench.speculation.drafters.eagle import proposer as eagle_proposer
from specbench.speculation.tree.plan import TreePlan
from specbench.speculation.tree.propose import grow_tree_reference

PLANS = [TreePlan(4, 4, 8), TreePlan(2, 3, 6), TreePlan(3, 2, 9)]


def _llm(target_dir, head_dir, variant: str, **kw) -> LLM:
    v = VARIANTS[variant]
    return LLM(str(target_dir(v.target)), dtype="fp32", device="cpu", block_size=4, method=v.method,
               draft=str(head_dir(variant)), max_num_steps=4, kv_cache_gb=0.02, allow_pickle=True,
               debug_invariants=True, max_concurrency=4, **kw)


@pytest.mark.parametrize("variant", ["eagle1-bias-bin", "eagle3-speculators"])
def test_device_tree_equals_host_reference(variant, target_dir, head_dir, prompt_ids, monkeypatch):
    prompts = prompt_ids[:3]
    for plan in PLANS:
        got = propose_first_tree(_llm(target_dir, head_dir, variant), prompts, plan)
        with monkeypatch.context() as mp:
            mp.setattr(eagle_proposer, "grow_tree_on_device", grow_tree_reference)
            expected = propose_first_tree(_llm(target_dir, head_dir, variant), prompts, plan)
        assert_same_tree_round(got, expected)
        assert got[0].draft_token_ids.shape == (3, plan.num_draft_tokens)


def test_tree_graph_buffers_equal_eager(target_dir, head_dir, prompt_ids):
    """The graph path on its static buffers (padded to a bucket of 4 for 3 requests) drafts what eager drafts, on
    the Triton backend (the interpreter off CUDA): padding requests write slot -1, which the kernels skip."""
    pytest.importorskip("triton")
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    variant, plan = "eagle3-speculators", TreePlan(4, 3, 8)
    prompts = prompt_ids[:3]
    expected = propose_first_tree(_llm(target_dir, head_dir, variant, attention_backend="triton"), prompts, plan)
    llm = _llm(target_dir, head_dir, variant, attention_backend="triton")
    proposer = llm.engine.proposer
    proposer.enable_cuda_graphs(GraphPlan(max_num_reqs=4, max_blocks_per_req=64, max_positions=256, block_size=4,
                                          device=llm.engine.device))  # off CUDA: runners rerun on their buffers
    proposer.prepare_tree_draft_graphs(plan)
    graphs = proposer.tree_graphs[plan]
    graphs.buckets = (4,)  # 3 requests in a bucket of 4: one padding request, which must write nothing
    got = propose_first_tree(llm, prompts, plan)
    assert graphs.num_replays == 1 and "eagle.tree_graph" in llm.engine.paths_taken()
    assert_same_tree_round(got, expected)


@pytest.mark.slow  # the Triton interpreter over whole generations (~30 s on CPU)
def test_tree_round_graphs_engine_equals_eager(target_dir, head_dir, prompt_ids):
    """An engine with the tree round graphs (rerun off CUDA) generates what the eager engine generates: rounds with a
    short catch-up take the whole-round graph, first rounds (the prompt's catch-up) the steps-only one."""
    pytest.importorskip("triton")
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    from specbench import SamplingParams
    from specbench.engine.builder import capture_graphs, graph_plan
    from specbench.speculation.draft_shape import DraftShape

    params = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (9, 6, 12)]
    runs = []
    for graphs in (False, True):
        llm = _llm(target_dir, head_dir, "eagle3-speculators", attention_backend="triton", enforce_eager=True)
        engine = llm.engine
        if graphs:
            capture_graphs(graph_plan(llm.config, engine.device, engine.stop_checker.max_model_len), engine.runner,
                           engine.proposer, 4)
        engine.set_draft_shape(DraftShape(4, 8))
        outs = llm.generate(prompt_ids[:3], params)
        runs.append([(list(o.output_token_ids), o.stats.num_accepted_tokens) for o in outs])
        taken = engine.paths_taken()
        assert ({"eagle.tree_round_graph", "eagle.tree_graph"} <= taken) == graphs, taken
        assert ("eagle.eager" in taken) != graphs, taken
    assert runs[0] == runs[1]

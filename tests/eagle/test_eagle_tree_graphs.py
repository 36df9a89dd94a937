"""EAGLE tree drafts replayed from CUDA graphs on a CUDA default engine (speculation/tree/graph.py: eagle.tree_graph,
the draft after an eager catch-up; speculation/drafters/eagle/tree_round_graph.py: eagle.tree_round_graph, the whole
round): one graph per batch bucket for the run's TreePlan, captured by set_draft_shape; a replay
drafts the trees eager drafting drafts (same tokens, parents and draft KV from the same state), a graphed engine's
greedy fp32 output and acceptance equal the enforce-eager engine's (ragged requests: smaller buckets as they finish),
and a new plan captures its own graphs. Fails loudly on a sync inside the capture (capture_graph's sync debug mode).
CUDA only: tests/eagle/test_eagle_tree_device.py runs the static-buffer logic off CUDA."""

from __future__ import annotations

import pytest
import torch
from tests.support.eagle_heads import VARIANTS
from tests.support.tree_checks import assert_same_tree_round, propose_first_tree

from specbench import LLM, SamplingParams
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.tree.plan import tree_plan

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
VARIANT = "eagle3-speculators"


def _llm(target_dir, head_dir, variant: str = VARIANT, **kw) -> LLM:
    v = VARIANTS[variant]
    return LLM(str(target_dir(v.target)), method=v.method, draft=str(head_dir(variant)), max_num_steps=4,
               dtype="fp32", device="cuda", block_size=16, max_concurrency=8, num_kv_blocks=512, allow_pickle=True,
               **kw)


@pytest.mark.parametrize("variant", ["eagle1-bias-bin", "eagle3-speculators"])
def test_gpu_tree_graph_replay_equals_eager(variant, target_dir, head_dir, prompt_ids):
    shape = DraftShape(4, 8)
    plan = tree_plan(shape, 4)
    eager = _llm(target_dir, head_dir, variant, enforce_eager=True)
    eager.engine.set_draft_shape(shape)
    expected = propose_first_tree(eager, prompt_ids[:3], plan)
    llm = _llm(target_dir, head_dir, variant)
    assert llm.engine.parts.cuda_graphs == "on"
    llm.engine.set_draft_shape(shape)
    graphs = llm.engine.proposer.tree_graphs[plan]
    assert graphs.num_graphs == len(graphs.buckets)
    llm.engine.reset_paths()
    got = propose_first_tree(llm, prompt_ids[:3], plan)
    assert graphs.num_replays == 1 and "eagle.tree_graph" in llm.engine.paths_taken()
    assert_same_tree_round(got, expected)


def test_gpu_graphed_tree_engine_matches_eager(target_dir, head_dir, prompt_ids):
    ragged = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (20, 33, 41, 27, 48)]
    runs = []
    for enforce_eager in (True, False):
        llm = _llm(target_dir, head_dir, enforce_eager=enforce_eager)
        outs_per_shape = []
        for shape in (DraftShape(4, 8), DraftShape(2, 6)):  # a new plan: its own graphs
            llm.engine.set_draft_shape(shape)
            llm.engine.reset_paths()
            outs = llm.generate(prompt_ids[:5], ragged)
            outs_per_shape.append([(list(o.output_token_ids), o.stats.num_accepted_tokens,
                                    o.stats.tree_counts.accepted_per_rank) for o in outs])
            taken = llm.engine.paths_taken()
            # first rounds (the prompt's catch-up) replay the steps-only graphs, later ones the whole round
            assert ({"eagle.tree_graph", "eagle.tree_round_graph"} <= taken) == (not enforce_eager), taken
            assert ("eagle.eager" in taken) == enforce_eager, taken
            if not enforce_eager:
                plan = tree_plan(shape, 4)
                assert llm.engine.proposer.tree_round_graphs[plan].graphs.num_replays > 0
        runs.append(outs_per_shape)
    expected, got = runs
    assert got == expected
    assert sum(n for shape in got for _, n, _ in shape) > 0

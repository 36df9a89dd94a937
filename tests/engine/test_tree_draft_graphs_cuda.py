"""Draft-LM tree drafts replayed from CUDA graphs (speculation/tree/graph.py, execution path draft.tree_graph) on a
CUDA default engine: a replay drafts the trees eager drafting drafts (same tokens, parents, fed rows and draft KV
from the same state), and a graphed engine's greedy fp32 output and acceptance equal the enforce-eager engine's, for
two plans, ragged requests included; the draft-side tree mutant's bend is captured in them. CUDA only: tests/engine/test_tree_draft_device.py runs the static-buffer logic
off CUDA."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.attention.invariant_violation import InvariantViolation
from specbench.faults.catalog import injection
from specbench.speculation.draft_shape import DraftShape
from specbench.speculation.tree.plan import tree_plan
from tests.support.tree_checks import assert_same_tree_round, propose_first_tree

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
COMMON = {"device": "cuda", "max_concurrency": 8, "num_kv_blocks": 512, "block_size": 16, "dtype": "fp32"}


def test_gpu_draft_tree_graph_replay_equals_eager(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    shape = DraftShape(4, 8)
    plan = tree_plan(shape, 4)
    eager = LLM(target, method="draft", draft=draft, max_num_steps=4, enforce_eager=True, **COMMON)
    eager.engine.set_draft_shape(shape)
    expected = propose_first_tree(eager, prompt_ids[:3], plan)
    llm = LLM(target, method="draft", draft=draft, max_num_steps=4, **COMMON)
    assert llm.engine.parts.cuda_graphs == "on"
    llm.engine.set_draft_shape(shape)
    graphs = llm.engine.proposer.tree_graphs[plan]
    assert graphs.num_graphs == len(graphs.buckets)
    llm.engine.reset_paths()
    got = propose_first_tree(llm, prompt_ids[:3], plan)
    assert graphs.num_replays == 1 and "draft.tree_graph" in llm.engine.paths_taken()
    assert_same_tree_round(got, expected)
    fed = [llm.engine.proposer._state[f"r{i}"].tree_round for i in range(3)]
    want = [eager.engine.proposer._state[f"r{i}"].tree_round for i in range(3)]
    assert [f.fed_row[f.row].tolist() for f in fed] == [w.fed_row[w.row].tolist() for w in want]


def test_gpu_graphed_draft_tree_engine_matches_eager(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    ragged = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (20, 33, 41, 27, 48)]
    runs = []
    for enforce_eager in (True, False):
        llm = LLM(target, method="draft", draft=draft, max_num_steps=3, enforce_eager=enforce_eager, **COMMON)
        outs_per_shape = []
        for shape in (DraftShape(4, 8), DraftShape(2, 6)):
            llm.engine.set_draft_shape(shape)
            llm.engine.reset_paths()
            outs = llm.generate(prompt_ids[:5], ragged)
            outs_per_shape.append([(list(o.output_token_ids), o.stats.num_accepted_tokens,
                                    o.stats.tree_counts.accepted_per_rank) for o in outs])
            assert ("draft.tree_graph" in llm.engine.paths_taken()) == (not enforce_eager)
        runs.append(outs_per_shape)
    expected, got = runs
    assert got == expected


def test_gpu_tree_draft_graphs_carry_the_draft_side_tree_mutant(tiny_pair, prompt_ids):
    """tree-draft-sees-sibling bends the device mask by tensor ops and is installed before set_draft_shape captures
    the tree draft graphs: a replay drafts what the mutant's eager round drafts (the round the draft oracle records,
    a recorder making tree rounds eager), so the bug the oracle catches is the one the graphs run; its draft KV
    differs from the clean engine's (a bent query's hidden state, hence its later layers' KV, changed). The debug
    invariants are off here: INV-TREE recomputes each query's position from the mask it sees and stops the bent
    eager round at its second step (asserted last), and this test is about what the graphs replay."""
    target, draft = tiny_pair
    shape = DraftShape(4, 8)
    plan = tree_plan(shape, 4)
    fault = injection("tree-draft-sees-sibling")
    rounds = {}
    for name, kwargs in (("eager", {"enforce_eager": True, "fault": fault}), ("graphed", {"fault": fault}),
                         ("clean", {"enforce_eager": True})):
        llm = LLM(target, method="draft", draft=draft, max_num_steps=4, debug_invariants=False, **kwargs, **COMMON)
        llm.engine.set_draft_shape(shape)
        llm.engine.reset_paths()
        rounds[name] = propose_first_tree(llm, prompt_ids[:3], plan)
        assert ("draft.tree_graph" in llm.engine.paths_taken()) == (name == "graphed")
    assert_same_tree_round(rounds["graphed"], rounds["eager"])
    assert any(not torch.equal(a, b) for a, b in zip(rounds["eager"][1], rounds["clean"][1]))
    llm = LLM(target, method="draft", draft=draft, max_num_steps=4, enforce_eager=True, fault=fault,
              debug_invariants=True, **COMMON)
    llm.engine.set_draft_shape(shape)
    with pytest.raises(InvariantViolation, match="INV-TREE"):
        propose_first_tree(llm, prompt_ids[:3], plan)

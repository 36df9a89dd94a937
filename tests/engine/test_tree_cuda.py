"""Tree rounds on a CUDA default engine (Triton attention and verifier, CUDA graphs captured, rounds drafted ahead
on): tree verifies replay the tree graphs captured for the run's DraftShape (graph.verify_tree), the tree round
bypasses drafting ahead, and greedy fp32 output equals the plain engine's and the enforce-eager tree engine's token
for token. Chains on the same engine afterwards still replay their graphs."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.speculation.draft_shape import DraftShape

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
COMMON = {"device": "cuda", "max_concurrency": 8, "num_kv_blocks": 512, "block_size": 16}


def test_gpu_default_engine_tree_rounds_are_exact(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    plain = [list(o.output_token_ids) for o in LLM(target, dtype="fp32", **COMMON).generate(prompt_ids, params)]
    llm = LLM(target, method="draft", draft=draft, max_num_steps=3, dtype="fp32", **COMMON)
    assert llm.engine.parts.cuda_graphs == "on"
    llm.engine.set_draft_shape(DraftShape(4, 8))
    assert set(llm.engine.runner.tree_graphs) == {9}
    got = [list(o.output_token_ids) for o in llm.generate(prompt_ids, params)]
    assert got == plain
    taken = llm.engine.paths_taken()
    assert {"spec.tree_round", "attention.tree_triton", "verify.tree", "graph.verify_tree"} <= taken
    assert "graph.verify" not in taken and "eagle.ahead" not in taken
    assert llm.engine.runner.tree_graphs[9].num_replays > 0
    llm.engine.set_draft_shape(DraftShape())
    llm.engine.reset_paths()
    assert [list(o.output_token_ids) for o in llm.generate(prompt_ids, params)] == plain
    assert "graph.verify" in llm.engine.paths_taken()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_gpu_graphed_tree_rounds_match_eager(tiny_pair, prompt_ids, dtype):
    """Graphed vs enforce-eager tree rounds, ragged requests (buckets padded as they finish): tokens and acceptance
    identical in fp32; in bf16 padded GEMMs may round differently, so the share of equal tokens is reported."""
    target, draft = tiny_pair
    ragged = [SamplingParams(max_tokens=n, ignore_eos=True) for n in (20, 33, 41, 27, 48)]
    runs = []
    for enforce_eager in (False, True):
        llm = LLM(target, method="draft", draft=draft, max_num_steps=3, dtype=dtype, enforce_eager=enforce_eager,
                  **COMMON)
        llm.engine.set_draft_shape(DraftShape(2, 6))
        outs = llm.generate(prompt_ids[:5], ragged)
        runs.append([(list(o.output_token_ids), o.stats.num_accepted_tokens) for o in outs])
        assert ("graph.verify_tree" in llm.engine.paths_taken()) == (not enforce_eager)
    got, expected = runs
    if dtype == "fp32":
        assert got == expected
        return
    same = sum(a == b for (x, _), (y, _) in zip(got, expected) for a, b in zip(x, y)) / sum(len(y) for y, _ in expected)
    from tests.support.gpu_report import record_gpu_result

    record_gpu_result("tree_graphs_vs_eager_padded_bf16", same)
    assert same > 0.5  # a request's first differing token changes its whole tail: a low bar, reported above


def test_gpu_synthetic_tree_rounds_on_graphs(tiny_pair, prompt_ids):
    """The bench's configuration on a tiny model: a draft LM engine with synthetic acceptance drafts
    trees, verifies them on graphs with the synthetic (depth, rank) law, and accepts beyond rank 0."""
    target, draft = tiny_pair
    llm = LLM(target, method="draft", draft=draft, max_num_steps=3, dtype="bf16", synthetic_acceptance=(0.8, 0.64, 0.5),
              **COMMON)
    llm.engine.set_draft_shape(DraftShape(4, 8))
    outs = llm.generate(prompt_ids, SamplingParams(max_tokens=48, ignore_eos=True))
    taken = llm.engine.paths_taken()
    assert {"graph.verify_tree", "verify.synthetic"} <= taken and "verify.tree" not in taken
    per_rank = [sum(o.stats.tree_counts.accepted_per_rank[i] for o in outs
                    if len(o.stats.tree_counts.accepted_per_rank) > i) for i in range(2)]
    assert per_rank[0] > 0 and per_rank[1] > 0, per_rank

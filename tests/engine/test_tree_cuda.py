"""Tree rounds on a CUDA default engine (Triton attention and verifier, CUDA graphs captured for chains, rounds
drafted ahead on): the tree round bypasses graphs and drafting ahead, the tree verify runs the Triton bitmask kernel,
and greedy fp32 output equals the plain engine's. Chains on the same engine afterwards still replay their graphs."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.speculation.draft_shape import DraftShape


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_default_engine_tree_rounds_are_exact(tiny_pair, prompt_ids):
    target, draft = tiny_pair
    common = {"dtype": "fp32", "device": "cuda", "max_concurrency": 8, "num_kv_blocks": 512, "block_size": 16}
    params = SamplingParams(max_tokens=32, ignore_eos=True)
    plain = [list(o.output_token_ids) for o in LLM(target, **common).generate(prompt_ids, params)]
    llm = LLM(target, method="draft", draft=draft, max_num_steps=3, **common)
    assert llm.engine.parts.cuda_graphs == "on"
    llm.engine.set_draft_shape(DraftShape(4, 8))
    got = [list(o.output_token_ids) for o in llm.generate(prompt_ids, params)]
    assert got == plain
    taken = llm.engine.paths_taken()
    assert {"spec.tree_round", "attention.tree_triton", "verify.tree", "target.eager"} <= taken
    assert "graph.verify" not in taken and "eagle.ahead" not in taken
    llm.engine.set_draft_shape(DraftShape())
    llm.engine.reset_paths()
    assert [list(o.output_token_ids) for o in llm.generate(prompt_ids, params)] == plain
    assert "graph.verify" in llm.engine.paths_taken()

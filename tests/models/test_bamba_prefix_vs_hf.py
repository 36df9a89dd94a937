"""Prefix caching on a Mamba-2 hybrid target (Bamba): a hit resumes the Mamba-2 conv and SSM state from the snapshot
of the hit's last block, through the same snapshot store as Qwen3-Next's Gated DeltaNet state
(tests/models/test_hybrid_prefix_vs_hf.py). Greedy output == HF transformers' BambaForCausalLM (fp32, CPU) on a
shared system prompt with different suffixes and multi-turn follow-ups, plain and with n-gram speculation at k = 3,
concurrency 8; INV-STATE after every step; the hit counter non-zero."""

from __future__ import annotations

import pytest
import torch

from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_prefix import MAX_TOKENS, hit_tokens, run_waves
from tests.support.hybrid_runs import NGRAM, PROMPT_LENGTHS, hybrid_llm
from tests.support.tiny_bamba import build_tiny_bamba

from specbench.selftest.hf_reference import hf_reference_mismatch

NUM_PROMPTS = 8


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    root = tmp_path_factory.mktemp("bamba_prefix")
    return build_tiny_bamba(root / "target", seed=0), root / "target"


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS[:NUM_PROMPTS])


@pytest.mark.parametrize("case", ["plain", "ngram"])
def test_prefix_hits_match_hf_and_the_state_oracle(target, prompts, case):
    hf_model, path = target
    mismatch = hf_reference_mismatch(str(path))
    if mismatch is not None:  # the GPU image's transformers: its Bamba is not the engine's model
        pytest.skip(f"no HF reference: {mismatch}")
    llm = hybrid_llm(path, max_concurrency=8, **(NGRAM if case == "ngram" else {}))
    assert llm.engine.parts.prefix_caching == "on"
    outs, worst, num_checked = run_waves(llm, prompts)
    expected = hf_greedy_outputs(hf_model, [list(o.prompt_token_ids) for o in outs], MAX_TOKENS)
    assert [list(o.output_token_ids) for o in outs] == expected
    assert num_checked > 0 and worst < 1e-4, worst
    hit, queried = hit_tokens(llm)
    assert hit >= 20 * len(prompts) and hit < queried, (hit, queried)
    assert all(o.stats.num_prefix_hit_tokens > 0 for o in outs[1:]), [o.stats.num_prefix_hit_tokens for o in outs]
    assert {"prefix.hit", "hybrid.snapshot_take", "hybrid.snapshot_restore",
            "hybrid.mamba2_chunked"} <= llm.engine.paths_taken()
    if case == "ngram":
        assert sum(o.stats.num_draft_tokens for o in outs) > 0


def test_a_snapshot_from_the_wrong_block_is_caught_on_mamba2(target, prompts):
    """state-snapshot-wrong-block restores the block before the hit's last: the Mamba-2 layers miss a block the
    attention layers see; the state oracle sees the slot differ from a recomputation."""
    from specbench.faults import injection

    _, path = target
    llm = hybrid_llm(path, max_concurrency=8, fault=injection("state-snapshot-wrong-block"))
    _, worst, num_checked = run_waves(llm, prompts[:4])
    assert num_checked > 0 and worst > 1e-2, worst

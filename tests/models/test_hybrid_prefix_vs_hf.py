"""Prefix caching on a hybrid target (Qwen3-Next): hits resume the Gated DeltaNet state from the snapshot of the
hit's last block (recurrent/state_snapshots.py). Greedy output == HF transformers' Qwen3NextForCausalLM (fp32, CPU)
on a shared system prompt with different suffixes (lengths a block multiple and one either side) and multi-turn
follow-ups, plain and with n-gram (whole and chunked prefill) and draft-LM speculation at k = 3, concurrency 8; the
state oracle (INV-STATE: the slot against a recomputation from the committed tokens alone) after every step; the hit
counter non-zero."""

from __future__ import annotations

import pytest
import torch

from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_prefix import MAX_TOKENS, hit_tokens, run_waves
from tests.support.hybrid_runs import NGRAM, PROMPT_LENGTHS, hybrid_llm
from tests.support.tiny_hybrid import build_tiny_hybrid
from tests.support.tiny_models import build_tiny_model

pytestmark = pytest.mark.slow  # four engines x three waves, each step rechecked by a fresh forward


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("qwen3_next_prefix")
    build_tiny_hybrid(root / "target", seed=0)
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    return root


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_model(dirs):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(dirs / "target", dtype=torch.float32).eval()


CASES = {
    "plain": {},
    "ngram": dict(NGRAM),
    "draft": {"method": "draft", "max_num_steps": 3},
    # prompt chunks of 6 tokens beside verify rows: snapshots from chunks that end off a block boundary
    "ngram-chunked": {**NGRAM, "enable_chunked_prefill": True, "max_num_batched_tokens": 6 + 8 * 4},
}


@pytest.mark.parametrize("case", list(CASES))
def test_prefix_hits_match_hf_and_the_state_oracle(dirs, prompts, hf_model, case):
    kwargs = dict(CASES[case])
    if case == "draft":
        kwargs["draft"] = str(dirs / "draft")
    llm = hybrid_llm(dirs / "target", max_concurrency=8, **kwargs)
    assert llm.engine.parts.prefix_caching == "on"
    outs, worst, num_checked = run_waves(llm, prompts)
    expected = hf_greedy_outputs(hf_model, [list(o.prompt_token_ids) for o in outs], MAX_TOKENS)
    assert [list(o.output_token_ids) for o in outs] == expected
    assert num_checked > 0 and worst < 1e-4, worst
    hit, queried = hit_tokens(llm)
    # the first turns hit the warm-up's system prompt (20 tokens), the follow-ups their first turn and its output
    assert hit >= 20 * len(prompts) and hit < queried, (hit, queried)
    assert all(o.stats.num_prefix_hit_tokens > 0 for o in outs[1:]), [o.stats.num_prefix_hit_tokens for o in outs]
    assert {"prefix.hit", "hybrid.snapshot_take", "hybrid.snapshot_restore"} <= llm.engine.paths_taken()
    if case != "plain":
        assert sum(o.stats.num_draft_tokens for o in outs) > 0

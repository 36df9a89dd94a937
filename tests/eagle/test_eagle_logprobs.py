"""EAGLE-3 rounds (drafted ahead, under preemption) report the same target logprobs as plain decoding."""

from __future__ import annotations

import pytest

from specbench import LLM, SamplingParams
from tests.support.eagle_heads import PREEMPTING_KV_BLOCKS, VARIANTS

PARAMS = SamplingParams(max_tokens=16, ignore_eos=True, logprobs=3, prompt_logprobs=1)


def _run(target, prompts, **kwargs):
    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, allow_pickle=True, **kwargs)
    return llm.generate(prompts, PARAMS)


@pytest.mark.slow  # fits the head once per session (~40 s on 2 shared cores)
def test_eagle3_logprobs_equal_plain(head_dir, target_dir, prompt_ids):
    v = VARIANTS["eagle3-native-nested"]
    plain = _run(target_dir(v.target), prompt_ids, async_scheduling=False)
    outs = _run(target_dir(v.target), prompt_ids, method=v.method, draft=str(head_dir("eagle3-native-nested")),
                max_num_steps=3, num_kv_blocks=PREEMPTING_KV_BLOCKS)
    assert sum(o.stats.num_preemptions for o in outs) > 0
    assert sum(o.stats.num_accepted_tokens for o in outs) > 0
    for got, ref in zip(outs, plain):
        assert got.output_token_ids == ref.output_token_ids
        assert len(got.logprobs) == len(ref.logprobs) == 16
        for a, b in zip((*got.logprobs, *got.prompt_logprobs[1:]), (*ref.logprobs, *ref.prompt_logprobs[1:])):
            assert a.token_id == b.token_id and abs(a.logprob - b.logprob) < 1e-5
            assert [t for t, _ in a.top] == [t for t, _ in b.top]
            assert max(abs(x - y) for (_, x), (_, y) in zip(a.top, b.top)) < 1e-5

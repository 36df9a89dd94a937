"""On a GPU (fp32, CUDA graphs, overlapped decoding and rounds): speculative logprobs equal plain ones; the tables
reach the host through their own async copies, read only with the step's tokens."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams

PARAMS = SamplingParams(max_tokens=24, ignore_eos=True, logprobs=5, prompt_logprobs=2)
TOL = 1e-4  # fp32 on the GPU: verify-shaped (graph) and decode-shaped kernels may round differently


def _run(target, prompts, **kwargs):
    llm = LLM(target, dtype="fp32", device="cuda", block_size=16, max_concurrency=4, kv_cache_gb=0.25, **kwargs)
    return llm.generate(prompts, PARAMS)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("async_scheduling", [True, False])
def test_cuda_speculative_logprobs_equal_plain(tiny_pair, prompt_ids, async_scheduling):
    target, draft = tiny_pair
    plain = _run(target, prompt_ids, async_scheduling=async_scheduling)
    spec = _run(target, prompt_ids, method="draft", draft=draft, max_num_steps=3, async_scheduling=async_scheduling)
    assert sum(o.stats.num_accepted_tokens for o in spec) > 0
    for got, ref in zip(spec, plain):
        num_same = next((i for i, (a, b) in enumerate(zip(got.output_token_ids, ref.output_token_ids)) if a != b),
                        len(ref.output_token_ids))  # compare up to a (numerically tied) divergence
        for a, b in zip(got.logprobs[:num_same], ref.logprobs[:num_same]):
            assert a.token_id == b.token_id and abs(a.logprob - b.logprob) < TOL
            assert max(abs(x - y) for (_, x), (_, y) in zip(a.top, b.top)) < TOL
        for a, b in zip(got.prompt_logprobs[1:], ref.prompt_logprobs[1:]):
            assert a.token_id == b.token_id and abs(a.logprob - b.logprob) < TOL

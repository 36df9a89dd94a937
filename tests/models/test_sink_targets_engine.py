"""Greedy output of the engine on gpt-oss (sliding / full layers, learned sinks, YaRN, biased MoE), Gemma-2 (attention
and logit soft-caps) and Gemma-3 (sandwich (1 + w) norms, scaled embeddings, local / global RoPE,
query_pre_attn_scalar, final soft-cap) == HF
transformers' own generate in fp32: plain and for every speculative method, with and without preemption; windows
(5) shorter than every prompt and than prompt + k. Debug invariants are on: INV-KIND checks each forward's windows,
INV-SCORE recomputes each sink / scaled layer's attention."""

from __future__ import annotations

import pytest
import torch

from specbench import LLM, SamplingParams
from specbench.speculation.drafters.eagle.config import EAGLE1, EAGLE3_SPECULATORS
from specbench.speculation.drafters.eagle.writer import HeadFormat
from tests.support.eagle_heads import HeadVariant, unfitted_tensors, write_head
from tests.support.hf_greedy import hf_greedy_outputs, tiny_prompt_ids
from tests.support.sink_models import build_sink_target

MAX_TOKENS = 20
PREEMPTING_KV_BLOCKS = 20  # too few 4-token blocks for 4 requests of up to 33 + 20 + k + 1 tokens


@pytest.fixture(scope="module", params=["gpt_oss", "gemma2", "gemma3"])
def case(request, tmp_path_factory):
    """(arch, target dir, draft dir, HF greedy outputs)."""
    from transformers import AutoModelForCausalLM

    target, draft = build_sink_target(tmp_path_factory.mktemp("sinks"), request.param)
    hf = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    return request.param, target, draft, hf_greedy_outputs(hf, tiny_prompt_ids(), MAX_TOKENS)


def _generate(target, **kwargs) -> tuple[list[list[int]], list]:
    if "num_kv_blocks" not in kwargs:
        kwargs["kv_cache_gb"] = 0.25
    llm = LLM(str(target), dtype="fp32", device="cpu", block_size=4, max_concurrency=4, allow_pickle=True,
              debug_invariants=True, **kwargs)
    outs = llm.generate(tiny_prompt_ids(), SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    return [list(o.output_token_ids) for o in outs], outs


def _preempted(outs) -> bool:
    return sum(o.stats.num_preemptions for o in outs) > 0


def test_plain_matches_hf(case):
    _, target, _, expected = case
    assert _generate(target)[0] == expected


@pytest.mark.parametrize("is_preempting", [False, True])
def test_draft_model_matches_hf(case, is_preempting):
    _, target, draft, expected = case
    extra = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {}
    got, outs = _generate(target, method="draft", draft=str(draft), max_num_steps=3, **extra)
    assert got == expected
    assert _preempted(outs) == is_preempting
    # The draft is the same architecture (sinks / Gemma blocks included): it proposes well.
    assert sum(o.stats.num_accepted_tokens for o in outs) > 0.2 * sum(o.stats.num_draft_tokens for o in outs)


@pytest.mark.parametrize("is_preempting", [False, True])
def test_ngram_matches_hf(case, is_preempting):
    _, target, _, expected = case
    extra = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {}
    got, outs = _generate(target, method="ngram", max_num_steps=3, ngram_min=1, ngram_max=3, **extra)
    assert got == expected
    assert _preempted(outs) == is_preempting


@pytest.mark.parametrize("method, recipe, fmt", [("eagle", "e1-bias", HeadFormat(EAGLE1)),
                                                  ("eagle3", "e3-moe", HeadFormat(EAGLE3_SPECULATORS))])
@pytest.mark.parametrize("is_preempting", [False, True])
def test_eagle_matches_hf(case, tmp_path, method, recipe, fmt, is_preempting):
    """Unfitted Llama-style heads (no sinks of their own) drafting for the target: verify and the head's catch-up run
    every round; the greedy output is the target's whatever the head proposes."""
    _, target, _, expected = case
    head = write_head(tmp_path / "head", unfitted_tensors(target, recipe), HeadVariant("t", recipe, method, fmt), target)
    extra = {"num_kv_blocks": PREEMPTING_KV_BLOCKS} if is_preempting else {}
    got, outs = _generate(target, method=method, draft=str(head), max_num_steps=3, **extra)
    assert got == expected
    assert _preempted(outs) == is_preempting

"""A hybrid target (Qwen3-Next: Gated DeltaNet layers beside gated full attention) through the engine: greedy output
== HF transformers' own Qwen3NextForCausalLM (fp32, CPU), plain, n-gram and draft-LM speculation at k=3 with 10
concurrent requests (n-gram rounds batch zero-draft requests with drafting ones), under preemption and chunked
prefill, dense and MoE; and the state oracle (INV-STATE) holds after every step.

The target is a tiny random checkpoint built on the fly by transformers (tests/support/tiny_hybrid.py).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.hf_greedy import hf_greedy_of, hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_runs import (MAX_TOKENS, NGRAM, PROMPT_LENGTHS, build_target_dirs, hybrid_llm,
                                       record_commits, run_with_oracle)
from tests.support.scripted_drafts import install_scripted
from tests.support.tiny_hybrid import build_tiny_hybrid

from specbench import SamplingParams


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return build_target_dirs(tmp_path_factory.mktemp("qwen3_next"), build_tiny_hybrid, "target", "Qwen3NextGatedDeltaNet")


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompts):
    return hf_greedy_of(dirs / "target", prompts, MAX_TOKENS)


def _tokens(outs):
    return [list(o.output_token_ids) for o in outs]


def test_plain_decode_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    llm = hybrid_llm(dirs / "target")
    outs, worst, num_checked = run_with_oracle(llm, prompts, every=4)
    assert _tokens(outs) == hf_greedy
    assert num_checked > 0 and worst < 1e-4, worst
    # overlapped plain decoding: each step launched before the last is read, its state committed on the device
    assert "decode.overlap" in llm.engine.paths_taken()


@pytest.mark.parametrize("case", ["ngram", "draft", "ngram-preempting", "ngram-chunked"])
def test_speculation_matches_hf(dirs, prompts, hf_greedy, case):
    kwargs = dict(NGRAM) if case.startswith("ngram") else {"method": "draft", "draft": str(dirs / "draft"),
                                                           "max_num_steps": 3}
    if case.endswith("preempting"):
        kwargs["num_kv_blocks"] = 40  # 10 requests of up to 33 + 12 + 3 tokens in 160 slots: preemption
    if case.endswith("chunked"):
        kwargs.update(enable_chunked_prefill=True, max_num_batched_tokens=16)
    llm = hybrid_llm(dirs / "target", **kwargs)
    commits = record_commits(llm)
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert _tokens(outs) == hf_greedy
    assert sum(o.stats.num_draft_tokens for o in outs) > 0
    if case.endswith("preempting"):
        assert sum(o.stats.num_preemptions for o in outs) > 0
    if case.startswith("ngram"):  # some round verified zero-draft requests beside drafting ones
        assert any(0 in c and max(c) > 0 for c in commits), commits
    assert {"hybrid.state_write", "hybrid.state_commit"} <= llm.engine.paths_taken()


def test_rejection_at_every_position_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    """Drafts that are HF's own continuation spoiled at a cycling position: rounds accept 0..k drafts or draft none,
    mixed in each batch; output is still HF's and every slot equals the recomputation after every step."""
    llm = hybrid_llm(dirs / "target", **NGRAM)
    script = install_scripted(llm, prompts, hf_greedy)
    outs, worst, num_checked = run_with_oracle(llm, prompts, every=2)
    assert _tokens(outs) == hf_greedy
    assert script.accepted_lengths == {-1, 0, 1, 2, 3}
    assert num_checked > 0 and worst < 1e-4, worst
    assert sum(o.stats.num_accepted_tokens for o in outs) > 0.3 * sum(o.stats.num_draft_tokens for o in outs)


def test_forced_acceptance_keeps_the_state_oracle(dirs, prompts):
    """Synthetic acceptance accepts drafts at every position (the random draft alone accepts almost none): the slot
    after each step still equals a recomputation from the committed tokens."""
    llm = hybrid_llm(dirs / "target", method="draft", draft=str(dirs / "draft"), max_num_steps=3,
                     synthetic_acceptance=(0.8, 0.6, 0.5))
    outs, worst, num_checked = run_with_oracle(llm, prompts[:6], every=2)
    assert sum(o.stats.num_accepted_tokens for o in outs) > 10
    assert num_checked > 0 and worst < 1e-4, worst


def test_moe_hybrid_matches_hf(dirs, prompts):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(dirs / "moe", dtype=torch.float32).eval()
    assert type(model.model.layers[0].mlp).__name__ == "Qwen3NextSparseMoeBlock"
    few = prompts[:3]
    expected = hf_greedy_outputs(model, few, 8)
    outs = hybrid_llm(dirs / "moe", **NGRAM).generate(few, SamplingParams(max_tokens=8, ignore_eos=True))
    assert _tokens(outs) == expected


@pytest.mark.parametrize("variant", ["target", "moe"])
def test_config_reads_as_transformers_builds_it(dirs, variant):
    import json

    from transformers import AutoModelForCausalLM

    from specbench.models.config import ModelConfig

    hf = json.loads((dirs / variant / "config.json").read_text())
    config = ModelConfig.from_hf(hf)
    model = AutoModelForCausalLM.from_pretrained(dirs / variant, dtype=torch.float32)
    assert config.is_hybrid and config.architecture == "qwen3_next" and config.partial_rotary_dim == 8
    assert [k.name for k in config.attention_kinds] == ["gated_delta_net", "full"] * 2
    assert (config.moe is not None) == (variant == "moe")
    assert config.num_params() == sum(p.numel() for p in model.parameters())


@pytest.mark.slow  # ~2.5-3 s: the -m 'not slow' subset stays under 5 min on 2 busy cores
def test_the_triton_attention_verifier_and_fused_layers_match_hf(dirs, prompts, hf_greedy):
    """The CUDA production kernels (Triton attention and verifier, fused layer kernels), interpreted on CPU, around
    the hybrid's attention layers and verify: the same greedy output as transformers."""
    from tests.support.kernel_testing import RERUN_REASON, kernels_runnable_here

    if not kernels_runnable_here():
        pytest.skip(RERUN_REASON)
    llm = hybrid_llm(dirs / "target", attention_backend="triton", verifier="triton", fused_kernels="on", **NGRAM)
    few = prompts[:3]
    outs = llm.generate(few, SamplingParams(max_tokens=6, ignore_eos=True))
    assert _tokens(outs) == [h[:6] for h in hf_greedy[:3]]
    assert {"attention.triton", "verify.triton", "hybrid.state_commit"} <= llm.engine.paths_taken()

"""A Granite-4 target (GraniteMoeHybridForCausalLM: Bamba's Mamba-2 / attention layout, muP multipliers, routed
experts plus a shared MLP) through the engine: greedy output == HF transformers' own model (fp32, CPU), the MoE
variant without RoPE (as the released checkpoints) and the dense one (the shared MLP alone) with RoPE; n-gram
speculation at k = 3 with scripted drafts rejecting at every position, 10 concurrent requests, preemption, chunked
prefill, prefix-cache hits; the state oracle (INV-STATE) after every step; a state-rollback mutant caught.

The targets are tiny random checkpoints built on the fly by transformers (tests/support/tiny_granite_hybrid.py).
"""

from __future__ import annotations

import json

import pytest

from tests.support.hf_greedy import hf_greedy_of, hf_greedy_outputs, tiny_prompt_ids
from tests.support.hybrid_prefix import MAX_TOKENS as PREFIX_MAX_TOKENS, hit_tokens, run_waves
from tests.support.hybrid_runs import (MAMBA2_PATHS, MAX_TOKENS, NGRAM, PROMPT_LENGTHS, hybrid_llm, output_tokens,
                                       run_with_oracle)
from tests.support.scripted_drafts import install_scripted
from tests.support.tiny_granite_hybrid import MULTIPLIERS, build_tiny_granite_hybrid
from tests.support.tiny_models import build_tiny_model

from specbench import SamplingParams
from specbench.faults import injection
from specbench.models.config import ModelConfig
from specbench.selftest.hf_reference import hf_reference_mismatch

@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("granite_hybrid")
    models = {"moe": build_tiny_granite_hybrid(root / "moe", seed=0),
              "dense": build_tiny_granite_hybrid(root / "dense", seed=1, num_experts=0, rope=True)}
    build_tiny_model(root / "draft", "qwen3", num_layers=1, seed=5)
    mismatch = hf_reference_mismatch(str(root / "moe"))
    if mismatch is not None:  # an older transformers: its Bamba mixer's norm is not the engine's
        pytest.skip(f"no HF reference: {mismatch}")
    return root, models


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


@pytest.fixture(scope="module")
def hf_greedy(dirs, prompts):
    return {name: hf_greedy_of(dirs[0] / name, prompts, MAX_TOKENS) for name in ("moe", "dense")}


@pytest.mark.parametrize("variant", ["moe", "dense"])
def test_config_reads_as_transformers_builds_it(dirs, variant):
    root, models = dirs
    config = ModelConfig.from_hf(json.loads((root / variant / "config.json").read_text()))
    assert config.architecture == "granitemoehybrid" and config.is_hybrid
    assert [k.name for k in config.attention_kinds] == ["mamba2", "full"] * 2
    assert config.has_rope == (variant == "dense") and config.attention_scale == MULTIPLIERS["attention_multiplier"]
    assert (config.embedding_multiplier, config.residual_multiplier, config.logits_scaling) == (3.0, 0.5, 2.0)
    assert (config.moe is not None) == (variant == "moe")
    assert config.num_params() == sum(p.numel() for p in models[variant].parameters())


@pytest.mark.parametrize("variant", ["moe", "dense"])
def test_plain_decode_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy, variant):
    llm = hybrid_llm(dirs[0] / variant)
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == hf_greedy[variant]
    assert num_checked > 0 and worst < 1e-4, worst
    assert MAMBA2_PATHS - {"hybrid.state_commit"} <= llm.engine.paths_taken()


def test_rejection_at_every_position_matches_hf_and_the_state_oracle(dirs, prompts, hf_greedy):
    llm = hybrid_llm(dirs[0] / "moe", **NGRAM)
    script = install_scripted(llm, prompts, hf_greedy["moe"])
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == hf_greedy["moe"]
    assert script.accepted_lengths == {-1, 0, 1, 2, 3}
    assert num_checked > 0 and worst < 1e-4, worst
    assert MAMBA2_PATHS <= llm.engine.paths_taken()


@pytest.mark.parametrize("case", ["preempting", "chunked"])
def test_speculation_matches_hf(dirs, prompts, hf_greedy, case):
    kwargs = dict(NGRAM)
    if case == "preempting":
        kwargs["num_kv_blocks"] = 40  # 10 requests of up to 33 + 12 + 3 tokens in 160 slots: preemption
    else:
        kwargs.update(enable_chunked_prefill=True, max_num_batched_tokens=16)
    llm = hybrid_llm(dirs[0] / "dense", **kwargs)
    install_scripted(llm, prompts, hf_greedy["dense"])
    outs = llm.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True))
    assert output_tokens(outs) == hf_greedy["dense"]
    assert sum(o.stats.num_draft_tokens for o in outs) > 0
    if case == "preempting":
        assert sum(o.stats.num_preemptions for o in outs) > 0


def test_prefix_hits_match_hf_and_the_state_oracle(dirs, prompts):
    root, models = dirs
    llm = hybrid_llm(root / "moe", max_concurrency=8, **NGRAM)
    outs, worst, num_checked = run_waves(llm, prompts[:8])
    expected = hf_greedy_outputs(models["moe"], [list(o.prompt_token_ids) for o in outs], PREFIX_MAX_TOKENS)
    assert output_tokens(outs) == expected
    assert num_checked > 0 and worst < 1e-4, worst
    hit, queried = hit_tokens(llm)
    assert 0 < hit < queried, (hit, queried)
    assert {"prefix.hit", "hybrid.snapshot_take", "hybrid.snapshot_restore"} <= llm.engine.paths_taken()


def test_the_state_oracle_catches_a_rollback_mutant(dirs, prompts):
    root, _ = dirs

    def make(fault=None):
        return hybrid_llm(root / "moe", fault=fault, method="draft", draft=str(root / "draft"), max_num_steps=3,
                          synthetic_acceptance=(0.8, 0.6, 0.5))

    _, clean_worst, _ = run_with_oracle(make(), prompts[:4], max_tokens=6)
    assert clean_worst < 1e-4
    _, worst, num_checked = run_with_oracle(make(injection("state-not-rolled-back")), prompts[:4], max_tokens=6)
    assert num_checked > 0 and worst > 1e-2, worst


def test_logprobs_are_transformers_with_the_logits_scaling(dirs, prompts):
    """logits_scaling leaves every argmax as it is: the logprobs of the first token show it (HF's logits divided)."""
    import torch

    root, models = dirs
    outs = hybrid_llm(root / "moe").generate(prompts[:3], SamplingParams(max_tokens=1, ignore_eos=True, logprobs=0))
    for prompt, out in zip(prompts[:3], outs):
        with torch.no_grad():
            expected = torch.log_softmax(models["moe"](torch.tensor([prompt])).logits[0, -1].float(), dim=-1)
        got = out.logprobs[0]
        assert abs(got.logprob - float(expected[got.token_id])) < 1e-4, (got.logprob, float(expected[got.token_id]))

"""Qwen3.5 / 3.6 text targets (the Qwen3-Next blocks, the Gated DeltaNet's input projections split: in_proj_qkv,
in_proj_z, in_proj_b, in_proj_a) through the engine: greedy output == HF transformers' own Qwen3_5ForCausalLM and
Qwen3_5MoeForCausalLM (fp32, CPU), plain and n-gram k = 3 at concurrency 10 (zero-draft rows beside drafting ones),
a draft LM, and the state oracle after every step."""

from __future__ import annotations

import pytest

from tests.support.hf_greedy import hf_greedy_of, tiny_prompt_ids
from tests.support.hybrid_runs import (MAX_TOKENS, NGRAM, PROMPT_LENGTHS, build_target_dirs, hybrid_llm,
                                       output_tokens, run_with_oracle)
from tests.support.tiny_hybrid import build_tiny_qwen3_5

from specbench.models.config import ModelConfig


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return build_target_dirs(tmp_path_factory.mktemp("qwen3_5"), build_tiny_qwen3_5, "dense", "Qwen3_5GatedDeltaNet")


@pytest.fixture(scope="module")
def prompts():
    return tiny_prompt_ids(PROMPT_LENGTHS)


def test_qwen3_5_configs_parse_to_split_projections():
    base = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512, "rms_norm_eps": 1e-6,
            "max_position_embeddings": 2048, "layer_types": ["linear_attention", "full_attention"],
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
            "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25}}
    for fields in ({"architectures": ["Qwen3_5ForCausalLM"]}, {"model_type": "qwen3_5_text"},
                   {"architectures": ["Qwen3_5MoeForCausalLM"], "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32}):
        config = ModelConfig.from_hf({**base, **fields})
        assert config.is_hybrid and config.gated_delta_net.is_split_projections
    next_config = ModelConfig.from_hf({**base, "architectures": ["Qwen3NextForCausalLM"], "num_experts": 0})
    assert not next_config.gated_delta_net.is_split_projections


@pytest.mark.slow  # HF's generate of 10 prompts and two engines (~3 s here, more on a busy runner)
@pytest.mark.parametrize("target", ["dense", "moe"])
def test_qwen3_5_plain_and_ngram_match_hf_with_the_state_oracle(dirs, prompts, target):
    want = hf_greedy_of(dirs / target, prompts, MAX_TOKENS)
    for options in ({}, NGRAM):
        outs, worst, num_checked = run_with_oracle(hybrid_llm(dirs / target, **options), prompts)
        assert output_tokens(outs) == want, options
        assert num_checked > 0 and worst < 1e-4, worst


@pytest.mark.slow
def test_qwen3_5_draft_lm_matches_hf(dirs, prompts):
    want = hf_greedy_of(dirs / "dense", prompts, MAX_TOKENS)
    llm = hybrid_llm(dirs / "dense", method="draft", draft=str(dirs / "draft"), max_num_steps=3)
    outs, worst, _ = run_with_oracle(llm, prompts, every=3)
    assert output_tokens(outs) == want
    assert worst < 1e-4
    assert sum(o.stats.num_draft_tokens for o in outs) > 0


@pytest.mark.slow  # HF's generate through the multimodal wrapper
def test_qwen3_5_as_shipped_runs_its_language_model(tmp_path, prompts):
    """Qwen3.5 ships as Qwen3_5ForConditionalGeneration: the engine reads `text_config` and the
    `model.language_model.*` weights, skips the vision tower, and gives HF's own wrapper's greedy tokens on text
    (interleaved multimodal RoPE over text positions is plain RoPE)."""
    from tests.support.hf_greedy import hf_greedy_outputs
    from tests.support.tiny_hybrid import build_tiny_qwen3_5_vl

    hf = build_tiny_qwen3_5_vl(tmp_path / "vl", seed=2)
    want = hf_greedy_outputs(hf, prompts[:4], MAX_TOKENS)
    llm = hybrid_llm(tmp_path / "vl", **NGRAM)
    outs, worst, _ = run_with_oracle(llm, prompts[:4], every=2)
    assert output_tokens(outs) == want
    assert worst < 1e-4
    config = llm.engine.runner.model.config
    assert config.is_multimodal_wrapper and config.gated_delta_net.is_split_projections


def test_a_wrapper_without_a_text_config_is_one_error_line():
    from specbench.errors import SpecbenchError

    with pytest.raises(SpecbenchError, match="has no 'text_config' object"):
        ModelConfig.from_hf({"architectures": ["Qwen3_5ForConditionalGeneration"]})


@pytest.mark.slow
def test_qwen3_5_mtp_matches_hf_with_the_state_oracle(dirs, prompts, tmp_path):
    """A Qwen3.5 checkpoint's `mtp.*` module (Qwen3-Next's names; here a copy of its first attention layer over the
    next token's embedding, selftest/tiny_mtp.py) drafts k = 3 a round: HF's tokens, some drafts accepted and some
    not (~10% here, as on the tiny Qwen3-Next), each slot equal to the recomputation."""
    from specbench.selftest.tiny_mtp import MTP_PREFIX, build_mtp_target

    target = build_mtp_target(dirs / "dense", tmp_path / "mtp", MTP_PREFIX)
    want = hf_greedy_of(dirs / "dense", prompts, MAX_TOKENS)
    llm = hybrid_llm(target, method="mtp", max_num_steps=3)
    outs, worst, num_checked = run_with_oracle(llm, prompts)
    assert output_tokens(outs) == want
    drafted = sum(o.stats.num_draft_tokens for o in outs)
    accepted = sum(o.stats.num_accepted_tokens for o in outs)
    assert 0 < accepted < drafted, (accepted, drafted)
    assert num_checked > 0 and worst < 1e-4
    assert "mtp.qwen3_next_block" in llm.engine.paths_taken()


def test_the_qwen3_5_9b_preset_is_the_split_layout_at_its_size():
    from specbench.models.presets import get_preset
    from specbench.perf.hybrid_floor import cut_preset

    config = get_preset("qwen3.5-9b")
    assert config.gated_delta_net.is_split_projections and config.moe is None
    assert sum(k.is_recurrent_state for k in config.attention_kinds) == 24  # 3 of every 4 layers
    assert 8.5e9 < config.num_params() < 9.5e9
    name, note = cut_preset("qwen3.5-9b", 8)  # bench_hybrid's cut keeps the pattern
    assert get_preset(name).num_hidden_layers == 8 and "8 of 32" in note

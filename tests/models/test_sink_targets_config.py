"""gpt-oss and Gemma-3 configs as the engine reads them: YaRN against transformers' own computation, default layer
patterns, the older Gemma-3 RoPE fields, presets' parameter counts, MXFP4 refused in one line (config and tensor
names, through the CLI)."""

from __future__ import annotations

import json

import pytest
import torch

from specbench.attention.kinds import FullAttention, SlidingWindowAttention
from specbench.errors import SpecbenchError
from specbench.models.config import ModelConfig
from specbench.models.layers import RotaryEmbedding
from specbench.models.presets import get_preset
from tests.support.cli_run import run_main

_SHAPE = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 16, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 2048,
          "sliding_window": 5}
_GPT_OSS = {**_SHAPE, "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_local_experts": 4,
            "num_experts_per_tok": 2}


@pytest.mark.parametrize("truncate", [False, True])
def test_yarn_matches_transformers(truncate):
    from transformers import GptOssConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": truncate,
            "original_max_position_embeddings": 4096, "rope_theta": 150000.0}
    hf = GptOssConfig(hidden_size=2880, num_attention_heads=64, head_dim=64, rope_parameters=rope,
                      max_position_embeddings=131072)
    inv_freq, factor = ROPE_INIT_FUNCTIONS["yarn"](hf)
    config = ModelConfig.from_hf({**_GPT_OSS, "head_dim": 64, "rope_parameters": rope})
    ours = RotaryEmbedding(64, config.rope_theta, config.rope_scaling)
    assert torch.equal(ours.inv_freq, inv_freq)
    assert config.rope_scaling.attention_factor == pytest.approx(factor, rel=1e-12)
    table = ours.reserve(8, torch.device("cpu"))
    assert torch.allclose(table[5, 0, :32], (5 * inv_freq).cos() * factor)


def test_gpt_oss_defaults_alternate_windows_and_carry_sinks():
    config = ModelConfig.from_hf(_GPT_OSS)  # no layer_types, no RoPE: transformers' defaults
    assert config.attention_kinds == (SlidingWindowAttention(5), FullAttention()) * 2
    assert config.has_attention_sinks and config.attention_bias and config.has_o_proj_bias
    assert config.rope_scaling.rope_type == "yarn" and config.rope_theta == 150000.0
    assert config.moe.scoring == "topk_softmax" and config.moe.has_router_bias and config.moe.has_expert_bias


def test_gemma3_older_rope_fields_and_default_pattern():
    config = ModelConfig.from_hf({**_SHAPE, "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                                  "num_hidden_layers": 7, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
                                  "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                                  "query_pre_attn_scalar": 24, "final_logit_softcapping": 30.0,
                                  "attn_logit_softcapping": 50.0})
    assert [k.name for k in config.attention_kinds] == ["sliding_window"] * 5 + ["full", "sliding_window"]
    assert (config.rope_theta, config.sliding_rope_theta, config.rope_scaling.factor) == (1e6, 1e4, 8.0)
    assert config.attention_scale == 24 ** -0.5 and config.final_logit_softcapping == 30.0
    assert config.attn_logit_softcapping is None  # transformers' Gemma-3 attention never applies it


def test_gemma2_soft_caps_default_as_transformers_and_null_turns_them_off():
    gemma2 = {**_SHAPE, "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2"}
    config = ModelConfig.from_hf(gemma2)
    assert (config.attn_logit_softcapping, config.final_logit_softcapping) == (50.0, 30.0)
    assert config.attention_kinds == (SlidingWindowAttention(5), FullAttention()) * 2
    assert not config.use_qk_norm and config.sliding_rope_theta is None and config.is_gemma
    off = ModelConfig.from_hf({**gemma2, "attn_logit_softcapping": None, "final_logit_softcapping": None})
    assert (off.attn_logit_softcapping, off.final_logit_softcapping) == (None, None)


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gemma-2-2b", "gemma-3-1b", "gemma-3-4b"])
def test_preset_param_count_is_the_models(name):
    from specbench.attention.backend import create_backend
    from specbench.models.llama import DecoderLM

    config = get_preset(name)
    model = DecoderLM(config, create_backend("torch"), dtype=torch.bfloat16, device="meta")
    assert config.num_params() == sum(p.numel() for p in model.parameters())


def _write(tmp_path, config: dict, tensors: dict[str, torch.Tensor]) -> str:
    from safetensors.torch import save_file

    (tmp_path / "config.json").write_text(json.dumps(config))
    save_file(tensors, tmp_path / "model.safetensors")
    return str(tmp_path)


@pytest.mark.parametrize("how", ["config", "tensor names"])
def test_mxfp4_checkpoint_is_one_error_line_in_the_cli(tmp_path, how):
    config = dict(_GPT_OSS)
    tensors = {"model.layers.0.mlp.experts.gate_up_proj_blocks": torch.zeros(4, 32, 2, 16, dtype=torch.uint8)}
    if how == "config":
        config["quantization_config"] = {"quant_method": "mxfp4"}
    result = run_main("generate", "-p", "hi", "--device", "cpu", "--target", _write(tmp_path, config, tensors))
    assert result.exit_code != 0
    assert len(result.error_lines) == 1 and "MXFP4-quantized checkpoints are not supported" in result.error_lines[0]
    assert "Traceback" not in result.stderr


def test_mxfp4_tensor_names_refused_by_the_loader(tmp_path):
    from specbench.models.loader import load_model

    path = _write(tmp_path, _GPT_OSS, {"model.layers.0.mlp.experts.down_proj_scales": torch.zeros(4, 32, 1)})
    with pytest.raises(SpecbenchError, match="MXFP4-quantized checkpoints are not supported"):
        load_model(path, dtype=torch.float32, device="cpu", attn_backend="torch")


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gemma-3-1b"])
def test_dummy_weights_of_a_shrunk_preset_decode_finite_logits(name):
    """`--load-format dummy` initialisation on the preset's structure (sinks, experts, Gemma's zero-offset norms)."""
    from dataclasses import replace

    from specbench.attention.backend import create_backend
    from specbench.models.llama import DecoderLM
    from specbench.models.moe_config import MoeConfig
    from tests.models.test_decoder_vs_hf import blocks_for, new_cache, run

    config = get_preset(name)
    small = {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 32, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 6,
             "attention_kinds": config.attention_kinds[:6]}
    if config.moe is not None:
        small.update(moe=replace(config.moe, hidden_size=64, moe_intermediate_size=32, num_experts=4,
                                 num_experts_per_tok=2), moe_layer_ids=tuple(range(6)))
    model = DecoderLM(replace(config, **small), create_backend("torch", check_invariants=True), dtype=torch.float32)
    model.init_random_weights(seed=0)
    assert isinstance(model.config.moe, MoeConfig) == (name == "gpt-oss-20b")
    if name == "gemma-3-1b":
        assert float(model.layers[0].input_layernorm.weight.abs().max()) == 0.0  # (1 + 0): unit gain
    logits, _ = run(model, new_cache(model), [(list(range(3, 30)), 0, blocks_for(27, 60))])
    assert torch.isfinite(logits).all() and logits.std() > 0

"""HF config.json parsing and the shape presets (8B presets checked on the meta device, nothing allocated)."""

from __future__ import annotations

import pytest
import torch

from specbench.attention import create_backend
from specbench.attention.kinds import SlidingWindowAttention
from specbench.errors import SpecbenchError
from specbench.models import DecoderLM, ModelConfig, RopeScaling, get_preset, preset_names

# Llama-3.1-8B's config.json as published (transformers 4.x field names).
LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "max_position_embeddings": 131072, "tie_word_embeddings": False,
    "attention_bias": False, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "torch_dtype": "bfloat16",
}
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
    "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_scaling": None,
    "max_position_embeddings": 40960, "tie_word_embeddings": False, "attention_bias": False,
    "use_sliding_window": False, "sliding_window": None, "bos_token_id": 151643, "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
}
# Parameter counts published for these checkpoints.
PUBLISHED_NUM_PARAMS = {"llama-3.1-8b": 8_030_261_248, "qwen3-8b": 8_190_735_360}


def test_llama31_config_maps_to_preset():
    config = ModelConfig.from_hf(LLAMA31_8B)
    assert config == get_preset("llama-3.1-8b")
    assert config.architecture == "llama" and config.head_dim == 128
    assert config.rope_scaling == RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)
    assert config.eos_token_ids == (128001, 128008, 128009) and config.checkpoint_dtype == "bfloat16"


def test_qwen3_config_maps_to_preset():
    config = ModelConfig.from_hf(QWEN3_8B)
    assert config.use_qk_norm and not config.attention_bias and config.rope_scaling is None
    assert config.rope_theta == 1e6 and config.eos_token_ids == (151645,)
    preset = get_preset("qwen3-8b")
    for field in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "tie_word_embeddings"):
        assert getattr(config, field) == getattr(preset, field), field


def test_transformers5_rope_parameters_and_qwen2_bias():
    hf = {**QWEN3_8B, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "head_dim": None,
          "rope_theta": None, "rope_scaling": None,
          "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5}}
    config = ModelConfig.from_hf(hf)
    assert config.architecture == "qwen2" and config.attention_bias and not config.has_o_proj_bias
    assert config.head_dim == 4096 // 32
    assert config.rope_theta == 5e5 and config.rope_scaling == RopeScaling("linear", 4.0)


def test_old_style_rope_type_key_and_mistral():
    hf = {**LLAMA31_8B, "architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": None,
          "rope_scaling": {"type": "linear", "factor": 2.0}}
    assert ModelConfig.from_hf(hf).rope_scaling == RopeScaling("linear", 2.0)
    windowed = ModelConfig.from_hf({**hf, "sliding_window": 4096}).attention_kinds
    assert windowed == (SlidingWindowAttention(4096),) * hf["num_hidden_layers"]


@pytest.mark.parametrize(
    "hf, message",
    [
        ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, "unsupported architecture 'GPT2LMHeadModel'"),
        ({"model_type": "bert"}, "unsupported architecture 'bert'"),
        ({**LLAMA31_8B, "rope_scaling": {"rope_type": "longrope", "factor": 4.0}},
         "unsupported rope_scaling type 'longrope'"),
        ({**LLAMA31_8B, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
         "missing required field 'original_max_position_embeddings'"),
        ({k: v for k, v in LLAMA31_8B.items() if k != "hidden_size"}, "missing required field 'hidden_size'"),
        ({**LLAMA31_8B, "num_key_value_heads": 5}, "multiple of num_key_value_heads"),
    ],
)
def test_bad_configs_raise_one_clear_error(hf, message):
    with pytest.raises(SpecbenchError, match=message) as info:
        ModelConfig.from_hf(hf)
    if "architecture" in message:
        assert "LlamaForCausalLM" in str(info.value)  # lists what is supported


def test_unknown_preset_lists_known_ones():
    with pytest.raises(SpecbenchError) as info:
        get_preset("llama-9000")
    for name in ("llama-3.1-8b", "qwen3-8b", "tiny-llama"):
        assert name in str(info.value)
    assert {"llama-3.1-8b", "qwen3-8b", "tiny-llama", "tiny-qwen2", "tiny-qwen3"} <= set(preset_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED_NUM_PARAMS))
def test_8b_preset_shapes_on_meta_device(name):
    config = get_preset(name)
    model = DecoderLM(config, create_backend("torch"), torch.bfloat16, "meta")  # no memory allocated
    counted = sum(p.numel() for p in model.parameters())
    assert counted == config.num_params() == PUBLISHED_NUM_PARAMS[name]
    spec = model.kv_cache_spec()
    assert (spec.num_layers, spec.num_kv_heads, spec.head_dim) == (config.num_hidden_layers, 8, 128)
    assert spec.bytes_per_block(16) == 2 * config.num_hidden_layers * 16 * 8 * 128 * 2


@pytest.mark.parametrize("name", [n for n in preset_names() if not n.startswith("tiny")])
def test_every_preset_counts_its_parameters(name):
    config = get_preset(name)
    model = DecoderLM(config, create_backend("torch"), torch.bfloat16, "meta")
    assert sum(p.numel() for p in model.parameters()) == config.num_params()

"""Named model shapes for `load_format="dummy"` runs (random weights, real shapes)."""

from __future__ import annotations

import math
from dataclasses import replace

from specbench.attention.kinds import FullAttention, SlidingWindowAttention
from specbench.models.config import ModelConfig, RopeScaling
from specbench.models.moe_config import MoeConfig
from specbench.registry import Registry

MODEL_PRESETS: Registry[ModelConfig] = Registry("model preset")

_LLAMA3_ROPE = RopeScaling("llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                           original_max_position_embeddings=8192)
_LLAMA3 = dict(architecture="llama", vocab_size=128256, rms_norm_eps=1e-5, rope_theta=500000.0,
               max_position_embeddings=131072, attention_bias=False, use_qk_norm=False,
               bos_token_id=128000, eos_token_ids=(128001, 128008, 128009), checkpoint_dtype="bfloat16")
_QWEN = dict(vocab_size=151936, rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
             bos_token_id=151643, eos_token_ids=(151645, 151643), checkpoint_dtype="bfloat16")


def _preset(name: str, **fields) -> None:
    config = ModelConfig(**fields)
    MODEL_PRESETS.register(name)(lambda: config)


_preset("llama-3.1-8b", **_LLAMA3, rope_scaling=_LLAMA3_ROPE, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        tie_word_embeddings=False)
_preset("llama-3.2-1b", **_LLAMA3, rope_scaling=replace(_LLAMA3_ROPE, factor=32.0), hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        head_dim=64, tie_word_embeddings=True)
_preset("qwen3-8b", **_QWEN, architecture="qwen3", hidden_size=4096, intermediate_size=12288,
        num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, tie_word_embeddings=False, attention_bias=False, use_qk_norm=True)
_preset("qwen3-0.6b", **_QWEN, architecture="qwen3", hidden_size=1024, intermediate_size=3072,
        num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, tie_word_embeddings=True, attention_bias=False, use_qk_norm=True)
_preset("qwen2.5-7b", **{**_QWEN, "vocab_size": 152064}, architecture="qwen2", hidden_size=3584,
        intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        head_dim=128, max_position_embeddings=32768, tie_word_embeddings=False, attention_bias=True,
        use_qk_norm=False)
# Qwen3-30B-A3B: 48 layers, every one routing 128 experts of width 768, top 8, renormalised (~30.5B parameters,
# ~3.3B read per token).
_preset("qwen3-30b-a3b", **_QWEN, architecture="qwen3_moe", hidden_size=2048, intermediate_size=6144,
        num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
        max_position_embeddings=40960, tie_word_embeddings=False, attention_bias=False, use_qk_norm=True,
        moe=MoeConfig(hidden_size=2048, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                      norm_topk_prob=True),
        moe_layer_ids=tuple(range(48)))
# Mixtral-8x7B: 32 layers of 8 experts of width 14336, top 2 (~46.7B parameters, ~12.9B read per token).
_preset("mixtral-8x7b", architecture="mixtral", vocab_size=32000, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-5,
        rope_theta=1000000.0, rope_scaling=None, max_position_embeddings=32768, tie_word_embeddings=False,
        attention_bias=False, use_qk_norm=False, bos_token_id=1, eos_token_ids=(2,), checkpoint_dtype="bfloat16",
        moe=MoeConfig(hidden_size=4096, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=14336),
        moe_layer_ids=tuple(range(32)))
# GLM-4.5-Air: 46 layers, the first dense, then 128 sigmoid-routed experts of width 1408, top 8, one shared expert;
# half of each head rotates (~106B parameters without the MTP layer, ~12B read per token); one MTP module (a MoE
# decoder layer, `model.layers.46.*`).
_preset("glm-4.5-air", architecture="glm4_moe", vocab_size=151552, hidden_size=4096, intermediate_size=10944,
        num_hidden_layers=46, num_attention_heads=96, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-5,
        rope_theta=1000000.0, rope_scaling=None, max_position_embeddings=131072, tie_word_embeddings=False,
        attention_bias=True, use_qk_norm=False, bos_token_id=None, eos_token_ids=(151329, 151336, 151338),
        checkpoint_dtype="bfloat16", rotary_dim=64,
        moe=MoeConfig(hidden_size=4096, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=1408,
                      scoring="sigmoid", norm_topk_prob=True, has_score_correction_bias=True,
                      shared_intermediate_size=1408),
        moe_layer_ids=tuple(range(1, 46)), num_mtp_modules=1)
# gpt-oss-20b (bf16 shapes): 24 layers alternating sliding (128) / full attention, learned sinks, biases on q/k/v/o,
# YaRN x32 over 4096; 32 experts of width 2880, top 4, router and expert biases, clamped SwiGLU (~20.9B parameters,
# ~4.2B read per token with the 201k-row embedding and head).
_preset("gpt-oss-20b", architecture="gpt_oss", vocab_size=201088, hidden_size=2880, intermediate_size=2880,
        num_hidden_layers=24, num_attention_heads=64, num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5,
        rope_theta=150000.0, rope_scaling=RopeScaling("yarn", factor=32.0, original_max_position_embeddings=4096,
                                                      beta_fast=32.0, beta_slow=1.0, truncate=False,
                                                      attention_factor=0.1 * math.log(32.0) + 1.0),
        max_position_embeddings=131072, tie_word_embeddings=False, attention_bias=True, use_qk_norm=False,
        bos_token_id=199998, eos_token_ids=(200002,), checkpoint_dtype="bfloat16",
        moe=MoeConfig(hidden_size=2880, num_experts=32, num_experts_per_tok=4, moe_intermediate_size=2880,
                      scoring="topk_softmax", norm_topk_prob=False, has_router_bias=True, has_expert_bias=True,
                      activation="swiglu_oai"),
        moe_layer_ids=tuple(range(24)),
        attention_kinds=tuple(SlidingWindowAttention(128) if i % 2 == 0 else FullAttention() for i in range(24)),
        has_attention_sinks=True)


def _hf_preset(name: str, hf: dict) -> None:
    """A preset declared as the checkpoint's config.json fields, parsed by ModelConfig.from_hf (the hybrid layer
    pattern, the Gated DeltaNet shape and the partial RoPE are read the one way a real checkpoint's are)."""
    MODEL_PRESETS.register(name)(lambda: ModelConfig.from_hf(hf))


# Qwen3-Next-80B-A3B: 48 layers, each 4th gated full attention (16 q / 2 kv heads of 256, a quarter of each head
# rotates), the others Gated DeltaNet (16 key / 32 value heads of 128, conv kernel 4); every layer routes 512 experts
# of width 512, top 10, renormalised, beside a gated shared expert of width 512; one MTP layer (`mtp.*`). Shapes are
# transformers' Qwen3NextConfig defaults (the 80B's); rope_theta, context and token ids are the released config's.
_QWEN3_NEXT_80B = dict(architectures=["Qwen3NextForCausalLM"], vocab_size=151936, hidden_size=2048,
                       intermediate_size=5632, num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=2,
                       head_dim=256, partial_rotary_factor=0.25, rms_norm_eps=1e-6, rope_theta=10000000.0,
                       max_position_embeddings=262144, tie_word_embeddings=False, attention_bias=False,
                       full_attention_interval=4, linear_conv_kernel_dim=4, linear_key_head_dim=128,
                       linear_value_head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
                       decoder_sparse_step=1, mlp_only_layers=[], num_experts=512, num_experts_per_tok=10,
                       moe_intermediate_size=512, shared_expert_intermediate_size=512, norm_topk_prob=True,
                       mtp_num_hidden_layers=1, bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16")
_hf_preset("qwen3-next-80b-a3b", _QWEN3_NEXT_80B)

# Qwen3.5-9B style: transformers' Qwen3_5TextConfig defaults ("Qwen3.5-9B style" in its docstring): 32 layers, each
# 4th gated full attention (16 q / 4 kv heads of 256, a quarter rotates), the others Gated DeltaNet (16 key / 32 value
# heads of 128, conv 4) with split input projections; dense MLP 12288; vocabulary 248320. rope_theta is the config
# class's default (10000), not a released checkpoint's: the preset is for dummy-weight shapes, not for real weights.
_hf_preset("qwen3.5-9b", dict(architectures=["Qwen3_5ForCausalLM"], vocab_size=248320, hidden_size=4096,
                              intermediate_size=12288, num_hidden_layers=32, num_attention_heads=16,
                              num_key_value_heads=4, head_dim=256, partial_rotary_factor=0.25, rms_norm_eps=1e-6,
                              rope_theta=10000.0, max_position_embeddings=32768, tie_word_embeddings=False,
                              attention_bias=False, full_attention_interval=4, linear_conv_kernel_dim=4,
                              linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                              linear_num_value_heads=32, torch_dtype="bfloat16"))

# Nemotron-H-8B: 52 blocks (24 Mamba-2, 4 attention, 24 relu^2 MLP; 28 engine layers, config_nemotron_h.py), Mamba-2
# 128 heads of 64 over 8 groups, state 128; attention 32 q / 8 kv heads of 128, no RoPE. Field names as NVIDIA's
# config.json (hybrid_override_pattern, attention_head_dim); check the widths against the hub's before quoting a size.
_hf_preset("nemotron-h-8b", dict(
    architectures=["NemotronHForCausalLM"], vocab_size=131072, hidden_size=4096, intermediate_size=21504,
    hybrid_override_pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", num_hidden_layers=52,
    num_attention_heads=32, num_key_value_heads=8, attention_head_dim=128, mamba_num_heads=128, mamba_head_dim=64,
    n_groups=8, ssm_state_size=128, conv_kernel=4, layer_norm_epsilon=1e-5, max_position_embeddings=8192,
    tie_word_embeddings=False, use_bias=False, use_conv_bias=True, mlp_bias=False, bos_token_id=1, eos_token_id=2,
    torch_dtype="bfloat16"))

def _gemma3_kinds(num_layers: int, window: int) -> tuple:
    """Five sliding-window layers, then one global, repeated (transformers' sliding_window_pattern 6)."""
    return tuple(FullAttention() if (i + 1) % 6 == 0 else SlidingWindowAttention(window) for i in range(num_layers))


_GEMMA3 = dict(architecture="gemma3", rms_norm_eps=1e-6, rope_theta=1000000.0, attention_bias=False,
               use_qk_norm=True, bos_token_id=2, eos_token_ids=(1, 106), checkpoint_dtype="bfloat16",
               tie_word_embeddings=True, head_dim=256, query_pre_attn_scalar=256.0, sliding_rope_theta=10000.0)
# Gemma-2-2B: 26 layers alternating sliding (4096) / full, attention scores capped at 50, logits at 30.
_preset("gemma-2-2b", **{**_GEMMA3, "architecture": "gemma2", "rope_theta": 10000.0, "sliding_rope_theta": None,
                         "use_qk_norm": False, "eos_token_ids": (1, 107)},
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, rope_scaling=None, max_position_embeddings=8192,
        attention_kinds=tuple(SlidingWindowAttention(4096) if i % 2 == 0 else FullAttention() for i in range(26)),
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
# Gemma-3-1B (text): 26 layers, window 512, one KV head.
_preset("gemma-3-1b", **_GEMMA3, vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
        num_attention_heads=4, num_key_value_heads=1, rope_scaling=None, max_position_embeddings=32768,
        attention_kinds=_gemma3_kinds(26, 512))
# Gemma-3-4B's language model: 34 layers, window 1024, global RoPE linearly scaled x8.
_preset("gemma-3-4b", **_GEMMA3, vocab_size=262208, hidden_size=2560, intermediate_size=10240, num_hidden_layers=34,
        num_attention_heads=8, num_key_value_heads=4, rope_scaling=RopeScaling("linear", factor=8.0),
        max_position_embeddings=131072, attention_kinds=_gemma3_kinds(34, 1024))
_preset("smollm2-135m", architecture="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, head_dim=64, rms_norm_eps=1e-5,
        rope_theta=100000.0, rope_scaling=None, max_position_embeddings=8192, tie_word_embeddings=True,
        attention_bias=False, use_qk_norm=False, bos_token_id=1, eos_token_ids=(2,), checkpoint_dtype="bfloat16")

# Test-sized shapes: run in milliseconds on CPU.
_TINY = dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None,
             max_position_embeddings=2048, tie_word_embeddings=False, attention_bias=False, use_qk_norm=False,
             bos_token_id=0, eos_token_ids=(2,), checkpoint_dtype="float32")
_preset("tiny-llama", **_TINY, architecture="llama")
_preset("tiny-qwen2", **{**_TINY, "attention_bias": True}, architecture="qwen2")
_preset("tiny-qwen3", **{**_TINY, "use_qk_norm": True, "tie_word_embeddings": True}, architecture="qwen3")
_preset("tiny-qwen3-moe", **{**_TINY, "use_qk_norm": True}, architecture="qwen3_moe",
        moe=MoeConfig(hidden_size=64, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                      norm_topk_prob=True),
        moe_layer_ids=(1,))

# A tiny Qwen3-Next (DeltaNet x 3 + attention, MoE with a shared expert, one MTP layer): the hybrid bench's CPU run.
_hf_preset("tiny-qwen3-next", {**_QWEN3_NEXT_80B, "vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                               "head_dim": 16, "rope_theta": 10000.0, "max_position_embeddings": 2048,
                               "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
                               "linear_num_value_heads": 4, "num_experts": 8, "num_experts_per_tok": 2,
                               "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
                               "bos_token_id": 0, "eos_token_id": 2, "torch_dtype": "float32"})


def get_preset(name: str) -> ModelConfig:
    """The preset's config; unknown names raise SpecbenchError listing the known ones."""
    return MODEL_PRESETS.create(name)


def preset_names() -> list[str]:
    return MODEL_PRESETS.supported()

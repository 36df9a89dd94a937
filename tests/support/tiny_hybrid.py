"""Tiny random Qwen3-Next and Qwen3.5 checkpoints (hybrid: Gated DeltaNet + gated full attention), built on the fly
by transformers itself (no hub), with the tiny tokenizer: the hybrid tests' targets."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.tiny_models import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, save_random

# 4 layers: DeltaNet, attention, DeltaNet, attention; value heads grouped 2 per key head; half of each head rotates.
LAYER_TYPES = ["linear_attention", "full_attention", "linear_attention", "full_attention"]
DENSE = {"num_experts": 0}
MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
       "norm_topk_prob": True, "decoder_sparse_step": 1}
# the text model's shape, Qwen3-Next's and Qwen3.5's alike
TEXT_SHAPE = dict(
    vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=len(LAYER_TYPES),
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, layer_types=LAYER_TYPES,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
    linear_conv_kernel_dim=4, max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID)


def build_tiny_hybrid(out_dir: str | Path, *, seed: int = 0, moe: bool = False, weight_scale: float = 4.0):
    """Save an fp32 Qwen3-Next checkpoint (model.safetensors, config, tokenizer) to out_dir; returns the HF model."""
    from transformers import AutoModelForCausalLM, Qwen3NextConfig

    config = Qwen3NextConfig(**TEXT_SHAPE, **(MOE if moe else DENSE))
    config.architectures = ["Qwen3NextForCausalLM"]
    torch.manual_seed(seed)
    return save_random(AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval(), out_dir, seed,
                       weight_scale)


def build_tiny_qwen3_5(out_dir: str | Path, *, seed: int = 0, moe: bool = False, weight_scale: float = 4.0):
    """Save an fp32 Qwen3.5 text checkpoint (Qwen3_5ForCausalLM, or Qwen3_5MoeForCausalLM with `moe`): the
    Qwen3-Next blocks with the Gated DeltaNet's input projections split (in_proj_qkv / z / b / a); returns the HF
    model."""
    from transformers import AutoModelForCausalLM
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig

    cls = Qwen3_5MoeTextConfig if moe else Qwen3_5TextConfig
    extra = {k: v for k, v in MOE.items() if k != "decoder_sparse_step"} if moe else {}
    config = cls(**TEXT_SHAPE, **extra)
    config.architectures = ["Qwen3_5MoeForCausalLM" if moe else "Qwen3_5ForCausalLM"]
    torch.manual_seed(seed)
    return save_random(AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval(), out_dir, seed,
                       weight_scale)


def build_tiny_qwen3_5_vl(out_dir: str | Path, *, seed: int = 0, weight_scale: float = 4.0):
    """Save an fp32 Qwen3_5ForConditionalGeneration checkpoint (how Qwen3.5 / 3.6 ship: the language model under
    `model.language_model.*`, a tiny vision tower under `model.visual.*`, config.json's `text_config`); returns the
    HF model."""
    from transformers import Qwen3_5ForConditionalGeneration
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5Config

    rope = {**TEXT_SHAPE["rope_parameters"], "mrope_section": [2, 1, 1], "mrope_interleaved": True}
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2)
    config = Qwen3_5Config(text_config={**TEXT_SHAPE, "rope_parameters": rope}, vision_config=vision,
                           tie_word_embeddings=False)
    torch.manual_seed(seed)
    return save_random(Qwen3_5ForConditionalGeneration(config).to(torch.float32).eval(), out_dir, seed, weight_scale)

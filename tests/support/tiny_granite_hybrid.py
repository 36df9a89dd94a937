"""A tiny random Granite-4 checkpoint (GraniteMoeHybridForCausalLM: Mamba-2 mixers beside full attention, each
layer's MLP routed experts plus an always-on shared MLP, or the shared MLP alone; muP multipliers), built on the fly
by transformers itself (no hub), with the tiny tokenizer: the Granite-4 tests' target."""

from __future__ import annotations

from pathlib import Path

from tests.support.tiny_mamba2_checkpoint import save_tiny_mamba2_hybrid
from tests.support.tiny_models import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

# 4 layers: Mamba-2, attention, Mamba-2, attention.
LAYER_TYPES = ["mamba", "attention", "mamba", "attention"]
# 8 heads of 16 over 2 groups of B/C, state 16; chunk 8 so HF's own prefill runs several chunks.
MAMBA = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
         "mamba_expand": 2, "mamba_chunk_size": 8}
# muP multipliers away from 1 (Granite-4's are 12, 0.22, 0.0078125, 6-8), so a dropped one changes the outputs.
MULTIPLIERS = {"embedding_multiplier": 3.0, "residual_multiplier": 0.5, "attention_multiplier": 0.125,
               "logits_scaling": 2.0}


def tiny_granite_hybrid_config(*, num_experts: int = 4, rope: bool = False):
    """num_experts 0: the dense variant (the shared MLP alone); rope: position_embedding_type "rope" (Granite-4's
    released checkpoints say "nope")."""
    from transformers import GraniteMoeHybridConfig

    config = GraniteMoeHybridConfig(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=32, shared_intermediate_size=96,
        num_hidden_layers=len(LAYER_TYPES), layer_types=LAYER_TYPES, num_attention_heads=4, num_key_value_heads=2,
        num_local_experts=num_experts, num_experts_per_tok=2, max_position_embeddings=2048, rms_norm_eps=1e-6,
        tie_word_embeddings=False, position_embedding_type="rope" if rope else "nope",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
        pad_token_id=PAD_ID, **MAMBA, **MULTIPLIERS)
    config.architectures = ["GraniteMoeHybridForCausalLM"]
    return config


def build_tiny_granite_hybrid(out_dir: str | Path, *, seed: int = 0, weight_scale: float = 4.0, **config_kwargs):
    """Save an fp32 Granite-4 checkpoint (model.safetensors, config, tokenizer) to out_dir; returns the HF model."""
    return save_tiny_mamba2_hybrid(tiny_granite_hybrid_config(**config_kwargs), out_dir, seed=seed,
                                   weight_scale=weight_scale, mixer="mamba")

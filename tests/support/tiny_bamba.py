"""A tiny random Bamba checkpoint (hybrid: Mamba-2 mixers + plain full attention, Llama-like MLP), built on the fly
by transformers itself (no hub), with the tiny tokenizer: the Mamba-2 hybrid tests' target."""

from __future__ import annotations

from pathlib import Path

from tests.support.tiny_mamba2_checkpoint import save_tiny_mamba2_hybrid
from tests.support.tiny_models import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

# 4 layers: Mamba-2, attention, Mamba-2, attention (each state layer sits under an attention layer).
ATTN_LAYER_INDICES = [1, 3]
# 8 heads of 16 over 2 groups of B/C (4 heads share one), state 16; chunk 8 so HF's own prefill runs several chunks.
MAMBA = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
         "mamba_expand": 2, "mamba_chunk_size": 8}


def tiny_bamba_config():
    from transformers import BambaConfig

    config = BambaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, attn_layer_indices=ATTN_LAYER_INDICES, max_position_embeddings=2048,
        rms_norm_eps=1e-6, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, **MAMBA)
    config.architectures = ["BambaForCausalLM"]
    return config


def build_tiny_bamba(out_dir: str | Path, *, seed: int = 0, weight_scale: float = 4.0):
    """Save an fp32 Bamba checkpoint (model.safetensors, config, tokenizer) to out_dir; returns the HF model."""
    return save_tiny_mamba2_hybrid(tiny_bamba_config(), out_dir, seed=seed, weight_scale=weight_scale, mixer="mamba")

"""A tiny random Nemotron-H checkpoint (hybrid: one mixer per block, Mamba-2, attention without RoPE or a non-gated
relu^2 MLP, by `hybrid_override_pattern`), built on the fly by transformers itself (no hub), with the tiny tokenizer:
the Nemotron-H tests' target."""

from __future__ import annotations

from pathlib import Path

from tests.support.tiny_mamba2_checkpoint import save_tiny_mamba2_hybrid
from tests.support.tiny_models import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

# 6 blocks: Mamba-2, MLP, attention, MLP, Mamba-2, MLP (each kind twice or more, a state layer on either side of the
# attention layer).
PATTERN = "M-*-M-"
# 8 heads of 16 over 2 groups of B/C (4 heads share one), state 16; chunk 8 so HF's own prefill runs several chunks.
MAMBA = {"mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 2, "ssm_state_size": 16, "conv_kernel": 4,
         "chunk_size": 8}


def tiny_nemotron_h_config():
    from transformers import NemotronHConfig

    config = NemotronHConfig(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, hybrid_override_pattern=PATTERN,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
        layer_norm_epsilon=1e-6, tie_word_embeddings=False, bos_token_id=BOS_ID, eos_token_id=EOS_ID,
        pad_token_id=PAD_ID, **MAMBA)
    config.architectures = ["NemotronHForCausalLM"]
    return config


def build_tiny_nemotron_h(out_dir: str | Path, *, seed: int = 0, weight_scale: float = 4.0):
    """Save an fp32 Nemotron-H checkpoint (model.safetensors, config, tokenizer) to out_dir; returns the HF model."""
    return save_tiny_mamba2_hybrid(tiny_nemotron_h_config(), out_dir, seed=seed, weight_scale=weight_scale,
                                   mixer="mixer")

"""A tiny random Nemotron-H checkpoint (hybrid: one mixer per block, Mamba-2, attention without RoPE or a non-gated
relu^2 MLP, by `hybrid_override_pattern`), built on the fly by transformers itself (no hub), with the tiny tokenizer:
the Nemotron-H tests' target."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.tiny_models import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, _randomize, tiny_tokenizer_dir

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


@torch.no_grad()
def _state_space_params(model, seed: int) -> None:
    """Decays that keep a few tokens of memory (exp(-dt * A) ~ 0.8 a step) and a skip near one, as tiny_bamba's."""
    gen = torch.Generator().manual_seed(seed + 1)
    for name, param in sorted(model.named_parameters()):
        if name.endswith("mixer.A_log"):
            param.copy_(torch.empty(param.shape).uniform_(0.2, 1.0, generator=gen).log())
        elif name.endswith("mixer.dt_bias"):
            param.copy_(-1.0 + 0.5 * torch.randn(param.shape, generator=gen))
        elif name.endswith("mixer.D"):
            param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=gen))


def build_tiny_nemotron_h(out_dir: str | Path, *, seed: int = 0, weight_scale: float = 4.0):
    """Save an fp32 Nemotron-H checkpoint (model.safetensors, config, tokenizer) to out_dir; returns the HF model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_nemotron_h_config(), dtype=torch.float32).eval()
    _randomize(model, weight_scale, seed)
    _state_space_params(model, seed)
    out = Path(out_dir)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_tokenizer_dir()).save_pretrained(out)
    return model

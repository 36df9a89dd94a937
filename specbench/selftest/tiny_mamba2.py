"""The selftest's Mamba-2 hybrid tiny target (issue 45): a random Bamba (Mamba-2 mixers beside plain full attention)
written as an HF directory, run on the first seed only, n-gram only: its row is where the Mamba-2 mixer's paths
(hybrid.mamba2_verify, hybrid.mamba2_chunked) are reached and greedy-checked against transformers' BambaForCausalLM.
The hybrid-state faults run on the Qwen3-Next target (tiny_hybrid.py); tests/faults/test_bamba_state_mutants.py
shows them caught on Mamba-2 state too.

As tiny_hybrid.py: built by transformers' own class (its parameter names and shapes), every parameter then drawn
from a generator seeded by the seed alone inside a forked RNG (same seed, same bytes; the caller's RNG unmoved).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specbench.selftest.tiny import VOCAB_SIZE, build_tiny_pair
from specbench.selftest.tiny_hybrid import DRAFT_VARIANT, draw_weights, hf_model_of, write_checkpoint

TARGET = "mamba2"  # the selftest's name for this target (rows, table)
ATTN_LAYER_INDICES = (1, 3)  # Mamba-2, attention, Mamba-2, attention
HIDDEN, NUM_HEADS, NUM_KV_HEADS = 64, 4, 2
# 8 heads of 16 (expand 2), B and C in 2 groups, state 16, conv window 4, HF's prefill in chunks of 8
MAMBA = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 16, "mamba_d_conv": 4,
         "mamba_expand": 2, "mamba_chunk_size": 8}


def mamba2_config(vocab_size: int = VOCAB_SIZE):
    """transformers' BambaConfig of the target (half of each attention head rotates, as Bamba's always does)."""
    from transformers import BambaConfig

    config = BambaConfig(
        vocab_size=vocab_size, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=4,
        num_attention_heads=NUM_HEADS, num_key_value_heads=NUM_KV_HEADS, attn_layer_indices=list(ATTN_LAYER_INDICES),
        max_position_embeddings=1024, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, bos_token_id=0, eos_token_id=2,
        pad_token_id=3, **MAMBA)
    config.architectures = ["BambaForCausalLM"]
    return config


def _random_weights(model, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter drawn anew, in sorted-name order, from a generator of `seed` alone; decays that keep a few
    tokens of memory (exp(-dt * A) ~ 0.8 a token) so a wrong state shows in the next tokens."""
    gen = torch.Generator().manual_seed(7_000_003 + seed)  # never replays the other tiny targets' streams

    def own_law(name: str, shape: torch.Size) -> torch.Tensor | None:
        if name.endswith("mamba.A_log"):
            return torch.empty(shape).uniform_(0.2, 1.0, generator=gen).log()
        if name.endswith("mamba.dt_bias"):
            return -1.0 + 0.5 * torch.randn(shape, generator=gen)
        if name.endswith("mamba.D") or name.endswith("norm.weight"):  # plain (x * w) norms: w near one
            return 1.0 + 0.2 * torch.randn(shape, generator=gen)
        return None

    return draw_weights(model, gen, own_law)


def build_mamba2_target(out_dir: str | Path, *, seed: int = 0, vocab_size: int = VOCAB_SIZE) -> str:
    """Write the fp32 Bamba target (config.json + model.safetensors) to `out_dir`."""
    config = mamba2_config(vocab_size)
    weights = _random_weights(hf_model_of(config), seed)
    # transformers' own JSON (it writes time_step_limit's infinity as {"__float__": "Infinity"}: JSON has no inf)
    return write_checkpoint(out_dir, {**json.loads(config.to_json_string()), "dtype": "float32"}, weights)


def build_mamba2_pair(out_dir: str | Path, *, seed: int = 0) -> tuple[str, str]:
    """Write `target/` (the Bamba) and `draft/` (a non-hybrid draft LM of the same vocabulary); their paths."""
    out = Path(out_dir)
    target = build_mamba2_target(out / "target", seed=seed)
    draft, _ = build_tiny_pair(out / "draft-base", seed=seed, variant=DRAFT_VARIANT)
    return target, draft

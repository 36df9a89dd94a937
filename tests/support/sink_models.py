"""Tiny gpt-oss and Gemma-3 targets for the engine-vs-HF tests (fp32, the tiny tokenizer), each with a perturbed
draft of the same architecture.

- gpt-oss: 2 layers, sliding (window 5) then full, learned sinks, q/k/v/o biases, YaRN RoPE (factor 4), 4 experts
  top 2 with router and expert biases.
- Gemma-2: 3 layers, sliding / full / sliding (window 5), one RoPE, query_pre_attn_scalar 24, attention scores
  soft-capped at 2 (so the cap bends them) and logits at 30.
- Gemma-3: 3 layers, sliding / full / sliding (window 5), local RoPE base 10000 vs global 1e6 with linear scaling,
  query_pre_attn_scalar 24 (not head_dim), final logit soft-cap 30, tied embeddings.
Windows of 5 are shorter than every prompt (6..33 tokens) and than prompt + k.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.tiny_models import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    VOCAB_SIZE,
    _randomize,
    derive_draft,
    tiny_tokenizer_dir,
)

WINDOW = 5


def _config(arch: str, **overrides):
    from transformers import Gemma2Config, Gemma3TextConfig, GptOssConfig

    common = {"vocab_size": VOCAB_SIZE, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "max_position_embeddings": 2048, "sliding_window": WINDOW, "bos_token_id": BOS_ID,
              "eos_token_id": EOS_ID, "pad_token_id": PAD_ID}
    if arch == "gpt_oss":
        return GptOssConfig(**common, intermediate_size=32, num_hidden_layers=2, num_local_experts=4,
                            num_experts_per_tok=2, layer_types=["sliding_attention", "full_attention"],
                            rope_parameters={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                             "truncate": False, "original_max_position_embeddings": 512,
                                             "rope_theta": 150000.0}, **overrides)
    if arch == "gemma2":
        return Gemma2Config(**common, intermediate_size=128, num_hidden_layers=3, query_pre_attn_scalar=24,
                            attn_logit_softcapping=2.0, final_logit_softcapping=30.0, tie_word_embeddings=True,
                            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **overrides)
    return Gemma3TextConfig(**common, intermediate_size=128, num_hidden_layers=3, query_pre_attn_scalar=24,
                            final_logit_softcapping=30.0, tie_word_embeddings=True,
                            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                            rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0,
                                                                "rope_theta": 1000000.0},
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                            **overrides)


@torch.no_grad()
def build_sink_target(root: Path, arch: str, **overrides) -> tuple[Path, Path]:
    """(target dir, draft dir) of `arch` ("gpt_oss" | "gemma2" | "gemma3")."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target, draft = root / arch, root / f"{arch}-draft"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(arch, **overrides), dtype=torch.float32).eval()
    _randomize(model, 4.0, 0)
    if arch.startswith("gemma"):  # (1 + weight) norms: weights near zero, as trained Gemma checkpoints store them
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):  # the final norm's zero-mean weights (tied head) too
                param.sub_(1.0)
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(tiny_tokenizer_dir()).save_pretrained(target)
    derive_draft(target, draft, noise=0.15, seed=1)
    return target, draft

"""The selftest's hybrid tiny target (issue 45): a random Qwen3-Next (Gated DeltaNet layers beside gated full
attention) shipping its own MTP module, written as an HF directory, and its draft LM, a non-hybrid tiny model of the
same vocabulary (the engine refuses a hybrid draft LM: its draft steps would need their own state slots and rollback).

No tokenizer: the selftest prompts are token ids. The model is built by transformers' own Qwen3-Next class (so its
parameter names and shapes are the checkpoint format the greedy check's HF cross-check loads), then every parameter
is overwritten from a generator seeded by the seed alone, inside a forked RNG: the same seed writes the same bytes,
and the caller's global RNG is left as it was.

The draft LM is the seed's "qwen3" tiny target (tiny.py): random with respect to this target, so it is accepted
rarely, and rejections at every position occur; the rollback mutants that need accepted drafts are caught by the
invariant sweep's forced acceptance (INV-STATE), not by greedy output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

from specbench.selftest.tiny import VOCAB_SIZE, build_tiny_pair
from specbench.selftest.tiny_mtp import MTP_PREFIX, mtp_tensors

TARGET = "hybrid"  # the selftest's name for this target (rows, table)
# DeltaNet, attention, DeltaNet, attention: both state layers sit under an attention layer, so a wrong state moves
# the tokens the next attention layer sees, and the paged KV holds two layers only.
LAYER_TYPES = ("linear_attention", "full_attention", "linear_attention", "full_attention")
HIDDEN, NUM_HEADS, NUM_KV_HEADS, HEAD_DIM = 64, 4, 2, 16
# Value heads grouped 2 per key head (as Qwen3-Next-80B's 16 key / 32 value heads), conv window 4.
LINEAR_KEY_HEADS, LINEAR_VALUE_HEADS, LINEAR_HEAD_DIM, CONV_KERNEL = 2, 4, 16, 4
# Gains of N(0, (gain / sqrt(fan_in))^2) matrices: a peaky head keeps greedy decisions far from ties; larger layer
# gains make the net chaotic (tests/support/tiny_models.py measured the same on its tiny models).
HEAD_GAIN, LAYER_GAIN = 4.0, 0.5
DRAFT_VARIANT = "qwen3"  # tiny.py's variant the draft LM is


def hybrid_config(vocab_size: int = VOCAB_SIZE):
    """transformers' Qwen3NextConfig of the target (dense MLPs; half of each attention head rotates)."""
    from transformers import Qwen3NextConfig

    config = Qwen3NextConfig(
        vocab_size=vocab_size, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=len(LAYER_TYPES),
        num_attention_heads=NUM_HEADS, num_key_value_heads=NUM_KV_HEADS, head_dim=HEAD_DIM,
        layer_types=list(LAYER_TYPES), linear_num_key_heads=LINEAR_KEY_HEADS,
        linear_num_value_heads=LINEAR_VALUE_HEADS, linear_key_head_dim=LINEAR_HEAD_DIM,
        linear_value_head_dim=LINEAR_HEAD_DIM, linear_conv_kernel_dim=CONV_KERNEL, max_position_embeddings=1024,
        rms_norm_eps=1e-6, tie_word_embeddings=False, num_experts=0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        bos_token_id=0, eos_token_id=2, pad_token_id=3)
    config.architectures = ["Qwen3NextForCausalLM"]
    return config


def _random_weights(model, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter drawn anew, in sorted-name order, from a generator of `seed` alone."""
    gen = torch.Generator().manual_seed(5_000_011 + seed)  # never replays tiny.py's build streams

    def own_law(name: str, shape: torch.Size) -> torch.Tensor | None:
        if name.endswith("norm.weight"):  # (1 + w) norms: w ~ 0.2 keeps every scale near one
            return 0.2 * torch.randn(shape, generator=gen)
        if name.endswith("dt_bias") or name.endswith("A_log"):
            return 0.5 * torch.randn(shape, generator=gen)
        return None

    return draw_weights(model, gen, own_law)


def draw_weights(model, gen: torch.Generator,
                 own_law: Callable[[str, torch.Size], torch.Tensor | None]) -> dict[str, torch.Tensor]:
    """Every parameter of `model` drawn from `gen`, one draw each in sorted-name order (the tiny hybrid targets'
    weights, and so their shipped baselines, depend on that order): `own_law` for those whose law is the
    architecture's own (None: the common one: biases 0.5 N(0, 1), embeddings N(0, 1), matrices and convs N(0, 1)
    scaled by gain / sqrt(fan-in))."""
    weights = {}
    for name, param in sorted(model.state_dict().items()):
        w = own_law(name, param.shape)
        if w is None and name.endswith(".bias"):
            w = 0.5 * torch.randn(param.shape, generator=gen)
        elif w is None and name.endswith("embed_tokens.weight"):
            w = torch.randn(param.shape, generator=gen)
        elif w is None:  # the last dim is the fan-in of a matrix and of the conv's [channels, 1, kernel] alike
            gain = HEAD_GAIN if name.startswith("lm_head") else LAYER_GAIN
            w = torch.randn(param.shape, generator=gen) * (gain / param.shape[-1] ** 0.5)
        weights[name] = w.to(param.dtype)
    return weights


def build_hybrid_target(out_dir: str | Path, *, seed: int = 0, vocab_size: int = VOCAB_SIZE) -> str:
    """Write the fp32 Qwen3-Next target (config.json + model.safetensors) to `out_dir`."""
    config = hybrid_config(vocab_size)
    weights = _random_weights(hf_model_of(config), seed)
    # Its own MTP module in Qwen3-Next's mtp.* names (tiny_mtp.py: the first attention layer's copy over the next
    # token's embedding); transformers' class ignores mtp.* as it does Qwen3-Next-80B's.
    weights.update(mtp_tensors(weights, len(LAYER_TYPES), MTP_PREFIX, seed, offset_norms=True))
    return write_checkpoint(out_dir, {**config.to_dict(), "dtype": "float32", "mtp_num_hidden_layers": 1}, weights)


def hf_model_of(config):
    """transformers' fp32 model of `config`, its init drawn without moving the global RNG (the weights are ours)."""
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def write_checkpoint(out_dir: str | Path, hf_config: dict, weights: dict[str, torch.Tensor]) -> str:
    """config.json + model.safetensors under `out_dir`; its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(hf_config, indent=2))
    save_file({k: v.contiguous() for k, v in weights.items()}, out / "model.safetensors", metadata={"format": "pt"})
    return str(out)


def build_hybrid_pair(out_dir: str | Path, *, seed: int = 0) -> tuple[str, str]:
    """Write `target/` (the hybrid) and `draft/` (the non-hybrid draft LM, same vocabulary); their paths."""
    out = Path(out_dir)
    target = build_hybrid_target(out / "target", seed=seed)
    draft, _ = build_tiny_pair(out / "draft-base", seed=seed, variant=DRAFT_VARIANT)
    return target, draft


def hybrid_method_models(method: str, pair, engine_config):
    """setups.HYBRID_METHODS' models and prompts on the hybrid pair (drafters.py's builders make other targets):
    on random prompts the draft LM (accepted rarely), the target's own MTP module (~0.7 of its drafts accepted) and
    an EAGLE-3 head over the target's aux hidden states (tiny_hybrid_eagle3.py: ~0.3), so that rounds roll back at
    every accepted length; n-gram on prompts that repeat the hybrid target's own continuation (tiny_ngram.py), so
    that its rounds batch drafting requests beside zero-draft ones (the random target seldom continues a copy as
    before: most drafts are rejected, which the rollback needs)."""
    from specbench.selftest.drafters import NUM_PROMPTS, MethodModels
    from specbench.selftest.tiny import random_prompts
    from specbench.selftest.tiny_ngram import repeating_prompts

    random = tuple(tuple(p) for p in random_prompts(NUM_PROMPTS, seed=pair.seed))
    if method == "draft":
        return MethodModels(pair.target, pair.draft, random)
    if method == "mtp":
        return MethodModels(pair.target, None, random)
    if method == "eagle3":
        from specbench.selftest.tiny_hybrid_eagle3 import build_hybrid_eagle3_head

        return MethodModels(pair.target, build_hybrid_eagle3_head(pair.target, f"{pair.root}/eagle3", pair.seed),
                            random)
    prompts = repeating_prompts(pair.target, NUM_PROMPTS, pair.seed, engine_config)
    return MethodModels(pair.target, None, tuple(tuple(p) for p in prompts))


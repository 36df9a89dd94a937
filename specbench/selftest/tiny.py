"""A tiny random Llama target and a draft derived by perturbing it, written as HF dirs (no hub, no tokenizer).

Peaky logits (output head gain 4 / sqrt(hidden)) keep greedy decisions far from ties, and a mild inner
gain keeps the net non-chaotic, so a 10-15% weight perturbation gives a draft that agrees often.
"""

from __future__ import annotations

from pathlib import Path

import torch

VOCAB_SIZE = 512
HEAD_GAIN, LAYER_GAIN = 4.0, 0.5


@torch.no_grad()
def _randomize(model, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters()):
        if name.endswith("norm.weight"):
            param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=gen))
        elif name.endswith("embed_tokens.weight"):
            param.copy_(torch.randn(param.shape, generator=gen))
        else:
            gain = HEAD_GAIN if name.startswith("lm_head") else LAYER_GAIN
            param.copy_(torch.randn(param.shape, generator=gen) * (gain / param.shape[1] ** 0.5))


def build_tiny_pair(out_dir: str | Path, *, seed: int = 0, noise: float = 0.12) -> tuple[str, str]:
    """Write `target/` (2 layers, hidden 64) and `draft/` (its weights + noise * std * N(0, 1)); return both paths."""
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig

    transformers.utils.logging.disable_progress_bar()
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, rms_norm_eps=1e-6,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=2, pad_token_id=3,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    _randomize(model, seed)
    out = Path(out_dir)
    model.save_pretrained(out / "target")
    gen = torch.Generator().manual_seed(1_000_003 + seed)
    with torch.no_grad():
        for _, param in sorted(model.named_parameters()):
            param.add_(noise * param.std() * torch.randn(param.shape, generator=gen))
    model.save_pretrained(out / "draft")
    return str(out / "target"), str(out / "draft")


def random_prompts(num: int, *, seed: int = 0, min_len: int = 5, max_len: int = 30) -> list[list[int]]:
    """Token-id prompts of varied lengths (ids >= 4 avoid the special ids)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (num,), generator=gen).tolist()
    return [torch.randint(4, VOCAB_SIZE, (n,), generator=gen).tolist() for n in lengths]

"""What the tiny Mamba-2 hybrid checkpoints (Bamba, Nemotron-H, Granite-4) share: the state-space parameters that give
the recurrence a memory, and building, randomizing and saving the HF model with the tiny tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.support.tiny_models import _randomize, tiny_tokenizer_dir


@torch.no_grad()
def state_space_params(model, seed: int, mixer: str) -> None:
    """Decays that keep a few tokens of memory (exp(-dt * A) ~ 0.8 a step) and a skip near one: random matrices
    alone would leave A_log, dt_bias and D near zero (forgetting half the state every token). `mixer`: the Mamba-2
    module's attribute name in the checkpoint (Bamba and Granite: mamba; Nemotron-H: mixer)."""
    gen = torch.Generator().manual_seed(seed + 1)
    for name, param in sorted(model.named_parameters()):
        if name.endswith(f"{mixer}.A_log"):
            param.copy_(torch.empty(param.shape).uniform_(0.2, 1.0, generator=gen).log())
        elif name.endswith(f"{mixer}.dt_bias"):
            param.copy_(-1.0 + 0.5 * torch.randn(param.shape, generator=gen))
        elif name.endswith(f"{mixer}.D"):
            param.copy_(1.0 + 0.2 * torch.randn(param.shape, generator=gen))


def save_tiny_mamba2_hybrid(config, out_dir: str | Path, *, seed: int, weight_scale: float, mixer: str):
    """Build `config`'s HF model in fp32, randomize it (state-space parameters with a memory), save it with the tiny
    tokenizer to out_dir (model.safetensors, config); returns the HF model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    _randomize(model, weight_scale, seed)
    state_space_params(model, seed, mixer)
    out = Path(out_dir)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_tokenizer_dir()).save_pretrained(out)
    return model

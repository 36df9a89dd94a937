"""EAGLE head modules with random weights on tiny-llama layers, built in memory (no checkpoint on disk)."""

from __future__ import annotations

from dataclasses import replace

import torch

from specbench.attention import create_backend
from specbench.models import get_preset
from specbench.speculation.drafters.eagle.config import EAGLE1, EAGLE3_NATIVE, EagleHeadConfig
from specbench.speculation.drafters.eagle.head import EagleHead, HeadShape


def randomize(module: torch.nn.Module, seed: int) -> None:
    """Norm gains around 1 (non-unit, so a kernel that skipped them would show), other weights N(0, 0.1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            noise = torch.randn(param.shape, generator=gen)
            param.copy_(1 + 0.3 * noise if name.endswith("norm.weight") else 0.1 * noise)


def random_eagle_head(method: str, num_layers: int, norm_before_residual: bool, norm_output: bool,
                      dtype: torch.dtype, device: torch.device) -> EagleHead:
    """An EAGLE-1 (`method` "eagle") or EAGLE-3 head with its own embedding, bound to a random target
    embedding and lm_head (EAGLE-1 reads the target's)."""
    layer = replace(get_preset("tiny-llama"), num_hidden_layers=num_layers)
    h = layer.hidden_size
    config = EagleHeadConfig(
        dialect=EAGLE1 if method == "eagle" else EAGLE3_NATIVE, dialect_reason="test", layer=layer,
        num_layers=num_layers, vocab_size=layer.vocab_size, draft_vocab_size=layer.vocab_size, target_hidden_size=h,
        fc_bias=method == "eagle", norm_before_residual=norm_before_residual, norm_output=norm_output, aux=None,
    )
    shape = HeadShape(config, fc_in_features=2 * h if method == "eagle" else 3 * h, has_own_embed=True,
                      has_own_lm_head=method == "eagle3")
    head = EagleHead(shape, create_backend("torch"), dtype, device)
    randomize(head, seed=2)
    gen = torch.Generator().manual_seed(4)
    head.bind_target(*(0.1 * torch.randn(layer.vocab_size, h, generator=gen)).to(device, dtype).expand(2, -1, -1))
    return head

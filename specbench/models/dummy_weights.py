"""Dummy weights of a module (`--load-format dummy` targets and their MTP modules): seeded N(0, std) matrices,
unit norms (Gemma's (1 + weight) norms: zero weights), zero biases and no MoE selection bias, so shapes run with sane magnitudes and no checkpoint."""

from __future__ import annotations

import torch
from torch import nn

from specbench.models.layers import OffsetRMSNorm


@torch.no_grad()
def fill_dummy_weights(module: nn.Module, generator: torch.Generator, std: float) -> None:
    offset_norms = {f"{path}.weight" for path, m in module.named_modules() if isinstance(m, OffsetRMSNorm)}
    for name, param in module.named_parameters():
        if name in offset_norms:
            param.zero_()
        elif name.endswith("norm.weight"):
            param.fill_(1.0)
        elif name.endswith(".bias"):
            param.zero_()
        else:
            param.normal_(0.0, std, generator=generator)
    for name, buffer in module.named_buffers():
        if name.endswith("score_correction_bias"):  # a MoE selection bias: none until a checkpoint says
            buffer.zero_()

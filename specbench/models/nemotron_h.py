"""Nemotron-H's blocks (a hybrid target): each HF block is one norm and one mixer, added back to the stream; the
mixer a Mamba-2 one (recurrent/mamba2_mixer.py, as Bamba's), full attention without RoPE (models/llama.py
SelfAttention, q/k left unrotated) or a non-gated relu^2 MLP. One engine layer runs a mixer block and the MLP blocks
after it (models/config_nemotron_h.py), so its K/V and state indices count as Bamba's.

Parameter names are the checkpoint's under `blocks.j` (`layers.{i}.blocks.{j}.mixer.*` is the HF block's
`backbone.layers.{n}.mixer.*`, `nemotron_checkpoint_name`) except the fused q/k/v (llama.fused_checkpoint_targets).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

import torch
from torch import nn

from specbench.attention.backend import AttentionBackend
from specbench.attention.metadata import AttentionMetadata
from specbench.kv.kv_cache import KVCache
from specbench.models.config import ModelConfig
from specbench.models.config_nemotron_h import ATTENTION, MAMBA
from specbench.models.layer_output import LayerOutput
from specbench.models.layers import RMSNorm
from specbench.recurrent.mamba2_mixer import Mamba2Mixer
from specbench.recurrent.mixer import mix_tokens


class Fp32WeightRMSNorm(RMSNorm):
    """RMSNorm whose weight multiplies in fp32 before the cast back (transformers' NemotronHRMSNorm): in bf16 this
    rounds once where RMSNorm rounds twice, so it always runs the eager path (the fused kernel rounds as RMSNorm)."""

    def is_fused(self, x: torch.Tensor) -> bool:
        return False

    def reference(self, x: torch.Tensor) -> torch.Tensor:  # [..., size]
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.float() * normed).to(x.dtype)


class Relu2MLP(nn.Module):
    """down(relu(up(x)) ** 2): Nemotron-H's MLP block, no gate."""

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool) -> None:
        super().__init__()
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [num_tokens, hidden] -> same
        return self.down_proj(torch.relu(self.up_proj(x)).square())


class NemotronHBlock(nn.Module):
    """One HF block: stream += mixer(norm(stream))."""

    def __init__(self, config: ModelConfig, letter: str, attention: nn.Module | None, state_layer: int | None) -> None:
        super().__init__()
        self.norm = Fp32WeightRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.letter = letter  # 'M' Mamba-2, '*' attention, '-' MLP
        if letter == MAMBA:
            self.mixer = Mamba2Mixer(config.mamba2, config.hidden_size, config.rms_norm_eps, state_layer)
        elif letter == ATTENTION:
            self.mixer = attention
        else:
            self.mixer = Relu2MLP(config.hidden_size, config.intermediate_size, config.mlp_bias)


class NemotronHLayer(nn.Module):
    """An engine layer: its HF blocks in order (a mixer and the MLP blocks after it), each pre-norm residual; the last
    block's add is left to the next layer's first norm, as every decoder layer here hands it on (LayerOutput)."""

    def __init__(self, config: ModelConfig, letters: str, attention: nn.Module | None,
                 state_layer: int | None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(NemotronHBlock(config, letter, attention, state_layer) for letter in letters)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor | None, cos_sin: torch.Tensor,
                kv_cache: KVCache, md: AttentionMetadata, backend: AttentionBackend) -> LayerOutput:
        layer_input = None
        for block in self.blocks:
            if residual is None:
                normed, residual = block.norm(hidden), hidden
            else:
                normed, residual = block.norm.add_and_norm(hidden, residual)
            if layer_input is None:
                layer_input = residual
            if block.letter == MAMBA:
                hidden = mix_tokens(block.mixer, normed, md.query_start_loc_cpu, kv_cache, md.state_rows,
                                    backend.paths)
            elif block.letter == ATTENTION:
                # its K/V index counts attention layers only; the backend sees plain causal attention (as Bamba's)
                hidden = block.mixer(normed, cos_sin, kv_cache, dataclasses.replace(md, layer_kinds=()), backend)
            else:
                hidden = block.mixer(normed)
        return LayerOutput(hidden=hidden, residual=residual, layer_input=layer_input)


def nemotron_checkpoint_name(config: ModelConfig):
    """Our parameter path -> the checkpoint's: `layers.{i}.blocks.{j}.` is HF block n (the blocks of the layers
    before i, plus j), under `backbone.`; the final norm is `norm_f`, the embedding `embeddings`."""
    first_block, count = [], 0
    for letters in config.nemotron_blocks:
        first_block.append(count)
        count += len(letters)

    def name(ours: str) -> str:
        if ours.startswith("lm_head."):
            return ours
        if ours.startswith("norm."):
            return "backbone.norm_f." + ours[len("norm."):]
        if ours.startswith("embed_tokens."):
            return "backbone.embeddings." + ours[len("embed_tokens."):]
        match = re.match(r"layers\.(\d+)\.blocks\.(\d+)\.(.*)", ours)
        if match is None:
            raise ValueError(f"no Nemotron-H checkpoint name for parameter {ours!r}")
        layer, block, rest = int(match.group(1)), int(match.group(2)), match.group(3)
        return f"backbone.layers.{first_block[layer] + block}.{rest}"

    return name


def backbone_names(weights: Iterable[tuple[str, torch.Tensor]]) -> Iterable[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors under `backbone.` (NVIDIA's and transformers' saved name) whether stored so or under
    `model.` (transformers' in-memory name)."""
    for name, tensor in weights:
        yield ("backbone." + name[len("model."):] if name.startswith("model.") else name), tensor

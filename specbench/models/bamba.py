"""Bamba's decoder blocks (a hybrid target): Mamba-2 mixers (recurrent/mamba2_mixer.py) beside plain Llama-style
full attention, RMSNorms, dense gated MLPs (HF `feed_forward`).

Its attention is the Llama one (models/llama.py SelfAttention: fused q/k/v, RoPE on the first half of each head as
GLM-4.5's partial RoPE, K/V index counting attention layers only); its Mamba-2 layers read and write the requests'
state slots (kv_cache.states, md.state_rows) as Qwen3-Next's Gated DeltaNet layers do (models/qwen3_next.py).
Parameter names are the checkpoint's except the fused q/k/v and gate/up (llama.fused_checkpoint_targets).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from specbench.attention.backend import AttentionBackend
from specbench.attention.metadata import AttentionMetadata
from specbench.recurrent.mixer import mix_tokens
from specbench.kv.kv_cache import KVCache
from specbench.models.config import ModelConfig
from specbench.models.layer_output import LayerOutput
from specbench.models.layers import GatedMLP, RMSNorm
from specbench.recurrent.mamba2_mixer import Mamba2Mixer


def mamba_or_attention(mamba: Mamba2Mixer | None, self_attn: nn.Module | None, normed: torch.Tensor,
                       cos_sin: torch.Tensor, kv_cache: KVCache, md: AttentionMetadata,
                       backend: AttentionBackend) -> torch.Tensor:  # normed [num_tokens, hidden] -> same
    """The token mixer of a layer that is either Mamba-2 (`mamba`) or full attention (`self_attn`): Bamba's, and
    Granite-4's."""
    if mamba is not None:
        return mix_tokens(mamba, normed, md.query_start_loc_cpu, kv_cache, md.state_rows, backend.paths)
    # its K/V index counts attention layers only: the backend sees no per-layer kinds (every layer it is handed
    # plain causal), never a Mamba-2 layer's (as Qwen3-Next's GatedSelfAttention)
    return self_attn(normed, cos_sin, kv_cache, dataclasses.replace(md, layer_kinds=()), backend)


class BambaDecoderLayer(nn.Module):
    """Pre-norm residual block whose token mixer is a Mamba-2 mixer (`mamba`) or full attention (`self_attn`)."""

    def __init__(self, config: ModelConfig, attention: nn.Module | None, state_layer: int | None) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.input_layernorm = RMSNorm(config.hidden_size, eps)
        self.pre_ff_layernorm = RMSNorm(config.hidden_size, eps)
        # state_layer None: an attention layer (`attention`, llama.SelfAttention); else its state's StateCache index
        self.mamba = None if state_layer is None else Mamba2Mixer(config.mamba2, config.hidden_size, eps, state_layer)
        self.self_attn = attention if state_layer is None else None
        self.feed_forward = GatedMLP(config.hidden_size, config.intermediate_size)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor | None, cos_sin: torch.Tensor,
                kv_cache: KVCache, md: AttentionMetadata, backend: AttentionBackend) -> LayerOutput:
        if residual is None:
            normed, residual = self.input_layernorm(hidden), hidden
        else:
            normed, residual = self.input_layernorm.add_and_norm(hidden, residual)
        layer_input = residual
        mixed = mamba_or_attention(self.mamba, self.self_attn, normed, cos_sin, kv_cache, md, backend)
        normed, residual = self.pre_ff_layernorm.add_and_norm(mixed, residual)
        return LayerOutput(hidden=self.feed_forward(normed), residual=residual, layer_input=layer_input)

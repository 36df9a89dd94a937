"""Gemma-2/3's decoder block (transformers' Gemma2DecoderLayer / Gemma3DecoderLayer), over the engine's attention.

Sandwich norms: h += post_attn_norm(attn(input_norm(h))); h += post_ff_norm(mlp(pre_ff_norm(h))). Every norm is
(1 + weight) RMSNorm (layers.OffsetRMSNorm), the MLP is GELU-tanh gated; Gemma-3 norms q and k per head. Each block adds
its own residuals (nothing left for the next norm to fuse): its LayerOutput carries the whole stream.
"""

from __future__ import annotations

import torch
from torch import nn

from specbench.models.config import ModelConfig
from specbench.models.layer_output import LayerOutput
from specbench.models.layers import GatedMLP, OffsetRMSNorm


class GemmaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, self_attn: nn.Module) -> None:
        super().__init__()
        h, eps = config.hidden_size, config.rms_norm_eps
        self.input_layernorm = OffsetRMSNorm(h, eps)
        self.self_attn = self_attn  # llama.SelfAttention with Gemma's scale (and Gemma-3's q/k norms)
        self.post_attention_layernorm = OffsetRMSNorm(h, eps)
        self.pre_feedforward_layernorm = OffsetRMSNorm(h, eps)
        self.post_feedforward_layernorm = OffsetRMSNorm(h, eps)
        self.mlp = GatedMLP(h, config.intermediate_size, activation="gelu_tanh")

    def forward(
        self,
        hidden: torch.Tensor,  # [num_tokens, hidden] the stream (Gemma blocks leave no add undone)
        residual: torch.Tensor | None,  # always None between Gemma blocks
        cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] this layer's RoPE (local or global)
        kv_cache,
        md,
        backend,
    ) -> LayerOutput:
        stream = hidden if residual is None else residual + hidden
        attn = self.self_attn(self.input_layernorm(stream), cos_sin, kv_cache, md, backend)
        mid = stream + self.post_attention_layernorm(attn)
        out = mid + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(mid)))
        return LayerOutput(hidden=out, residual=None, layer_input=stream)

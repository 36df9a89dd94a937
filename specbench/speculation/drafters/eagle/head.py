"""EAGLE-1 and EAGLE-3 draft heads over a paged KV cache, built from the target's Llama layers.

Both take (token ids, an H-wide input feature) per query; `project_target_features` turns the target's
features into that input (identity for EAGLE-1, `fc` over the concatenated aux states for EAGLE-3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from specbench.attention.metadata import AttentionMetadata
from specbench.kv.kv_cache import KVCache, KVCacheSpec
from specbench.models import decode_gemv, fused_kernels
from specbench.models.config import ModelConfig
from specbench.models.layers import GatedMLP, RMSNorm, RotaryEmbedding, uninitialized_embedding
from specbench.models.llama import DecoderLayer, LayerOutput, SelfAttention, fused_checkpoint_targets
from specbench.models.materialize import materialize_
from specbench.speculation.drafters.eagle import fused_head
from specbench.speculation.drafters.eagle.config import EagleHeadConfig


@dataclass(frozen=True, slots=True)
class HeadOutput:
    hidden: torch.Tensor  # [num_tokens, H] the feature the next draft step is fed
    logits_input: torch.Tensor  # [num_tokens, H] what the lm_head reads


@dataclass(frozen=True)
class HeadShape:
    """What a head module is built with (the checkpoint decides the optional parts)."""

    config: EagleHeadConfig
    fc_in_features: int  # EAGLE-1: H + target H; EAGLE-3: num_aux * target H
    has_own_embed: bool
    has_own_lm_head: bool  # EAGLE-3 only; EAGLE-1 always uses the target's


class Eagle3FirstLayer(nn.Module):
    """q/k/v read [input_layernorm(embedding), hidden_norm(hidden)] (2H wide); then a standard block.

    Like DecoderLayer, it leaves the MLP's residual add to the next norm.
    """

    def __init__(self, config: ModelConfig, norm_before_residual: bool) -> None:
        super().__init__()
        h = config.hidden_size
        self.norm_before_residual = norm_before_residual
        self.hidden_norm = RMSNorm(h, config.rms_norm_eps)
        self.input_layernorm = RMSNorm(h, config.rms_norm_eps)
        self.self_attn = SelfAttention(config, 0, input_size=2 * h)
        self.post_attention_layernorm = RMSNorm(h, config.rms_norm_eps)
        self.mlp = GatedMLP(h, config.intermediate_size)
        self.qkv_norm_weight = fused_head.NormPairWeight()  # [input_layernorm; hidden_norm] weights, fused path

    def forward(self, embeds, hidden, cos_sin, kv_cache, md, backend) -> LayerOutput:  # embeds, hidden: [n, H]
        if decode_gemv.applies(self, hidden):
            backend.paths.record(fused_head.FUSED_HEAD_PATH)
            backend.paths.record(decode_gemv.fused_path(self, hidden.shape[0]))
            return fused_head.eagle3_first_layer(self, embeds, hidden, cos_sin, kv_cache, md, backend)
        backend.paths.record(decode_gemv.eager_path(self, hidden))
        normed = self.hidden_norm(hidden)
        layer_input = normed if self.norm_before_residual else hidden
        x = torch.cat([self.input_layernorm(embeds), normed], dim=-1)  # embedding first
        attn_out = self.self_attn(x, cos_sin, kv_cache, md, backend)
        normed, residual = self.post_attention_layernorm.add_and_norm(attn_out, layer_input)
        return LayerOutput(hidden=self.mlp(normed), residual=residual, layer_input=layer_input)


class EagleHead(fused_kernels.UsesFusedKernels, nn.Module):
    """Parameters start uninitialized (meta -> empty): the loader fills them, tests may init them.

    Its fused policy (set_policy) covers fc; the layers carry their own (the same, set together)."""

    def __init__(self, shape: HeadShape, attn_backend, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        cfg = shape.config
        c = cfg.layer
        self.shape = shape
        self.config = cfg
        self.is_eagle3 = cfg.method == "eagle3"
        self.attn_backend = attn_backend
        self.dtype = dtype
        with torch.device("meta"):
            self.embed_tokens = uninitialized_embedding(cfg.vocab_size, c.hidden_size) if shape.has_own_embed else None
            self.fc = nn.Linear(shape.fc_in_features, c.hidden_size, bias=cfg.fc_bias)
            self.layers = nn.ModuleList(self._layer(i) for i in range(cfg.num_layers))
            self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps) if self.is_eagle3 else None
            self.lm_head = nn.Linear(c.hidden_size, cfg.draft_vocab_size, bias=False) if shape.has_own_lm_head else None
        self.rotary = RotaryEmbedding(c.head_dim, c.rope_theta, c.rope_scaling)  # the head's own RoPE
        materialize_(self, dtype, device).requires_grad_(False)
        # Target tensors shared by reference (not parameters of the head):
        self.target_embed: torch.Tensor | None = None  # [vocab, H]
        self.target_lm_head: torch.Tensor | None = None  # [vocab, H]
        self.draft_to_target: torch.Tensor | None = None  # [draft_vocab] int64 target id of each draft id

    def _layer(self, i: int) -> nn.Module:
        if self.is_eagle3 and i == 0:
            return Eagle3FirstLayer(self.config.layer, self.config.norm_before_residual)
        layer = DecoderLayer(self.config.layer, i)
        if not self.is_eagle3 and i == 0:
            layer.input_layernorm = nn.Identity()  # EAGLE-1's first layer has no input norm
        return layer

    def bind_target(self, embed_weight: torch.Tensor, lm_head_weight: torch.Tensor) -> None:
        # detach(): a plain view, so nn.Module does not register the target's tensors as head parameters
        self.target_embed = embed_weight.detach()
        self.target_lm_head = lm_head_weight.detach()

    def kv_cache_spec(self) -> KVCacheSpec:
        c = self.config.layer
        return KVCacheSpec(self.config.num_layers, c.num_key_value_heads, c.head_dim, self.dtype)

    @property
    def embed_weight(self) -> torch.Tensor:  # [vocab, H]
        return self.target_embed if self.embed_tokens is None else self.embed_tokens.weight

    @property
    def lm_head_weight(self) -> torch.Tensor:  # [draft_vocab, H]
        return self.target_lm_head if self.lm_head is None else self.lm_head.weight

    def project_target_features(self, features: torch.Tensor) -> torch.Tensor:
        """[n, feature_dim] target features -> [n, H] head input (EAGLE-1 feeds them through fc later)."""
        return self._fc(features) if self.is_eagle3 else features

    def _fc(self, x: torch.Tensor) -> torch.Tensor:  # [n, fc_in_features] -> [n, H]
        if fused_head.projects(self.fused_policy, self.fc, x):
            return fused_head.project(self.fc, x)
        return self.fc(x)

    def forward(
        self,
        input_ids: torch.Tensor,  # [n]
        hidden: torch.Tensor,  # [n, H] projected target features or the head's own previous output
        md: AttentionMetadata,
        kv_cache: KVCache,
        phase: str,
        check_metadata: bool = True,  # False only under CUDA-graph capture (replays check the real metadata)
    ) -> HeadOutput:
        if check_metadata:
            self.attn_backend.begin_forward(md, phase)
        cos_sin = self.rotary.cos_sin(md.positions, md.max_seq_len)
        embeds = F.embedding(input_ids, self.embed_weight)
        if self.is_eagle3:
            out = self.layers[0](embeds, hidden, cos_sin, kv_cache, md, self.attn_backend)
            h, residual, rest = out.hidden, out.residual, self.layers[1:]
        else:
            h, residual, rest = self._fc(torch.cat([embeds, hidden], dim=-1)), None, self.layers
            fused_head.record_first_layer(self.layers[0], h, self.attn_backend.paths)
        for layer in rest:
            out = layer(h, residual, cos_sin, kv_cache, md, self.attn_backend)
            h, residual = out.hidden, out.residual
        if not self.is_eagle3:
            if residual is not None:
                h = residual + h  # EAGLE-1: no final norm to fuse the last MLP add into
            return HeadOutput(hidden=h, logits_input=h)
        normed, h = self.norm.add_and_norm(h, residual)
        return HeadOutput(hidden=normed if self.config.norm_output else h, logits_input=normed)

    def compute_logits(self, logits_input: torch.Tensor) -> torch.Tensor:  # [n, H] -> [n, draft_vocab] fp32
        return F.linear(logits_input, self.lm_head_weight).float()

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:  # [n] draft vocab -> target vocab
        return draft_ids if self.draft_to_target is None else self.draft_to_target[draft_ids]

    def checkpoint_targets(self) -> dict[str, tuple[torch.Tensor, int, int]]:
        """Canonical checkpoint name -> (our parameter, first row, end row) it fills."""
        return fused_checkpoint_targets(self, self.config.layer)

"""Qwen3-Next's decoder blocks (a hybrid target): Gated DeltaNet layers (recurrent/gated_delta_net.py) beside
full-attention layers whose output is gated, all with (1 + weight) RMSNorms, dense or MoE MLPs.

The full-attention layers attend the paged KV through the attention backend like every other model's; the Gated
DeltaNet layers read and write the requests' state slots (kv_cache.states, md.state_rows). Parameter names are the
checkpoint's except the fused qkv_proj of the attention layers and the dense/shared MLP's gate_up_proj
(llama.fused_checkpoint_targets maps both).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from specbench.attention.backend import AttentionBackend
from specbench.attention.metadata import AttentionMetadata
from specbench.attention.score_params import PLAIN
from specbench.errors import SpecbenchError
from specbench.recurrent.mixer import mix_tokens
from specbench.kv.kv_cache import KVCache
from specbench.models import fused_kernels, gated_attention_fused
from specbench.models.config import ModelConfig
from specbench.models.layer_output import LayerOutput
from specbench.models.layers import GatedMLP, OffsetRMSNorm, RotaryEmbedding
from specbench.models.moe import MoeMLP
from specbench.models.moe_forward import normed_moe_forward
from specbench.recurrent.gated_delta_net import GatedDeltaNet


class GatedSelfAttention(fused_kernels.UsesFusedKernels, nn.Module):
    """Full attention with a per-head output gate: q_proj gives [q | gate] per head; out = o(attn * sigmoid(gate)).
    Partial RoPE on the first `partial_rotary_dim` dims of q and k (the model's rotary table is that wide). q_proj,
    k_proj and v_proj are one `qkv_proj` (the loader fills its rows from the checkpoint's three); at 1 to 64 tokens
    on the fused path the layer runs as four kernels (models/gated_attention_fused.py)."""

    def __init__(self, config: ModelConfig, kv_layer: int) -> None:
        super().__init__()
        self.kv_layer = kv_layer  # index of this layer's K/V among the model's attention layers (the KVCache's)
        self.num_heads, self.num_kv_heads, self.head_dim = (config.num_attention_heads, config.num_key_value_heads,
                                                            config.head_dim)
        self.rotary_dim = config.partial_rotary_dim or config.head_dim
        self.q_size, self.kv_size = config.q_size, config.kv_size
        h, bias = config.hidden_size, config.attention_bias
        # rows: per head [q (head_dim) | gate (head_dim)], then k, then v
        self.qkv_proj = nn.Linear(h, 2 * config.q_size + 2 * config.kv_size, bias=bias)
        self.o_proj = nn.Linear(config.q_size, h, bias=bias)
        self.q_norm = OffsetRMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = OffsetRMSNorm(self.head_dim, config.rms_norm_eps)

    def _rotate(self, x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:  # [n, heads, head_dim]
        rotated = RotaryEmbedding.apply(x[..., : self.rotary_dim], cos_sin)
        return torch.cat([rotated, x[..., self.rotary_dim :]], dim=-1)

    def forward(self, x: torch.Tensor, cos_sin: torch.Tensor, kv_cache: KVCache, md: AttentionMetadata,
                backend: AttentionBackend) -> torch.Tensor:  # x [n, hidden]; cos_sin [n, 2, rotary_dim]
        # Its kind is full attention and its K/V index counts attention layers only: the backend sees metadata
        # with no per-layer kinds (every layer it is handed plain causal), never a Gated DeltaNet layer's.
        attn_md = dataclasses.replace(md, layer_kinds=())
        if gated_attention_fused.applies(self, x):
            backend.paths.record(gated_attention_fused.PATH)
            return gated_attention_fused.forward(self, x, cos_sin, kv_cache, attn_md, backend)
        n = x.shape[0]
        q_gate, k, v = self.qkv_proj(x).split([2 * self.q_size, self.kv_size, self.kv_size], dim=-1)
        q, gate = q_gate.view(n, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        k = k.view(n, self.num_kv_heads, self.head_dim)
        v = v.reshape(n, self.num_kv_heads, self.head_dim).contiguous()
        q, k = self._rotate(self.q_norm(q), cos_sin), self._rotate(self.k_norm(k), cos_sin)
        out = backend.forward(self.kv_layer, q.contiguous(), k.contiguous(), v, kv_cache, attn_md,
                              PLAIN)  # [n, heads, head_dim]
        return self.o_proj(out.reshape(n, -1) * torch.sigmoid(gate.reshape(n, -1)))

    def fused_qk_store(
        self,
        qkv: torch.Tensor,  # [n, 2 * q_size + 2 * kv_size], qkv_proj's output
        cos_sin: torch.Tensor,  # [n, 2, rotary_dim] fp32
        kv_cache: KVCache,
        md: AttentionMetadata,
    ) -> torch.Tensor:  # [n, q_size]: normed, rotated q; normed, rotated k and v stored at md.slot_mapping
        """The fused path's q/k norms, partial RoPE and K/V store in one kernel (a seam for
        faults/gated_attention_kv_slot_shift.py)."""
        return fused_kernels.qk_norm_rope_store(
            qkv, self.q_norm.weight, self.k_norm.weight, self.q_norm.eps, cos_sin, md.slot_mapping,
            kv_cache.k[self.kv_layer], kv_cache.v[self.kv_layer], self.num_heads, self.num_kv_heads,
            is_q_gated=True, rotary_dim=self.rotary_dim, is_offset=True)

    def gated_output(
        self,
        attn_out: torch.Tensor,  # [n, q_size] attention's output
        qkv: torch.Tensor,  # [n, 2 * q_size + 2 * kv_size], whose q rows hold each head's gate after its q
    ) -> torch.Tensor:  # [n, hidden]: o_proj(attn_out * sigmoid(gate)) in one kernel
        """A seam for faults/gated_attention_gate_shift.py."""
        gate = fused_kernels.input_gate(qkv[:, self.head_dim:], self.head_dim, 2 * self.head_dim)
        return fused_kernels.gemv(attn_out, self.o_proj.weight, input_gate=gate)


class HybridDecoderLayer(nn.Module):
    """Pre-norm residual block whose token mixer is a Gated DeltaNet or a gated full attention."""

    def __init__(self, config: ModelConfig, layer_idx: int, state_layer: int | None, kv_layer: int | None) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.input_layernorm = OffsetRMSNorm(config.hidden_size, eps)
        self.post_attention_layernorm = OffsetRMSNorm(config.hidden_size, eps)
        # state_layer None: a full-attention layer; else the index of its state in the StateCache
        self.linear_attn = None if state_layer is None else GatedDeltaNet(config.gated_delta_net,
                                                                          config.hidden_size, eps, state_layer)
        self.self_attn = GatedSelfAttention(config, kv_layer) if state_layer is None else None
        self.mlp = MoeMLP(config.moe) if config.is_moe_layer(layer_idx) else GatedMLP(
            config.hidden_size, config.intermediate_size)

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor | None, cos_sin: torch.Tensor,
                kv_cache: KVCache, md: AttentionMetadata, backend: AttentionBackend) -> LayerOutput:
        if residual is None:
            normed, residual = self.input_layernorm(hidden), hidden
        else:
            normed, residual = self.input_layernorm.add_and_norm(hidden, residual)
        layer_input = residual
        if self.linear_attn is not None:
            mixed = mix_tokens(self.linear_attn, normed, md.query_start_loc_cpu, kv_cache, md.state_rows,
                               backend.paths)
        else:
            mixed = self.self_attn(normed, cos_sin, kv_cache, md, backend)
        if isinstance(self.mlp, MoeMLP):
            half = normed_moe_forward(self.mlp, self.post_attention_layernorm, mixed, residual, md, backend.paths)
            return LayerOutput(hidden=half.hidden, residual=half.stream, layer_input=layer_input)
        normed, residual = self.post_attention_layernorm.add_and_norm(mixed, residual)
        return LayerOutput(hidden=self.mlp(normed), residual=residual, layer_input=layer_input)


def kv_layer_ids(config: ModelConfig) -> tuple[int | None, ...]:
    """[num_layers] each attention layer's index among them (its KVCache layer); None for Gated DeltaNet ones."""
    ids: list[int | None] = []
    count = 0
    for kind in config.attention_kinds:
        if kind.is_recurrent_state:
            ids.append(None)
        else:
            ids.append(count)
            count += 1
    return tuple(ids)


def state_layer_ids(config: ModelConfig) -> tuple[int | None, ...]:
    """[num_layers] each Gated DeltaNet layer's index among them (its StateCache layer); None for attention ones."""
    ids: list[int | None] = []
    count = 0
    for kind in config.attention_kinds:
        if kind.is_recurrent_state:
            ids.append(count)
            count += 1
        else:
            ids.append(None)
    return tuple(ids)


def ensure_state_rows(model, md: AttentionMetadata, kv_cache: KVCache) -> AttentionMetadata:
    """`md` with state rows for a hybrid target's forward. Engine forwards carry them (engine/state_attach.py); an
    oracle's cache-free forward over a private KV cache (check/fresh_forward.py: every sequence from position 0)
    gets a private StateCache, one slot per sequence, starting from zeros. Anything else is refused: a forward
    that continues sequences must read their slots, never a made-up state."""
    if md.state_rows is not None:
        return md
    starts = [md.positions_cpu[md.query_start_loc_cpu[r]] for r in range(md.num_reqs)
              if md.query_start_loc_cpu[r] < md.query_start_loc_cpu[r + 1]]
    if getattr(kv_cache, "states", None) is not None or any(starts):
        raise SpecbenchError("a hybrid target's forward needs its requests' recurrent-state slots "
                             "(this phase does not attach them)")
    from specbench.recurrent.state_cache import new_state_cache
    from specbench.recurrent.state_rows import state_rows

    kv_cache.states = new_state_cache(model, max(md.num_reqs, 1))
    cu = md.query_start_loc_cpu
    rows = state_rows(list(range(md.num_reqs)), [cu[r + 1] - cu[r] for r in range(md.num_reqs)], 0,
                      [True] * md.num_reqs)
    return dataclasses.replace(md, state_rows=rows)

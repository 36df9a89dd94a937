"""A decoder block at 1 to 64 tokens as fused projections around attention (kernels/gemv.py).

At decode batch sizes a block is a stream of weight reads, and what costs beyond them is the small kernels
between the GEMMs. The eager chain runs seven kernels plus cuBLAS's two split-K reduces; this path runs
- at one token (plain decoding of one request, one request's draft steps), four: norm + qkv, o_proj + residual
  add, norm + gate_up + SiLU-and-mul, down + residual add;
- from 2 to 64 tokens (batched decode, verify, draft steps of a batch), six: the norms are kernels of their own,
  since a norm prologue costs the tensor-core projections more than a norm kernel does (on the H100 a Llama-3.1-8B
  block takes 163 us against cuBLAS's 175 at 4 and 16 tokens; BENCHMARKS.md,
  scripts/bench_decode_layer.py --sweep).
The qkv projection also rotates q and k and writes k and v into the paged cache (RoPE and the K/V store are no
kernels of their own), and the backend attends over the cache (`attend_stored`).
The residual adds happen in the projections, so the block returns its output stream whole
(`LayerOutput.residual` is None). The eager layers stay the reference; tests compare the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from specbench.models import fused_kernels
from specbench.models.layers import GatedMLP, RMSNorm

if TYPE_CHECKING:
    from specbench.attention.backend import AttentionBackend
    from specbench.attention.metadata import AttentionMetadata
    from specbench.kv.kv_cache import KVCache
    from specbench.models.llama import SelfAttention


class Block(Protocol):
    """What this path reads of a block: DecoderLayer, and the EAGLE-3 head's first layer."""

    input_layernorm: nn.Module  # RMSNorm, or nn.Identity in EAGLE-1's first layer (the stream is projected as is)
    self_attn: SelfAttention
    post_attention_layernorm: RMSNorm
    mlp: GatedMLP


def applies(layer: Block, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Depends on shapes, dtypes and the fused-kernel policy only (never on values): a CUDA graph captures one path."""
    attn = layer.self_attn
    return (
        x.shape[0] >= 1
        and isinstance(layer.input_layernorm, (RMSNorm, nn.Identity))
        and isinstance(layer.mlp, GatedMLP)  # a MoE layer's experts take their own grouped kernels
        and layer.mlp.activation == "silu"
        and attn.qkv_proj.bias is None
        and attn.o_proj.bias is None
        and x.dtype == attn.qkv_proj.weight.dtype
        and fused_kernels.use_fused(attn.fused_policy, x)
        and x.shape[0] <= fused_kernels.gemv_max_tokens()
    )


def fused_path(layer: Block, num_tokens: int) -> str:
    """The execution path (execution_paths.py) `block` takes where `applies` holds: with RoPE and the K/V store in the
    qkv projection, or attention from the plain qkv output."""
    return "proj.rope_store" if _stores_rope(layer.self_attn, num_tokens) else "proj.fused"


def eager_path(layer: Block, x: torch.Tensor) -> str:  # x: [num_tokens, hidden]
    """The execution path of the eager layers on x: the Triton norm, RoPE and SiLU kernels, or torch throughout."""
    return "layers.fused_ops" if fused_kernels.use_fused(layer.self_attn.fused_policy, x) else "layers.torch"


def _stores_rope(attn: SelfAttention, num_tokens: int) -> bool:
    # Qwen3's q/k norm sits between the projection and RoPE: no RoPE in the projection then.
    return attn.q_norm is None and fused_kernels.rope_store_fits(num_tokens, attn.head_dim)


def project_and_attend(
    attn: SelfAttention,
    x: torch.Tensor,  # [num_tokens, in_size] qkv_proj's input (before the norm when norm_weight is given)
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    kv_cache: KVCache,
    md: AttentionMetadata,
    backend: AttentionBackend,
    norm_weight: torch.Tensor | None = None,  # [in_size]: the norm rides in the projection
    eps: float = 0.0,
    norm_split: int = 0,  # > 0: two norms side by side (kernels/gemv.py), EAGLE-3's [embedding, hidden] input
) -> torch.Tensor:  # [num_tokens, q_size] attention output, o_proj's input
    """qkv (+ RoPE and the K/V store where they fit), then attention."""
    num_tokens = x.shape[0]
    if _stores_rope(attn, num_tokens):
        # Two kernels fewer: q comes back rotated, k and v are already in the cache.
        q = fused_kernels.gemv_rope_store(
            x, attn.qkv_proj.weight, cos_sin, md.slot_mapping, kv_cache.k[attn.layer_idx],
            kv_cache.v[attn.layer_idx], attn.num_heads, attn.num_kv_heads, norm_weight=norm_weight, eps=eps,
            norm_split=norm_split)
        out = backend.attend_stored(attn.layer_idx, q.view(num_tokens, attn.num_heads, attn.head_dim), kv_cache, md,
                                    attn.score_params())
        return out.reshape(num_tokens, attn.q_size)
    qkv = fused_kernels.gemv(x, attn.qkv_proj.weight, norm_weight=norm_weight, eps=eps, norm_split=norm_split)
    return attn.attend(qkv, cos_sin, kv_cache, md, backend)


def block(
    layer: Block,
    hidden: torch.Tensor,  # [num_tokens, hidden] the previous block's output, or the stream itself (first block)
    residual: torch.Tensor | None,  # [num_tokens, hidden] the stream before `hidden`; None: `hidden` is the stream
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    kv_cache: KVCache,
    md: AttentionMetadata,
    backend: AttentionBackend,
) -> tuple[torch.Tensor, torch.Tensor]:  # (stream leaving the block, stream entering it), each [num_tokens, hidden]
    """norm + qkv (+ RoPE and the K/V store), attention, then `block_tail`."""
    norm = layer.input_layernorm
    norm_weight, eps = None, 0.0
    if not isinstance(norm, RMSNorm):  # EAGLE-1's first layer projects the stream as is
        x = stream = hidden if residual is None else residual + hidden
    elif hidden.shape[0] == 1:  # the norm rides in the projection
        x = stream = hidden if residual is None else residual + hidden
        norm_weight, eps = norm.weight, norm.eps
    else:
        x, stream = norm.add_and_norm(hidden, residual)
    attn_out = project_and_attend(layer.self_attn, x, cos_sin, kv_cache, md, backend, norm_weight, eps)
    return block_tail(layer, attn_out, stream), stream


def block_tail(
    layer: Block,
    attn: torch.Tensor,  # [num_tokens, q_size] attention output, before o_proj
    layer_input: torch.Tensor,  # [num_tokens, hidden] the stream entering the block
) -> torch.Tensor:  # [num_tokens, hidden] the stream leaving the block
    """o_proj + residual, then the gated MLP with its norm and residual."""
    stream = fused_kernels.gemv(attn, layer.self_attn.o_proj.weight, residual=layer_input)
    norm, gate_up_weight = layer.post_attention_layernorm, layer.mlp.gate_up_proj.weight
    if attn.shape[0] == 1:
        act = fused_kernels.gemv(stream, gate_up_weight, norm_weight=norm.weight, eps=norm.eps, is_gated=True)
    else:
        act = fused_kernels.gemv(norm(stream), gate_up_weight, is_gated=True)
    return fused_kernels.gemv(act, layer.mlp.down_proj.weight, residual=stream)

"""A decoder block at one token as four fused projections around attention (kernels/gemv.py).

At one token a block is a stream of weight reads, and what costs beyond them is the small kernels between the
GEMMs. This path runs norm + qkv, o_proj + residual add, norm + gate_up + SiLU-and-mul, and down + residual
add: four kernels where the eager chain runs seven plus cuBLAS's two split-K reduces. The residual adds happen
in the projections, so the block returns its output stream whole (`LayerOutput.residual` is None).

Only one-token batches take it (plain decoding of one request, one request's draft steps): on the H100 the
fused kernels are no faster than cuBLAS at 2 tokens and slower from 4 up (BENCHMARKS.md,
scripts/bench_decode_layer.py --sweep).
The eager layers stay the reference; tests compare the two.
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

MAX_TOKENS = 1


class Block(Protocol):
    """What this path reads of a block: DecoderLayer, and the EAGLE-3 head's first layer."""

    input_layernorm: nn.Module  # RMSNorm, or nn.Identity in EAGLE-1's first layer (then this path is not taken)
    self_attn: SelfAttention
    post_attention_layernorm: RMSNorm
    mlp: GatedMLP


def applies(layer: Block, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Depends on shapes, dtypes and the fused-kernel policy only (never on values): a CUDA graph captures one path."""
    attn = layer.self_attn
    return (
        1 <= x.shape[0] <= MAX_TOKENS
        and isinstance(layer.input_layernorm, RMSNorm)
        and attn.qkv_proj.bias is None
        and attn.o_proj.bias is None
        and x.dtype == attn.qkv_proj.weight.dtype
        and fused_kernels.use_fused(x)
    )


def block(
    layer: Block,
    stream: torch.Tensor,  # [num_tokens, hidden] the residual stream entering the block
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    kv_cache: KVCache,
    md: AttentionMetadata,
    backend: AttentionBackend,
) -> torch.Tensor:  # [num_tokens, hidden] the stream leaving the block
    """norm + qkv, attention, then `block_tail`: four kernels around attention."""
    norm = layer.input_layernorm
    qkv = fused_kernels.gemv(stream, layer.self_attn.qkv_proj.weight, norm_weight=norm.weight, eps=norm.eps)
    return block_tail(layer, layer.self_attn.attend(qkv, cos_sin, kv_cache, md, backend), stream)


def block_tail(
    layer: Block,
    attn: torch.Tensor,  # [num_tokens, q_size] attention output, before o_proj
    layer_input: torch.Tensor,  # [num_tokens, hidden] the stream entering the block
) -> torch.Tensor:  # [num_tokens, hidden] the stream leaving the block
    """o_proj + residual, then the gated MLP with its norm and residual: three kernels."""
    stream = fused_kernels.gemv(attn, layer.self_attn.o_proj.weight, residual=layer_input)
    norm, mlp = layer.post_attention_layernorm, layer.mlp
    act = fused_kernels.gemv(stream, mlp.gate_up_proj.weight, norm_weight=norm.weight, eps=norm.eps, is_gated=True)
    return fused_kernels.gemv(act, mlp.down_proj.weight, residual=stream)

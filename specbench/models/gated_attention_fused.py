"""Qwen3-Next's gated full attention (models/qwen3_next.py GatedSelfAttention) at 1 to 64 tokens as fused kernels.

The eager chain runs about twenty kernels a layer at one token: three cuBLAS projections (split-K, with reduces),
the q and k norms over strided views and their copies, the partial RoPE's slices and concatenations, the K/V store,
attention, the sigmoid, the product and o_proj. Here four:
- the q/gate, k and v projection as one gemv (kernels/gemv.py) over the fused qkv_proj weight,
- the q and k (1 + weight) norms, the partial RoPE and the K/V store in one kernel (kernels/qk_norm_rope.py), the
  output gates left where the projection wrote them,
- attention over the paged cache (the backend's `attend_stored`),
- o_proj with the gate's sigmoid and product in its prologue (kernels/gemv.py InputGate).
Roundings are the eager chain's; the sums' fp32 order differs. The eager layer stays the reference; tests compare
the two (tests/models/test_gated_attention_fused.py) and the selftest's hybrid target reaches this path on CUDA.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from specbench.attention.score_params import PLAIN
from specbench.models import fused_kernels, pending_fusions

if TYPE_CHECKING:
    from specbench.attention.backend import AttentionBackend
    from specbench.attention.metadata import AttentionMetadata
    from specbench.kv.kv_cache import KVCache

PATH = "hybrid.gated_attention_fused"  # execution_paths.py


class GatedSelfAttention(Protocol):
    """What this path reads of the layer: models/qwen3_next.py's GatedSelfAttention (declared here, since that
    module runs this path and imports this one)."""

    kv_layer: int
    num_heads: int
    head_dim: int
    qkv_proj: nn.Linear  # rows: per head [q | gate], then k, then v
    o_proj: nn.Linear
    fused_policy: str  # fused_kernels.UsesFusedKernels

    def fused_qk_store(self, qkv: torch.Tensor, cos_sin: torch.Tensor, kv_cache: KVCache,
                       md: AttentionMetadata) -> torch.Tensor: ...

    def gated_output(self, attn_out: torch.Tensor, qkv: torch.Tensor) -> torch.Tensor: ...


def applies(attn: GatedSelfAttention, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Shapes, dtypes and the fused-kernel policy only (never values): a CUDA graph captures one path. Opt-in until
    a GPU run (models/pending_fusions.py)."""
    return (pending_fusions.is_on() and 1 <= x.shape[0] and attn.qkv_proj.bias is None and attn.o_proj.bias is None
            and x.dtype == attn.qkv_proj.weight.dtype and fused_kernels.use_fused(attn.fused_policy, x)
            and x.shape[0] <= fused_kernels.gemv_max_tokens())


def forward(
    attn: GatedSelfAttention,
    x: torch.Tensor,  # [num_tokens, hidden], the input norm's output
    cos_sin: torch.Tensor,  # [num_tokens, 2, rotary_dim] fp32
    kv_cache: KVCache,
    md: AttentionMetadata,  # the attention layers' (no per-layer kinds)
    backend: AttentionBackend,
) -> torch.Tensor:  # [num_tokens, hidden], o_proj's output
    num_tokens = x.shape[0]
    qkv = fused_kernels.gemv(x, attn.qkv_proj.weight)  # [num_tokens, 2 * q_size + 2 * kv_size]
    q = attn.fused_qk_store(qkv, cos_sin, kv_cache, md)  # [num_tokens, q_size]
    out = backend.attend_stored(attn.kv_layer, q.view(num_tokens, attn.num_heads, attn.head_dim), kv_cache, md,
                                PLAIN)
    return attn.gated_output(out.reshape(num_tokens, -1), qkv)

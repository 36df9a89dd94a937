"""A decoder block at 1 to 64 tokens as fused projections around attention (kernels/gemv.py).

A decode step at small batch size reads each weight matrix once and does little math, so what costs beyond the
reads is the small kernels between the GEMMs. The eager chain runs seven kernels plus cuBLAS's two split-K reduces;
this path runs
- at one token (plain decoding of one request, one request's draft steps), four: norm + qkv, o_proj + residual
  add, norm + gate_up + SiLU-and-mul, down + residual add;
- from 2 to 64 tokens (batched decode, verify, draft steps of a batch), six: the norms are kernels of their own,
  since a norm prologue costs the tensor-core projections more than a norm kernel does (on the H100 a Llama-3.1-8B
  block takes 163 us against cuBLAS's 175 at 4 and 16 tokens; BENCHMARKS.md,
  scripts/bench_decode_layer.py --sweep).
The qkv projection also rotates q and k and writes k and v into the paged cache (RoPE and the K/V store are no
kernels of their own), and the backend attends over the cache (`attend_stored`). Qwen3's q/k norm sits between the
projection and RoPE: there one kernel after the projection normalizes, rotates and stores (kernels/qk_norm_rope.py)
instead of four. Projection biases (gpt-oss, GLM-4.5) are added in the projections' epilogues (MoE layers; `applies`
says why dense biased blocks stay eager).

The attention half does not depend on the MLP: a mixture-of-experts layer takes it too, and its MLP half is the MoE
forward (models/moe_forward.py: the routing and expert kernels) on the post-attention norm, leaving the last residual
add to the next block's norm as the eager layers do. A dense gated MLP runs as two more projections, whose residual
adds happen in the down projection, so the block returns its output stream whole (`LayerOutput.residual` is None).
The eager layers stay the reference; tests compare the two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from torch import nn

from specbench.attention.score_invariants import check_score_params
from specbench.models import fused_kernels
from specbench.models.layer_output import LayerOutput
from specbench.models.layers import GatedMLP, RMSNorm
from specbench.models.moe import MoeMLP
from specbench.models.moe_forward import normed_moe_forward

if TYPE_CHECKING:
    from specbench.attention.backend import AttentionBackend
    from specbench.attention.metadata import AttentionMetadata
    from specbench.attention.score_params import ScoreParams
    from specbench.kv.kv_cache import KVCache


class AttentionLayer(Protocol):
    """What this path reads of a block's attention: llama.SelfAttention (declared here, since llama.py runs this
    path and imports this module)."""

    layer_idx: int  # index of this layer's K/V in the KVCache
    num_heads: int
    num_kv_heads: int
    head_dim: int
    q_size: int
    qkv_proj: nn.Linear  # rows: [q; k; v]
    o_proj: nn.Linear
    q_norm: nn.Module | None  # RMSNorm (Qwen3) or OffsetRMSNorm (Gemma-3); None: no q/k norm
    k_norm: nn.Module | None
    fused_policy: str  # fused_kernels.UsesFusedKernels

    def score_params(self) -> ScoreParams: ...

    def attend(self, qkv: torch.Tensor, cos_sin: torch.Tensor, kv_cache: KVCache, md: AttentionMetadata,
               backend: AttentionBackend) -> torch.Tensor: ...


class Block(Protocol):
    """What this path reads of a block: DecoderLayer, and the EAGLE-3 head's first layer."""

    input_layernorm: nn.Module  # RMSNorm, or nn.Identity in EAGLE-1's first layer (the stream is projected as is)
    self_attn: AttentionLayer
    post_attention_layernorm: RMSNorm
    mlp: GatedMLP | MoeMLP


def applies(layer: Block, x: torch.Tensor) -> bool:  # x: [num_tokens, hidden]
    """Depends on shapes, dtypes and the fused-kernel policy only (never on values): a CUDA graph captures one path."""
    attn = layer.self_attn
    return (
        x.shape[0] >= 1
        and isinstance(layer.input_layernorm, (RMSNorm, nn.Identity))
        # A MoE layer's experts take their own kernels after this path's attention half (models/moe_forward.py),
        # whatever its projections' biases (gpt-oss, GLM-4.5). A dense block with biased projections (Qwen2) keeps
        # the eager chain: the kernels take its biases too, but the selftest's "biased" tiny variant is what
        # reaches layers.fused_ops on CUDA (selftest/tiny.py); it needs another route there before this can go.
        and (isinstance(layer.mlp, MoeMLP) or (_is_fused_mlp(layer.mlp) and not _has_bias(attn)))
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


def _is_fused_mlp(mlp: nn.Module) -> bool:
    """A dense MLP that runs as gate_up + SiLU-and-mul and down gemvs."""
    return isinstance(mlp, GatedMLP) and mlp.activation == "silu"


def _has_bias(attn: AttentionLayer) -> bool:
    return attn.qkv_proj.bias is not None or attn.o_proj.bias is not None


def _stores_rope(attn: AttentionLayer, num_tokens: int) -> bool:
    # Qwen3's q/k norm sits between the projection and RoPE: no RoPE in the projection then.
    return attn.q_norm is None and fused_kernels.rope_store_fits(num_tokens, attn.head_dim)


def _norms_qk(attn: AttentionLayer) -> bool:
    # Plain RMSNorm over each head (Qwen3); Gemma's offset norms take the eager chain.
    return type(attn.q_norm) is RMSNorm and type(attn.k_norm) is RMSNorm and attn.head_dim % 2 == 0


def project_and_attend(
    attn: AttentionLayer,
    x: torch.Tensor,  # [num_tokens, in_size] qkv_proj's input (before the norm when norm_weight is given)
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    kv_cache: KVCache,
    md: AttentionMetadata,
    backend: AttentionBackend,
    norm_weight: torch.Tensor | None = None,  # [in_size]: the norm rides in the projection
    eps: float = 0.0,
    norm_split: int = 0,  # > 0: two norms side by side (kernels/gemv.py), EAGLE-3's [embedding, hidden] input
) -> torch.Tensor:  # [num_tokens, q_size] attention output, o_proj's input
    """qkv (+ bias) (+ RoPE and the K/V store where they fit, or after Qwen3's q/k norm in one kernel), then
    attention."""
    num_tokens = x.shape[0]
    k_cache, v_cache = kv_cache.k[attn.layer_idx], kv_cache.v[attn.layer_idx]
    bias = attn.qkv_proj.bias
    if _stores_rope(attn, num_tokens):
        # Two kernels fewer: q comes back rotated, k and v are already in the cache.
        q = fused_kernels.gemv_rope_store(
            x, attn.qkv_proj.weight, cos_sin, md.slot_mapping, k_cache, v_cache, attn.num_heads, attn.num_kv_heads,
            norm_weight=norm_weight, eps=eps, norm_split=norm_split, bias=bias)
    else:
        qkv = fused_kernels.gemv(x, attn.qkv_proj.weight, norm_weight=norm_weight, eps=eps, norm_split=norm_split,
                                 bias=bias)
        if not _norms_qk(attn):
            return attn.attend(qkv, cos_sin, kv_cache, md, backend)
        # Three kernels fewer: the q norm, the k norm, RoPE and the K/V store are one.
        q = fused_kernels.qk_norm_rope_store(qkv, attn.q_norm.weight, attn.k_norm.weight, attn.q_norm.eps, cos_sin,
                                             md.slot_mapping, k_cache, v_cache, attn.num_heads, attn.num_kv_heads)
    q = q.view(num_tokens, attn.num_heads, attn.head_dim)
    score = attn.score_params()
    out = backend.attend_stored(attn.layer_idx, q, kv_cache, md, score)
    if backend.check_invariants and not score.is_plain:  # as SelfAttention.attend: sinks, soft-caps, scales
        check_score_params(attn.layer_idx, q, out, kv_cache, md, score)
    return out.reshape(num_tokens, attn.q_size)


def block(
    layer: Block,
    hidden: torch.Tensor,  # [num_tokens, hidden] the previous block's output, or the stream itself (first block)
    residual: torch.Tensor | None,  # [num_tokens, hidden] the stream before `hidden`; None: `hidden` is the stream
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    kv_cache: KVCache,
    md: AttentionMetadata,
    backend: AttentionBackend,
) -> LayerOutput:
    """norm + qkv (+ RoPE and the K/V store), attention, o_proj + residual, then the MLP half: the fused gated MLP
    (the stream leaving the block, whole), or the MoE forward (its output, the residual add left to the next norm)."""
    norm = layer.input_layernorm
    norm_weight, eps = None, 0.0
    if not isinstance(norm, RMSNorm):  # EAGLE-1's first layer projects the stream as is
        x = stream = hidden if residual is None else residual + hidden
    elif hidden.shape[0] == 1 and residual is None:  # the norm rides in the projection
        x = stream = hidden
        norm_weight, eps = norm.weight, norm.eps
    else:
        # From two tokens; or at one after a block that left its residual add undone (a MoE block): the add costs a
        # kernel either way, and the add+norm kernel spares the projection its RMS pass.
        x, stream = norm.add_and_norm(hidden, residual)
    attn_out = project_and_attend(layer.self_attn, x, cos_sin, kv_cache, md, backend, norm_weight, eps)
    if isinstance(layer.mlp, MoeMLP):
        after_attn = output_projection(layer, attn_out, stream)
        # The post-attention norm rides in the routing kernel where it can (moe_forward.py normed_moe_forward).
        half = normed_moe_forward(layer.mlp, layer.post_attention_layernorm, after_attn, None, md, backend.paths)
        return LayerOutput(hidden=half.hidden, residual=after_attn, layer_input=stream)
    return LayerOutput(hidden=block_tail(layer, attn_out, stream), residual=None, layer_input=stream)


def output_projection(
    layer: Block,
    attn: torch.Tensor,  # [num_tokens, q_size] attention output, before o_proj
    layer_input: torch.Tensor,  # [num_tokens, hidden] the stream entering the block
) -> torch.Tensor:  # [num_tokens, hidden] the stream after the attention add
    """o_proj (+ bias) + residual in one kernel."""
    o_proj = layer.self_attn.o_proj
    return fused_kernels.gemv(attn, o_proj.weight, residual=layer_input, bias=o_proj.bias)


def block_tail(
    layer: Block,
    attn: torch.Tensor,  # [num_tokens, q_size] attention output, before o_proj
    layer_input: torch.Tensor,  # [num_tokens, hidden] the stream entering the block
) -> torch.Tensor:  # [num_tokens, hidden] the stream leaving the block
    """o_proj + residual, then the gated MLP with its norm and residual (a dense SiLU MLP: `applies`)."""
    stream = output_projection(layer, attn, layer_input)
    norm, gate_up_weight = layer.post_attention_layernorm, layer.mlp.gate_up_proj.weight
    if attn.shape[0] == 1:
        act = fused_kernels.gemv(stream, gate_up_weight, norm_weight=norm.weight, eps=norm.eps, is_gated=True)
    else:
        act = fused_kernels.gemv(norm(stream), gate_up_weight, is_gated=True)
    return fused_kernels.gemv(act, layer.mlp.down_proj.weight, residual=stream)

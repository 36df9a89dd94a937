"""Qwen3's and Qwen3-Next's q/k norm, RoPE and the paged K/V store after the qkv projection, in one launch.

Between Qwen3's qkv projection and attention the eager chain runs four kernels: RMSNorm over each q head, RMSNorm
over each k head, RoPE on q and k, and the K/V store. Each reads and writes a few kilobytes, so each costs its launch
and not its bytes. Here one program per (token, head) of the qkv output normalizes and rotates a q head into the
output, normalizes, rotates and stores a k head, or stores a v head, rounding where the eager kernels round
(kernels/rms_norm.py, kernels/rope.py, kernels/kv_store.py): the result differs from theirs only by the order of the
fp32 sum of squares. Qwen3-Next's gated attention (models/qwen3_next.py) takes it too: each q head followed by its
output gate in the projection (left there for the output projection's prologue, kernels/gemv.py), (1 + weight)
norms, RoPE over each head's first rotary_dim dims only.

Why not in qkv's epilogue (as kernels/gemv_rope.py does RoPE): the norm needs the whole head's sum of squares, and
a gemv tile holds BLOCK_N dims of a head; making a tile a whole head (128 rows, and its partners) would cut the
projection's programs to one per head (40 at Qwen3-30B-A3B's 32 + 4 + 4 heads on 132 SMs), the weight stream of a
21 MB projection from 40 SMs. A launch of its own costs about what one of the four did (the eager RoPE kernel: 2 us
on the H100 at one token) and keeps the projection at full width.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, next_pow2, slot_strides


@triton.jit
def _qk_norm_rope_store_kernel(
    qkv_ptr,  # [num_tokens, NUM_Q_HEADS * Q_HEAD_STRIDE + 2 * NUM_KV_HEADS * HEAD_DIM], rows q heads, k heads, v heads
    q_norm_ptr,  # [HEAD_DIM]
    k_norm_ptr,  # [HEAD_DIM]
    cos_sin_ptr,  # [num_tokens, 2, ROTARY_DIM] fp32, each token's cos row then sin row
    slot_mapping_ptr,  # [num_tokens] int64, negative = padding (nothing stored)
    out_ptr,  # [num_tokens, NUM_Q_HEADS * HEAD_DIM]: normalized, rotated q
    k_cache_ptr,  # [num_slots, NUM_KV_HEADS, HEAD_DIM]
    v_cache_ptr,  # [num_slots, NUM_KV_HEADS, HEAD_DIM]
    eps,
    stride_qkv, stride_out, stride_cs_token, stride_cs_kind,
    stride_kc_slot, stride_kc_head, stride_vc_slot, stride_vc_head,
    NUM_Q_HEADS: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    Q_HEAD_STRIDE: tl.constexpr,  # HEAD_DIM; 2 * HEAD_DIM where each q head is followed by its output gate
    ROTARY_DIM: tl.constexpr,  # dims [0, ROTARY_DIM) rotate (pairs i, i + ROTARY_DIM / 2); the rest pass through
    IS_OFFSET: tl.constexpr,  # (1 + weight) in fp32, rounded once (Qwen3-Next); else Llama's two roundings
    BLOCK_HALF: tl.constexpr,  # >= ROTARY_DIM / 2
    BLOCK_PASS: tl.constexpr,  # >= HEAD_DIM - ROTARY_DIM (at least 1)
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    HALF: tl.constexpr = ROTARY_DIM // 2
    dtype = qkv_ptr.dtype.element_ty
    i = tl.arange(0, BLOCK_HALF)
    is_i = i < HALF
    p = tl.arange(0, BLOCK_PASS)
    is_p = p < HEAD_DIM - ROTARY_DIM
    if head < NUM_Q_HEADS:
        src = qkv_ptr + token * stride_qkv + head * Q_HEAD_STRIDE
    else:
        src = qkv_ptr + token * stride_qkv + NUM_Q_HEADS * Q_HEAD_STRIDE + (head - NUM_Q_HEADS) * HEAD_DIM
    # A head as its rotated halves x1, x2 and its pass-through dims x3 (none under full RoPE).
    x1 = tl.load(src + i, mask=is_i, other=0.0)
    x2 = tl.load(src + HALF + i, mask=is_i, other=0.0)
    x3 = tl.load(src + ROTARY_DIM + p, mask=is_p, other=0.0)
    if head >= NUM_Q_HEADS + NUM_KV_HEADS:  # v: stored as it is
        slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
        if slot >= 0:
            dst = v_cache_ptr + slot * stride_vc_slot + (head - NUM_Q_HEADS - NUM_KV_HEADS) * stride_vc_head
            tl.store(dst + i, x1.to(v_cache_ptr.dtype.element_ty), mask=is_i)
            tl.store(dst + HALF + i, x2.to(v_cache_ptr.dtype.element_ty), mask=is_i)
            tl.store(dst + ROTARY_DIM + p, x3.to(v_cache_ptr.dtype.element_ty), mask=is_p)
    else:
        if head < NUM_Q_HEADS:
            norm_ptr = q_norm_ptr
        else:
            norm_ptr = k_norm_ptr
        w1 = tl.load(norm_ptr + i, mask=is_i, other=0.0).to(tl.float32)
        w2 = tl.load(norm_ptr + HALF + i, mask=is_i, other=0.0).to(tl.float32)
        w3 = tl.load(norm_ptr + ROTARY_DIM + p, mask=is_p, other=0.0).to(tl.float32)
        # RMSNorm as kernels/rms_norm.py: Llama's normalized head rounded, times the weight, rounded; the offset
        # form's (1 + weight) product in fp32, rounded once.
        # new names for the fp32 copies: a compiled Triton `if` may not change a variable's type (the interpreter may)
        f1 = x1.to(tl.float32)
        f2 = x2.to(tl.float32)
        f3 = x3.to(tl.float32)
        sum_sq = tl.sum(f1 * f1, 0) + tl.sum(f2 * f2, 0) + tl.sum(f3 * f3, 0)
        inv_rms = tl.math.rsqrt(tl.math.div_rn(sum_sq, HEAD_DIM * 1.0) + eps)
        if IS_OFFSET:
            n1 = ((1.0 + w1) * (f1 * inv_rms)).to(dtype).to(tl.float32)
            n2 = ((1.0 + w2) * (f2 * inv_rms)).to(dtype).to(tl.float32)
            n3 = ((1.0 + w3) * (f3 * inv_rms)).to(dtype)
        else:
            n1 = (w1 * (f1 * inv_rms).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
            n2 = (w2 * (f2 * inv_rms).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
            n3 = (w3 * (f3 * inv_rms).to(dtype).to(tl.float32)).to(dtype)
        # RoPE as kernels/rope.py: the fp32 table cast to the activation dtype, each product rounded, then the sum.
        row = cos_sin_ptr + token * stride_cs_token + i
        cos1 = tl.load(row, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        cos2 = tl.load(row + HALF, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        sin1 = tl.load(row + stride_cs_kind, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        sin2 = tl.load(row + stride_cs_kind + HALF, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        r1 = ((n1 * cos1).to(dtype).to(tl.float32) + (-n2 * sin1).to(dtype).to(tl.float32)).to(dtype)
        r2 = ((n2 * cos2).to(dtype).to(tl.float32) + (n1 * sin2).to(dtype).to(tl.float32)).to(dtype)
        if head < NUM_Q_HEADS:
            dst = out_ptr + token * stride_out + head * HEAD_DIM
            tl.store(dst + i, r1, mask=is_i)
            tl.store(dst + HALF + i, r2, mask=is_i)
            tl.store(dst + ROTARY_DIM + p, n3, mask=is_p)
        else:
            slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
            if slot >= 0:
                dst = k_cache_ptr + slot * stride_kc_slot + (head - NUM_Q_HEADS) * stride_kc_head
                tl.store(dst + i, r1.to(k_cache_ptr.dtype.element_ty), mask=is_i)
                tl.store(dst + HALF + i, r2.to(k_cache_ptr.dtype.element_ty), mask=is_i)
                tl.store(dst + ROTARY_DIM + p, n3.to(k_cache_ptr.dtype.element_ty), mask=is_p)


def qk_norm_rope_store(
    qkv: torch.Tensor,  # [num_tokens, (num_q_heads + 2 * num_kv_heads) * head_dim], the qkv projection's output
    q_norm_weight: torch.Tensor,  # [head_dim]
    k_norm_weight: torch.Tensor,  # [head_dim]
    eps: float,
    cos_sin: torch.Tensor,  # [num_tokens, 2, head_dim] fp32
    slot_mapping: torch.Tensor,  # [num_tokens] int64, negative = padding
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    num_q_heads: int,
    num_kv_heads: int,
    *,
    is_q_gated: bool = False,  # each q head followed by its output gate's head_dim (Qwen3-Next), left in qkv
    rotary_dim: int | None = None,  # partial RoPE over each head's first rotary_dim dims (cos_sin that wide)
    is_offset: bool = False,  # the norms' (1 + weight) form (layers.OffsetRMSNorm)
) -> torch.Tensor:  # [num_tokens, num_q_heads * head_dim]: rope(q_norm(q)); rope(k_norm(k)) and v are in the caches
    """q_norm + k_norm + RoPE + the K/V store in one launch."""
    check_runnable(_qk_norm_rope_store_kernel, qkv)
    num_tokens = qkv.shape[0]
    head_dim = k_cache.shape[-1]
    rotary_dim = rotary_dim or head_dim
    num_heads = num_q_heads + 2 * num_kv_heads
    width = (num_q_heads * (2 if is_q_gated else 1) + 2 * num_kv_heads) * head_dim
    if qkv.shape[1] != width or qkv.stride(-1) != 1 or rotary_dim % 2 or not 0 < rotary_dim <= head_dim:
        raise ValueError(f"qk_norm_rope_store: qkv {tuple(qkv.shape)} is not a row-major [{num_tokens}, {width}] "
                         f"with an even rotary width ({rotary_dim}) of at most head_dim ({head_dim})")
    if tuple(cos_sin.shape) != (num_tokens, 2, rotary_dim) or cos_sin.stride(-1) != 1:
        raise ValueError(f"qk_norm_rope_store: cos_sin {tuple(cos_sin.shape)} is not [{num_tokens}, 2, {rotary_dim}]")
    if tuple(slot_mapping.shape) != (num_tokens,):
        raise ValueError(f"qk_norm_rope_store: slot_mapping {tuple(slot_mapping.shape)} is not [{num_tokens}]")
    if q_norm_weight.shape != (head_dim,) or k_norm_weight.shape != (head_dim,):
        raise ValueError(f"qk_norm_rope_store: q/k norm weights must be [{head_dim}]")
    out = torch.empty((num_tokens, num_q_heads * head_dim), dtype=qkv.dtype, device=qkv.device)
    if num_tokens == 0:
        return out
    _qk_norm_rope_store_kernel[(num_tokens, num_heads)](
        qkv, q_norm_weight, k_norm_weight, cos_sin, slot_mapping, out, k_cache, v_cache, eps,
        qkv.stride(0), out.stride(0), cos_sin.stride(0), cos_sin.stride(1),
        *slot_strides(k_cache), *slot_strides(v_cache),
        NUM_Q_HEADS=num_q_heads, NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim,
        Q_HEAD_STRIDE=head_dim * (2 if is_q_gated else 1), ROTARY_DIM=rotary_dim, IS_OFFSET=is_offset,
        BLOCK_HALF=next_pow2(rotary_dim // 2), BLOCK_PASS=next_pow2(max(head_dim - rotary_dim, 1)),
        num_warps=1 if head_dim <= 256 else 4,
        enable_fp_fusion=False,  # an fma would round once where the eager mul, mul, add round three times
        **launch_overlap(qkv),
    )
    return out

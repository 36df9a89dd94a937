"""Qwen3's q/k norm, RoPE and the paged K/V store after the qkv projection, in one launch.

Between Qwen3's qkv projection and attention the eager chain runs four kernels: RMSNorm over each q head, RMSNorm
over each k head, RoPE on q and k, and the K/V store. Each reads and writes a few kilobytes, so each costs its launch
and not its bytes. Here one program per (token, head) of the qkv output normalizes and rotates a q head into the
output, normalizes, rotates and stores a k head, or stores a v head, rounding where the eager kernels round
(kernels/rms_norm.py, kernels/rope.py, kernels/kv_store.py): the result differs from theirs only by the order of the
fp32 sum of squares.

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
    qkv_ptr,  # [num_tokens, (NUM_Q_HEADS + 2 * NUM_KV_HEADS) * HEAD_DIM], rows q heads, k heads, v heads
    q_norm_ptr,  # [HEAD_DIM]
    k_norm_ptr,  # [HEAD_DIM]
    cos_sin_ptr,  # [num_tokens, 2, HEAD_DIM] fp32, each token's cos row then sin row
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
    BLOCK_HALF: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    HALF: tl.constexpr = HEAD_DIM // 2
    dtype = qkv_ptr.dtype.element_ty
    i = tl.arange(0, BLOCK_HALF)
    is_i = i < HALF
    src = qkv_ptr + token * stride_qkv + head * HEAD_DIM + i
    x1 = tl.load(src, mask=is_i, other=0.0)
    x2 = tl.load(src + HALF, mask=is_i, other=0.0)
    if head >= NUM_Q_HEADS + NUM_KV_HEADS:  # v: stored as it is
        slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
        if slot >= 0:
            dst = v_cache_ptr + slot * stride_vc_slot + (head - NUM_Q_HEADS - NUM_KV_HEADS) * stride_vc_head + i
            tl.store(dst, x1.to(v_cache_ptr.dtype.element_ty), mask=is_i)
            tl.store(dst + HALF, x2.to(v_cache_ptr.dtype.element_ty), mask=is_i)
    else:
        if head < NUM_Q_HEADS:
            w1 = tl.load(q_norm_ptr + i, mask=is_i, other=0.0).to(tl.float32)
            w2 = tl.load(q_norm_ptr + HALF + i, mask=is_i, other=0.0).to(tl.float32)
        else:
            w1 = tl.load(k_norm_ptr + i, mask=is_i, other=0.0).to(tl.float32)
            w2 = tl.load(k_norm_ptr + HALF + i, mask=is_i, other=0.0).to(tl.float32)
        # RMSNorm as kernels/rms_norm.py: the normalized head rounded, times the weight, rounded.
        # new names for the fp32 copies: a compiled Triton `if` may not change a variable's type (the interpreter may)
        f1 = x1.to(tl.float32)
        f2 = x2.to(tl.float32)
        inv_rms = tl.math.rsqrt(tl.math.div_rn(tl.sum(f1 * f1, 0) + tl.sum(f2 * f2, 0), HEAD_DIM * 1.0) + eps)
        n1 = (w1 * (f1 * inv_rms).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        n2 = (w2 * (f2 * inv_rms).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
        # RoPE as kernels/rope.py: the fp32 table cast to the activation dtype, each product rounded, then the sum.
        row = cos_sin_ptr + token * stride_cs_token + i
        cos1 = tl.load(row, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        cos2 = tl.load(row + HALF, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        sin1 = tl.load(row + stride_cs_kind, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        sin2 = tl.load(row + stride_cs_kind + HALF, mask=is_i, other=0.0).to(dtype).to(tl.float32)
        r1 = ((n1 * cos1).to(dtype).to(tl.float32) + (-n2 * sin1).to(dtype).to(tl.float32)).to(dtype)
        r2 = ((n2 * cos2).to(dtype).to(tl.float32) + (n1 * sin2).to(dtype).to(tl.float32)).to(dtype)
        if head < NUM_Q_HEADS:
            dst = out_ptr + token * stride_out + head * HEAD_DIM + i
            tl.store(dst, r1, mask=is_i)
            tl.store(dst + HALF, r2, mask=is_i)
        else:
            slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
            if slot >= 0:
                dst = k_cache_ptr + slot * stride_kc_slot + (head - NUM_Q_HEADS) * stride_kc_head + i
                tl.store(dst, r1.to(k_cache_ptr.dtype.element_ty), mask=is_i)
                tl.store(dst + HALF, r2.to(k_cache_ptr.dtype.element_ty), mask=is_i)


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
) -> torch.Tensor:  # [num_tokens, num_q_heads * head_dim]: rope(q_norm(q)); rope(k_norm(k)) and v are in the caches
    """q_norm + k_norm + RoPE + the K/V store in one launch."""
    check_runnable(_qk_norm_rope_store_kernel, qkv)
    num_tokens = qkv.shape[0]
    head_dim = k_cache.shape[-1]
    num_heads = num_q_heads + 2 * num_kv_heads
    if qkv.shape[1] != num_heads * head_dim or qkv.stride(-1) != 1 or head_dim % 2:
        raise ValueError(f"qk_norm_rope_store: qkv {tuple(qkv.shape)} is not a row-major [{num_tokens}, "
                         f"{num_heads} x {head_dim}] with an even head_dim")
    if tuple(cos_sin.shape) != (num_tokens, 2, head_dim) or cos_sin.stride(-1) != 1:
        raise ValueError(f"qk_norm_rope_store: cos_sin {tuple(cos_sin.shape)} is not [{num_tokens}, 2, {head_dim}]")
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
        BLOCK_HALF=next_pow2(head_dim // 2),
        num_warps=1 if head_dim <= 256 else 4,
        enable_fp_fusion=False,  # an fma would round once where the eager mul, mul, add round three times
        **launch_overlap(qkv),
    )
    return out

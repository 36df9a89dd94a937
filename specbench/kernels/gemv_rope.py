"""qkv's RoPE and paged K/V store as an epilogue of kernels/gemv.py: what it needs and what it does per tile.

A tile holds BLOCK_N dims of one head's first half and, as a second weight tile, their rotation partners HEAD_DIM / 2
rows below, so rotate-half RoPE needs nothing from another program. q comes back rotated; k (rotated) and v go straight
into the paged cache, so RoPE and the K/V store are no kernels of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from specbench.kernels.runtime import next_pow2


@triton.jit
def rope_store_epilogue(first, second, head, dims, tokens, is_token, out_ptr, stride_out, cos_sin_ptr,
                        stride_cs_token, stride_cs_kind, slot_mapping_ptr, k_cache_ptr, stride_kc_slot,
                        stride_kc_head, v_cache_ptr, stride_vc_slot, stride_vc_head,
                        NUM_Q_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, HALF: tl.constexpr):
    """One tile of qkv (`first`/`second`: [BLOCK_M, BLOCK_N] fp32 sums for dims `dims` and `dims + HALF` of
    `head`, counting q heads, then k heads, then v heads): RoPE on q and k as kernels/rope.py rounds it, q to
    `out`, k and v into the paged cache at each token's slot as kernels/kv_store.py writes them."""
    dtype = out_ptr.dtype.element_ty
    first = first.to(dtype).to(tl.float32)  # the projection's output, rounded as the eager qkv is
    second = second.to(dtype).to(tl.float32)
    mask = is_token[:, None]
    if head < NUM_Q_HEADS + NUM_KV_HEADS:
        row = cos_sin_ptr + tokens.to(tl.int64)[:, None] * stride_cs_token + dims[None, :]
        cos1 = tl.load(row, mask=mask, other=0.0).to(dtype).to(tl.float32)
        cos2 = tl.load(row + HALF, mask=mask, other=0.0).to(dtype).to(tl.float32)
        sin1 = tl.load(row + stride_cs_kind, mask=mask, other=0.0).to(dtype).to(tl.float32)
        sin2 = tl.load(row + stride_cs_kind + HALF, mask=mask, other=0.0).to(dtype).to(tl.float32)
        rotated_first = (first * cos1).to(dtype).to(tl.float32) + (-second * sin1).to(dtype).to(tl.float32)
        second = (second * cos2).to(dtype).to(tl.float32) + (first * sin2).to(dtype).to(tl.float32)
        first = rotated_first
    if head < NUM_Q_HEADS:
        dst = out_ptr + tokens.to(tl.int64)[:, None] * stride_out + head * (2 * HALF) + dims[None, :]
        tl.store(dst, first.to(dtype), mask=mask)
        tl.store(dst + HALF, second.to(dtype), mask=mask)
    else:
        slot = tl.load(slot_mapping_ptr + tokens, mask=is_token, other=-1).to(tl.int64)
        is_slot = (slot >= 0)[:, None]
        if head < NUM_Q_HEADS + NUM_KV_HEADS:
            kv_head = head - NUM_Q_HEADS
            dst = k_cache_ptr + slot[:, None] * stride_kc_slot + kv_head * stride_kc_head + dims[None, :]
            tl.store(dst, first.to(dtype).to(k_cache_ptr.dtype.element_ty), mask=is_slot)
            tl.store(dst + HALF, second.to(dtype).to(k_cache_ptr.dtype.element_ty), mask=is_slot)
        else:
            kv_head = head - NUM_Q_HEADS - NUM_KV_HEADS
            dst = v_cache_ptr + slot[:, None] * stride_vc_slot + kv_head * stride_vc_head + dims[None, :]
            tl.store(dst, first.to(dtype).to(v_cache_ptr.dtype.element_ty), mask=is_slot)
            tl.store(dst + HALF, second.to(dtype).to(v_cache_ptr.dtype.element_ty), mask=is_slot)


@dataclass(frozen=True)
class RopeStore:
    """What qkv's epilogue needs to rotate q and k and write k and v into the paged cache itself."""

    cos_sin: torch.Tensor  # [num_tokens, 2, head_dim] fp32, each token's cos row then sin row
    slot_mapping: torch.Tensor  # [num_tokens] int64, negative = padding (nothing stored)
    k_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim]
    num_q_heads: int
    num_kv_heads: int
    head_dim: int


def rope_store_fits(num_tokens: int, head_dim: int) -> bool:
    """A tile holds a power-of-two run of dims from a head's first half; tensor-core tiles need 16 of them."""
    half = head_dim // 2
    return head_dim % 2 == 0 and half == next_pow2(half) and (num_tokens == 1 or half >= 16)


def check_rope(rope: RopeStore, num_tokens: int, out_features: int, has_other_epilogue: bool) -> None:
    heads = rope.num_q_heads + 2 * rope.num_kv_heads
    if has_other_epilogue or out_features != heads * rope.head_dim:
        raise ValueError(f"gemv rope: a plain qkv weight of {heads} x {rope.head_dim} rows, got {out_features} "
                         f"rows{' with another epilogue' if has_other_epilogue else ''}")
    if not rope_store_fits(num_tokens, rope.head_dim):
        raise ValueError(f"gemv rope: head_dim {rope.head_dim} at {num_tokens} tokens does not fit its tiles")
    if tuple(rope.cos_sin.shape) != (num_tokens, 2, rope.head_dim) or rope.cos_sin.stride(-1) != 1:
        raise ValueError(f"gemv rope: cos_sin {tuple(rope.cos_sin.shape)} is not [{num_tokens}, 2, {rope.head_dim}]")
    if tuple(rope.slot_mapping.shape) != (num_tokens,):
        raise ValueError(f"gemv rope: slot_mapping {tuple(rope.slot_mapping.shape)} is not [{num_tokens}]")

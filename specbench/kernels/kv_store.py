"""Paged KV store: write each token's K and V at its slot of the paged cache."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import check_runnable, next_pow2, slot_strides


@triton.jit
def _store_kv_kernel(
    k_ptr,  # [num_tokens, num_kv_heads, head_dim]
    v_ptr,  # [num_tokens, num_kv_heads, head_dim]
    k_cache_ptr,  # [num_slots, num_kv_heads, head_dim]
    v_cache_ptr,  # [num_slots, num_kv_heads, head_dim]
    slot_mapping_ptr,  # [num_tokens] int64; negative = padding token, skipped
    num_kv_heads,
    stride_k_token, stride_k_head,
    stride_v_token, stride_v_head,
    stride_kc_slot, stride_kc_head,
    stride_vc_slot, stride_vc_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    if slot < 0:
        return
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, BLOCK_D)
    mask = (h < num_kv_heads)[:, None] & (d < HEAD_DIM)[None, :]
    k = tl.load(k_ptr + token * stride_k_token + h[:, None] * stride_k_head + d[None, :], mask=mask)
    v = tl.load(v_ptr + token * stride_v_token + h[:, None] * stride_v_head + d[None, :], mask=mask)
    k_dst = k_cache_ptr + slot * stride_kc_slot + h[:, None] * stride_kc_head + d[None, :]
    v_dst = v_cache_ptr + slot * stride_vc_slot + h[:, None] * stride_vc_head + d[None, :]
    tl.store(k_dst, k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_dst, v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def store_kv(
    k: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim], any token/head strides
    v: torch.Tensor,  # [num_tokens, num_kv_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    slot_mapping: torch.Tensor,  # [num_tokens] int64
) -> None:
    """k_cache.flat[slot_mapping[t]] = k[t] (cast to the cache dtype); same for v."""
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    check_runnable(_store_kv_kernel, k)
    if k.stride(-1) != 1:
        k = k.contiguous()
    if v.stride(-1) != 1:
        v = v.contiguous()
    _store_kv_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        num_kv_heads,
        k.stride(0), k.stride(1),
        v.stride(0), v.stride(1),
        *slot_strides(k_cache),
        *slot_strides(v_cache),
        HEAD_DIM=head_dim,
        BLOCK_H=next_pow2(num_kv_heads),
        BLOCK_D=next_pow2(head_dim), **launch_overlap(k),
    )

"""Paged attention for tree verification: each query row sees the cached prefix and the rows its bitmask lists.

The mask is packed per query token: bit i of word i // 32 says whether the row sees its request's tree row i
(itself, the root, its ancestors). Keys of the prefix are always visible. In a tree verify the tree rows are the
queries; a tree draft step (`num_tree_rows`) has more tree rows than queries, its queries being the last ones
(attention/tree_mask.py). One program per (query block, request, kv head); no key splits: a tree forward reads
every key of its request in one program.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from specbench.kernels.pdl import launch_overlap, wait_for_inputs
from specbench.kernels.runtime import (
    check_runnable,
    is_interpreted,
    next_pow2,
    slot_strides,
)

MASK_BITS = 32


def pack_tree_mask(tree_mask: torch.Tensor) -> torch.Tensor:
    """[num_tokens, max_query_len] bool -> [num_tokens, ceil(max_query_len / 32)] int32, bit i = column i."""
    num_tokens, max_query_len = tree_mask.shape
    num_words = max(1, triton.cdiv(max_query_len, MASK_BITS))
    padded = torch.zeros(num_tokens, num_words * MASK_BITS, dtype=torch.int64, device=tree_mask.device)
    padded[:, :max_query_len] = tree_mask.long()
    weights = torch.pow(2, torch.arange(MASK_BITS, dtype=torch.int64, device=tree_mask.device))  # [32]
    words = (padded.view(num_tokens, num_words, MASK_BITS) * weights).sum(-1)  # [num_tokens, num_words] in [0, 2^32)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # same bits as int32


@triton.jit
def tree_attention_kernel(
    q_ptr,  # [num_tokens, num_heads, head_dim]
    k_cache_ptr,  # [num_slots, num_kv_heads, head_dim]
    v_cache_ptr,  # [num_slots, num_kv_heads, head_dim]
    out_ptr,  # [num_tokens, num_heads, head_dim]
    mask_ptr,  # [num_tokens, num_words] int32, packed tree mask
    query_start_loc_ptr,  # [num_reqs + 1] int32
    seq_lens_ptr,  # [num_reqs] int32
    block_tables_ptr,  # [num_reqs, max_num_blocks] int32
    tree_rows_ptr,  # [num_reqs] int32, tree rows ending each request's keys (HAS_TREE_ROWS; else = its queries)
    scale_log2,
    stride_q_token, stride_q_head,
    stride_k_slot, stride_k_head,
    stride_v_slot, stride_v_head,
    stride_o_token, stride_o_head,
    stride_mask_token,
    stride_block_table,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST_Q: tl.constexpr,
    HAS_TREE_ROWS: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
):
    wait_for_inputs(USE_PDL)
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP
    q_block = tl.program_id(0)
    req = tl.program_id(1)
    kv_head = tl.program_id(2)

    q_start = tl.load(query_start_loc_ptr + req)
    num_query = tl.load(query_start_loc_ptr + req + 1) - q_start
    first_query = q_block * BLOCK_Q
    if first_query >= num_query:
        return
    seq_len = tl.load(seq_lens_ptr + req)
    # A tree draft step's queries are the last of more tree rows (attention/tree_mask.py): mask bits index tree rows.
    if HAS_TREE_ROWS:
        num_rows = tl.load(tree_rows_ptr + req)
    else:
        num_rows = num_query
    num_context = seq_len - num_rows

    rows = tl.arange(0, BLOCK_M)
    query = first_query + rows // GROUP  # [BLOCK_M]
    head = kv_head * GROUP + rows % GROUP
    is_row = (rows < BLOCK_Q * GROUP) & (query < num_query)
    token = (q_start + query).to(tl.int64)
    d = tl.arange(0, HEAD_DIM_PAD)
    is_dim = d < HEAD_DIM
    q = tl.load(q_ptr + token[:, None] * stride_q_token + head[:, None] * stride_q_head + d[None, :],
                mask=is_row[:, None] & is_dim[None, :], other=0.0)
    if UPCAST_Q:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], tl.float32)
    cols = tl.arange(0, BLOCK_N)
    block_table = block_tables_ptr + req.to(tl.int64) * stride_block_table
    mask_rows = mask_ptr + token * stride_mask_token  # [BLOCK_M]
    # Every key up to seq_len: a mask may list any row (a bent one a later sibling), and the kernel honours it.
    for tile_start in range(0, seq_len, BLOCK_N):
        key = tile_start + cols  # [BLOCK_N]
        is_key = key < seq_len
        block = tl.load(block_table + key // BLOCK_SIZE, mask=is_key, other=0)
        slot = block.to(tl.int64) * BLOCK_SIZE + key % BLOCK_SIZE
        kv_mask = is_key[:, None] & is_dim[None, :]
        k = tl.load(k_cache_ptr + slot[:, None] * stride_k_slot + kv_head * stride_k_head + d[None, :],
                    mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + slot[:, None] * stride_v_slot + kv_head * stride_v_head + d[None, :],
                    mask=kv_mask, other=0.0)
        scores = tl.dot(q, tl.trans(k.to(q.dtype)), input_precision=DOT_PRECISION) * scale_log2
        node = key - num_context  # [BLOCK_N] tree row of the key, < 0 for the cached prefix
        is_tree_key = (node >= 0) & is_key
        node_safe = tl.where(is_tree_key, node, 0)
        word = tl.load(mask_rows[:, None] + node_safe[None, :] // 32,
                       mask=is_row[:, None] & is_tree_key[None, :], other=0)  # [BLOCK_M, BLOCK_N]
        is_listed = ((word >> (node_safe[None, :] % 32)) & 1) != 0
        is_visible = is_key[None, :] & ((node < 0)[None, :] | is_listed)
        scores = tl.where(is_visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(scores - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v.to(q.dtype), input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(out_ptr + token[:, None] * stride_o_token + head[:, None] * stride_o_head + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=is_row[:, None] & is_dim[None, :])


def tree_attention(
    q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim], this forward's K already stored
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32
    seq_lens: torch.Tensor,  # [num_reqs] int32, keys per request, this forward's rows included
    block_tables: torch.Tensor,  # [num_reqs, max_num_blocks] int32
    packed_mask: torch.Tensor,  # [num_tokens, num_words] int32 from pack_tree_mask (bit i: tree row i)
    *,
    max_query_len: int,
    num_tree_rows: torch.Tensor | None = None,  # [num_reqs] int32; None: every request's tree rows are its queries
    scale: float | None = None,
    block_n: int = 32,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim], q's dtype
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    num_reqs = seq_lens.shape[0]
    out = torch.zeros_like(q, memory_format=torch.contiguous_format)
    if num_tokens == 0 or num_reqs == 0:
        return out
    check_runnable(tree_attention_kernel, q)
    q = q.contiguous()
    packed_mask = packed_mask.contiguous()
    group = num_heads // num_kv_heads
    # Up to 64 rows per program (the whole tree of a small request); wider trees take several query blocks.
    block_m = max(16, min(next_pow2(max_query_len * group), 64), next_pow2(group))
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    grid = (triton.cdiv(max_query_len, block_m // group), num_reqs, num_kv_heads)
    tree_attention_kernel[grid](
        q, k_cache, v_cache, out, packed_mask, query_start_loc, seq_lens, block_tables,
        seq_lens if num_tree_rows is None else num_tree_rows,  # unread without HAS_TREE_ROWS
        scale * math.log2(math.e),
        q.stride(0), q.stride(1),
        *slot_strides(k_cache),
        *slot_strides(v_cache),
        out.stride(0), out.stride(1),
        packed_mask.stride(0),
        block_tables.stride(0),
        HEAD_DIM=head_dim,
        HEAD_DIM_PAD=max(16, next_pow2(head_dim)),
        BLOCK_SIZE=k_cache.shape[1],
        GROUP=group,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        UPCAST_Q=q.dtype == torch.bfloat16 and is_interpreted(tree_attention_kernel),
        HAS_TREE_ROWS=num_tree_rows is not None, **launch_overlap(q),
    )
    return out

"""Triton programs of paged attention: one ragged causal kernel (optionally split over keys) and the split merge.

A program's rows are query tokens x the query heads of one kv head (each K/V tile loaded once per group).
Optional, each behind a constexpr flag so the default program is unchanged: a sliding window (a query at
position p sees keys p - window + 1 .. p; key tiles wholly before the window are never loaded), logit
soft-capping (cap * tanh(score / cap), before masking) and attention sinks (one logit per query head in the
softmax denominator, added once: at the end of an unsplit program, or in the merge of a split one).
"""

from __future__ import annotations

import triton
import triton.language as tl

from specbench.kernels.pdl import wait_for_inputs


@triton.jit
def paged_attention_kernel(
    q_ptr,  # [num_tokens, num_heads, head_dim]
    k_cache_ptr,  # [num_slots, num_kv_heads, head_dim]
    v_cache_ptr,  # [num_slots, num_kv_heads, head_dim]
    out_ptr,  # [num_tokens, num_heads, head_dim], or fp32 [num_tokens, num_heads, num_splits, head_dim] if IS_SPLIT
    lse_ptr,  # fp32 [num_tokens, num_heads, num_splits] log2-sum-exp2 of each split (IS_SPLIT only)
    query_start_loc_ptr,  # [num_reqs + 1] int32
    seq_lens_ptr,  # [num_reqs] int32, keys visible to the request's last query
    block_tables_ptr,  # [num_reqs, max_num_blocks] int32
    sinks_ptr,  # [num_heads] sink logit per query head (HAS_SINKS and not IS_SPLIT only)
    window_starts_ptr,  # [num_tokens] int32 first key each query sees (HAS_WINDOW_STARTS only: the metadata's window)
    scale_log2,  # softmax scale * log2(e): the online softmax runs in fp32, base 2
    num_kv_heads,
    split_len,  # keys per split, a multiple of BLOCK_N (IS_SPLIT only)
    window,  # sliding window in keys, >= 1 (HAS_WINDOW only)
    softcap_log2,  # soft cap * log2(e) (HAS_SOFTCAP only): caps the base-2 scores as the cap does natural ones
    stride_q_token, stride_q_head,
    stride_k_slot, stride_k_head,
    stride_v_slot, stride_v_head,
    stride_o_token, stride_o_head, stride_o_split,
    stride_lse_token, stride_lse_head,
    stride_block_table,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,  # tokens per KV-cache block
    GROUP: tl.constexpr,  # query heads per kv head
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    IS_SPLIT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,  # "ieee" for fp32 inputs (no TF32), else "tf32" (ignored for 16-bit)
    UPCAST_Q: tl.constexpr,  # run the dots in fp32 (the Triton 3.9 CPU interpreter's bf16 dot is wrong)
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
    HAS_WINDOW: tl.constexpr = False,
    HAS_SOFTCAP: tl.constexpr = False,
    HAS_SINKS: tl.constexpr = False,
    HAS_WINDOW_STARTS: tl.constexpr = False,  # the window's first keys come from window_starts_ptr, not from `window`
):
    wait_for_inputs(USE_PDL)
    BLOCK_Q: tl.constexpr = BLOCK_M // GROUP
    q_block = tl.program_id(0)
    req = tl.program_id(1)
    kv_head = tl.program_id(2) % num_kv_heads
    split = tl.program_id(2) // num_kv_heads

    q_start = tl.load(query_start_loc_ptr + req)
    num_query = tl.load(query_start_loc_ptr + req + 1) - q_start
    first_query = q_block * BLOCK_Q
    if first_query >= num_query:
        return
    seq_len = tl.load(seq_lens_ptr + req)
    num_context = seq_len - num_query

    rows = tl.arange(0, BLOCK_M)
    query = first_query + rows // GROUP  # [BLOCK_M] query index inside the request
    head = kv_head * GROUP + rows % GROUP  # [BLOCK_M]
    is_row = (rows < BLOCK_Q * GROUP) & (query < num_query)
    token = (q_start + query).to(tl.int64)
    last_key = num_context + query  # [BLOCK_M] last visible key, inclusive
    d = tl.arange(0, HEAD_DIM_PAD)
    is_dim = d < HEAD_DIM

    q_ptrs = q_ptr + token[:, None] * stride_q_token + head[:, None] * stride_q_head + d[None, :]
    q = tl.load(q_ptrs, mask=is_row[:, None] & is_dim[None, :], other=0.0)
    if UPCAST_Q:
        q = q.to(tl.float32)

    kv_end = tl.minimum(seq_len, num_context + first_query + BLOCK_Q)
    if HAS_WINDOW_STARTS:
        # Each query's first key as the metadata says; tiles before the program's earliest are skipped, not masked.
        row_start = tl.load(window_starts_ptr + token, mask=is_row, other=0)  # [BLOCK_M]
        window_start = tl.min(tl.where(is_row, row_start, seq_len), 0)
        window_start = window_start - window_start % BLOCK_N
    elif HAS_WINDOW:
        # The program's first query sees the earliest key; tiles before it are skipped, not masked.
        window_start = tl.maximum(num_context + first_query - window + 1, 0)
        window_start = window_start - window_start % BLOCK_N
    else:
        window_start = 0
    if IS_SPLIT:
        # Splits tile the keys from window_start (the host sized them for the window's span, not max_seq_len).
        kv_start = window_start + split * split_len
        # The last split runs to the end, so keys past a stale host max_seq_len (a replayed graph) still count.
        is_last = split == tl.num_programs(2) // num_kv_heads - 1
        kv_end = tl.where(is_last, kv_end, tl.minimum(kv_end, kv_start + split_len))
    else:
        kv_start = window_start

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], tl.float32)
    cols = tl.arange(0, BLOCK_N)
    block_table = block_tables_ptr + req.to(tl.int64) * stride_block_table
    # Block ids are fetched one tile ahead, so a tile's K/V loads never wait on its block-table load.
    next_key = kv_start + cols
    next_block = tl.load(block_table + next_key // BLOCK_SIZE, mask=next_key < kv_end, other=0)
    for tile_start in range(kv_start, kv_end, BLOCK_N):
        key = tile_start + cols  # [BLOCK_N]
        is_key = key < kv_end
        slot = next_block.to(tl.int64) * BLOCK_SIZE + key % BLOCK_SIZE  # [BLOCK_N]
        kv_mask = is_key[:, None] & is_dim[None, :]
        k = tl.load(k_cache_ptr + slot[:, None] * stride_k_slot + kv_head * stride_k_head + d[None, :],
                    mask=kv_mask, other=0.0)  # [BLOCK_N, HEAD_DIM_PAD]
        v = tl.load(v_cache_ptr + slot[:, None] * stride_v_slot + kv_head * stride_v_head + d[None, :],
                    mask=kv_mask, other=0.0)
        next_key = key + BLOCK_N
        next_block = tl.load(block_table + next_key // BLOCK_SIZE, mask=next_key < kv_end, other=0)
        scores = tl.dot(q, tl.trans(k.to(q.dtype)), input_precision=DOT_PRECISION) * scale_log2
        if HAS_SOFTCAP:
            scores = softcap_log2 * _tanh(scores / softcap_log2)
        is_visible = (key[None, :] <= last_key[:, None]) & is_key[None, :]
        if HAS_WINDOW_STARTS:
            is_visible = is_visible & (key[None, :] >= row_start[:, None])
        elif HAS_WINDOW:
            is_visible = is_visible & (key[None, :] > last_key[:, None] - window)
        scores = tl.where(is_visible, scores, float("-inf"))  # [BLOCK_M, BLOCK_N]
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        # A row with nothing visible yet (a later split's causal tail) keeps m = -inf; subtract 0 then.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(scores - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v.to(q.dtype), input_precision=DOT_PRECISION)
        m_i = m_new

    if HAS_SINKS and not IS_SPLIT:
        sink = tl.load(sinks_ptr + head).to(tl.float32) * 1.4426950408889634  # [BLOCK_M], log2(e): base 2
        m_new = tl.maximum(m_i, sink)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.exp2(sink - m_new)
        acc = acc * alpha[:, None]
        m_i = m_new
    is_empty = l_i == 0.0
    out = acc / tl.where(is_empty, 1.0, l_i)[:, None]
    o_ptrs = out_ptr + token[:, None] * stride_o_token + head[:, None] * stride_o_head + d[None, :]
    if IS_SPLIT:
        lse = tl.where(is_empty, float("-inf"), m_i + tl.log2(tl.where(is_empty, 1.0, l_i)))
        tl.store(o_ptrs + split * stride_o_split, out, mask=is_row[:, None] & is_dim[None, :])
        tl.store(lse_ptr + token * stride_lse_token + head * stride_lse_head + split, lse, mask=is_row)
    else:
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=is_row[:, None] & is_dim[None, :])


@triton.jit
def _tanh(x):
    """tanh from exp2 (no tanh in the interpreter's tl): saturates to +-1 without inf/inf."""
    return 1.0 - 2.0 / (tl.exp2(x * 2.8853900817779268) + 1.0)  # 2 * log2(e)


@triton.jit
def merge_splits_kernel(
    partial_out_ptr,  # fp32 [num_tokens, num_heads, num_splits, head_dim], each split normalized
    partial_lse_ptr,  # fp32 [num_tokens, num_heads, num_splits], -inf for a split that saw no key
    out_ptr,  # [num_tokens, num_heads, head_dim]
    sinks_ptr,  # [num_heads] sink logit per query head (HAS_SINKS only)
    num_splits,
    stride_p_token, stride_p_head, stride_p_split,
    stride_lse_token, stride_lse_head,
    stride_o_token, stride_o_head,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
    USE_PDL: tl.constexpr,  # kernels/pdl.py: launched with launch_overlap
    HAS_SINKS: tl.constexpr = False,
    HAS_WINDOW_STARTS: tl.constexpr = False,  # the window's first keys come from window_starts_ptr, not from `window`
):
    wait_for_inputs(USE_PDL)
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    s = tl.arange(0, SPLITS_PAD)
    d = tl.arange(0, HEAD_DIM_PAD)
    is_split = s < num_splits
    lse = tl.load(partial_lse_ptr + token * stride_lse_token + head * stride_lse_head + s,
                  mask=is_split, other=float("-inf"))
    p_ptrs = partial_out_ptr + token * stride_p_token + head * stride_p_head
    parts = tl.load(p_ptrs + s[:, None] * stride_p_split + d[None, :],
                    mask=is_split[:, None] & (d < HEAD_DIM)[None, :], other=0.0)  # [SPLITS_PAD, HEAD_DIM_PAD]
    # Every query sees its own key, so some split's lse is finite: lse_max is finite.
    lse_max = tl.max(lse, 0)
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + head).to(tl.float32) * 1.4426950408889634  # log2(e): lse is base 2
        lse_max = tl.maximum(lse_max, sink)
    weight = tl.exp2(lse - lse_max)  # [SPLITS_PAD]
    parts = tl.where((weight > 0)[:, None], parts, 0.0)  # a split that saw no key weighs 0
    denominator = tl.sum(weight, 0)
    if HAS_SINKS:
        denominator += tl.exp2(sink - lse_max)  # the sink's mass, once per row: it carries no value
    out = tl.sum(parts * weight[:, None], 0) / denominator
    tl.store(out_ptr + token * stride_o_token + head * stride_o_head + d, out.to(out_ptr.dtype.element_ty),
             mask=d < HEAD_DIM)

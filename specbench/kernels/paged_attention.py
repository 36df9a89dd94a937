"""Paged attention over ragged causal queries (prefill, extend, decode, verify) with split-KV for small batches.

`plan_launch` sizes tiles and splits from host ints only (max_query_len, max_seq_len): a forward never syncs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from specbench.kernels.attention_kernels import merge_splits_kernel, paged_attention_kernel
from specbench.kernels.pdl import launch_overlap
from specbench.kernels.runtime import check_runnable, is_interpreted, next_pow2, slot_strides, sm_count

MAX_SPLITS = 64
# Splitting costs a merge launch (~3 us); below this many key tiles one program per row block is faster.
MIN_TILES_TO_SPLIT = 4
# From a sweep of tiles, warps, stages and splits on an H200 (CUDA-graph replay, bf16, Llama-3.1-8B heads):
# decode/verify is latency-bound at batch 1 and fastest with one or two key tiles per split.
DECODE_TILES = dict(block_n=64, num_warps=4, num_stages=2)
PREFILL_TILES = dict(block_m=64, block_n=64, num_warps=4, num_stages=3)
WIDE_TILES = dict(block_m=64, block_n=32, num_warps=4, num_stages=2)  # fp32 or head_dim > 128: shared memory


@dataclass(frozen=True)
class AttentionLaunch:
    block_m: int  # query rows per program: (query tokens per program) x (query heads per kv head)
    block_n: int  # keys per tile
    num_q_blocks: int  # programs along the query axis per request
    num_splits: int  # key splits per (request, kv head, query block); 1 = no split
    split_len: int  # keys per split, a multiple of block_n
    num_warps: int
    num_stages: int


def plan_launch(
    *,
    num_reqs: int,
    num_kv_heads: int,
    group: int,
    head_dim: int,
    dtype: torch.dtype,
    max_query_len: int,
    max_seq_len: int,
    num_sms: int,
    sliding_window: int | None = None,
    num_splits: int | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> AttentionLaunch:
    """Tiles and split count; explicit arguments override the heuristic (tests use them to force paths).

    With a sliding window, splits tile only the keys a program's queries see (window + queries - 1), from
    the program's window start; the last split still runs to the end of the request's keys.
    """
    if sliding_window is not None:
        max_seq_len = min(max_seq_len, sliding_window + max_query_len - 1)
    rows = max_query_len * group
    is_wide = dtype == torch.float32 or next_pow2(head_dim) > 128
    tiles = WIDE_TILES if is_wide else (DECODE_TILES if rows <= 64 else PREFILL_TILES)
    if block_m is None:
        block_m = max(16, next_pow2(rows)) if rows <= 64 else tiles["block_m"]
    block_m = max(block_m, next_pow2(group))
    block_n = block_n or tiles["block_n"]
    num_q_blocks = triton.cdiv(max_query_len, block_m // group)
    num_tiles = triton.cdiv(max_seq_len, block_n)
    if num_splits is None:
        programs = num_reqs * num_kv_heads * num_q_blocks
        is_split_worth = programs < num_sms and num_tiles >= MIN_TILES_TO_SPLIT
        num_splits = min(triton.cdiv(2 * num_sms, programs), MAX_SPLITS) if is_split_worth else 1
    num_splits = max(1, min(num_splits, num_tiles))
    split_len = triton.cdiv(num_tiles, num_splits) * block_n
    num_splits = triton.cdiv(max_seq_len, split_len)  # no split starts past max_seq_len
    return AttentionLaunch(
        block_m=block_m,
        block_n=block_n,
        num_q_blocks=num_q_blocks,
        num_splits=num_splits,
        split_len=split_len,
        num_warps=num_warps or tiles["num_warps"],
        num_stages=num_stages or tiles["num_stages"],
    )


def runs_on(device: torch.device) -> bool:
    """CUDA, or CPU when the kernels were defined under TRITON_INTERPRET=1."""
    return device.type == "cuda" or (device.type == "cpu" and is_interpreted(paged_attention_kernel))


def paged_attention(
    q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32, cu_num_query_tokens
    seq_lens: torch.Tensor,  # [num_reqs] int32, keys visible to each request's last query
    block_tables: torch.Tensor,  # [num_reqs, max_num_blocks] int32
    *,
    max_query_len: int,
    max_seq_len: int,
    scale: float | None = None,
    sliding_window: int | None = None,
    sinks: torch.Tensor | None = None,  # [num_heads], one softmax logit per query head that carries no value
    softcap: float | None = None,
    window_starts: torch.Tensor | None = None,  # [num_tokens] int32, first key each query sees (needs sliding_window)
    num_splits: int | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim], q's dtype
    """Causal attention of each request's queries over its paged keys (the AttentionMetadata contract).

    max_query_len must bound every request's query count; max_seq_len only sizes the splits (keys past it
    are still attended, by the last split), so a CUDA graph captured at a smaller one stays correct.
    Optional, all off by default (then the program is today's, bit for bit): `sliding_window` w, a query at
    position p sees keys p - w + 1 .. p (`specbench.attention.window`); `sinks`, gpt-oss attention sinks;
    `softcap` c, Gemma-2 logit soft-capping c * tanh(score / c), applied after scaling and before masking.
    `window_starts`: each query's first visible key as the attention metadata built it (attention/kinds.py); the
    kernel then masks with these, and `sliding_window` only sizes the key splits.
    """
    if window_starts is not None and sliding_window is None:
        raise ValueError("window_starts needs the sliding_window that sizes the key splits")
    if sliding_window is not None and sliding_window < 1:
        raise ValueError(f"sliding_window must be >= 1 or None (no window), got {sliding_window}")
    if softcap is not None and softcap <= 0:
        raise ValueError(f"softcap must be > 0 or None, got {softcap}")
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    num_reqs = seq_lens.shape[0]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if num_tokens == 0 or num_reqs == 0:
        return out
    check_runnable(paged_attention_kernel, q)
    if q.stride(-1) != 1:
        q = q.contiguous()
    if sinks is not None and (sinks.shape != (num_heads,) or sinks.stride(0) != 1):
        raise ValueError(f"sinks must be a contiguous [num_heads={num_heads}] tensor, got shape {tuple(sinks.shape)}")
    plan = plan_launch(
        num_reqs=num_reqs, num_kv_heads=num_kv_heads, group=num_heads // num_kv_heads, head_dim=head_dim,
        dtype=q.dtype, max_query_len=max_query_len, max_seq_len=max_seq_len, num_sms=sm_count(q.device),
        sliding_window=sliding_window, num_splits=num_splits, block_m=block_m, block_n=block_n, num_warps=num_warps,
        num_stages=num_stages,
    )
    is_split = plan.num_splits > 1
    if is_split:
        partial_out = torch.empty(num_tokens, num_heads, plan.num_splits, head_dim, dtype=torch.float32,
                                  device=q.device)
        partial_lse = torch.empty(num_tokens, num_heads, plan.num_splits, dtype=torch.float32, device=q.device)
        o, o_strides, lse, lse_strides = partial_out, partial_out.stride()[:3], partial_lse, partial_lse.stride()[:2]
    else:
        o, o_strides, lse, lse_strides = out, (*out.stride()[:2], 0), out, (0, 0)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    head_dim_pad = max(16, next_pow2(head_dim))
    grid = (plan.num_q_blocks, num_reqs, num_kv_heads * plan.num_splits)
    sinks_arg = q if sinks is None else sinks  # any pointer when HAS_SINKS is off: never read
    paged_attention_kernel[grid](
        q, k_cache, v_cache, o, lse, query_start_loc, seq_lens, block_tables, sinks_arg,
        query_start_loc if window_starts is None else window_starts,  # any pointer when off: never read
        scale * math.log2(math.e), num_kv_heads, plan.split_len,
        sliding_window or 0, (softcap or 0.0) * math.log2(math.e),
        q.stride(0), q.stride(1),
        *slot_strides(k_cache),
        *slot_strides(v_cache),
        *o_strides,
        *lse_strides,
        block_tables.stride(0),
        HEAD_DIM=head_dim,
        HEAD_DIM_PAD=head_dim_pad,
        BLOCK_SIZE=k_cache.shape[1],
        GROUP=num_heads // num_kv_heads,
        BLOCK_M=plan.block_m,
        BLOCK_N=plan.block_n,
        IS_SPLIT=is_split,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        UPCAST_Q=q.dtype == torch.bfloat16 and is_interpreted(paged_attention_kernel),
        HAS_WINDOW=sliding_window is not None,
        HAS_SOFTCAP=softcap is not None,
        HAS_SINKS=sinks is not None,
        HAS_WINDOW_STARTS=window_starts is not None,
        num_warps=plan.num_warps,
        num_stages=plan.num_stages, **launch_overlap(q),
    )
    if is_split:
        merge_splits_kernel[(num_tokens, num_heads)](
            partial_out, partial_lse, out, sinks_arg, plan.num_splits,
            *partial_out.stride()[:3],
            *partial_lse.stride()[:2],
            *out.stride()[:2],
            HEAD_DIM=head_dim,
            HEAD_DIM_PAD=head_dim_pad,
            SPLITS_PAD=next_pow2(plan.num_splits),
            HAS_SINKS=sinks is not None, **launch_overlap(partial_out),
        )
    return out

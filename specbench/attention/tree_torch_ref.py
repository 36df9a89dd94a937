"""Readable tree attention over the paged KV cache: the reference the Triton tree kernel is tested against.

A tree verify forward feeds each request's root and draft nodes as its queries; their K/V are already stored at
the request's last num_query positions (node order). Query row j sees every cached key before those rows, and
among the rows exactly those its tree mask lists (itself, the root, its ancestors): never a sibling or cousin.
"""

from __future__ import annotations

import math

import torch


def tree_attention_reference(
    q: torch.Tensor,  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim], this forward's K already stored
    v_cache: torch.Tensor,  # [num_blocks, block_size, num_kv_heads, head_dim]
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32, cu_num_query_tokens
    seq_lens: torch.Tensor,  # [num_reqs] int32, keys per request, this forward's rows included (the last ones)
    block_tables: torch.Tensor,  # [num_reqs, max_num_blocks] int32
    tree_mask: torch.Tensor,  # [num_tokens, max_tree_rows] bool, row j sees request row i iff tree_mask[j, i]
    scale: float | None = None,
    num_tree_rows: tuple[int, ...] | None = None,  # [num_reqs] tree rows ending each request's keys; None = queries
) -> torch.Tensor:  # [num_tokens, num_heads, head_dim], q's dtype
    """`num_tree_rows` (attention/tree_mask.py): a tree draft step's queries are the last of more stored tree rows
    (the frontier nodes fed in earlier steps); by default the tree rows are exactly the queries (a tree verify)."""
    num_heads, head_dim = q.shape[1], q.shape[2]
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.zeros_like(q)
    qsl, lens = query_start_loc.tolist(), seq_lens.tolist()
    for req in range(len(lens)):
        rows = slice(qsl[req], qsl[req + 1])
        num_query, seq_len = qsl[req + 1] - qsl[req], lens[req]
        num_rows = num_query if num_tree_rows is None else num_tree_rows[req]
        num_context = seq_len - num_rows
        pos = torch.arange(seq_len, device=q.device)
        slots = block_tables[req].long()[pos // block_size] * block_size + pos % block_size  # [seq_len]
        keys = k_cache.flatten(0, 1)[slots].float().repeat_interleave(num_heads // num_kv_heads, dim=1)
        values = v_cache.flatten(0, 1)[slots].float().repeat_interleave(num_heads // num_kv_heads, dim=1)
        is_visible = torch.ones(num_query, seq_len, dtype=torch.bool, device=q.device)  # [num_query, seq_len]
        is_visible[:, num_context:] = tree_mask[rows, :num_rows]
        scores = torch.einsum("qhd,khd->hqk", q[rows].float(), keys) * scale  # [num_heads, num_query, seq_len]
        scores = scores.masked_fill(~is_visible[None], float("-inf"))
        out[rows] = torch.einsum("hqk,khd->qhd", scores.softmax(dim=-1), values).to(q.dtype)
    return out

"""Ragged paged batches for the sliding-window / sinks / soft-cap tests: random ones, and a crafted one whose
output spells out which key positions each query saw."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from specbench.attention.metadata import AttentionMetadata, build_metadata


@dataclass(frozen=True)
class WindowBatch:
    md: AttentionMetadata
    q: torch.Tensor  # [num_tokens, num_heads, head_dim]
    k_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim], this forward's keys already stored
    v_cache: torch.Tensor  # [num_blocks, block_size, num_kv_heads, head_dim]

    def flat_caches(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[num_slots, num_kv_heads, head_dim] views, the reference's layout."""
        return self.k_cache.flatten(0, 1), self.v_cache.flatten(0, 1)


def window_batch(
    *,
    num_query: list[int],  # [num_reqs]
    num_context: list[int],  # [num_reqs] keys cached before this forward
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    block_size: int,
    dtype: torch.dtype,
    device: torch.device | str,
    seed: int = 0,
) -> WindowBatch:
    """Each request owns a shuffled, non-contiguous set of blocks; two spare blocks hold keys nobody may see."""
    rng = random.Random(seed)
    seq_lens = [c + n for c, n in zip(num_context, num_query)]
    blocks_per_req = [-(-s // block_size) for s in seq_lens]
    pool = list(range(sum(blocks_per_req) + 2))
    rng.shuffle(pool)
    block_tables, start = [], 0
    for n in blocks_per_req:
        block_tables.append(pool[start:start + n])
        start += n
    positions = [c + j for c, n in zip(num_context, num_query) for j in range(n)]
    md = build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=block_tables,
                        block_size=block_size, device=torch.device(device))
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

    return WindowBatch(md=md, q=randn(len(positions), num_heads, head_dim),
                       k_cache=randn(len(pool), block_size, num_kv_heads, head_dim),
                       v_cache=randn(len(pool), block_size, num_kv_heads, head_dim))


def position_revealing_batch(*, num_query: list[int], num_context: list[int], block_size: int,
                             device: torch.device | str) -> WindowBatch:
    """Zero queries (every visible key weighs the same) and value of key position i = one-hot e_i: the output
    of a query is 1/n on exactly the n positions it saw, so a window off by one changes it."""
    max_seq_len = max(c + n for c, n in zip(num_context, num_query))
    batch = window_batch(num_query=num_query, num_context=num_context, num_heads=2, num_kv_heads=1,
                         head_dim=max_seq_len, block_size=block_size, dtype=torch.float32, device=device)
    v_cache = torch.zeros_like(batch.v_cache)
    flat_v = v_cache.view(-1, max_seq_len)  # [num_slots, head_dim]: one kv head
    for blocks, seq_len in zip(batch.md.block_tables_cpu, batch.md.seq_lens_cpu):
        for pos in range(seq_len):
            flat_v[blocks[pos // block_size] * block_size + pos % block_size, pos] = 1.0
    return WindowBatch(md=batch.md, q=torch.zeros_like(batch.q), k_cache=batch.k_cache, v_cache=v_cache)


def expected_visible_average(batch: WindowBatch, sliding_window: int | None) -> torch.Tensor:
    """[num_tokens, head_dim] what `position_revealing_batch` must output, from the window convention directly
    (a query at position p sees max(0, p - w + 1) .. p), independent of the code under test."""
    rows = []
    for seq_len, n in zip(batch.md.seq_lens_cpu, _num_query(batch.md)):
        for j in range(n):
            p = seq_len - n + j
            first = 0 if sliding_window is None else max(0, p - sliding_window + 1)
            row = torch.zeros(batch.q.shape[-1])
            row[first:p + 1] = 1.0 / (p + 1 - first)
            rows.append(row)
    return torch.stack(rows)


def _num_query(md: AttentionMetadata) -> list[int]:
    cu = md.query_start_loc_cpu
    return [cu[r + 1] - cu[r] for r in range(md.num_reqs)]

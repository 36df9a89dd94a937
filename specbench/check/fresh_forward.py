"""A fresh, private KV cache for one sequence, and metadata for queries over it (positions from 0, nothing the
engine wrote is visible): the oracles' cache-free forwards."""

from __future__ import annotations

import math

import torch

from specbench.attention.metadata import AttentionMetadata, build_metadata
from specbench.kv.kv_cache import KVCache, KVCacheSpec


def fresh_cache(spec: KVCacheSpec, num_tokens: int, block_size: int,
                device: torch.device | str) -> tuple[KVCache, list[int]]:
    """(KV with room for positions 0..num_tokens-1, its one block table)."""
    num_blocks = math.ceil(num_tokens / block_size)
    return KVCache(spec, num_blocks, block_size, torch.device(device)), list(range(num_blocks))


def query_metadata(first: int, num: int, block_table: list[int], block_size: int,
                   device: torch.device | str) -> AttentionMetadata:
    """Queries at positions first..first+num-1, each seeing keys 0..its own position."""
    return build_metadata(positions=list(range(first, first + num)), num_query=[num], seq_lens=[first + num],
                          block_tables=[block_table], block_size=block_size, device=torch.device(device))


def fresh_sequence(spec: KVCacheSpec, num_tokens: int, block_size: int,
                   device: torch.device | str) -> tuple[AttentionMetadata, KVCache]:
    """One dense pass: every query p sees keys 0..p."""
    kv, table = fresh_cache(spec, num_tokens, block_size, device)
    return query_metadata(0, num_tokens, table, block_size, device), kv

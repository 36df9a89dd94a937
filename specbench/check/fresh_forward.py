"""Metadata and KV for one cache-free forward: a single sequence at positions 0..n-1 over a fresh, private cache."""

from __future__ import annotations

import math

import torch

from specbench.attention.metadata import AttentionMetadata, build_metadata
from specbench.kv.kv_cache import KVCache, KVCacheSpec


def fresh_sequence(spec: KVCacheSpec, num_tokens: int, block_size: int,
                   device: torch.device | str) -> tuple[AttentionMetadata, KVCache]:
    """Every query p sees keys 0..p; nothing the engine wrote is visible."""
    num_blocks = math.ceil(num_tokens / block_size)
    kv = KVCache(spec, num_blocks, block_size, torch.device(device))
    md = build_metadata(positions=list(range(num_tokens)), num_query=[num_tokens], seq_lens=[num_tokens],
                        block_tables=[list(range(num_blocks))], block_size=block_size, device=torch.device(device))
    return md, kv

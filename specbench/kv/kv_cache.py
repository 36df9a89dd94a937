"""Paged KV pool tensors: one K and one V tensor per layer, shared block ids."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KVCacheSpec:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype

    def bytes_per_block(self, block_size: int) -> int:
        elem = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.num_layers * block_size * self.num_kv_heads * self.head_dim * elem


class KVCache:
    """K/V storage indexed by slot = block_id * block_size + offset."""

    def __init__(self, spec: KVCacheSpec, num_blocks: int, block_size: int, device: torch.device) -> None:
        self.spec = spec
        self.num_blocks = num_blocks
        self.block_size = block_size
        shape = (num_blocks, block_size, spec.num_kv_heads, spec.head_dim)
        # [num_blocks, block_size, num_kv_heads, head_dim] per layer
        self.k = [torch.zeros(shape, dtype=spec.dtype, device=device) for _ in range(spec.num_layers)]
        self.v = [torch.zeros(shape, dtype=spec.dtype, device=device) for _ in range(spec.num_layers)]

    def flat(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """[num_slots, num_kv_heads, head_dim] views of one layer's K and V."""
        k, v = self.k[layer], self.v[layer]
        return k.view(-1, *k.shape[2:]), v.view(-1, *v.shape[2:])

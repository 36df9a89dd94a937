"""Paged KV pool tensors: one K and one V tensor per layer, shared block ids.

Every layer's K and V are views of one allocation, `storage` [2, num_layers, num_blocks, block_size, heads, dim],
so a copy between slots can cover all layers in one launch (speculation/tree/kv.py). Each view is contiguous, as
the attention kernels expect.
"""

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
        # [2 (K, V), num_layers, num_blocks, block_size, num_kv_heads, head_dim]
        self.storage = torch.zeros((2, spec.num_layers, *shape), dtype=spec.dtype, device=device)
        # [num_blocks, block_size, num_kv_heads, head_dim] per layer
        self.k = list(self.storage[0].unbind(0))
        self.v = list(self.storage[1].unbind(0))
        # Hybrid targets: the requests' recurrent-state slots, owned beside the K/V (recurrent/state_cache.py
        # StateCache; the builder sets it); None for every other model.
        self.states = None

    def flat(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """[num_slots, num_kv_heads, head_dim] views of one layer's K and V."""
        k, v = self.k[layer], self.v[layer]
        return k.view(-1, *k.shape[2:]), v.view(-1, *v.shape[2:])

    def all_layers_flat(self) -> torch.Tensor | None:
        """[2 * num_layers, num_slots, num_kv_heads * head_dim] view of every layer's K then V, or None when a layer
        no longer lives in `storage` (a caller replaced a list entry, as scripts/bench_kernels.py does)."""
        storage = self.storage
        layer_bytes = storage[0, 0].numel() * storage.element_size()
        base = storage.data_ptr()
        for i, t in enumerate((*self.k, *self.v)):
            if t.data_ptr() != base + i * layer_bytes or t.shape != storage.shape[2:]:
                return None
        return storage.view(2 * self.spec.num_layers, self.num_blocks * self.block_size, -1)

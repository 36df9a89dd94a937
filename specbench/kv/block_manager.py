"""Paged-KV block allocation (pure Python, no torch).

A request owns a block table; slot = block_table[pos // block_size] * block_size
+ pos % block_size. Rejected draft tokens are rolled back by not advancing the
request's committed length: their slots stay owned and are overwritten later.
Leading blocks no future query sees (every layer windowed) can be released early: their
entries become RELEASED_BLOCK, so the table keeps its positions (a kernel may still gather
them and mask them out: the entry must be a valid block index, never read for a result).
"""

from __future__ import annotations

RELEASED_BLOCK = 0  # a released entry: any in-range block index (masked keys are gathered, never used)


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        # LIFO free list: recently freed blocks are reused first (warm in cache).
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        self._owned: set[int] = set()
        self.peak_num_owned = 0  # the most blocks owned at once since construction (a measurement)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def num_blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def num_missing_blocks(self, block_table: list[int], num_tokens: int) -> int:
        return max(0, self.num_blocks_for(num_tokens) - len(block_table))

    def can_grow(self, block_table: list[int], num_tokens: int) -> bool:
        return self.num_missing_blocks(block_table, num_tokens) <= len(self._free)

    def grow(self, block_table: list[int], num_tokens: int) -> bool:
        """Append blocks so the table covers `num_tokens` slots; all-or-nothing."""
        missing = self.num_missing_blocks(block_table, num_tokens)
        if missing > len(self._free):
            return False
        for _ in range(missing):
            block = self._free.pop()
            self._owned.add(block)
            block_table.append(block)
        self.peak_num_owned = max(self.peak_num_owned, len(self._owned))
        return True

    def release_leading(self, block_table: list[int], num_released: int, num_releasable: int) -> int:
        """Free entries [num_released, num_releasable) of the table (its leading blocks no query will see again),
        leaving RELEASED_BLOCK in their place; returns the table's new number of released entries."""
        end = min(num_releasable, len(block_table))
        for i in range(num_released, end):
            self._give_back(block_table[i])
            block_table[i] = RELEASED_BLOCK
        return max(num_released, end)

    def free(self, block_table: list[int], num_released: int = 0) -> None:
        """Every block of the table but its first `num_released` entries (already released)."""
        for block in reversed(block_table[num_released:]):
            self._give_back(block)
        block_table.clear()

    def _give_back(self, block: int) -> None:
        if block not in self._owned:
            raise RuntimeError(f"block {block} freed twice or never allocated")
        self._owned.remove(block)
        self._free.append(block)

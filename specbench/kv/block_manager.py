"""Paged-KV block allocation (pure Python, no torch).

A request owns a block table; slot = block_table[pos // block_size] * block_size
+ pos % block_size. Rejected draft tokens are rolled back by not advancing the
request's committed length: their slots stay owned and are overwritten later.
Leading blocks no future query sees (every layer windowed) can be released early: their
entries become RELEASED_BLOCK, so the table keeps its positions (a kernel may still gather
them and mask them out: the entry must be a valid block index, never read for a result).

With a prefix cache (kv/prefix_cache.py) blocks are reference counted: a registered block (full of committed KV)
may sit in several tables at once, read-only. A block whose last reference goes away returns to the free list, or,
when registered, is parked as evictable: its KV stays reusable until a fresh block is needed and no free one is left.
Parked blocks count as free (num_free_blocks): taking one evicts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.kv.prefix_cache import PrefixCache

RELEASED_BLOCK = 0  # a released entry: any in-range block index (masked keys are gathered, never used)


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, prefix_cache: PrefixCache | None = None) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need num_blocks >= 1 and block_size >= 1, got {num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_cache = prefix_cache  # None: caching off, every block private
        # LIFO free list: recently freed blocks are reused first (warm in cache).
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        self._refs: list[int] = [0] * num_blocks  # [num_blocks] tables holding each block
        self._num_owned = 0  # blocks with a reference
        self.peak_num_owned = 0  # the most blocks owned at once since construction (a measurement)

    @property
    def num_free_blocks(self) -> int:
        """Blocks a grow can take: free ones and parked (evictable) cached ones."""
        return len(self._free) + (self.prefix_cache.num_parked if self.prefix_cache is not None else 0)

    def num_blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def num_missing_blocks(self, block_table: list[int], num_tokens: int) -> int:
        return max(0, self.num_blocks_for(num_tokens) - len(block_table))

    def can_grow(self, block_table: list[int], num_tokens: int) -> bool:
        return self.num_missing_blocks(block_table, num_tokens) <= self.num_free_blocks

    def grow(self, block_table: list[int], num_tokens: int) -> bool:
        """Append blocks so the table covers `num_tokens` slots; all-or-nothing."""
        missing = self.num_missing_blocks(block_table, num_tokens)
        if missing > self.num_free_blocks:
            return False
        for _ in range(missing):
            block = self._free.pop() if self._free else self.prefix_cache.evict_oldest()
            self._take(block)
            block_table.append(block)
        return True

    def num_parked(self, blocks: Sequence[int]) -> int:
        """How many of `blocks` (cached ones a lookup found) are parked: sharing them takes them from the free count."""
        cache = self.prefix_cache
        return 0 if cache is None else sum(cache.is_parked(b) for b in blocks)

    def share(self, block_table: list[int], blocks: Sequence[int]) -> None:
        """Append cached blocks (a prefix-cache hit) to an empty table, one more reference each."""
        if block_table:
            raise RuntimeError("a prefix hit starts a table: it must be empty")
        for block in blocks:
            if self._refs[block] == 0:
                if self.prefix_cache.is_parked(block):
                    self.prefix_cache.unpark(block)
                else:  # only reachable through a stale index entry (a mutant): keep the free list consistent
                    self._free.remove(block)
            self._take(block)
            block_table.append(block)

    def is_shared(self, block: int) -> bool:
        """Read-only: registered in the prefix cache (any request may read it) or referenced by several tables."""
        return self._refs[block] > 1 or (self.prefix_cache is not None and self.prefix_cache.is_registered(block))

    def release_leading(self, block_table: list[int], num_released: int, num_releasable: int) -> int:
        """Free entries [num_released, num_releasable) of the table (its leading blocks no query will see again),
        leaving RELEASED_BLOCK in their place; returns the table's new number of released entries."""
        end = min(num_releasable, len(block_table))
        for i in range(num_released, end):
            self._give_back(block_table[i])
            block_table[i] = RELEASED_BLOCK
        return max(num_released, end)

    def free(self, block_table: list[int], num_released: int = 0) -> None:
        """Drop the table's reference to every block but its first `num_released` entries (already released); the
        table's tail goes first, so its leading (most shared) blocks are the last to be evicted."""
        for block in reversed(block_table[num_released:]):
            self._give_back(block)
        block_table.clear()

    def reset_prefix_cache(self) -> int:
        """Forget every cached block no request holds (they become free); the number forgotten."""
        if self.prefix_cache is None:
            return 0
        blocks = self.prefix_cache.clear()
        self._free.extend(blocks)
        return len(blocks)

    def _take(self, block: int) -> None:
        if self._refs[block] == 0:
            self._num_owned += 1
            self.peak_num_owned = max(self.peak_num_owned, self._num_owned)
        self._refs[block] += 1

    def _give_back(self, block: int) -> None:
        if self._refs[block] <= 0:
            raise RuntimeError(f"block {block} freed twice or never allocated")
        self._refs[block] -= 1
        if self._refs[block]:
            return
        self._num_owned -= 1
        if self.prefix_cache is not None and self.prefix_cache.is_registered(block):
            self.prefix_cache.park(block)
        else:
            self._free.append(block)

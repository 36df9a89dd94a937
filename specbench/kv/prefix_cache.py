"""The prefix cache's index: full KV blocks by content hash (kv/block_hash.py), and the registered blocks no request
references any more, parked in LRU order until a fresh block is needed (the block manager owns the refcounts).

A registered block is read-only: it holds committed KV of every position, and any number of requests may read it.
Eviction takes the least recently parked block and forgets its hash, so no later lookup can hit it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence


class PrefixCache:
    def __init__(self, drops_evicted_hash: Callable[[bytes], bool] = lambda block_hash: True) -> None:
        self._block_of: dict[bytes, int] = {}  # hash -> block holding that content
        self._hash_of: dict[int, bytes] = {}  # registered block -> its hash
        # registered blocks with refcount 0, least recently released first (values unused)
        self._parked: OrderedDict[int, None] = OrderedDict()
        # Whether an evicted block's hash is forgotten (always; the hooks seam lets a mutant keep it: a stale hit).
        self._drops_evicted_hash = drops_evicted_hash
        self.num_evictions = 0  # since construction (a measurement; the engine records prefix.evict from it)

    @property
    def num_parked(self) -> int:
        return len(self._parked)

    @property
    def num_registered(self) -> int:
        return len(self._hash_of)

    def lookup(self, hashes: Sequence[bytes]) -> list[int]:
        """Blocks of the longest cached prefix of `hashes` (a request's chained block hashes, first block first)."""
        blocks = []
        for h in hashes:
            block = self._block_of.get(h)
            if block is None:
                break
            blocks.append(block)
        return blocks

    def register(self, block: int, block_hash: bytes) -> bool:
        """Index `block` (full of committed KV) under `block_hash`; False when that content is cached already (by
        another block: this one stays private) or the block is registered already."""
        if block_hash in self._block_of or block in self._hash_of:
            return False
        self._block_of[block_hash] = block
        self._hash_of[block] = block_hash
        return True

    def is_registered(self, block: int) -> bool:
        return block in self._hash_of

    def park(self, block: int) -> None:
        """A registered block's last reference went away: evictable, most recently used last."""
        self._parked[block] = None

    def unpark(self, block: int) -> None:
        """A lookup hit a parked block: a request references it again."""
        del self._parked[block]

    def is_parked(self, block: int) -> bool:
        return block in self._parked

    def evict_oldest(self) -> int:
        """Forget the least recently parked block's content and hand the block out as a fresh one."""
        block, _ = self._parked.popitem(last=False)
        block_hash = self._hash_of.pop(block)
        if self._drops_evicted_hash(block_hash):
            del self._block_of[block_hash]
        self.num_evictions += 1
        return block

    def clear(self) -> list[int]:
        """Forget every parked block (they return to the free list: the list returned); blocks in use stay
        registered until released, then become free."""
        blocks = list(self._parked)
        for block in blocks:
            del self._block_of[self._hash_of.pop(block)]
        self._parked.clear()
        return blocks

"""The prefix cache's pieces without an engine: chained block hashes, refcounted sharing, LRU parking and eviction."""

from __future__ import annotations

import pytest

from specbench.kv.block_hash import ROOT_HASH, block_hash, extend_block_hashes
from specbench.kv.block_manager import BlockManager
from specbench.kv.prefix_cache import PrefixCache

BS = 4


def hashes(tokens: list[int], key: bytes = b"target") -> list[bytes]:
    out: list[bytes] = []
    extend_block_hashes(out, tokens, len(tokens) // BS, BS, key)
    return out


def test_hash_chains_over_the_parent_block_and_the_extra_key():
    a = hashes([1, 2, 3, 4, 5, 6, 7, 8])
    b = hashes([9, 9, 9, 9, 5, 6, 7, 8])
    assert a[0] != b[0] and a[1] != b[1]  # same tokens in block 1, other prefix: another block
    assert a[1] == block_hash(a[0], [5, 6, 7, 8], b"target")
    assert hashes([5, 6, 7, 8])[0] != a[1]  # same tokens at block 0: not the block-1 content
    assert hashes([1, 2, 3, 4], b"draft:eagle") != hashes([1, 2, 3, 4])  # other drafter KV in the block
    assert block_hash(ROOT_HASH, [1, 2, 3, 4], b"") == block_hash(ROOT_HASH, (1, 2, 3, 4), b"")
    partial = [1, 2, 3, 4, 5]
    assert len(hashes(partial)) == 1  # only full blocks are hashed
    grown: list[bytes] = []
    extend_block_hashes(grown, [1, 2, 3, 4, 5, 6, 7, 8], 1, BS, b"target")
    extend_block_hashes(grown, [1, 2, 3, 4, 5, 6, 7, 8], 2, BS, b"target")
    assert grown == a  # extended incrementally = hashed at once


def cached_manager(num_blocks: int) -> BlockManager:
    return BlockManager(num_blocks, BS, PrefixCache())


def test_shared_block_is_refcounted_and_parked_on_last_release():
    bm = cached_manager(4)
    a: list[int] = []
    assert bm.grow(a, 8)
    h = hashes(list(range(8)))
    assert bm.prefix_cache.register(a[0], h[0]) and bm.prefix_cache.register(a[1], h[1])
    b: list[int] = []
    bm.share(b, bm.prefix_cache.lookup(h))
    first = list(a)
    assert b == first and bm.is_shared(first[0])
    bm.free(a)
    assert bm.num_free_blocks == 2  # b still holds both
    bm.free(b)
    assert bm.num_free_blocks == 4 and bm.prefix_cache.num_parked == 2  # parked, still cached
    c: list[int] = []
    bm.share(c, bm.prefix_cache.lookup(h[:1]))  # a hit takes a parked block back
    assert c == [first[0]] and bm.prefix_cache.num_parked == 1 and bm.num_free_blocks == 3


def test_eviction_is_lru_and_only_when_no_free_block_is_left():
    bm = cached_manager(3)
    tables = [[], [], []]
    for i, t in enumerate(tables):
        assert bm.grow(t, BS)
        assert bm.prefix_cache.register(t[0], hashes([i] * BS)[0])
    for t in (tables[1], tables[0], tables[2]):  # parked in this order: 1 is the least recently used
        bm.free(t)
    assert bm.num_free_blocks == 3 and bm.prefix_cache.num_evictions == 0
    fresh: list[int] = []
    assert bm.grow(fresh, BS)
    assert bm.prefix_cache.num_evictions == 1
    assert bm.prefix_cache.lookup(hashes([1] * BS)) == []  # its hash forgotten: no stale hit
    assert bm.prefix_cache.lookup(hashes([0] * BS)) != [] and bm.prefix_cache.lookup(hashes([2] * BS)) != []


def test_free_blocks_go_first_before_any_eviction():
    bm = cached_manager(3)
    a: list[int] = []
    bm.grow(a, BS)
    bm.prefix_cache.register(a[0], hashes([7] * BS)[0])
    cached = list(a)
    bm.free(a)
    b: list[int] = []
    assert bm.grow(b, 2 * BS) and bm.prefix_cache.num_evictions == 0  # the two never-used blocks
    assert bm.prefix_cache.lookup(hashes([7] * BS)) == cached


def test_duplicate_content_stays_private_and_goes_back_to_the_free_list():
    bm = cached_manager(4)
    a, b = [], []
    bm.grow(a, BS)
    bm.grow(b, BS)
    h = hashes([3] * BS)[0]
    assert bm.prefix_cache.register(a[0], h)
    assert not bm.prefix_cache.register(b[0], h)  # same content computed twice: the second copy stays private
    assert not bm.is_shared(b[0]) and bm.is_shared(a[0])
    bm.free(b)
    assert bm.prefix_cache.num_parked == 0 and bm.num_free_blocks == 3


def test_share_needs_an_empty_table_and_double_free_is_still_a_bug():
    bm = cached_manager(2)
    a: list[int] = []
    bm.grow(a, BS)
    with pytest.raises(RuntimeError):
        bm.share(a, [1])
    kept = list(a)
    bm.free(a)
    with pytest.raises(RuntimeError):
        bm.free(kept)


def test_reset_forgets_parked_blocks_only():
    bm = cached_manager(2)
    a, b = [], []
    bm.grow(a, BS)
    bm.grow(b, BS)
    bm.prefix_cache.register(a[0], hashes([1] * BS)[0])
    bm.prefix_cache.register(b[0], hashes([2] * BS)[0])
    bm.free(a)
    assert bm.reset_prefix_cache() == 1
    assert bm.prefix_cache.lookup(hashes([1] * BS)) == [] and bm.prefix_cache.lookup(hashes([2] * BS)) == b
    assert bm.num_free_blocks == 1


def test_without_a_cache_the_manager_behaves_as_before():
    bm = BlockManager(3, BS)
    a: list[int] = []
    assert bm.grow(a, 3 * BS) and bm.num_free_blocks == 0 and not bm.is_shared(a[0])
    bm.free(a)
    assert bm.num_free_blocks == 3 and bm.num_parked(a) == 0

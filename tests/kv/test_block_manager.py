import pytest

from specbench.kv.block_manager import BlockManager


def test_grow_is_all_or_nothing_and_free_returns_blocks():
    bm = BlockManager(num_blocks=5, block_size=4)
    a: list[int] = []
    assert bm.grow(a, 9)  # 3 blocks
    assert len(a) == 3 and bm.num_free_blocks == 2
    b: list[int] = []
    assert not bm.grow(b, 12)  # needs 3, only 2 free: nothing allocated
    assert b == [] and bm.num_free_blocks == 2
    assert bm.grow(a, 12)  # same block count: no-op
    assert len(a) == 3
    bm.free(a)
    assert a == [] and bm.num_free_blocks == 5
    assert bm.grow(b, 20) and len(set(b)) == 5


def test_double_free_is_a_bug():
    bm = BlockManager(num_blocks=2, block_size=4)
    a: list[int] = []
    bm.grow(a, 4)
    kept = list(a)
    bm.free(a)
    with pytest.raises(RuntimeError):
        bm.free(kept)


def test_blocks_never_shared_between_owners():
    bm = BlockManager(num_blocks=8, block_size=2)
    tables = [[] for _ in range(4)]
    for t in tables:
        assert bm.grow(t, 4)
    flat = [b for t in tables for b in t]
    assert len(flat) == len(set(flat)) == 8

"""`num_blocks_outside_windows`: hand-worked cases, and a brute force over every future query of every layer."""

from __future__ import annotations

import itertools

import pytest

from specbench.attention.window import first_visible_key, num_blocks_outside_windows


def test_first_visible_key_follows_the_convention():
    assert first_visible_key(10, 4) == 7  # sees 7, 8, 9, 10: four keys
    assert first_visible_key(10, 1) == 10
    assert first_visible_key(2, 4) == 0
    assert first_visible_key(10, None) == 0


def test_hand_worked_cases():
    # 20 committed keys, window 4: the next query (position 20) sees 17..20, so keys 0..16 are dead:
    # blocks of 4 -> 0..3 (keys 0..15) free, block 4 (16..19) still holds 17, 18, 19.
    assert num_blocks_outside_windows(20, [4], block_size=4) == 4
    assert num_blocks_outside_windows(20, [5], block_size=4) == 4  # first needed 16: block 4 starts there
    assert num_blocks_outside_windows(20, [6], block_size=4) == 3  # first needed 15
    assert num_blocks_outside_windows(20, [4, 8], block_size=4) == 3  # the widest window decides (first 13)
    assert num_blocks_outside_windows(20, [4, None], block_size=4) == 0  # a global layer keeps everything
    assert num_blocks_outside_windows(3, [4], block_size=4) == 0
    assert num_blocks_outside_windows(0, [1], block_size=2) == 0


def _brute_force(num_committed: int, windows: list[int | None], block_size: int) -> int:
    """Leading blocks none of whose keys any query at num_committed .. num_committed + 40 sees in any layer."""
    def is_seen(key: int) -> bool:
        return any(first_visible_key(p, w) <= key <= p
                   for p in range(num_committed, num_committed + 40) for w in windows)

    num_free = 0
    while all(not is_seen(key) for key in range(num_free * block_size, (num_free + 1) * block_size)):
        num_free += 1
    return num_free


@pytest.mark.parametrize("block_size", [1, 3, 4])
def test_matches_a_brute_force_over_future_queries(block_size):
    for num_committed, windows in itertools.product(range(26), ([1], [4], [7], [3, 9], [2, None], [16, 5, 16])):
        assert num_blocks_outside_windows(num_committed, windows, block_size) == _brute_force(
            num_committed, windows, block_size), (num_committed, windows)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="sliding_window"):
        num_blocks_outside_windows(10, [0], 4)
    with pytest.raises(ValueError, match="every layer"):
        num_blocks_outside_windows(10, [], 4)
    with pytest.raises(ValueError, match="block_size"):
        num_blocks_outside_windows(10, [4], 0)

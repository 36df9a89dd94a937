"""The accepted path's KV moves: pure plan, applied in one gather + scatter; without them a rejected branch shows."""

from __future__ import annotations

import torch

from specbench.speculation.tree import tree_from_parents
from specbench.speculation.tree_kv import accepted_path_moves, apply_moves

BLOCK_SIZE = 4


def _cache_after_verify(num_cached: list[int], num_rows: list[int], block_tables: list[list[int]]) -> torch.Tensor:
    """A flat one-layer cache whose slot holds (request, logical position) encoded as 1000 * (req + 1) + pos."""
    num_slots = (max(max(t) for t in block_tables) + 1) * BLOCK_SIZE
    cache = torch.full((num_slots, 2), -1.0)
    for req, (cached, rows) in enumerate(zip(num_cached, num_rows)):
        for pos in range(cached + rows):
            slot = block_tables[req][pos // BLOCK_SIZE] * BLOCK_SIZE + pos % BLOCK_SIZE
            cache[slot] = 1000 * (req + 1) + pos
    return cache


def _read(cache: torch.Tensor, block_table: list[int], positions: range) -> list[int]:
    slots = [block_table[p // BLOCK_SIZE] * BLOCK_SIZE + p % BLOCK_SIZE for p in positions]
    return cache[slots, 0].long().tolist()


def test_path_lands_right_after_the_root_across_blocks():
    # Request 0: root -> 0, 1; 0 -> 2, 3; 1 -> 4; 4 -> 5; accepted 1, 4, 5 (rank-1 branch). Request 1: a chain,
    # all in place already. Request 2: accepted nothing.
    parents = [[-1, -1, 0, 0, 1, 4], [-1, 0, 1], [-1, -1]]
    tree = tree_from_parents(parents, parents)
    num_cached = [6, 2, 9]
    block_tables = [[5, 1, 7, 8], [0, 3, 0, 0], [2, 4, 6, 0]]  # padded with 0
    accepted = torch.tensor([[1, 4, 5], [0, 1, -1], [-1, -1, -1]])
    num_accepted = torch.tensor([3, 2, 0])
    plan = accepted_path_moves(accepted, num_accepted, torch.tensor(num_cached), torch.tensor(block_tables), BLOCK_SIZE)
    assert plan.req.tolist() == [0, 0, 0]
    # node a at depth d: from num_cached + 1 + a to num_cached + 1 + d
    assert plan.src_pos.tolist() == [8, 11, 12] and plan.dst_pos.tolist() == [7, 8, 9]
    cache = _cache_after_verify(num_cached, (tree.num_nodes + 1).tolist(), block_tables)
    apply_moves(cache, plan)
    # Position 8 was both a destination (node 4 -> depth 1) and a source (node 1): the gather came first.
    assert _read(cache, block_tables[0], range(6, 10)) == [1006, 1008, 1011, 1012]
    assert _read(cache, block_tables[1], range(2, 5)) == [2002, 2003, 2004]
    assert _read(cache, block_tables[0], range(6)) == [1000 + p for p in range(6)]  # the prefix is untouched


def test_without_the_moves_a_catch_up_reads_a_rejected_branch():
    """Seed 003's bug in tree form: skipping the plan leaves rejected node 0's KV where the path's depth 0 lives."""
    block_tables = [[0, 1]]
    accepted, num_accepted = torch.tensor([[1, 2]]), torch.tensor([2])  # root -> 0, 1; 1 -> 2
    plan = accepted_path_moves(accepted, num_accepted, torch.tensor([3]), torch.tensor(block_tables), BLOCK_SIZE)
    stale = _cache_after_verify([3], [4], block_tables)
    moved = stale.clone()
    apply_moves(moved, plan)
    path_kv = [1000 + 3, 1000 + 4 + 1, 1000 + 4 + 2]  # root, node 1, node 2 (stored at 3 + 1 + index)
    assert _read(moved, block_tables[0], range(3, 6)) == path_kv
    assert _read(stale, block_tables[0], range(3, 6)) == [1003, 1004, 1005]  # node 0 (rejected) at depth 0

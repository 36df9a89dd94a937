"""The accepted path's KV moves: pure plan, applied in one gather + scatter; without them a rejected branch shows."""

from __future__ import annotations

import torch

from specbench.speculation.tree.draft_tree import tree_from_parents
from specbench.speculation.tree.kv import accepted_path_moves, apply_moves
from tests.support.trees import random_round

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


def test_padded_plan_over_all_layers_equals_the_reference_per_layer():
    """padded_path_moves + move_slots_all_layers (two launches for every layer's K and V) leave the cache exactly as
    accepted_path_moves + apply_moves layer by layer, on random paths whose destinations overlap other moves'
    sources; then a layer swapped out of the storage takes the per-layer fallback with the same result."""
    from specbench.kv.kv_cache import KVCache, KVCacheSpec
    from specbench.speculation.tree.kv import move_slots_all_layers, padded_path_moves

    gen = torch.Generator().manual_seed(0)
    num_overlapping = 0
    for _ in range(30):
        accepted, num_accepted, cached, tables = random_round(gen, 5, 9, 40)
        kv = KVCache(KVCacheSpec(3, 2, 4, torch.float32), 40, BLOCK_SIZE, torch.device("cpu"))
        kv.storage.copy_(torch.randn(kv.storage.shape, generator=gen))
        want = [t.clone() for layer in range(3) for t in kv.flat(layer)]
        plan = accepted_path_moves(accepted, num_accepted, cached, tables, BLOCK_SIZE)
        for cache in want:
            apply_moves(cache, plan)
        num_overlapping += len(set(plan.src_slot.tolist()) & set(plan.dst_slot.tolist())) > 0
        move_slots_all_layers(kv, padded_path_moves(accepted, num_accepted, cached, tables, BLOCK_SIZE))
        assert all(torch.equal(got, w) for got, w in zip((t for layer in range(3) for t in kv.flat(layer)), want))
    assert num_overlapping > 0, "no round had a destination that is another move's source"
    kv.k[1] = kv.k[1].clone()  # swapped out of the storage: the per-layer path
    assert kv.all_layers_flat() is None
    move_slots_all_layers(kv, padded_path_moves(accepted, num_accepted, cached, tables, BLOCK_SIZE))


def test_padded_plan_writes_only_path_slots():
    """Non-moves are root self-copies: every slot outside the real destinations keeps its value."""
    from specbench.speculation.tree.kv import padded_path_moves

    block_tables = [[5, 1, 7, 8], [0, 3, 2, 4], [6, 9, 10, 11]]
    accepted = torch.tensor([[1, 4, 5], [0, 1, -1], [-1, -1, -1]])
    num_accepted = torch.tensor([3, 2, 0])
    cached = torch.tensor([6, 2, 9])
    cache = torch.randn(12 * BLOCK_SIZE, 3)
    reference = cache.clone()
    apply_moves(reference, accepted_path_moves(accepted, num_accepted, cached, torch.tensor(block_tables), BLOCK_SIZE))
    padded = padded_path_moves(accepted, num_accepted, cached, torch.tensor(block_tables), BLOCK_SIZE)
    assert padded.num_moves == 9
    apply_moves(cache, padded)
    assert torch.equal(cache, reference)

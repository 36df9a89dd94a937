"""The tree part of a forward's attention metadata: which of its request's tree rows each query sees (`TreeMask`,
declared beside AttentionMetadata in metadata.py; built and checked here).

A tree forward (a tree verify, or a tree draft step) stores its request's *tree rows* as the last
`num_tree_rows[r]` keys of request r, in row order; its queries are the last `num_query[r]` of those rows. Every
query sees the whole prefix before the tree rows, and among the tree rows exactly those `mask` lists (itself and
its ancestors: never a sibling or cousin). The stored order is not the position order, so a query's RoPE position
is its prefix length plus the number of tree rows it sees, minus one (INV-TREE below), and its slot is the slot of
its *storage* position, not of its RoPE position.
- tree verify: the tree rows are this forward's queries (root + nodes), num_tree_rows = num_query.
- tree draft step s: the tree rows are every frontier node fed so far this round (steps 1..s), the queries the
  newest frontier: num_tree_rows > num_query.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.attention.invariant_violation import InvariantViolation
# TreeMask is declared beside AttentionMetadata (its `tree` field): import it from specbench.attention.metadata.
from specbench.attention.metadata import PADDING_SLOT, AttentionMetadata, TreeMask, build_metadata, slot_of
from specbench.device_copy import tensor_to_device, to_device


def build_tree_metadata(
    *,
    positions: list[int],  # [num_tokens] RoPE position of each query (prefix + visible tree rows - 1)
    storage_positions: list[int],  # [num_tokens] logical position whose KV slot the query writes
    num_query: list[int],  # [num_reqs]
    num_tree_rows: list[int],  # [num_reqs] >= num_query
    seq_lens: list[int],  # [num_reqs] keys after this forward: prefix + num_tree_rows
    mask: torch.Tensor,  # [num_tokens, max_tree_rows] bool, host
    block_tables: list,
    block_size: int,
    device: torch.device,
) -> AttentionMetadata:
    slots, t = [], 0
    for r, n in enumerate(num_query):
        slots.extend(slot_of(block_tables[r], storage_positions[t + j], block_size) for j in range(n))
        t += n
    md = build_metadata(positions=positions, num_query=num_query, seq_lens=seq_lens, block_tables=block_tables,
                        block_size=block_size, device=device, slot_mapping=slots)
    is_verify = list(num_query) == list(num_tree_rows)
    tree_rows = None if is_verify else to_device(list(num_tree_rows), torch.int32, device)
    tree = TreeMask(mask=tensor_to_device(mask, device), mask_cpu=mask, num_tree_rows=tuple(num_tree_rows),
                    is_verify=is_verify, tree_rows=tree_rows)
    return dataclasses.replace(md, tree=tree)


def is_verify_layout(md: AttentionMetadata) -> bool:
    """Every request's tree rows are exactly this forward's queries (a tree verify: what the Triton kernel takes)."""
    assert md.tree is not None
    return md.tree.is_verify


def tree_query_rows(md: AttentionMetadata, r: int) -> tuple[int, int]:
    """(first tree row of request r's queries, prefix length) of a tree forward."""
    assert md.tree is not None
    num_query = md.query_start_loc_cpu[r + 1] - md.query_start_loc_cpu[r]
    num_rows = md.tree.num_tree_rows[r]
    return num_rows - num_query, md.seq_lens_cpu[r] - num_rows


def check_tree_positions_and_slots(md: AttentionMetadata, where: str = "") -> None:
    """INV-TREE (INV-0 and INV-SLOT of a tree forward): query j of request r, tree row i = first + j, sees its own
    row and the prefix; its position is prefix + (tree rows it sees) - 1, and it writes the slot of storage position
    prefix + i, each slot once."""
    tree = md.tree
    assert tree is not None
    cu = md.query_start_loc_cpu
    if tuple(tree.mask_cpu.shape[:1]) != (cu[-1],):
        raise InvariantViolation(f"{where}: INV-TREE violated: mask has {tree.mask_cpu.shape[0]} rows for "
                                 f"{cu[-1]} queries")
    is_verify = all(cu[r + 1] - cu[r] == n for r, n in enumerate(tree.num_tree_rows))
    if tree.is_verify != is_verify:
        raise InvariantViolation(f"{where}: INV-TREE violated: is_verify {tree.is_verify}, but the tree rows "
                                 f"{'are' if is_verify else 'are not'} exactly the queries")
    if tree.packed is not None and tuple(tree.packed.shape[:1]) != (cu[-1],):
        raise InvariantViolation(f"{where}: INV-TREE violated: packed mask has {tree.packed.shape[0]} rows for "
                                 f"{cu[-1]} queries")
    seen: set[int] = set()
    for r in range(md.num_reqs):
        num_query, num_rows = cu[r + 1] - cu[r], tree.num_tree_rows[r]
        if not num_query <= num_rows <= md.seq_lens_cpu[r] or num_rows > tree.mask_cpu.shape[1]:
            raise InvariantViolation(f"{where}: INV-TREE violated: request {r} has {num_query} queries, {num_rows} "
                                     f"tree rows, {md.seq_lens_cpu[r]} keys, mask width {tree.mask_cpu.shape[1]}")
        first, prefix = tree_query_rows(md, r)
        for j in range(num_query):
            t, row = cu[r] + j, first + j
            sees = tree.mask_cpu[t, :num_rows]
            if not bool(sees[row]) or bool(sees[row + 1:].any()):
                raise InvariantViolation(f"{where}: INV-TREE violated: request {r} query {j} (tree row {row}) must "
                                         f"see itself and no later row, sees {sees.nonzero().flatten().tolist()}")
            expected = prefix + int(sees.sum()) - 1
            if md.positions_cpu[t] != expected:
                raise InvariantViolation(f"{where}: INV-TREE violated: request {r} query {j} at position "
                                         f"{md.positions_cpu[t]} sees {expected + 1} keys (expected {expected})")
            slot = md.slot_mapping_cpu[t]
            own = slot_of(md.block_tables_cpu[r], prefix + row, md.block_size)
            if slot == PADDING_SLOT or slot != own or slot in seen:
                raise InvariantViolation(f"{where}: INV-TREE violated: request {r} query {j} (tree row {row}) writes "
                                         f"slot {slot}, its storage slot is {own} (each written once)")
            seen.add(slot)

"""After a tree verify: the KV moves that put the accepted path right after the committed prefix.

The verify forward stores request r's row j (root = row 0, node i = row 1 + i) at logical position
num_cached[r] + j, num_cached being the tokens cached before that forward. Tree nodes are stored in node order,
not at their positions, so after acceptance the path a_0, .., a_{m-1} must move to positions
num_cached + 1 + d; anything later in the cache is overwritten by the next forward. Without the moves the next
forward (or a drafter's catch-up) attends to a rejected branch's KV at the path's positions.

Ordering: node indices grow along a path (a parent precedes its child), so a_d >= d: every move goes left or
stays. A destination may be another move's source (node 4 -> depth 1 while node 1 -> depth 0: position 1 is
both), so the moves read every source before writing any destination: one gather, then one scatter
(`apply_moves`), exact whatever the order. In depth order one at a time would be exact too (move d reads
a_d >= d, never an earlier move's destination d' < d), which is what a per-move kernel must keep.

Two forms of the plan. `accepted_path_moves`: only the real moves (the readable reference; a boolean selection,
so its size is read from the device). `padded_path_moves`: [num_reqs * width] fixed-size moves built with no
host read, every non-move (past the path, or a node already in place) turned into a copy of the request's root
slot onto itself: that slot is never a real destination (destinations are > the root's position, requests own
disjoint blocks), and duplicate self-copies write the value the slot already holds. `move_slots_all_layers`
applies a plan to every layer's K and V in two launches (KVCache.storage).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.kv.kv_cache import KVCache


@dataclass(frozen=True, slots=True)
class KVMovePlan:
    req: torch.Tensor  # [num_moves] int64, request of each move
    src_pos: torch.Tensor  # [num_moves] int64, logical position the accepted node's KV was stored at
    dst_pos: torch.Tensor  # [num_moves] int64, its position on the accepted path
    src_slot: torch.Tensor  # [num_moves] int64, physical slot (block * block_size + offset) of src_pos
    dst_slot: torch.Tensor  # [num_moves] int64, physical slot of dst_pos

    @property
    def num_moves(self) -> int:
        return self.req.shape[0]


def _path_positions(accepted_nodes: torch.Tensor, num_accepted: torch.Tensor, num_cached: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # each [num_reqs, max_depth]
    """(is a move, source position, destination position) of every path column."""
    device = accepted_nodes.device
    d = torch.arange(accepted_nodes.shape[1], device=device)  # [max_depth]
    is_path = d[None, :] < num_accepted.to(device)[:, None]  # [num_reqs, max_depth]
    base = num_cached.to(device)[:, None] + 1  # first node row's position
    src = base + accepted_nodes
    dst = base + d[None, :]
    return is_path & (src != dst), src, dst


def _slot(tables: torch.Tensor, req: torch.Tensor, pos: torch.Tensor, block_size: int) -> torch.Tensor:
    return tables[req, pos // block_size] * block_size + pos % block_size


def accepted_path_moves(
    accepted_nodes: torch.Tensor,  # [num_reqs, max_depth] int64, request-local path nodes, padded with -1
    num_accepted: torch.Tensor,  # [num_reqs] int64
    num_cached: torch.Tensor,  # [num_reqs] int64, tokens cached before the verify forward (the root's position)
    block_tables: torch.Tensor,  # [num_reqs, max_num_blocks] int32
    block_size: int,
) -> KVMovePlan:
    """Moves for every accepted node not already in place (a node at index d on depth d stays put)."""
    device = accepted_nodes.device
    num_reqs, max_depth = accepted_nodes.shape
    is_move, src, dst = _path_positions(accepted_nodes, num_accepted, num_cached)
    req = torch.arange(num_reqs, device=device)[:, None].expand(-1, max_depth)[is_move]
    src_pos, dst_pos = src[is_move], dst[is_move]
    tables = block_tables.to(device).long()
    return KVMovePlan(req=req, src_pos=src_pos, dst_pos=dst_pos, src_slot=_slot(tables, req, src_pos, block_size),
                      dst_slot=_slot(tables, req, dst_pos, block_size))


def padded_path_moves(
    accepted_nodes: torch.Tensor,  # [num_reqs, max_depth] int64, request-local path nodes, padded with -1
    num_accepted: torch.Tensor,  # [num_reqs] int64
    num_cached: torch.Tensor,  # [num_reqs] int64, the root's position
    block_tables: torch.Tensor,  # [num_reqs, max_num_blocks] int32, on the same device
    block_size: int,
) -> KVMovePlan:
    """accepted_path_moves' moves in a fixed [num_reqs * max_depth] layout, non-moves as root self-copies (module
    docstring): built on the device with no host read."""
    device = accepted_nodes.device
    num_reqs, max_depth = accepted_nodes.shape
    is_move, src, dst = _path_positions(accepted_nodes, num_accepted, num_cached)
    root = num_cached.to(device)[:, None].expand(-1, max_depth)
    src, dst = torch.where(is_move, src, root), torch.where(is_move, dst, root)
    req = torch.arange(num_reqs, device=device)[:, None].expand(-1, max_depth)
    tables = block_tables.to(device).long()
    return KVMovePlan(req=req.reshape(-1), src_pos=src.reshape(-1), dst_pos=dst.reshape(-1),
                      src_slot=_slot(tables, req, src, block_size).reshape(-1),
                      dst_slot=_slot(tables, req, dst, block_size).reshape(-1))


def apply_moves(cache: torch.Tensor, plan: KVMovePlan) -> None:
    """cache: [num_slots, ...] one layer's flat K or V; gathers every source before writing any destination."""
    move_slots(cache, plan.src_slot, plan.dst_slot)


def move_slots(cache: torch.Tensor, src_slot: torch.Tensor, dst_slot: torch.Tensor) -> None:
    """cache[dst_slot] = cache[src_slot] for one layer's flat K or V, every source read before any write."""
    cache.index_copy_(0, dst_slot, cache[src_slot])


def move_slots_all_layers(kv: KVCache, plan: KVMovePlan) -> None:
    """apply_moves on every layer's K and V: one gather and one scatter over KVCache.storage (a per-layer loop when
    a layer was swapped out of it)."""
    flat = kv.all_layers_flat()  # [2 * num_layers, num_slots, heads * dim]
    if flat is None:
        for layer in range(len(kv.k)):
            for cache in kv.flat(layer):
                apply_moves(cache, plan)
        return
    flat.index_copy_(1, plan.dst_slot, flat.index_select(1, plan.src_slot))

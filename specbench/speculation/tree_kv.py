"""After a tree verify: the KV moves that put the accepted path right after the committed prefix.

The verify forward stores request r's row j (root = row 0, node i = row 1 + i) at logical position
num_cached[r] + j, num_cached being the tokens cached before that forward. Tree nodes are stored in node order,
not at their positions, so after acceptance the path a_0, .., a_{m-1} must move to positions
num_cached + 1 + d; anything later in the cache is overwritten by the next forward. Without the moves the next
forward (or a drafter's catch-up) attends to a rejected branch's KV at the path's positions.

Ordering: node indices grow along a path (a parent precedes its child), so a_d >= d: every move goes left or
stays, and no move's destination is a later move's source. Applying them as one gather followed by one scatter
(`apply_moves`) is therefore exact whatever the order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


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
    d = torch.arange(max_depth, device=device)  # [max_depth]
    is_path = d[None, :] < num_accepted.to(device)[:, None]  # [num_reqs, max_depth]
    base = num_cached.to(device)[:, None] + 1  # first node row's position
    src = base + accepted_nodes  # [num_reqs, max_depth]
    dst = base + d[None, :]
    is_move = is_path & (src != dst)
    req = torch.arange(num_reqs, device=device)[:, None].expand(-1, max_depth)[is_move]
    src_pos, dst_pos = src[is_move], dst[is_move]
    tables = block_tables.to(device).long()

    def slot(pos: torch.Tensor) -> torch.Tensor:
        return tables[req, pos // block_size] * block_size + pos % block_size

    return KVMovePlan(req=req, src_pos=src_pos, dst_pos=dst_pos, src_slot=slot(src_pos), dst_slot=slot(dst_pos))


def apply_moves(cache: torch.Tensor, plan: KVMovePlan) -> None:
    """cache: [num_slots, ...] one layer's flat K or V; gathers every source before writing any destination."""
    move_slots(cache, plan.src_slot, plan.dst_slot)


def move_slots(cache: torch.Tensor, src_slot: torch.Tensor, dst_slot: torch.Tensor) -> None:
    """cache[dst_slot] = cache[src_slot] for one layer's flat K or V, every source read before any write."""
    cache.index_copy_(0, dst_slot, cache[src_slot])

"""Which recurrent-state slot each request of a target forward reads and writes, and how it writes it.

Rows of committed tokens (a prefill, a prompt chunk) write their final state straight into the request's slot.
Verify rows (the newest token, then its drafts) keep the state after every position in the cache's pending buffers
and leave the slot alone: the verifier's accepted count picks which one the slot takes (StateCache.commit). A tree
verify's rows keep the state after every node, each continuing its parent's (`tree`); the accepted path's last node
picks the slot's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.device_copy import to_device

from specbench.recurrent.state_snapshots import SnapshotPoint

if TYPE_CHECKING:
    from specbench.recurrent.tree_verify import TreeStateRows


@dataclass(frozen=True, slots=True)
class StateRows:
    slots: tuple[int, ...]  # [num_reqs] each request's state slot (StateCache.slot_for)
    # [num_reqs] True for verify requests (always the batch's first ones): states kept per position until commit
    keeps_positions: tuple[bool, ...]
    # [num_reqs] first pending row of a verify request's kept states (its newest token); -1 for the others
    pending_starts: tuple[int, ...]
    num_pending: int  # kept positions over the forward (the verify rows)
    # [num_reqs] the request's rows start at position 0 (a prefill or re-prefill): its state starts from zeros, not
    # from whatever its slot held (a previous owner's state)
    starts_fresh: tuple[bool, ...] = ()
    # states the forward writes into the snapshot store as well (block boundaries: recurrent/state_snapshots.py)
    snapshots: tuple[SnapshotPoint, ...] = ()
    # a tree verify (every request a verify row: its root, then its nodes): each row continues its parent's state,
    # not its previous row's (recurrent/tree_verify.py); None: rows are chains
    tree: TreeStateRows | None = None
    # [num_reqs] int64 on the device: `slots`, built once per forward (engine/state_attach.py) so the batched verify
    # gathers and a CUDA graph reads slots from a tensor, never from the host tuple (a graph's is a static buffer
    # reloaded before each replay: recurrent/graph_rows.py). None: built from `slots` where needed (tests, oracles).
    slot_index: torch.Tensor | None = None
    # A CUDA graph's rows (recurrent/graph_rows.py): every request, padding included, a verify row of this many
    # tokens, known without the forward's host offsets (a graph's metadata has none); 0 = an ordinary forward.
    graph_query_len: int = 0

    @property
    def num_verify_reqs(self) -> int:
        return sum(self.keeps_positions)

    def slot_tensor(self, device: torch.device) -> torch.Tensor:  # [num_reqs] int64
        """The requests' slots on `device`: `slot_index` where the forward was handed one."""
        if self.slot_index is not None:
            return self.slot_index
        return to_device(list(self.slots), torch.int64, device)


def state_rows(slots: list[int], num_query: list[int], num_verify_reqs: int,
               starts_fresh: list[bool] | None = None, snapshots: tuple[SnapshotPoint, ...] = (),
               slot_index: torch.Tensor | None = None) -> StateRows:
    """The first `num_verify_reqs` requests are verify rows (they keep positions), the rest committed tokens;
    `starts_fresh` None: none starts fresh. `slot_index`: `slots` on the device, built by the caller (the engine:
    one copy per forward)."""
    starts: list[int] = []
    num_pending = 0
    for r, n in enumerate(num_query):
        starts.append(num_pending if r < num_verify_reqs else -1)
        num_pending += n if r < num_verify_reqs else 0
    keeps = tuple(r < num_verify_reqs for r in range(len(slots)))
    fresh = tuple(starts_fresh) if starts_fresh is not None else (False,) * len(slots)
    return StateRows(tuple(slots), keeps, tuple(starts), num_pending, fresh, snapshots, slot_index=slot_index)

"""Recurrent-state snapshots at prefix-cache block boundaries (hybrid targets): what lets a prefix hit resume the
recurrent layers (Gated DeltaNet, Mamba-2), whose state after a cached block the block's K/V does not hold.

A forward whose rows cross a snapshot point (a multiple of `interval` tokens: `stride` whole blocks) writes the state
after that point into an entry claimed for (request, point) (`plan`, then the layer: recurrent/gated_delta_net.py).
The entry is provisional until the request's block ending there is registered in the prefix cache, which happens only
once the point is committed (engine/prefix_reuse.py): then `publish` keys it by the block's hash. A verify's drafted
positions write provisional entries too; a rejected one is rewritten by the forward that later commits that position
(the last forward whose rows cover a position is the one that committed it), or dropped with the request.

A published snapshot is read-only: a hit copies it into the request's own slot (`restore`). The store is bounded
(`capacity` entries, allocated up front beside the slots): claiming an entry when none is free evicts the least
recently used published snapshot; a block evicted from the prefix cache drops its snapshot (`drop`). A hit whose last
block has no snapshot is shortened to the last block that has one (PrefixReuse.lookup).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from specbench.recurrent.state_shape import StateShape


@dataclass(frozen=True, slots=True)
class SnapshotPoint:
    request: int  # the request's index in the forward
    row: int  # its row (0 = its first token in this forward) after which the state is taken
    entry: int  # the store entry the state is written to


class StateSnapshots:
    def __init__(self, shape: StateShape, capacity: int, block_size: int, stride: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        self.capacity = capacity
        self.block_size = block_size
        self.interval = block_size * stride  # tokens between snapshot points
        s = shape
        # [num_state_layers, capacity, conv_channels, conv_width], as StateCache.conv
        self.conv = torch.zeros(s.num_layers, capacity, s.conv_channels, s.conv_width, dtype=dtype, device=device)
        # [num_state_layers, capacity, *recurrent_dims] fp32, as StateCache.recurrent
        self.recurrent = torch.zeros(s.num_layers, capacity, *s.recurrent_dims, dtype=torch.float32, device=device)
        self._published: OrderedDict[bytes, int] = OrderedDict()  # block hash -> entry, least recently used first
        self._provisional: dict[str, dict[int, int]] = {}  # request -> {tokens covered: entry}, not yet published
        self._free = list(range(capacity - 1, -1, -1))
        self.num_published = 0  # since construction (measurements)
        self.num_restored = 0

    @property
    def num_cached(self) -> int:
        return len(self._published)

    # ---- taking snapshots -------------------------------------------------------------------------
    def plan(self, request_ids: list[str], first_positions: list[int], num_query: list[int]) -> tuple[SnapshotPoint,
                                                                                                       ...]:
        """The snapshot points of a forward: request r's rows cover positions first_positions[r] .. + num_query[r];
        the state after row j covers first_positions[r] + j + 1 tokens. Each request's points are claimed last
        first (a later one gives a longer hit); one with no entry to claim (every entry provisional) is skipped: its
        block will have no snapshot."""
        points = []
        for r, (request_id, first, n) in enumerate(zip(request_ids, first_positions, num_query)):
            point = (first + n) // self.interval * self.interval  # the last multiple within the rows
            mine = []
            while point > first:
                entry = self._claim(request_id, point)
                if entry is not None:
                    mine.append(SnapshotPoint(r, point - first - 1, entry))
                point -= self.interval
            points.extend(reversed(mine))
        return tuple(points)

    def _claim(self, request_id: str, num_tokens: int) -> int | None:
        mine = self._provisional.setdefault(request_id, {})
        entry = mine.get(num_tokens)
        if entry is None:
            if not self._free and self._published:
                self._free.append(self._published.popitem(last=False)[1])
            if not self._free:
                return None
            entry = mine[num_tokens] = self._free.pop()
        return entry

    def publish(self, request_id: str, num_tokens: int, block_hash: bytes) -> bool:
        """The request's block ending at `num_tokens` (committed) was registered under `block_hash`: its provisional
        snapshot there becomes that hash's (unless the hash has one already). False: none taken there."""
        entry = self._provisional.get(request_id, {}).pop(num_tokens, None)
        if entry is None:
            return False
        if block_hash in self._published:  # the same content snapshotted by another request: keep the older
            self._free.append(entry)
            return True
        self._published[block_hash] = entry
        self.num_published += 1
        return True

    def forget_request(self, request_id: str) -> None:
        """The request's slot is freed: its provisional entries (drafted past its end, or never registered) too."""
        self._free.extend(self._provisional.pop(request_id, {}).values())

    # ---- prefix hits --------------------------------------------------------------------------------
    def has(self, block_hash: bytes) -> bool:
        return block_hash in self._published

    def is_point(self, num_tokens: int) -> bool:
        """Whether a block ending at `num_tokens` can have a snapshot."""
        return num_tokens % self.interval == 0

    def restore(
        self,
        block_hash: bytes,
        slot_conv: torch.Tensor,  # [num_state_layers, num_slots, conv_channels, conv_width]: StateCache.conv
        slot_recurrent: torch.Tensor,  # [num_state_layers, num_slots, *recurrent_dims]: StateCache.recurrent
        slot: int,
    ) -> None:
        """Copy the snapshot of `block_hash` into `slot` (device copies, in stream order before the forward that
        reads it); the snapshot itself is left as it was."""
        entry = self._published[block_hash]
        self._published.move_to_end(block_hash)
        slot_conv[:, slot] = self.conv[:, entry]
        slot_recurrent[:, slot] = self.recurrent[:, entry]
        self.num_restored += 1

    def drop(self, block_hash: bytes) -> None:
        """The prefix cache evicted the block: no hit can end there any more."""
        entry = self._published.pop(block_hash, None)
        if entry is not None:
            self._free.append(entry)


"""Per-request recurrent state of a hybrid target's Gated DeltaNet layers: the one owner of the slots, beside the
paged KV cache (which keeps the full-attention layers' K/V).

A request gets a slot the first time a forward runs it (or when a prefix hit restores a snapshot into it:
recurrent/state_snapshots.py) and gives it back when the engine frees it (finished, aborted, preempted). A forward
row starting at position 0 starts from zeros (StateRows.starts_fresh), so a preempted request that is re-prefilled
rebuilds its state from its committed tokens (or resumes from a prefix hit's snapshot), and a reused slot never
leaks the previous owner's state.

Verify: the layers keep each position's conv and recurrent state in `pending` (per layer, [num_pending, ...]); after
the verifier, `commit` copies row (pending_start + num_accepted) of each verify request into its slot
(engine/state_attach.py picks the rows), on the device (no host sync: an overlapped or drafted-ahead step launched
next reads the committed state in stream order).

One more slot than requests, `scratch_slot`, is never handed out: the padding requests of a CUDA graph's batch
bucket read it (recurrent/graph_rows.py), so a padding row can never read or move a real request's state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from specbench.errors import SpecbenchError
from specbench.recurrent.state_shape import StateShape

if TYPE_CHECKING:
    from specbench.recurrent.state_snapshots import StateSnapshots


class StateCache:
    def __init__(self, shape: StateShape, num_slots: int, dtype: torch.dtype, device: torch.device) -> None:
        self.shape = shape
        self.num_slots = num_slots  # slots requests may own; index num_slots is the scratch slot
        self.scratch_slot = num_slots
        s = shape
        # [num_state_layers, num_slots + 1, conv_channels, conv_width], the model's dtype (as the inputs it keeps)
        self.conv = torch.zeros(s.num_layers, num_slots + 1, s.conv_channels, s.conv_width, dtype=dtype,
                                device=device)
        # [num_state_layers, num_slots + 1, *recurrent_dims] fp32 (Gated DeltaNet: [Hv, Dk, Dv]; Mamba-2: [H, P, N]):
        # the recurrence accumulates in fp32
        self.recurrent = torch.zeros(s.num_layers, num_slots + 1, *s.recurrent_dims, dtype=torch.float32,
                                     device=device)
        self._slot_of: dict[str, int] = {}
        self._free = list(range(num_slots - 1, -1, -1))
        # per state layer, this forward's kept states: (conv [num_pending, C, W], recurrent [num_pending, *dims])
        self.pending: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # snapshots at prefix-cache block boundaries (recurrent/state_snapshots.py); None: prefix caching off
        self.snapshots: StateSnapshots | None = None
        # While a CUDA graph's forward runs (recurrent/graph_rows.py): static buffers its kept states are written to,
        # (conv [num_state_layers, max_rows, C, W], recurrent [num_state_layers, max_rows, *dims] fp32), shared by
        # every graph so that each graph does not hold kept states of its own; None: fresh tensors per forward.
        self.static_kept: tuple[torch.Tensor, torch.Tensor] | None = None
        # the CUDA graphs' kept-state buffers (recurrent/graph_rows.new_graph_kept), reserved before the KV pool is
        # sized; None: no graphs (or not reserved yet)
        self.graph_kept: tuple[torch.Tensor, torch.Tensor] | None = None

    # ---- slots ----------------------------------------------------------------------------------
    def slot_for(self, request_id: str) -> int:
        slot = self._slot_of.get(request_id)
        if slot is None:
            if not self._free:
                raise SpecbenchError(f"all {self.num_slots} recurrent-state slots are taken; lower max_num_seqs")
            slot = self._slot_of[request_id] = self._free.pop()
        return slot

    def free(self, request_id: str) -> None:
        slot = self._slot_of.pop(request_id, None)
        if slot is not None:
            self._free.append(slot)
        if self.snapshots is not None:
            self.snapshots.forget_request(request_id)

    @property
    def num_used(self) -> int:
        return len(self._slot_of)

    # ---- a forward ------------------------------------------------------------------------------
    def begin_forward(self) -> None:
        self.pending.clear()

    def kept_rows(self, layer: int, num_pending: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Storage for a forward's kept states of state layer `layer`: conv [num_pending, C, W] in the slots' dtype
        and recurrent [num_pending, *dims] fp32; rows of the static buffers while a graph's forward runs."""
        if self.static_kept is not None:
            conv, recurrent = self.static_kept
            return conv[layer, :num_pending], recurrent[layer, :num_pending]
        s = self.shape
        return (torch.empty(num_pending, s.conv_channels, s.conv_width, dtype=self.conv.dtype, device=self.conv.device),
                torch.empty(num_pending, *s.recurrent_dims, dtype=torch.float32, device=self.conv.device))

    def keep(self, layer: int, conv_states: torch.Tensor, recurrent_states: torch.Tensor) -> None:
        """A state layer's kept per-position states of the forward's verify rows (in pending-row order)."""
        self.pending[layer] = (conv_states, recurrent_states)

    def commit(self, slots: torch.Tensor, conv_rows: torch.Tensor, recurrent_rows: torch.Tensor) -> None:
        """After the verifier: slot slots[i] takes kept row conv_rows[i] / recurrent_rows[i] of every state layer
        (all [num_committed] int64 on the device; engine/state_attach.py picks them from the accepted counts)."""
        if self._pending_is_graph_kept():  # after a graph's replay: every layer at once, 4 launches, not 4 a layer
            conv_kept, recurrent_kept = self.graph_kept
            self.conv[:, slots] = conv_kept[:, conv_rows]
            self.recurrent[:, slots] = recurrent_kept[:, recurrent_rows]
        else:
            for layer, (conv_states, recurrent_states) in self.pending.items():
                self.conv[layer, slots] = conv_states[conv_rows]
                self.recurrent[layer, slots] = recurrent_states[recurrent_rows]
        self.pending.clear()

    def _pending_is_graph_kept(self) -> bool:
        """Every state layer's kept states are the graphs' static buffers from their first row (a replay's outputs:
        recurrent/graph_rows.py restore_kept), so one index over the layer dimension reaches them all."""
        if self.graph_kept is None or len(self.pending) != self.shape.num_layers:
            return False
        conv_kept, recurrent_kept = self.graph_kept
        return all(conv.data_ptr() == conv_kept[layer].data_ptr()
                   and recurrent.data_ptr() == recurrent_kept[layer].data_ptr()
                   for layer, (conv, recurrent) in self.pending.items())

    def snapshot_kept(self, entries: torch.Tensor, rows: torch.Tensor) -> None:
        """Snapshot entries[i] takes kept row rows[i] of every state layer (both [num_points] int64 on the device):
        a tree verify's snapshots, taken from its accepted path before the commit clears the kept rows."""
        snapshots = self.snapshots
        assert snapshots is not None, "snapshots are taken with prefix caching on only"
        for layer, (conv_states, recurrent_states) in self.pending.items():
            snapshots.conv[layer, entries] = conv_states[rows].to(snapshots.conv.dtype)
            snapshots.recurrent[layer, entries] = recurrent_states[rows]

def state_shape(model) -> StateShape:
    """The per-request state of a hybrid DecoderLM: every state layer's, in its kind's layout
    (ModelConfig.state_layout)."""
    c = model.config
    num_layers = sum(1 for k in c.attention_kinds if k.is_recurrent_state)
    return StateShape.of(c.state_layout, num_layers)


def new_state_cache(model, max_concurrency: int) -> StateCache:
    """Slots for `max_concurrency` running requests of a hybrid DecoderLM."""
    return StateCache(state_shape(model), max_concurrency, model.dtype, model.embed_weight.device)

"""What every recurrent-state token mixer of a hybrid target (Gated DeltaNet, Mamba-2) shares with the engine: the
forward's signature, the slot each state layer owns in the StateCache, and how it writes states to the snapshot store.

A mixer's forward over a ragged batch (query_start_loc_cpu [num_reqs + 1]) reads each request's slot
(rows.slots[r]) and, per rows (recurrent/state_rows.py):
- committed rows (a prefill, a prompt chunk): the state after the last token straight into the slot, from zeros
  where rows.starts_fresh[r]; the states at rows.snapshots' points into the snapshot store;
- verify rows (keeps_positions): the conv and recurrent state after every position into the StateCache's pending
  buffers (StateCache.keep, rows pending_starts[r] ..), the slot left alone until the commit picks one; those at
  rows.snapshots' points reach the store after the forward (write_verify_snapshots, the engine's commit), so a
  forward replayed from a CUDA graph writes exactly what an eager one does.
Its state is a conv part and a recurrent part in the layout its config declares (recurrent/state_shape.py), so the
cache, the commit, the snapshots, the oracle and the state mutants act on every kind alike.
"""

from __future__ import annotations

import torch
from torch import nn

from specbench.device_copy import to_device
from specbench.errors import SpecbenchError
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_rows import StateRows


class RecurrentMixer(nn.Module):
    """Base of the state layers' mixers; `state_layer` is the index of the layer's state in the StateCache."""

    state_layer: int

    def forward(self, x: torch.Tensor, query_start_loc_cpu: tuple[int, ...], states: StateCache, rows: StateRows,
                paths=None) -> torch.Tensor:  # x [num_tokens, hidden] -> [num_tokens, hidden]
        raise NotImplementedError


def mix_tokens(mixer: RecurrentMixer, normed: torch.Tensor, query_start_loc_cpu: tuple[int, ...], kv_cache,
               state_rows: StateRows | None, paths=None) -> torch.Tensor:  # normed [num_tokens, hidden] -> same
    """A hybrid layer's recurrent mixer over its requests' state slots (the KV cache's StateCache, the metadata's
    rows); a phase that attached no slots is one clear error, never a forward over someone else's state."""
    states = getattr(kv_cache, "states", None)  # None: a cache without recurrent layers (kv/ owns both shapes)
    if states is None or state_rows is None:
        raise SpecbenchError("a hybrid target's forward needs its requests' recurrent-state slots "
                             "(this phase does not attach them)")
    return mixer(normed, query_start_loc_cpu, states, state_rows, paths)


def write_snapshots(states: StateCache, layer: int, entries: list[int], conv: torch.Tensor | None,
                    recurrent: torch.Tensor | None) -> None:
    """State layer `layer`'s states conv [num_points, C, W] and recurrent [num_points, *dims] into snapshot
    `entries` (None: that part is written by another call)."""
    snapshots = states.snapshots
    index = to_device(entries, torch.int64, snapshots.conv.device)
    if conv is not None:
        snapshots.conv[layer, index] = conv.to(snapshots.conv.dtype)
    if recurrent is not None:
        snapshots.recurrent[layer, index] = recurrent


def keep_verify_states(states: StateCache, layer: int, kept_conv: torch.Tensor, kept_recurrent: torch.Tensor) -> None:
    """A forward's verify rows' per-position states (kept_conv [num_pending, C, W], kept_recurrent
    [num_pending, *dims]) kept for the commit. Those at snapshot points reach the store after the forward
    (write_verify_snapshots), never from inside it: a CUDA graph's forward cannot see the step's points."""
    states.keep(layer, kept_conv, kept_recurrent)


def write_verify_snapshots(states: StateCache, rows: StateRows) -> None:
    """After a forward (eager or a graph's replay), before the commit: the kept states of its verify rows at
    snapshot points into the store, every state layer (provisional: only a committed one is ever published)."""
    points = [p for p in rows.snapshots if rows.keeps_positions[p.request]]
    if not points or not states.pending:
        return
    device = states.conv.device
    pending = to_device([rows.pending_starts[p.request] + p.row for p in points], torch.int64, device)
    entries = [p.entry for p in points]
    for layer, (kept_conv, kept_recurrent) in states.pending.items():
        write_snapshots(states, layer, entries, kept_conv[pending], kept_recurrent[pending])


def is_uniform_verify(rows: StateRows, query_start_loc_cpu: tuple[int, ...]) -> bool:
    """Every request is a verify row (none fresh) with the same number of tokens (plain decode; every request
    drafting k): a mixer may run them as one batch, each request's heads side by side as extra heads. A CUDA
    graph's rows are uniform by construction (StateRows.graph_query_len)."""
    if rows.graph_query_len:
        return True
    num_reqs = len(rows.slots)
    if num_reqs == 0 or not all(rows.keeps_positions) or any(rows.starts_fresh):
        return False
    n = query_start_loc_cpu[1] - query_start_loc_cpu[0]
    return n > 0 and all(query_start_loc_cpu[r + 1] - query_start_loc_cpu[r] == n for r in range(num_reqs))

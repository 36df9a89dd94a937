"""The recurrent-state inputs of a hybrid target's CUDA graphs: plain decode and the uniform chain verify (every
request a verify row of the same length: what is_uniform_verify sends to the mixers' batched path).

A graph's forward reads nothing per step from the host. What varies per step is the requests' state slots: a
static device buffer (`slots`) the graph's rows point at, reloaded before every replay with the real requests'
slots and, for the batch bucket's padding requests, the StateCache's scratch slot, which no request owns. The rest
is fixed by the graph's shape: every request keeps its positions, request r's kept rows start at r * query_len
(state_rows' offsets for a uniform verify), none starts fresh, and no snapshot is written inside the graph (the
commit writes the verify rows' snapshots from the kept states after the forward: mixer.write_verify_snapshots).

The kept per-position states are written into static buffers every graph of the target shares (StateCache.static_kept,
set while a graph's forward runs), so a graph's outputs include views of them and no graph holds kept states of its
own (per graph they would be batch x (k + 1) x every state layer's state: gigabytes over the buckets).

Nothing a uniform verify runs writes a slot (the commit does, for real requests only), so a padding row's worst
case is reading the scratch slot and keeping states no commit picks. Everything else (prefill, prompt chunks, mixed
steps, ragged verifies with zero-draft requests, tree verifies, the fla kernels) stays eager: `replays_graph`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from specbench.recurrent.mixer import is_uniform_verify
from specbench.recurrent.state_cache import StateCache
from specbench.recurrent.state_rows import StateRows


class GraphStateRows:
    """The static slot buffer of one target's graphs (every bucket and query length reads a prefix of it)."""

    def __init__(self, states: StateCache, max_num_reqs: int, max_query_len: int) -> None:
        self.states = states
        # [max_num_reqs] int64: each graph request's slot; the scratch slot until a replay loads real ones
        self.slots = torch.full((max_num_reqs,), states.scratch_slot, dtype=torch.int64, device=states.conv.device)
        max_rows = max_num_reqs * max_query_len
        if states.graph_kept is None or states.graph_kept[0].shape[1] < max_rows:  # not reserved by the builder
            states.graph_kept = new_graph_kept(states, max_rows)
        # the kept states of whichever graph replayed last (StateCache.static_kept while a graph's forward runs)
        self.kept = states.graph_kept

    @contextlib.contextmanager
    def forward_on_static_kept(self) -> Iterator[None]:
        """A graph's forward (its capture, or its rerun off CUDA): the layers keep their states in the static
        buffers; an eager forward afterwards allocates its own again."""
        self.states.static_kept = self.kept
        try:
            yield
        finally:
            self.states.static_kept = None

    def rows(self, num_reqs: int, query_len: int) -> StateRows:
        """The rows a graph of `num_reqs` requests (its bucket) of `query_len` tokens each is captured on. The host
        slots are the capture batch's (all padding: the scratch slot) and mean nothing at a replay; the mixers read
        `slot_index`, a view of the static buffer."""
        scratch = self.states.scratch_slot
        return StateRows(
            slots=(scratch,) * num_reqs,
            keeps_positions=(True,) * num_reqs,
            pending_starts=tuple(r * query_len for r in range(num_reqs)),
            num_pending=num_reqs * query_len,
            starts_fresh=(False,) * num_reqs,
            slot_index=self.slots[:num_reqs],
            graph_query_len=query_len,
        )

    def load(self, rows: StateRows, num_reqs: int) -> None:
        """Before a replay of a `num_reqs`-request bucket: the real requests' slots (rows: the step's own), then the
        scratch slot for the padding requests."""
        n = len(rows.slots)
        self.slots[:n].copy_(rows.slot_tensor(self.slots.device), non_blocking=True)
        if num_reqs > n:
            self.slots[n:num_reqs].fill_(self.states.scratch_slot)

    @property
    def num_kept_outputs(self) -> int:
        """Kept-state outputs a graph's forward appends: conv and recurrent of every state layer."""
        return 2 * self.states.shape.num_layers

    def kept_outputs(self) -> tuple[torch.Tensor, ...]:
        """The forward's kept states as graph outputs, (conv, recurrent) of state layer 0, 1, ..: what a replay
        hands back to the StateCache (`restore_kept`), since a replay runs no Python that could call keep()."""
        layers = range(self.states.shape.num_layers)
        assert sorted(self.states.pending) == list(layers), "a uniform verify keeps every state layer's states"
        return tuple(t for layer in layers for t in self.states.pending[layer])

    def restore_kept(self, kept: tuple[torch.Tensor, ...]) -> None:
        """After a replay: the StateCache's pending states are the graph's kept outputs (their first rows the real
        requests', as the commit reads them)."""
        self.states.pending.clear()
        for layer in range(self.states.shape.num_layers):
            self.states.keep(layer, kept[2 * layer], kept[2 * layer + 1])


def new_graph_kept(states: StateCache, max_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The static kept-state buffers of a target's graphs: conv [num_state_layers, max_rows, C, W] in the slots'
    dtype and recurrent [num_state_layers, max_rows, *dims] fp32 (max_rows = max concurrency x (k_max + 1)). The
    builder allocates them before it sizes the KV pool from free memory, as it does the slots: allocated after, at
    a real hybrid's concurrency (gigabytes), a full pool would leave capture out of memory."""
    s, device = states.shape, states.conv.device
    return (torch.zeros(s.num_layers, max_rows, s.conv_channels, s.conv_width, dtype=states.conv.dtype,
                        device=device),
            torch.zeros(s.num_layers, max_rows, *s.recurrent_dims, dtype=torch.float32, device=device))


def replays_graph(rows: StateRows | None, query_start_loc_cpu: tuple[int, ...]) -> bool:
    """Whether a hybrid target's forward may replay a graph: its rows are a uniform chain verify (plain decode
    included); a tree verify, and any row that commits or starts fresh, run eagerly."""
    return rows is not None and rows.tree is None and is_uniform_verify(rows, query_start_loc_cpu)

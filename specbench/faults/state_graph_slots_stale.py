"""A hybrid target's CUDA graphs read a copy of the state slots taken when the graph's forward first ran (its capture
warm-up) instead of the static slot buffer reloaded before every replay (seed class: a graph replaying on a stale
static buffer, issue 45's hybrid graphs; recurrent/graph_rows.py).

The graph form of a recurrent layer gathers each request's conv and recurrent state by StateRows.slot_index, a view
of the buffer GraphStateRows.load fills before each replay (the real requests' slots, the scratch slot for padding).
Here each layer's first graph-form forward keeps a copy of that index and every later one reads the copy. On CUDA the
first is the warm-up of the largest bucket, whose rows are all padding: every replay then runs every request from
the scratch slot's zeros, and the tokens go wrong from the first decode step on. Off CUDA the "replays" rerun the
forward (tests that capture by hand): the copy is the first replayed step's slots, wrong once the batch changes.
Eager forwards (prefill, mixed and ragged steps, an engine without graphs) never take the graph form: inert there,
and on targets without recurrent state.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.faults.fault import Fault
from specbench.faults.path_mutant import PathMutant, recapture_target_graphs, wrap_method
from specbench.recurrent.mixer import RecurrentMixer
from specbench.recurrent.state_rows import StateRows
from specbench.speculation.capabilities import Proposer


class StateGraphSlotsStale(PathMutant):
    fault = Fault("state-graph-slots-stale", "a hybrid target's CUDA graphs read the state slots copied when they "
                  "were captured, not the buffer reloaded before each replay", "", "target", Proposer,
                  is_plain_hosted=True, path="graph.hybrid_decode", caught_by="greedy, state oracle")

    def install(self, engine) -> None:
        for module in engine.runner.model.modules():
            if isinstance(module, RecurrentMixer):  # none on a target without recurrent state: inert
                wrap_method(module, "forward", _stale_slots)
        recapture_target_graphs(engine)


def _stale_slots(forward):
    copied: list[torch.Tensor] = []  # [num_reqs] the slot index of this layer's first graph-form forward

    def bent(x: torch.Tensor, query_start_loc_cpu: tuple[int, ...], states, rows: StateRows,
             paths=None) -> torch.Tensor:
        if rows.graph_query_len and rows.slot_index is not None:
            if not copied:
                copied.append(rows.slot_index.clone())
            stale, live = copied[0], rows.slot_index
            index = stale[: live.shape[0]] if stale.shape[0] >= live.shape[0] else torch.cat(
                [stale, live[stale.shape[0]:]])
            rows = dataclasses.replace(rows, slot_index=index)
        return forward(x, query_start_loc_cpu, states, rows, paths)

    return bent

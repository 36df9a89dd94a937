"""The target's sliding windows start one key too early: each query of a windowed layer sees w + 1 keys (an
inclusive/exclusive slip in the window start, `p - w` for `p - w + 1`).

Every target forward (prefill, verify) is bent; full-attention layers and full-attention targets are untouched.
Greedy output departs from HF transformers' on a window target; INV-KIND (debug invariants) raises at the first
forward whose window does not start at key 0.
"""

from __future__ import annotations

import dataclasses

from specbench.attention.kinds import SlidingWindowAttention
from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import recapture_target_graphs
from specbench.faults.window_bend import bend_layer_kinds
from specbench.speculation.capabilities import Proposer


class WindowOffByOne(Mutant):
    fault = Fault("window-off-by-one", "the target's sliding windows start one key too early (w + 1 keys seen)",
                  "", "target", Proposer, is_plain_hosted=True)
    eager_drafting = False  # a target-side bug: drafting as production runs it

    def install(self, engine) -> None:
        bend_layer_kinds(engine.runner.model, _widened)
        recapture_target_graphs(engine)


def _widened(md: AttentionMetadata, where: str) -> AttentionMetadata:
    kinds = tuple(
        dataclasses.replace(k, window_starts=(k.window_starts - 1).clamp(min=0))
        if isinstance(k.kind, SlidingWindowAttention) else k for k in md.layer_kinds)
    return dataclasses.replace(md, layer_kinds=kinds) if md.layer_kinds else md

"""Verify forgets the sliding window: the target's verify forwards run every layer as full attention (the window
metadata is built for prefill and decode-shaped paths but not for the k + 1-query verify).

Prefill is right, so the first token is; each verified round then attends over keys its window hides. Greedy output
departs from HF transformers' on a window target once the context outgrows the window; INV-KIND (debug invariants)
raises at the first verify. Full-attention targets are untouched.
"""

from __future__ import annotations

import dataclasses

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.faults.path_mutant import recapture_target_graphs
from specbench.faults.window_bend import bend_layer_kinds
from specbench.speculation.capabilities import Proposer

VERIFY = "verify"  # the target runner's phase name for decode and verify forwards (engine/model_runner.py)


class WindowMissingInVerify(Mutant):
    fault = Fault("window-missing-in-verify", "verify runs the target's sliding-window layers as full attention",
                  "", "target", Proposer, is_plain_hosted=True)
    eager_drafting = False  # a target-side bug: drafting as production runs it

    def install(self, engine) -> None:
        bend_layer_kinds(engine.runner.model, _without_window_in_verify)
        recapture_target_graphs(engine)


def _without_window_in_verify(md: AttentionMetadata, where: str) -> AttentionMetadata:
    return dataclasses.replace(md, layer_kinds=()) if where == VERIFY else md

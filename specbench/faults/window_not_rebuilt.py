"""Draft steps j > 1 of the draft LM attend with step 1's window metadata (seed 000, the DeepSeek-V4 bug:
`decode_swa_indices` / `window_size` not rebuilt between draft steps).

Positions, slots and visible lengths are rebuilt for every step; only the sliding-window layers' first visible keys
stay where step 1 put them, so step j sees j - 1 keys too many at the far end of its window. On a full-attention
draft there is no window metadata and the mutant changes nothing. Outputs stay lossless (the draft only proposes);
acceptance drops, and INV-KIND (debug invariants) raises at step 2.
"""

from __future__ import annotations

import dataclasses

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.faults.window_bend import bend_layer_kinds
from specbench.speculation.drafters.draft_model import DraftModelProposer

_STEP = "draft_step_"  # the draft LM's eager step phases: draft_step_1, draft_step_2, ...


class WindowNotRebuiltBetweenDraftSteps(Mutant):
    fault = Fault("window-not-rebuilt-between-draft-steps",
                  "draft steps j > 1 reuse step 1's sliding-window metadata (window starts)",
                  "000 (sglang#24750)", "draft", DraftModelProposer)

    def __init__(self) -> None:
        self._step1: AttentionMetadata | None = None  # the latest round's step-1 metadata, kinds attached

    def install(self, engine) -> None:
        # Draft steps run eagerly (one forward per step, each through attach): the bug is the eager builder's.
        engine.proposer.pause_step_graphs(True)
        bend_layer_kinds(engine.proposer.model, self._stale_window)

    def _stale_window(self, md: AttentionMetadata, where: str) -> AttentionMetadata:
        if not where.startswith(_STEP) or not md.layer_kinds:
            return md
        if where == f"{_STEP}1":
            self._step1 = md
        elif self._step1 is not None and self._step1.num_tokens == md.num_tokens:
            return dataclasses.replace(md, layer_kinds=self._step1.layer_kinds)
        return md

"""The draft LM's catch-up forgets the sliding window: its draft_extend forwards (the tokens the last verify accepted,
written into the draft KV before the next round's steps) run every windowed layer as full attention.

The catch-up's last row proposes a round's first draft token, and the K/V it writes in the layers above the first
feed every later step: drafts go wrong, outputs stay lossless. The draft oracle (a cache-free recompute) and INV-KIND
(debug invariants) catch it; a full-attention draft is untouched.
"""

from __future__ import annotations

import dataclasses

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.faults.window_bend import bend_layer_kinds
from specbench.speculation.drafters.draft_model import DraftModelProposer

CATCH_UP = "draft_extend"  # the draft LM's catch-up phase (speculation/drafters/draft_model.py)


class WindowMissingInCatchup(Mutant):
    fault = Fault("window-missing-in-catch-up", "the draft LM's catch-up runs its sliding-window layers as full "
                  "attention", "002 (draft-extend phase)", "draft", DraftModelProposer)

    def install(self, engine) -> None:
        bend_layer_kinds(engine.proposer.model, _without_window_in_catchup)


def _without_window_in_catchup(md: AttentionMetadata, where: str) -> AttentionMetadata:
    return dataclasses.replace(md, layer_kinds=()) if where == CATCH_UP else md

"""Chunked prefill, EAGLE / MTP: each prompt chunk's target features are handed to the proposer at position 0, as
if every chunk were a whole prompt (the chunk's own start lost). Appended to the pending features of the chunks
before it, they would give the catch-up rows at the wrong positions: the proposer refuses features that do not
continue the pending ones (EagleProposer.add_target_features), so the engine fails loudly at a request's second
chunk rather than drafting from shifted features. Inert without --enable-chunked-prefill and on one-chunk prompts.
"""

from __future__ import annotations

from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import ConsumesTargetFeatures


class ChunkFeatureStartLost(Mutant):
    fault = Fault("chunk-feature-start-lost", "a prompt chunk's target features are handed at position 0, not at "
                  "the chunk's start (chunked prefill, EAGLE / MTP)", "", "draft", ConsumesTargetFeatures,
                  caught_by="the proposer's feature-contiguity check (a crash in any check)")

    def chunk_feature_start(self, request_id: str, start: int) -> int:
        return 0

"""Seed 004: draft step j > 1 runs on step 1's attention metadata (positions, slots, visible lengths)."""

from __future__ import annotations

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import HasDraftKV


class StaleDraftMetadata(Mutant):
    fault = Fault("stale-draft-metadata", "draft step j > 1 reuses step 1's attention metadata",
                  "004", "draft", HasDraftKV)

    def __init__(self) -> None:
        self._step1_md: AttentionMetadata | None = None  # the latest round's step-1 metadata

    def step_metadata(self, step: int, request_ids: tuple[str, ...], md: AttentionMetadata,
                      hidden) -> AttentionMetadata:
        if step == 1:
            self._step1_md = md
        elif self._step1_md is not None and self._step1_md.num_reqs == md.num_reqs:
            return self._step1_md
        return md

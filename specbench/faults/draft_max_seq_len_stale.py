"""Draft step j > 1 keeps step 1's max_seq_len: the kernel's key loop stops j - 1 keys short of the longest request.

Positions, lengths and slots are right; only a field the metadata-only invariants never read is wrong.
"""

from __future__ import annotations

import dataclasses

import torch

from specbench.attention.metadata import AttentionMetadata
from specbench.faults.fault import Fault, Mutant
from specbench.speculation.capabilities import HasDraftKV


class DraftMaxSeqLenStale(Mutant):
    fault = Fault("draft-max-seq-len-stale", "draft step j > 1 keeps step 1's max_seq_len (the kernel drops keys)",
                  "", "draft", HasDraftKV)

    def step_metadata(self, step: int, request_ids: tuple[str, ...], md: AttentionMetadata,
                      hidden: torch.Tensor | None) -> AttentionMetadata:
        return dataclasses.replace(md, max_seq_len=md.max_seq_len - (step - 1)) if step > 1 else md

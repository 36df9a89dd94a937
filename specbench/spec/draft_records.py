"""What the draft oracle records from a proposer's drafting (only while a recorder is attached)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DraftStepRecord:
    """One draft step's output as the oracle needs it (recorded only when a recorder is attached)."""

    request_id: str
    step: int  # 0 = the catch-up row, j >= 1 = draft step j
    token_ids: tuple[int, ...]  # committed tokens, then the drafts fed so far; the logits predict the next token
    logits: torch.Tensor  # [draft_vocab] float32 on the host


@dataclass(frozen=True)
class TargetFeatureRecord:
    """EAGLE: the target features a catch-up received (the oracle replays them; recorded only when attached)."""

    request_id: str
    start: int  # position of the first row
    features: torch.Tensor  # [num_new, feature_dim] float32 on the host

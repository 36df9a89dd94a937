"""Draft-side fault hooks shared by the draft-LM and EAGLE proposers (called only when a fault is active)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.attention.metadata import slot_of
from specbench.faults import Fault


@dataclass(frozen=True)
class StepPlan:
    positions: list[int]  # [num_reqs_in_step]
    seq_lens: list[int]  # [num_reqs_in_step]
    slot_mapping: list[int] | None  # [num_reqs_in_step], None = each position's own slot


def mutate_step_plan(
    fault: Fault, j: int, positions: list[int], seq_lens: list[int], tables, block_size: int
) -> StepPlan:
    """Draft step j's plan as a mutant builds it (seeds 003 and 000)."""
    if fault.name == "draft-positions-off-by-one":
        # RoPE positions advanced once too often; KV still lands in each position's own slot.
        own = [slot_of(t, p, block_size) for t, p in zip(tables, positions)]
        return StepPlan([p + 1 for p in positions], seq_lens, own)
    if fault.name == "draft-kv-slice" and j > 1:
        # Every step writes step 1's slot and sees step 1's visible length: not advanced by j.
        first = [slot_of(t, p - (j - 1), block_size) for t, p in zip(tables, positions)]
        return StepPlan(positions, [s - (j - 1) for s in seq_lens], first)
    return StepPlan(positions, seq_lens, None)


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

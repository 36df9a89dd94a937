"""What the draft oracle records from a proposer's drafting: a recorder the oracle hands to `attach_recorder`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from specbench.speculation.tree.records import TreeRoundRecord


@dataclass(frozen=True)
class DraftStepRecord:
    """One draft step's output as the oracle needs it."""

    request_id: str
    step: int  # 0 = the catch-up row, j >= 1 = draft step j
    token_ids: tuple[int, ...]  # committed tokens, then the drafts fed so far; the logits predict the next token
    logits: torch.Tensor  # [draft_vocab] float32 on the host


@dataclass
class DraftRecorder:
    """Collects the draft steps of one engine run, in the order the proposer drafted them (the oracle owns it): chain
    rounds' steps, and tree rounds whole (speculation/tree/records.py)."""

    steps: list[DraftStepRecord] = field(default_factory=list)
    trees: list[TreeRoundRecord] = field(default_factory=list)

    def record(self, step: DraftStepRecord) -> None:
        self.steps.append(step)

    def record_tree(self, tree_round: TreeRoundRecord) -> None:
        self.trees.append(tree_round)


def group_rounds(steps: list[DraftStepRecord]) -> list[list[DraftStepRecord]]:
    """Step records grouped by (request, committed tokens): one drafting round each, steps in recorded order."""
    rounds: dict[tuple, list[DraftStepRecord]] = defaultdict(list)
    for step in steps:
        rounds[(step.request_id, step.token_ids[: len(step.token_ids) - step.step])].append(step)
    return list(rounds.values())

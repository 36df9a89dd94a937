"""What the draft oracle records from a proposer's drafting: chain steps (`DraftStepRecord`) and tree rounds
(`TreeRoundRecord`, traced by tree/records.py), into the recorder the oracle hands to `attach_recorder`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class DraftStepRecord:
    """One draft step's output as the oracle needs it."""

    request_id: str
    step: int  # 0 = the catch-up row, j >= 1 = draft step j
    token_ids: tuple[int, ...]  # committed tokens, then the drafts fed so far; the logits predict the next token
    logits: torch.Tensor  # [draft_vocab] float32 on the host


@dataclass(frozen=True)
class TreeRoundRecord:
    """One request's tree round as the drafter produced it. Token ids are the drafter's vocabulary (what its
    log-probs index); a branch is the tokens from the root's child down to a node."""

    request_id: str
    token_ids: tuple[int, ...]  # committed tokens; the newest (the tree's root) last
    topk: int  # the round's plan: children per frontier node, frontier size per step
    depth: int  # draft steps (the deepest a path can go)
    num_draft_tokens: int  # node budget
    node_token_ids: tuple[int, ...]  # [num_nodes] the kept tree, node order
    parents: tuple[int, ...]  # [num_nodes] request-local parent node index, -1 = the root
    fed_branches: tuple[tuple[int, ...], ...]  # [num_fed] branch of each fed node, in feed (tree row) order
    fed_parent_rows: tuple[int, ...]  # [num_fed] the tree row of its parent the draft step was handed (-1: root)
    fed_sees: tuple[tuple[int, ...], ...]  # [num_fed] the tree rows the draft step's mask lets each row see
    root_log_probs: torch.Tensor  # [draft_vocab] float32 host: the drafter's log-probs after the committed tokens
    fed_log_probs: torch.Tensor  # [num_fed, draft_vocab] float32 host: its log-probs at each fed node


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

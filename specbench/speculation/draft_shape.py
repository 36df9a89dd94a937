"""The shape of a round's drafts: a chain of k tokens, or a tree grown top-k children at a time under a budget.

One value per run (a sweep cell), owned by the scheduler like k (num_steps): the proposer reads it per round.
- `eagle_topk` (SGLang's `--speculative-eagle-topk`): children kept per frontier node at each draft step; 1 = a chain.
- `num_draft_tokens`: drafted nodes per request-round, the root (the newest committed token) excluded; None = as many
  as the steps give (k for a chain). A tree of depth k = num_steps keeps at most this many nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError


@dataclass(frozen=True, slots=True)
class DraftShape:
    eagle_topk: int = 1
    num_draft_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.eagle_topk < 1:
            raise SpecbenchError(f"eagle_topk must be >= 1, got {self.eagle_topk}")
        if self.num_draft_tokens is not None and self.num_draft_tokens < 1:
            raise SpecbenchError(f"num_draft_tokens must be >= 1, got {self.num_draft_tokens}")

    @property
    def is_tree(self) -> bool:
        return self.eagle_topk > 1

    def label(self) -> str:
        """Short text for tables: 'chain' or 'tree top-4/16'."""
        if not self.is_tree:
            return "chain"
        budget = "all" if self.num_draft_tokens is None else str(self.num_draft_tokens)
        return f"tree top-{self.eagle_topk}/{budget}"


CHAIN = DraftShape()

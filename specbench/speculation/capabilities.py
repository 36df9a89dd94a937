"""Capabilities a proposer declares by subclassing: the engine asks `isinstance`, never probes attributes."""

from __future__ import annotations

from abc import ABC, abstractmethod

from specbench.speculation.proposer import DraftProposal, ProposeInput
from specbench.speculation.tree_propose import TreePlan


class DraftsTrees(ABC):
    """A proposer that drafts trees (eagle_topk > 1): top-k children of the best frontier nodes per draft step,
    cut to a node budget (speculation/tree_builder.py). Tree rounds run synchronously (engine/tree_round.py)."""

    @abstractmethod
    def propose_tree(self, inp: ProposeInput, plan: TreePlan) -> DraftProposal:
        """One tree per request of `inp` (every request drafts), shaped by `plan`: the proposal's `parents` is set,
        its `draft_probs` None (the children are the deterministic top-k of the draft distribution)."""

    @abstractmethod
    def on_tree_verified(self, request_ids: tuple[str, ...], accepted_nodes: tuple[tuple[int, ...], ...]) -> None:
        """The accepted path of each request's tree (request-local node indices, root to leaf) of the round just
        verified; the target KV of that path is already compacted to its positions."""


def tree_methods() -> tuple[str, ...]:
    """The methods whose proposers draft trees (for the one-line refusal of a tree shape elsewhere)."""
    return ("draft", "eagle", "eagle3", "mtp")

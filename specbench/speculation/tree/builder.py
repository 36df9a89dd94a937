"""Grow a draft tree step by step: top-k children of the best frontier nodes, cut to a draft-token budget.

Per step the drafter scores its frontier (one distribution per frontier node); every frontier node gets its
`topk` most likely children as candidates (cumulative score = parent score + child log-prob), and the `topk`
best candidates of the step become the next frontier. `finish` keeps the `num_draft_tokens` best candidates
over all steps. A child never scores above its parent (log-probs are <= 0) and a stable sort keeps creation
order on ties, so the kept set always contains each kept node's parent: the result is a tree.

Children are the deterministic top-k of the draft distribution (no sampling), so sampled verification must
use the deterministic-children rule (`verify/tree.py`, draft_probs=None).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.speculation.tree.draft_tree import ROOT_PARENT, DraftTree, tree_from_parents


@dataclass(frozen=True, slots=True)
class Frontier:
    """The nodes the drafter runs next: feed token_ids, attend along their branch (node_index, parent)."""

    token_ids: torch.Tensor  # [num_reqs, num_frontier] int64
    node_index: torch.Tensor  # [num_reqs, num_frontier] int64, creation index among all candidates
    parent: torch.Tensor  # [num_reqs, num_frontier] int64, creation index of the parent, -1 = root


@dataclass(frozen=True, slots=True)
class StepShape:
    num_candidates: int  # candidates created by the step (per request)
    num_frontier: int  # of which became the next frontier


@dataclass(frozen=True, slots=True)
class PaddedTree:
    """The trees of a batch as fixed-shape device tensors (every request keeps the same node count): what
    `finish_on_device` returns without reading anything back to the host."""

    token_ids: torch.Tensor  # [num_reqs, num_kept] int64, node order = creation order (parents first)
    parent: torch.Tensor  # [num_reqs, num_kept] int64, request-local parent node, -1 = child of the root
    source: torch.Tensor  # [num_reqs, num_kept] int64, each kept node's creation index among all candidates


class TopKTreeBuilder:
    """One round's tree for a batch; every request grows the same shape, only the tokens differ."""

    def __init__(self, num_reqs: int, topk: int, num_draft_tokens: int, device: torch.device | str = "cpu") -> None:
        if topk < 1 or num_draft_tokens < 1:
            raise ValueError(f"topk ({topk}) and num_draft_tokens ({num_draft_tokens}) must be >= 1")
        self.topk = topk
        self.num_draft_tokens = num_draft_tokens
        self.device = torch.device(device)
        self.token_ids = torch.empty(num_reqs, 0, dtype=torch.int64, device=self.device)  # [num_reqs, N]
        self.parent = torch.empty(num_reqs, 0, dtype=torch.int64, device=self.device)  # [num_reqs, N]
        self.score = torch.empty(num_reqs, 0, dtype=torch.float32, device=self.device)  # [num_reqs, N]
        self.frontier: Frontier | None = None  # None before the first step: the frontier is the root
        self.shape: list[StepShape] = []

    def expand(self, log_probs: torch.Tensor) -> Frontier:
        """log_probs: [num_reqs, num_frontier, V] draft log-probs at each frontier node (the root on step 0)."""
        num_reqs, num_frontier, vocab_size = log_probs.shape
        expected = 1 if self.frontier is None else self.frontier.token_ids.shape[1]
        if num_frontier != expected or num_reqs != self.token_ids.shape[0]:
            raise ValueError(f"log_probs must be [{self.token_ids.shape[0]}, {expected}, V], got {tuple(log_probs.shape)}")
        k = min(self.topk, vocab_size)
        child_logp, child_token = log_probs.float().topk(k, dim=-1)  # [num_reqs, F, k], best first
        if self.frontier is None:
            parent_score = torch.zeros(num_reqs, 1, device=self.device)
            parent_index = torch.full((num_reqs, 1), ROOT_PARENT, dtype=torch.int64, device=self.device)
        else:
            parent_index = self.frontier.node_index
            parent_score = self.score.gather(1, parent_index)
        first = self.token_ids.shape[1]
        cand_score = (parent_score[:, :, None] + child_logp).flatten(1)  # [num_reqs, F * k]
        cand_parent = parent_index[:, :, None].expand(-1, -1, k).flatten(1)
        self.token_ids = torch.cat([self.token_ids, child_token.flatten(1)], dim=1)
        self.parent = torch.cat([self.parent, cand_parent], dim=1)
        self.score = torch.cat([self.score, cand_score], dim=1)
        order = torch.sort(cand_score, dim=1, descending=True, stable=True).indices[:, : self.topk]
        chosen = first + order  # [num_reqs, num_frontier]
        self.frontier = Frontier(
            token_ids=self.token_ids.gather(1, chosen), node_index=chosen, parent=self.parent.gather(1, chosen)
        )
        self.shape.append(StepShape(num_candidates=cand_score.shape[1], num_frontier=chosen.shape[1]))
        return self.frontier

    def num_kept(self) -> int:
        return min(self.num_draft_tokens, self.score.shape[1])

    def finish_on_device(self) -> PaddedTree:
        """What `finish` keeps, as device tensors of fixed shape (no host sync: capturable in a CUDA graph). A kept
        node's parent is always kept (module doc), so every parent maps to a kept node's new index."""
        num_reqs, num_candidates = self.score.shape
        keep = self.num_kept()
        kept = torch.sort(self.score, dim=1, descending=True, stable=True).indices[:, :keep]
        kept = kept.sort(dim=1).values  # [num_reqs, keep] creation order: parents precede children
        new_index = torch.full((num_reqs, num_candidates), ROOT_PARENT, dtype=torch.int64, device=self.device)
        new_index.scatter_(1, kept, torch.arange(keep, device=self.device).expand(num_reqs, keep))
        old_parent = self.parent.gather(1, kept)
        parent = torch.where(old_parent == ROOT_PARENT, ROOT_PARENT, new_index.gather(1, old_parent.clamp_min(0)))
        return PaddedTree(token_ids=self.token_ids.gather(1, kept), parent=parent, source=kept)

    def finish(self) -> DraftTree:
        """The best num_draft_tokens candidates per request, renumbered in creation order (parents first)."""
        num_reqs, num_candidates = self.score.shape
        keep = min(self.num_draft_tokens, num_candidates)
        kept = torch.sort(self.score, dim=1, descending=True, stable=True).indices[:, :keep]
        kept = kept.sort(dim=1).values.tolist()  # creation order: parents precede children
        tokens, parents = self.token_ids.tolist(), self.parent.tolist()
        tree_tokens, tree_parents = [], []
        for req in range(num_reqs):
            new_index = {old: new for new, old in enumerate(kept[req])}
            new_index[ROOT_PARENT] = ROOT_PARENT
            tree_tokens.append([tokens[req][old] for old in kept[req]])
            # A missing parent (KeyError) would mean a kept child outscored its parent: impossible, see module doc.
            tree_parents.append([new_index[parents[req][old]] for old in kept[req]])
        return tree_from_parents(tree_tokens, tree_parents, self.device)

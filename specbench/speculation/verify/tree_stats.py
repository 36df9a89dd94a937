"""Acceptance counts of tree rounds: length per round, per depth, per rank among siblings, tree size.

Counts, not rates, so rounds and runs add up (`merge`); rates are ratios of sums.
- depth d: *offered* when the accepted path reached depth d - 1 (the root for d = 0) and that node has children
  in the tree; *accepted* when the path goes on to depth d.
- rank r (a child's index among its parent's children, in node order; 0 = the drafter's best): *offered* at each
  node of the accepted path, root included, that has a child of rank r; *accepted* when the path continues
  through that child.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the counts are torch-free: results read over HTTP (engine/stats.py) never import torch
    from specbench.speculation.tree.draft_tree import DraftTree
    from specbench.speculation.verify.tree import TreeVerifyResult


@dataclass(slots=True)
class TreeAcceptanceCounts:
    num_rounds: int = 0  # request-rounds (one tree verified for one request)
    num_accepted: int = 0  # accepted draft tokens, summed
    num_nodes: int = 0  # drafted tree nodes, summed
    acceptance_lengths: list[int] = field(default_factory=list)  # [num_rounds] accepted tokens per request-round
    tree_sizes: list[int] = field(default_factory=list)  # [num_rounds] nodes per request-round
    offered_per_depth: list[int] = field(default_factory=list)  # [max_depth]
    accepted_per_depth: list[int] = field(default_factory=list)  # [max_depth]
    offered_per_rank: list[int] = field(default_factory=list)  # [max_rank + 1]
    accepted_per_rank: list[int] = field(default_factory=list)  # [max_rank + 1]

    @property
    def mean_acceptance_length(self) -> float:
        return self.num_accepted / self.num_rounds if self.num_rounds else 0.0

    @property
    def mean_tree_size(self) -> float:
        return self.num_nodes / self.num_rounds if self.num_rounds else 0.0

    def acceptance_per_depth(self) -> list[float]:
        return _rates(self.accepted_per_depth, self.offered_per_depth)

    def acceptance_per_rank(self) -> list[float]:
        return _rates(self.accepted_per_rank, self.offered_per_rank)


def round_counts(tree: DraftTree, result: TreeVerifyResult) -> TreeAcceptanceCounts:
    """The counts of one verified batch of trees."""
    from specbench.speculation.tree.draft_tree import ROOT_PARENT, children_of, sibling_rank

    counts = TreeAcceptanceCounts()
    num_accepted = result.num_accepted.tolist()
    accepted_nodes = result.accepted_nodes.tolist()
    for req in range(tree.num_reqs):
        parents = tree.parents_of(req)
        children, ranks = children_of(parents), sibling_rank(parents)
        path = accepted_nodes[req][: num_accepted[req]]
        counts.num_rounds += 1
        counts.num_accepted += len(path)
        counts.num_nodes += len(parents)
        counts.acceptance_lengths.append(len(path))
        counts.tree_sizes.append(len(parents))
        for depth, node in enumerate([ROOT_PARENT, *path]):
            kids = children[node]
            if not kids:
                break
            _bump(counts.offered_per_depth, depth)
            for rank in range(len(kids)):
                _bump(counts.offered_per_rank, rank)
            if depth < len(path):
                _bump(counts.accepted_per_depth, depth)
                _bump(counts.accepted_per_rank, ranks[path[depth]])
    return counts


def path_round_counts(num_nodes: int, num_children: list[int], ranks: list[int]) -> TreeAcceptanceCounts:
    """One request-round's counts (round_counts over a one-request tree) from what the batched round reads back:
    num_children [>= len(ranks) + 1] of the root then of each path node, ranks [num accepted] of the path nodes."""
    counts = TreeAcceptanceCounts(num_rounds=1, num_accepted=len(ranks), num_nodes=num_nodes,
                                  acceptance_lengths=[len(ranks)], tree_sizes=[num_nodes])
    for depth in range(len(ranks) + 1):
        if not num_children[depth]:
            break
        _bump(counts.offered_per_depth, depth)
        for rank in range(num_children[depth]):
            _bump(counts.offered_per_rank, rank)
        if depth < len(ranks):
            _bump(counts.accepted_per_depth, depth)
            _bump(counts.accepted_per_rank, ranks[depth])
    return counts


def merge(a: TreeAcceptanceCounts, b: TreeAcceptanceCounts) -> TreeAcceptanceCounts:
    return TreeAcceptanceCounts(
        num_rounds=a.num_rounds + b.num_rounds,
        num_accepted=a.num_accepted + b.num_accepted,
        num_nodes=a.num_nodes + b.num_nodes,
        acceptance_lengths=a.acceptance_lengths + b.acceptance_lengths,
        tree_sizes=a.tree_sizes + b.tree_sizes,
        offered_per_depth=_add(a.offered_per_depth, b.offered_per_depth),
        accepted_per_depth=_add(a.accepted_per_depth, b.accepted_per_depth),
        offered_per_rank=_add(a.offered_per_rank, b.offered_per_rank),
        accepted_per_rank=_add(a.accepted_per_rank, b.accepted_per_rank),
    )


def _bump(values: list[int], index: int) -> None:
    values.extend([0] * (index + 1 - len(values)))
    values[index] += 1


def _add(a: list[int], b: list[int]) -> list[int]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def _rates(accepted: list[int], offered: list[int]) -> list[float]:
    return [(accepted[i] if i < len(accepted) else 0) / n if n else 0.0 for i, n in enumerate(offered)]

"""Tree acceptance counts: per round, per depth, per sibling rank, tree size; counts add across rounds."""

from __future__ import annotations

import torch

from specbench.speculation.tree.draft_tree import tree_from_parents
from specbench.speculation.verify.tree_stats import merge, round_counts
from specbench.speculation.verify.tree import TreeVerifyResult


def _result(paths: list[list[int]], max_depth: int) -> TreeVerifyResult:
    accepted = torch.tensor([p + [-1] * (max_depth - len(p)) for p in paths])
    return TreeVerifyResult(
        accepted_nodes=accepted,
        num_accepted=torch.tensor([len(p) for p in paths]),
        output_token_ids=torch.zeros(len(paths), max_depth + 1, dtype=torch.int64),  # not read
    )


def test_counts_by_hand():
    # Request 0: root -> 0, 1; 0 -> 2, 3; 1 -> 4; path 1, 4 (rank 1 then rank 0), then node 4 has no children.
    # Request 1: root -> 0, 1, 2; path none.
    # Request 2: chain 0 -> 1 -> 2; path 0 (rank 0), then node 1 offered and rejected.
    parents = [[-1, -1, 0, 0, 1], [-1, -1, -1], [-1, 0, 1]]
    tree = tree_from_parents(parents, parents)
    counts = round_counts(tree, _result([[1, 4], [], [0]], max_depth=3))
    assert counts.acceptance_lengths == [2, 0, 1] and counts.tree_sizes == [5, 3, 3]
    assert counts.mean_acceptance_length == 1.0 and counts.mean_tree_size == 11 / 3
    # depth 0 offered in all 3, accepted in 2; depth 1 offered in req 0 (node 1 has child 4) and 2: both... req 0
    # accepted node 4, req 2 rejected node 1; depth 2: req 0's node 4 is a leaf, not offered.
    assert counts.offered_per_depth == [3, 2] and counts.accepted_per_depth == [2, 1]
    assert counts.acceptance_per_depth() == [2 / 3, 1 / 2]
    # rank 0 offered at: root0, node1 (child 4), root1, root2, node0 of req 2 = 5; accepted: node 4, node 0 of req 2.
    # rank 1 offered at root0, root1 = 2; accepted: node 1 of req 0. rank 2 offered at root1 only.
    assert counts.offered_per_rank == [5, 2, 1] and counts.accepted_per_rank == [2, 1]
    assert counts.acceptance_per_rank() == [2 / 5, 1 / 2, 0.0]


def test_counts_add_across_rounds():
    parents = [[-1, -1, 0]]
    tree = tree_from_parents(parents, parents)
    a = round_counts(tree, _result([[0, 2]], max_depth=2))
    b = round_counts(tree, _result([[1]], max_depth=2))
    total = merge(a, b)
    assert total.num_rounds == 2 and total.num_accepted == 3 and total.acceptance_lengths == [2, 1]
    assert total.offered_per_depth == [2, 1] and total.accepted_per_depth == [2, 1]
    assert total.offered_per_rank == [3, 2] and total.accepted_per_rank == [2, 1]

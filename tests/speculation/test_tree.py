"""The tree proposal type: validation, masks, positions, ranks; a chain is the tree parent[i] = i - 1."""

from __future__ import annotations

import pytest
import torch

from specbench.speculation.tree.draft_tree import (
    DraftTree,
    TreeShapeError,
    ancestor_mask,
    children_of,
    node_positions,
    sibling_rank,
    tree_from_chain,
    tree_from_parents,
    validate,
    verify_attention_mask,
)

# root -> 0 (a), 1 (b); 0 -> 2, 3; 1 -> 4; 2 -> 5
PARENTS = [-1, -1, 0, 0, 1, 2]


def test_depths_and_ragged_layout():
    tree = tree_from_parents([[10, 11, 12, 13, 14, 15], [7, 8]], [PARENTS, [-1, 0]])
    assert tree.depth.tolist() == [0, 0, 1, 1, 1, 2, 0, 1]
    assert tree.num_nodes.tolist() == [6, 2]
    assert tree.cu_num_nodes.tolist() == [0, 6, 8]
    assert tree.cu_num_rows.tolist() == [0, 7, 10]
    assert tree.tokens_of(1) == [7, 8]


def test_chain_is_the_parent_minus_one_tree():
    tree = tree_from_chain(torch.tensor([[5, 6, 7], [9, -1, -1]]), torch.tensor([3, 1]))
    assert tree.parent.tolist() == [-1, 0, 1, -1]
    assert tree.depth.tolist() == [0, 1, 2, 0]
    assert tree.token_ids.tolist() == [5, 6, 7, 9]


@pytest.mark.parametrize("parents", [[0], [-1, 1], [-1, 2, 0], [-2]])
def test_a_parent_after_its_child_is_one_clear_error(parents):
    with pytest.raises(TreeShapeError, match="a parent must be -1"):
        tree_from_parents([[0] * len(parents)], [parents])


def test_inconsistent_depth_or_counts_are_rejected():
    tree = tree_from_parents([[1, 2, 3]], [[-1, 0, 0]])
    bad_depth = DraftTree(tree.token_ids, tree.parent, torch.tensor([0, 1, 2]), tree.num_nodes, tree.cu_num_nodes)
    with pytest.raises(TreeShapeError, match="node 2 has depth 2, its parent says 1"):
        validate(bad_depth)
    bad_cu = DraftTree(tree.token_ids, tree.parent, tree.depth, tree.num_nodes, torch.tensor([0, 2]))
    with pytest.raises(TreeShapeError, match="prefix sum"):
        validate(bad_cu)


def test_ancestor_mask_sees_ancestors_and_self_never_siblings_or_cousins():
    mask = ancestor_mask(PARENTS)
    expected = {0: {0}, 1: {1}, 2: {0, 2}, 3: {0, 3}, 4: {1, 4}, 5: {0, 2, 5}}
    for i, seen in expected.items():
        assert set(torch.nonzero(mask[i]).flatten().tolist()) == seen, i


def test_verify_mask_adds_the_root_row_and_pads():
    tree = tree_from_parents([[1, 2, 3], [4]], [[-1, -1, 0], [-1]])
    mask = verify_attention_mask(tree, max_num_rows=5)
    assert mask.shape == (6, 5)
    assert mask[:4, :4].int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert mask[4:, :2].int().tolist() == [[1, 0], [1, 1]]
    assert not mask[:, 4].any() and not mask[4:, 2:].any()
    with pytest.raises(TreeShapeError, match="widest request"):
        verify_attention_mask(tree, max_num_rows=3)


def test_positions_are_committed_length_plus_depth():
    tree = tree_from_parents([PARENTS, [-1]], [PARENTS, [-1]])
    positions = node_positions(tree, torch.tensor([10, 3]))
    assert positions.tolist() == [9, 10, 10, 11, 11, 11, 12, 2, 3]


def test_sibling_rank_and_children():
    assert sibling_rank(PARENTS) == [0, 1, 0, 1, 0, 0]
    assert children_of(PARENTS) == {-1: [0, 1], 0: [2, 3], 1: [4], 2: [5], 3: [], 4: [], 5: []}

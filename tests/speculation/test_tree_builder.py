"""Top-k tree growth: best frontier by cumulative log-prob, the budget cut keeps a tree, the shape is recorded."""

from __future__ import annotations

import math

import torch

from specbench.speculation.tree.draft_tree import validate
from specbench.speculation.tree.builder import TopKTreeBuilder


def log_probs(*rows: list[float]) -> torch.Tensor:  # one request: [1, num_frontier, V]
    return torch.tensor([[math.log(p) for p in row] for row in rows])[None]


def test_two_steps_by_hand():
    builder = TopKTreeBuilder(num_reqs=1, topk=2, num_draft_tokens=4)
    first = builder.expand(log_probs([0.1, 0.6, 0.3, 0.0001]))
    assert first.token_ids.tolist() == [[1, 2]] and first.parent.tolist() == [[-1, -1]]
    # Children of token 1 (score .6) and of token 2 (score .3); cumulative: 1->0: .54, 1->3: .06, 2->0: .15, 2->2: .12.
    second = builder.expand(log_probs([0.9, 0.0001, 0.0001, 0.1], [0.5, 0.0001, 0.4, 0.1]))
    assert second.token_ids.tolist() == [[0, 0]]
    assert second.parent.tolist() == [[0, 1]]  # creation indices of token 1 and token 2
    tree = builder.finish()
    # Best four of {1: .6, 2: .3, 1->0: .54, 1->3: .06, 2->0: .15, 2->2: .12}, in creation order.
    assert tree.token_ids.tolist() == [1, 2, 0, 0]
    assert tree.parent.tolist() == [-1, -1, 0, 1]
    assert tree.depth.tolist() == [0, 0, 1, 1]
    assert [(s.num_candidates, s.num_frontier) for s in builder.shape] == [(2, 2), (4, 2)]


def test_topk_one_is_the_greedy_chain():
    builder = TopKTreeBuilder(num_reqs=2, topk=1, num_draft_tokens=3)
    gen = torch.Generator().manual_seed(0)
    expected = [[], []]
    for _ in range(3):
        lp = torch.randn(2, 1, 7, generator=gen).log_softmax(-1)
        builder.expand(lp)
        for r in range(2):
            expected[r].append(int(lp[r, 0].argmax()))
    tree = builder.finish()
    assert tree.parent.tolist() == [-1, 0, 1, -1, 0, 1]
    assert [tree.tokens_of(r) for r in range(2)] == expected


def test_budget_cut_is_always_a_valid_tree_of_the_best_nodes():
    gen = torch.Generator().manual_seed(1)
    for topk, budget, steps in [(2, 5, 3), (3, 7, 4), (4, 16, 3), (2, 100, 2)]:
        builder = TopKTreeBuilder(num_reqs=3, topk=topk, num_draft_tokens=budget)
        frontier = 1
        for _ in range(steps):
            f = builder.expand(torch.randn(3, frontier, 9, generator=gen).mul(3).log_softmax(-1))
            frontier = f.token_ids.shape[1]
        tree = builder.finish()
        validate(tree)
        num_candidates = sum(s.num_candidates for s in builder.shape)
        assert tree.num_nodes.tolist() == [min(budget, num_candidates)] * 3
        assert int(tree.depth.max()) <= steps - 1
        assert all(s.num_frontier == min(topk, s.num_candidates) for s in builder.shape)

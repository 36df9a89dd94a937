"""Synthetic tree acceptance: the realised per-(depth, rank) rates match the table, chains match synthetic_verify's
law, the result has verify_tree's layout, and the calibration numbers the module docstring states hold."""

from __future__ import annotations

import math

import pytest
import torch

from specbench.speculation.synthetic.chain import synthetic_verify
from specbench.speculation.synthetic.tree import (
    DEFAULT_RANK_DECAY,
    PUBLISHED_CHAIN_RATES,
    SGLANG_SETTING,
    SGLANG_SETTING_RATES,
    engine_table,
    expected_acceptance_length,
    expected_tree,
    extend_rates,
    synthetic_tree_verify,
    tree_table,
)
from specbench.speculation.tree.draft_tree import sibling_rank, tree_from_chain, tree_from_parents

VOCAB = 11
# depth 0: three children of the root; depth 1: two under node 0, one under node 1; depth 2: one under node 3
PARENTS = [-1, -1, -1, 0, 0, 1, 3]


def _logits(num_rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(num_rows, VOCAB, generator=torch.Generator().manual_seed(seed))


def test_realised_rates_match_the_table() -> None:
    """Per node: P(accepted | tried), tried = its parent accepted and no lower-ranked sibling was, equals
    table[depth, rank]; a 5-sigma binomial band per node over 40000 requests in one batch."""
    table = torch.tensor([[0.6, 0.5, 0.4], [0.7, 0.3, 0.0], [0.9, 0.0, 0.0]])
    num_reqs = 40000
    tree = tree_from_parents([list(range(len(PARENTS)))] * num_reqs, [PARENTS] * num_reqs)
    logits = _logits(int(tree.cu_num_rows[-1]))
    result = synthetic_tree_verify(logits, tree, table, torch.Generator().manual_seed(1))
    accepted = torch.zeros(num_reqs, len(PARENTS), dtype=torch.bool)
    for d in range(result.accepted_nodes.shape[1]):
        node = result.accepted_nodes[:, d]
        accepted[node >= 0, node[node >= 0]] = True
    ranks = sibling_rank(PARENTS)
    depths = tree.depth[: len(PARENTS)].tolist()
    for i, p in enumerate(PARENTS):
        parent_ok = torch.ones(num_reqs, dtype=torch.bool) if p == -1 else accepted[:, p]
        earlier = [j for j in range(i) if PARENTS[j] == p]
        tried = parent_ok & ~accepted[:, earlier].any(dim=1) if earlier else parent_ok
        n = int(tried.sum())
        rate = float(table[depths[i], ranks[i]])
        hits = int((accepted[:, i] & tried).sum())
        assert int((accepted[:, i] & ~tried).sum()) == 0, f"node {i} accepted without being tried"
        sigma = math.sqrt(max(rate * (1 - rate), 1e-12) / n)
        assert abs(hits / n - rate) <= 5 * sigma + 1e-9, f"node {i}: {hits}/{n} vs {rate}"
    # the realised mean acceptance length against the exact expectation
    mean = float(result.num_accepted.float().mean()) + 1
    assert mean == pytest.approx(expected_acceptance_length(PARENTS, table), abs=0.03)


def test_layout_matches_verify_tree() -> None:
    """accepted_nodes are a root-to-leaf path, output = the path's tokens then the target argmax at its last row."""
    tree = tree_from_parents([[5, 6, 7, 8, 9, 1, 2], [3], []], [PARENTS, [-1], []])
    logits = _logits(int(tree.cu_num_rows[-1]), seed=3)
    table = tree_table(extend_rates(PUBLISHED_CHAIN_RATES, 4), 3)
    cu_rows = tree.cu_num_rows.tolist()
    for seed in range(30):
        result = synthetic_tree_verify(logits, tree, table, torch.Generator().manual_seed(seed))
        assert tuple(result.accepted_nodes.shape) == (3, 3) and tuple(result.output_token_ids.shape) == (3, 4)
        for r in range(3):
            n = int(result.num_accepted[r])
            path = result.accepted_nodes[r, :n].tolist()
            assert (result.accepted_nodes[r, n:] == -1).all()
            parents = tree.parents_of(r)
            assert all((parents[node] == (path[d - 1] if d else -1)) for d, node in enumerate(path))
            last_row = cu_rows[r] + 1 + (path[-1] if path else -1)
            tokens = tree.tokens_of(r)
            expected = [tokens[node] for node in path] + [int(logits[last_row].argmax())]
            assert result.output_token_ids[r, : n + 1].tolist() == expected
            assert (result.output_token_ids[r, n + 1:] == -1).all()


def test_chain_accepts_as_synthetic_verify() -> None:
    """A topk-1 tree under tree_table(rates) has the chain law of synthetic_verify with the same rates."""
    rates = (0.8, 0.5, 0.3)
    num_reqs = 20000
    drafts = torch.randint(0, VOCAB, (num_reqs, 3), generator=torch.Generator().manual_seed(0))
    counts = torch.full((num_reqs,), 3, dtype=torch.int64)
    tree = tree_from_chain(drafts, counts)
    logits = _logits(num_reqs * 4)
    tree_result = synthetic_tree_verify(logits, tree, tree_table(rates, 1), torch.Generator().manual_seed(5))
    cond = torch.tensor([0.8, 0.5 / 0.8, 0.3 / 0.5])
    chain_result = synthetic_verify(logits, drafts, counts, cond, torch.Generator().manual_seed(6))
    for j, rate in enumerate(rates, start=1):
        for result in (tree_result, chain_result):
            realised = float((result.num_accepted >= j).float().mean())
            assert realised == pytest.approx(rate, abs=5 * math.sqrt(rate * (1 - rate) / num_reqs))


def test_rank_decay_zero_is_the_rank0_chain_and_no_drafts_is_the_bonus() -> None:
    tree = tree_from_parents([list(range(len(PARENTS))), []], [PARENTS, []])
    logits = _logits(int(tree.cu_num_rows[-1]))
    table = tree_table((1.0, 1.0, 1.0), 3, rank_decay=0.0)
    result = synthetic_tree_verify(logits, tree, table, torch.Generator().manual_seed(0))
    assert result.accepted_nodes[0].tolist() == [0, 3, 6] and result.num_accepted.tolist() == [3, 0]
    assert result.output_token_ids[1, 0] == logits[8].argmax()  # request 1's root row
    empty = tree_from_parents([[], []], [[], []])
    result = synthetic_tree_verify(_logits(2), empty, table)
    assert result.num_accepted.tolist() == [0, 0] and result.output_token_ids.shape == (2, 1)


def test_calibration_stated_in_the_docstring() -> None:
    topk, num_tokens, num_steps = SGLANG_SETTING
    table = tree_table(SGLANG_SETTING_RATES, topk, DEFAULT_RANK_DECAY)
    parents = expected_tree(table, topk, num_tokens, num_steps)
    assert len(parents) == num_tokens and max(sibling_rank(parents)) > 0  # a real tree, not a chain
    assert expected_acceptance_length(parents, table) == pytest.approx(3.90, abs=0.01)
    assert 3.5 <= expected_acceptance_length(parents, table) <= 4.0
    assert expected_acceptance_length(list(range(-1, 4)), table) == pytest.approx(3.69, abs=0.01)
    assert expected_acceptance_length(list(range(-1, 2)), table) == pytest.approx(2.95, abs=0.01)
    published = tree_table(extend_rates(PUBLISHED_CHAIN_RATES, num_steps), topk, DEFAULT_RANK_DECAY)
    assert expected_acceptance_length(expected_tree(published, topk, num_tokens, num_steps), published) == \
        pytest.approx(3.24, abs=0.01)


def test_engine_table_extends_short_rate_lists():
    table = engine_table((0.8, 0.6), max_depth=4, topk=3)
    assert tuple(table.shape) == (4, 3)
    assert table[:, 0].tolist() == pytest.approx([0.8, 0.75, 0.75, 0.75])  # the last conditional rate repeats
    assert table[1].tolist() == pytest.approx([0.75, 0.375, 0.1875])  # DEFAULT_RANK_DECAY 0.5 over ranks

"""The batched tree verifiers against the readable walks: greedy identical on random ragged trees; synthetic identical
given the same coins; sampled with the walk's law (exact per-path probabilities from `path_distribution`, chi-square
over (path, next token) cells); the per-request stats read off the batched path equal round_counts'."""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy import stats

from specbench.sampling_params import SamplingParams
from specbench.speculation.verify import tree_batched as tree_verify_batched
from specbench.speculation.sampling import build_sampling_tensors
from specbench.speculation.synthetic.tree import synthetic_tree_verify, synthetic_tree_walk, tree_table
from specbench.speculation.tree.draft_tree import ancestor_mask, tree_from_parents
from specbench.speculation.tree.padded import pad_tree, path_shape
from specbench.speculation.verify.tree_stats import path_round_counts, round_counts
from specbench.speculation.verify.tree import TreeVerifyResult, path_distribution, verify_tree
from specbench.speculation.verify.tree_batched import verify_tree_batched
from tests.support.trees import random_trees

ALPHA = 1e-3


def _padded_to(x: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=-1)


def _greedy_st(num_reqs: int, vocab: int):
    return build_sampling_tensors([SamplingParams(temperature=0.0)] * num_reqs, [None] * num_reqs, vocab, "cpu")


@pytest.mark.parametrize("seed", range(40))
def test_greedy_is_identical_to_the_walk(seed):
    gen = torch.Generator().manual_seed(seed)
    vocab = 3
    tree = random_trees(gen, 6, 9, vocab)
    num_nodes = tree.num_nodes.tolist()
    # peaked logits at random argmaxes: a node matches its parent's row often (1/3)
    logits = torch.randn(int(tree.cu_num_rows[-1]), vocab, generator=gen)
    st = _greedy_st(tree.num_reqs, vocab)
    want = verify_tree(logits, tree, None, st)
    got = verify_tree_batched(logits, tree, st, num_nodes)
    width = max(num_nodes, default=0)
    assert tuple(got.accepted_nodes.shape) == (6, width)
    assert torch.equal(got.num_accepted, want.num_accepted)
    assert torch.equal(got.accepted_nodes, _padded_to(want.accepted_nodes, width))
    assert torch.equal(got.output_token_ids, _padded_to(want.output_token_ids, width + 1))
    # reading the counts itself (no host copy passed) gives the same
    assert torch.equal(verify_tree_batched(logits, tree, st).output_token_ids, got.output_token_ids)


def test_greedy_paths_were_exercised():
    """The random trees above reach deep paths and ties between branches (the identity test is not vacuous)."""
    gen = torch.Generator().manual_seed(0)
    lengths = []
    for _ in range(40):
        tree = random_trees(gen, 6, 9, 3)
        logits = torch.randn(int(tree.cu_num_rows[-1]), 3, generator=gen)
        lengths += verify_tree(logits, tree, None, _greedy_st(6, 3)).num_accepted.tolist()
    assert max(lengths) >= 3 and lengths.count(0) > 0


def test_ancestor_closure_is_the_ancestor_mask():
    gen = torch.Generator().manual_seed(1)
    tree = random_trees(gen, 8, 12, 5)
    padded = pad_tree(tree, 12)
    for r in range(tree.num_reqs):
        n = int(tree.num_nodes[r])
        assert torch.equal(padded.is_ancestor[r, :n, :n], ancestor_mask(tree.parents_of(r)))
        assert not padded.is_ancestor[r, n:].any() and not padded.is_ancestor[r, :, n:].any()


@pytest.mark.parametrize("seed", range(20))
def test_synthetic_is_the_walk_with_the_same_coins(seed):
    gen = torch.Generator().manual_seed(100 + seed)
    tree = random_trees(gen, 7, 9, 6)
    logits = torch.randn(int(tree.cu_num_rows[-1]), 6, generator=gen)
    table = tree_table((0.9, 0.8, 0.7, 0.6), 3, rank_decay=0.7)
    width = int(tree.num_nodes.max())
    coins = torch.rand(tree.num_reqs, width, generator=torch.Generator().manual_seed(seed))
    paths, finals = synthetic_tree_walk(logits, tree, table, coins)
    for padded in (None, pad_tree(tree, width)):  # syncing and sync-free forms
        result = synthetic_tree_verify(logits, tree, table, torch.Generator().manual_seed(seed), padded)
        num_accepted = result.num_accepted.tolist()
        assert [row[:n] for row, n in zip(result.accepted_nodes.tolist(), num_accepted)] == paths
        assert [row[n] for row, n in zip(result.output_token_ids.tolist(), num_accepted)] == finals


def test_synthetic_walk_paths_were_exercised():
    gen = torch.Generator().manual_seed(100)
    tree = random_trees(gen, 200, 9, 6)
    logits = torch.randn(int(tree.cu_num_rows[-1]), 6, generator=gen)
    coins = torch.rand(200, int(tree.num_nodes.max()), generator=gen)
    paths, _ = synthetic_tree_walk(logits, tree, tree_table((0.9, 0.8, 0.7, 0.6), 3, 0.7), coins)
    assert max(map(len, paths)) >= 3 and any(not p for p in paths)


@pytest.mark.parametrize("seed", range(10))
def test_path_counts_equal_round_counts(seed):
    gen = torch.Generator().manual_seed(200 + seed)
    vocab = 3
    tree = random_trees(gen, 6, 9, vocab)
    logits = torch.randn(int(tree.cu_num_rows[-1]), vocab, generator=gen)
    num_nodes = tree.num_nodes.tolist()
    result = verify_tree_batched(logits, tree, _greedy_st(6, vocab), num_nodes)
    kids, ranks = path_shape(pad_tree(tree, max(num_nodes)), result.accepted_nodes, result.num_accepted)
    for r, n in enumerate(result.num_accepted.tolist()):
        one = tree_from_parents([tree.tokens_of(r)], [tree.parents_of(r)])
        sub = TreeVerifyResult(result.accepted_nodes[r: r + 1], result.num_accepted[r: r + 1],
                               result.output_token_ids[r: r + 1])
        assert path_round_counts(num_nodes[r], kids[r].tolist(), ranks[r, :n].tolist()) == round_counts(one, sub)


# ---------------------------------------------------------------- sampled: the walk's law

# root -> 0, 1, 2 (node 2 repeats node 0's token: never accepted); 0 -> 3, 4; 1 -> 5; 3 -> 6
LAW_PARENTS = [-1, -1, -1, 0, 0, 1, 3]
LAW_TOKENS = [1, 0, 1, 2, 0, 3, 1]
LAW_VOCAB = 4
NUM_DRAWS = 30000


def _law_case(seed: int):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(len(LAW_PARENTS) + 1, LAW_VOCAB, generator=gen) * 0.8
    return logits


def _cells(accepted: list[int], final: int) -> tuple[tuple[int, ...], int]:
    return tuple(accepted), final


def _batched_counts(logits: torch.Tensor, seed: int, stale: bool = False) -> dict:
    tree = tree_from_parents([LAW_TOKENS] * NUM_DRAWS, [LAW_PARENTS] * NUM_DRAWS)
    st = build_sampling_tensors([SamplingParams(temperature=1.0)] * NUM_DRAWS, [None] * NUM_DRAWS, LAW_VOCAB, "cpu")
    torch.manual_seed(seed)
    result = verify_tree_batched(logits.repeat(NUM_DRAWS, 1), tree, st, [len(LAW_PARENTS)] * NUM_DRAWS)
    counts: dict = {}
    for nodes, n, out in zip(result.accepted_nodes.tolist(), result.num_accepted.tolist(),
                             result.output_token_ids.tolist()):
        cell = _cells(nodes[:n], out[n])
        counts[cell] = counts.get(cell, 0) + 1
    return counts


def _exact_law(logits: torch.Tensor) -> dict:
    tree = tree_from_parents([LAW_TOKENS], [LAW_PARENTS])
    probs = torch.softmax(logits.double(), dim=-1)
    law = {}
    for outcome in path_distribution(tree, 0, probs, None):
        for x, px in enumerate(outcome.final_probs.tolist()):
            if px > 0:
                law[_cells(list(outcome.accepted_nodes), x)] = outcome.probability * px
    return law


def _p_value(counts: dict, law: dict) -> float:
    assert set(counts) <= set(law), f"outcomes the walk never produces: {set(counts) - set(law)}"
    cells = sorted(law)
    expected = torch.tensor([law[c] for c in cells], dtype=torch.float64) * NUM_DRAWS
    observed = torch.tensor([counts.get(c, 0) for c in cells], dtype=torch.float64)
    small = expected < 5  # pool sparse cells into one so the chi-square approximation holds
    exp = torch.cat([expected[~small], expected[small].sum()[None]]) if small.any() else expected
    obs = torch.cat([observed[~small], observed[small].sum()[None]]) if small.any() else observed
    return float(stats.chisquare(obs.numpy(), exp.numpy() * obs.sum().item() / exp.sum().item()).pvalue)


@pytest.mark.parametrize("seed", [0, 1])
def test_sampled_has_the_walks_law(seed):
    logits = _law_case(seed)
    law = _exact_law(logits)
    assert abs(sum(law.values()) - 1.0) < 1e-9
    assert max(len(path) for path, _ in law) == 3  # the deepest path (0, 3, 6) is reachable
    counts = _batched_counts(logits, seed)
    assert _p_value(counts, law) > ALPHA
    assert not any(2 in path for path, _ in counts)  # the repeated token is never accepted


def test_a_stale_sibling_rule_fails_the_same_test(monkeypatch):
    """Power: testing every sibling against p itself (no renormalization by the rejected siblings) is caught."""
    monkeypatch.setattr(tree_verify_batched, "sibling_accept_probs", lambda child_probs, tree: child_probs)
    logits = _law_case(0)
    assert _p_value(_batched_counts(logits, 0), _exact_law(logits)) < ALPHA


def test_seeded_requests_do_not_depend_on_the_batch():
    """A seeded request draws its own uniforms and exponentials: alone or next to others, same tokens."""
    logits = _law_case(3)
    tree1 = tree_from_parents([LAW_TOKENS], [LAW_PARENTS])
    tree3 = tree_from_parents([LAW_TOKENS, [2], LAW_TOKENS], [LAW_PARENTS, [-1], LAW_PARENTS])
    params = [SamplingParams(temperature=1.0, seed=5)]

    def run(tree, num_nodes, rows, generators):
        st = build_sampling_tensors(params * len(generators), generators, LAW_VOCAB, "cpu")
        return verify_tree_batched(rows, tree, st, num_nodes)

    alone = run(tree1, [7], logits, [torch.Generator().manual_seed(5)])
    rows3 = torch.cat([logits, torch.randn(2, LAW_VOCAB), logits])
    batch = run(tree3, [7, 1, 7], rows3, [torch.Generator().manual_seed(9), None, torch.Generator().manual_seed(5)])
    assert batch.output_token_ids[2].tolist() == alone.output_token_ids[0].tolist()


def test_mixed_greedy_and_sampled_batch():
    """Greedy rows of a mixed batch are the greedy walk's, whatever the sampled rows draw."""
    gen = torch.Generator().manual_seed(7)
    tree = random_trees(gen, 6, 8, 3)
    logits = torch.randn(int(tree.cu_num_rows[-1]), 3, generator=gen)
    params = [SamplingParams(temperature=0.0 if r % 2 == 0 else 1.0) for r in range(6)]
    st = build_sampling_tensors(params, [None] * 6, 3, "cpu")
    got = verify_tree_batched(logits, tree, st, tree.num_nodes.tolist())
    want = verify_tree(logits, tree, None, _greedy_st(6, 3))
    width = got.accepted_nodes.shape[1]
    for r in range(0, 6, 2):
        assert got.output_token_ids[r].tolist() == _padded_to(want.output_token_ids, width + 1)[r].tolist()
    for r in range(1, 6, 2):  # sampled rows: a path of the tree, its tokens
        n = int(got.num_accepted[r])
        path = got.accepted_nodes[r, :n].tolist()
        parents = tree.parents_of(r)
        assert all(parents[node] == (path[d - 1] if d else -1) for d, node in enumerate(path))
        assert got.output_token_ids[r, :n].tolist() == [tree.tokens_of(r)[i] for i in path]


def test_empty_trees():
    tree = tree_from_parents([[], []], [[], []])
    logits = torch.randn(2, 5)
    result = verify_tree_batched(logits, tree, _greedy_st(2, 5), [0, 0])
    assert result.num_accepted.tolist() == [0, 0]
    assert result.output_token_ids.tolist() == [[int(logits[0].argmax())], [int(logits[1].argmax())]]
    assert list(itertools.chain(*result.accepted_nodes.tolist())) == []

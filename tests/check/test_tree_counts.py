"""The metrics check's tree part (check/tree_counts.py): a clean tree run's counts agree with its raw records, and
each kind of disagreement is reported."""

from __future__ import annotations

import dataclasses

import pytest

from specbench.check.greedy import greedy_params
from specbench.check.setup import build_llm, prompt_list
from specbench.check.tree_counts import tree_count_violations
from specbench.selftest.setups import TREE_SHAPE, selftest_setups


@pytest.fixture(scope="module")
def tree_outs(tmp_path_factory):
    setup = selftest_setups(str(tmp_path_factory.mktemp("tree-counts")), 0, ("draft",), 3)["draft"]
    setup = dataclasses.replace(setup, draft_shape=TREE_SHAPE)
    return build_llm(setup).generate(prompt_list(setup), greedy_params(setup))


def test_a_clean_tree_run_has_consistent_counts(tree_outs):
    assert all(o.stats.tree_counts is not None and o.stats.tree_counts.num_rounds for o in tree_outs)
    assert tree_count_violations(tree_outs) == ()


@pytest.mark.parametrize("corrupt, fact", [
    (lambda t: t.acceptance_lengths.__setitem__(0, t.acceptance_lengths[0] + 1), "sum of acceptance lengths"),
    (lambda t: t.tree_sizes.append(3), "tree rounds == draft rounds"),
    (lambda t: t.accepted_per_rank.__setitem__(0, t.accepted_per_rank[0] + 1), "accepted per rank"),
    (lambda t: t.accepted_per_depth.__setitem__(0, t.offered_per_depth[0] + 1), "accepted per depth"),
])
def test_each_disagreement_is_reported(tree_outs, corrupt, fact):
    out = tree_outs[0]
    counts = out.stats.tree_counts
    saved = dataclasses.replace(counts, acceptance_lengths=list(counts.acceptance_lengths),
                                tree_sizes=list(counts.tree_sizes), accepted_per_rank=list(counts.accepted_per_rank),
                                accepted_per_depth=list(counts.accepted_per_depth))
    try:
        corrupt(counts)
        problems = tree_count_violations(tree_outs)
        assert any(p.startswith("request 0:") and fact in p for p in problems), problems
    finally:
        out.stats.tree_counts = saved

"""The selftest's tree rows (setups.TREE_SHAPE on every method whose proposer drafts trees): planned after the chain
rows on the seed targets only, their clean rows passing every check (the draft oracle too: check/tree_oracle.py),
the tree mutants run on them alone and caught by the battery, and the tree paths covered."""

from __future__ import annotations

import pytest

from specbench.check.battery import CHECKS
from specbench.check.budget import BUDGETS
from specbench.faults.catalog import TREE_MUTANTS
from specbench.selftest.row_tasks import SeedTask, plan_seed
from specbench.selftest.runner import (
    false_alarms,
    format_mutation_table,
    run_selftest,
    selftest_coverage,
)
from specbench.selftest.setups import TREE_SHAPE, WINDOW_MOE

TREE_FAULTS = tuple(m.fault.name for m in TREE_MUTANTS)


def test_tree_rows_are_planned_for_the_tree_drafters_on_the_seed_targets_only(tmp_path):
    task = SeedTask(str(tmp_path), 0, ("ngram", "draft"), 3, "cpu", None, ("greedy",), BUDGETS["fast"])
    rows = plan_seed(task).clean_rows
    assert [(r.method, r.shape.is_tree) for r in rows] == [("none", False), ("ngram", False), ("draft", False),
                                                          ("draft", True)]
    assert rows[-1].shape == TREE_SHAPE and rows[-1].setup.draft_shape == TREE_SHAPE
    window = plan_seed(SeedTask(str(tmp_path), 0, ("draft",), 3, "cpu", None, ("greedy",), BUDGETS["fast"],
                                WINDOW_MOE)).clean_rows
    assert not any(r.shape.is_tree for r in window)  # trees refuse windowed layers
    off = plan_seed(SeedTask(str(tmp_path), 0, ("draft",), 3, "cpu", None, ("greedy",), BUDGETS["fast"],
                             trees=False)).clean_rows
    assert [(r.method, r.shape.is_tree) for r in off] == [("none", False), ("draft", False)]  # --no-trees


@pytest.mark.slow  # the full battery on two methods' chain and tree rows, five mutants each: ~3 min on 2 cores
def test_tree_mutants_are_caught_on_tree_rows_and_absent_from_chain_rows():
    rows = run_selftest(seeds=(0,), methods=("draft", "eagle3"), faults=TREE_FAULTS, window_moe=False, jobs=2)
    table = format_mutation_table(rows, CHECKS)
    assert not false_alarms(rows), table
    tree_rows = [r for r in rows if r.shape.is_tree]
    assert {(r.method, r.inject) for r in tree_rows} == {(m, f) for m in ("draft", "eagle3")
                                                         for f in (None, *TREE_FAULTS)}, table
    assert all(r.detected for r in tree_rows if r.inject is not None), table
    assert not any(r.inject for r in rows if not r.shape.is_tree), table  # tree mutants: tree rows only
    clean_tree = [r for r in tree_rows if r.inject is None]
    for row in clean_tree:
        by_name = {r.name: r for r in row.results}
        assert not any(r.skipped for r in row.results), table  # the tree oracle included
        assert "tree-round laws" in by_name["oracle"].detail
    assert "draft t2/6" in table
    coverage = selftest_coverage(rows, "cpu")
    assert {"spec.tree_round", "verify.tree", "attention.tree_torch"} <= coverage.taken
    assert coverage.is_complete, coverage.unexercised

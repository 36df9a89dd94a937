"""The selftest's tree rows (setups.TREE_SHAPE on every method whose proposer drafts trees): planned after the chain
rows on the seed targets (and one on the hybrid target: tests/check/test_selftest_hybrid.py), none on the window + MoE
target. That their clean rows pass every check (the tree oracle too), that the tree mutants
run on them alone and are caught, and that the tree paths are covered is asserted on every method's selftest run
(tests/support/selftest_rows.py; the coverage in test_selftest_methods.py)."""

from __future__ import annotations

from specbench.check.budget import BUDGETS
from specbench.selftest.row_tasks import SeedTask, plan_seed
from specbench.selftest.setups import TREE_SHAPE, WINDOW_MOE


def test_tree_rows_are_planned_for_the_tree_drafters_on_the_seed_targets_only(tmp_path):
    task = SeedTask(str(tmp_path), 0, ("ngram", "draft"), 3, "cpu", None, ("greedy",), BUDGETS["fast"])
    rows = plan_seed(task).clean_rows
    # (the chunked rows come last: tests/check/test_selftest_chunked.py)
    assert [(r.method, r.shape.is_tree) for r in rows if not r.chunked and not r.constrained] == [
        ("none", False), ("ngram", False), ("draft", False), ("draft", True)]
    assert rows[3].shape == TREE_SHAPE and rows[3].setup.draft_shape == TREE_SHAPE
    window = plan_seed(SeedTask(str(tmp_path), 0, ("draft",), 3, "cpu", None, ("greedy",), BUDGETS["fast"],
                                WINDOW_MOE)).clean_rows
    assert not any(r.shape.is_tree for r in window)  # trees refuse windowed layers
    off = plan_seed(SeedTask(str(tmp_path), 0, ("draft",), 3, "cpu", None, ("greedy",), BUDGETS["fast"],
                             trees=False, chunked=False, constrained=False)).clean_rows
    # --no-trees --no-chunked --no-constrained
    assert [(r.method, r.shape.is_tree) for r in off] == [("none", False), ("draft", False)]

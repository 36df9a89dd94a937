"""The selftest's chunked rows (setups.CHUNKED_OPTIONS): each method once more with chunked prefill, its greedy check
against the whole-prompt reference and its metrics check. That the clean rows pass and take the chunked paths, and that
each chunked-prefill mutant is caught there (and runs nowhere else): test_selftest_methods.py, on the rows of its
mutation run (every method, seed 0), which holds them."""

from __future__ import annotations


def test_chunked_rows_are_planned_last_on_the_seed_targets_only(tmp_path):
    from specbench.check.budget import BUDGETS
    from specbench.selftest.row_tasks import SeedTask, plan_seed
    from specbench.selftest.setups import CHUNKED_OPTIONS, WINDOW_MOE

    rows = plan_seed(SeedTask(str(tmp_path), 0, ("ngram", "draft"), 3, "cpu", None, ("greedy",), BUDGETS["fast"],
                              trees=False, constrained=False)).clean_rows
    assert [(r.method, r.chunked) for r in rows] == [("none", False), ("ngram", False), ("draft", False),
                                                     ("ngram", True), ("draft", True)]
    assert all(getattr(rows[-1].setup.engine, k) == v for k, v in CHUNKED_OPTIONS.items())
    window = plan_seed(SeedTask(str(tmp_path), 0, ("draft",), 3, "cpu", None, ("greedy",), BUDGETS["fast"],
                                WINDOW_MOE)).clean_rows
    assert not any(r.chunked for r in window)

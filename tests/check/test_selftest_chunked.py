"""The selftest's chunked rows (setups.CHUNKED_OPTIONS): each method once more with chunked prefill, its greedy check
against the whole-prompt reference and its metrics check; the clean rows pass and take the chunked paths, each chunked-prefill mutant is
caught there (and runs nowhere else)."""

from __future__ import annotations

import pytest

from specbench.faults.catalog import CHUNK_MUTANTS
from specbench.selftest.runner import format_mutation_table, run_selftest, selftest_ok

CHUNK_FAULTS = tuple(m.fault.name for m in CHUNK_MUTANTS)


@pytest.mark.slow
def test_chunked_rows_pass_clean_and_catch_every_chunk_mutant():
    checks = ("greedy", "metrics")
    # eagle3 hosts all three (the target-side ones every method does, tests/faults/test_chunk_mutants.py)
    rows = run_selftest(seeds=(0,), methods=("eagle3",), faults=CHUNK_FAULTS, checks=checks, trees=False,
                        constrained=False)  # the constrained rows: test_selftest_constrained.py
    table = format_mutation_table(rows, checks)
    assert selftest_ok(rows), table
    clean_chunked = [r for r in rows if r.chunked and r.inject is None]
    assert [r.method for r in clean_chunked] == ["eagle3"], table
    for row in clean_chunked:
        assert {"prefill.chunked_mixed", "prefill.chunk_partial"} <= row.results[0].paths
        assert not any(r.skipped for r in row.results)  # the metrics check runs on chunked rows too
    faulted = {(r.method, r.inject) for r in rows if r.inject is not None}
    assert all(r.chunked for r in rows if r.inject is not None)  # inert elsewhere: never run on whole-prompt rows
    assert faulted == {("eagle3", name) for name in CHUNK_FAULTS}
    assert "eagle3 chunked" in table


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

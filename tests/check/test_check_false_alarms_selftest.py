"""Issue 15: the selftest's clean rows over ten seeds, every method (a file of its own, apart from
test_check_false_alarms.py's batteries, which take seeds 0-19: the two test workers take one file each). Each seed is
deterministic, so this is a measurement of those seeds, not a flake; `specbench selftest --seeds 0-29 --faults none`
measures all 30."""

from __future__ import annotations

import pytest

from specbench.check.budget import Budget
from specbench.selftest.reference_baselines import SHIPPED_SEEDS
from specbench.selftest.runner import (
    METHODS,
    PLAIN,
    false_alarms,
    format_mutation_table,
    run_selftest,
)

CLEAN_SEEDS = tuple(range(20, 30))

# The selftest's clean rows over many seeds within ~1 min per ten on 2 CPU cores: every prompt and token (the
# baseline check compares with the shipped baselines, measured on those), no sampled engine runs (the sampled check skips, saying
# so), no greedy / oracle re-runs with forced preemption, the invariant sweep's real-verification cases only. Kept:
# greedy (and the reference vs HF transformers), the verifier rows' laws (seeded per seed), the draft oracle, the
# invariant sweep's real-verification cases, the baseline's Fisher tests, metrics.
CLEAN_MANY_SEEDS = Budget("clean-many-seeds", None, None, False, False, False,
                          "the sampled check's engine runs, the preemption re-runs, the forced-acceptance sweep cases")


@pytest.mark.slow
def test_selftest_clean_rows_over_ten_seeds_every_method():
    """`selftest --seeds 20-29 --faults none` on CPU: no false alarm on the plain row or any method's
    clean row; seeds 20-29 all have shipped baselines, so the baseline check runs on every speculative row."""
    # chains (the tree rows' clean runs: the selftest's default rows and scripts/selftest_false_alarms.sh on CUDA;
    # many seeds of them here would double this test's time)
    # in-process (jobs=1): the test workers already keep the cores busy, and each spawned row worker would import
    # torch again (~8 s apiece); test_selftest_jobs.py checks that workers give these rows in this order
    rows = run_selftest(seeds=CLEAN_SEEDS, methods=METHODS, faults=("none",), budget=CLEAN_MANY_SEEDS, jobs=1,
                        trees=False, chunked=False)  # chunked rows: test_selftest_methods.py
    # per seed the plain row, each method's chain row, then each method's constrained row (selftest/constrained.py)
    assert [(r.seed, r.method, r.constrained) for r in rows] == [
        (s, m, c) for s in CLEAN_SEEDS for m, c in ((PLAIN, False), *((m, False) for m in METHODS),
                                                   *((m, True) for m in METHODS))]
    assert set(CLEAN_SEEDS) <= set(SHIPPED_SEEDS)
    for row in rows:
        skipped = {r.name for r in row.results if r.skipped}
        assert "baseline" not in skipped or row.method == PLAIN or row.constrained, row  # those: greedy only
    table = format_mutation_table(rows)
    print(table)
    assert not false_alarms(rows), table

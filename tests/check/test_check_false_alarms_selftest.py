"""Issue 15: the selftest's clean rows over 30 seeds, every method (a file of its own, apart from
test_check_false_alarms.py's batteries: the two test workers take one each). Each seed is deterministic, so this is
a measurement of those 30 seeds, not a flake."""

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

SEEDS_30 = tuple(range(30))

# The selftest's clean rows over 30 seeds within ~3 min on 2 CPU cores: every prompt and token (the baseline check
# compares with the shipped baselines, measured on those), no sampled engine runs (the sampled check skips, saying
# so), no greedy / oracle re-runs with forced preemption, the invariant sweep's real-verification cases only. Kept:
# greedy (and the reference vs HF transformers), the verifier rows' laws (seeded per seed), the draft oracle, the
# invariant sweep's real-verification cases, the baseline's Fisher tests, metrics.
CLEAN_30_SEEDS = Budget("clean-30-seeds", None, None, False, False, False,
                        "the sampled check's engine runs, the preemption re-runs, the forced-acceptance sweep cases")


@pytest.mark.slow
def test_selftest_clean_rows_over_30_seeds_every_method():
    """`selftest --seeds 0-29 --faults none` on CPU (two workers): no false alarm on the plain row or any method's
    clean row; seeds 0-29 all have shipped baselines, so the baseline check runs on every speculative row."""
    # chains (the tree rows' clean runs: the selftest's default rows and scripts/selftest_false_alarms.sh on CUDA;
    # 30 seeds of them here would double this test's time)
    rows = run_selftest(seeds=SEEDS_30, methods=METHODS, faults=("none",), budget=CLEAN_30_SEEDS, jobs=2,
                        trees=False)
    assert [(r.seed, r.method) for r in rows] == [(s, m) for s in SEEDS_30 for m in (PLAIN, *METHODS)]
    assert set(SEEDS_30) <= set(SHIPPED_SEEDS)
    for row in rows:
        skipped = {r.name for r in row.results if r.skipped}
        assert "baseline" not in skipped or row.method == PLAIN, row
    table = format_mutation_table(rows)
    print(table)
    assert not false_alarms(rows), table

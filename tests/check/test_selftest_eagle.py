"""The selftest in CI (EAGLE rows): the EAGLE-1 head the selftest builds from the tiny target's own weights;
every fault its proposer hosts detected, no false alarm on several seeds."""

from __future__ import annotations

import pytest

from tests.support.selftest_rows import assert_selftest_rows

from specbench.check.baseline import measure_acceptance
from specbench.selftest.runner import run_selftest, selftest_setups

SEEDS = (0, 1)


def test_built_eagle_head_drafts_like_its_target(tmp_path):
    """Built, not fitted: the target's layers over the shifted pairs. Acceptance as real EAGLE-1 heads reach;
    a head with the shift or the embedding path wrong would draft near-random tokens (acceptance ~0)."""
    for seed in SEEDS:
        setup = selftest_setups(str(tmp_path), seed, ("eagle",), num_steps=3)["eagle"]
        rates = measure_acceptance(setup).acceptance_per_pos
        assert rates[0] > 0.5 and rates[2] > 0.1, rates


@pytest.mark.slow  # every fault on EAGLE, 3 seeds: ~45 s on 2 busy cores
def test_selftest_detects_every_fault_on_eagle_without_false_alarms():
    rows = run_selftest(seeds=SEEDS, methods=("eagle",))
    assert_selftest_rows(rows, "eagle", SEEDS)

"""Issue 25 item 5: every registered speculative method runs in the selftest, n-gram included, on prompts it drafts
and is accepted on; every fault an n-gram proposer hosts runs on it."""

from __future__ import annotations

import pytest
from tests.support.selftest_rows import assert_selftest_rows

from specbench.check.baseline import measure_acceptance
from specbench.faults import FAULTS
from specbench.faults.catalog import selftest_faults
from specbench.selftest.drafters import TINY_DRAFTERS
from specbench.selftest.runner import METHODS, run_selftest, selftest_setups
from specbench.speculation.registry import PROPOSERS


def test_selftest_methods_are_the_registered_proposers():
    assert set(METHODS) == set(PROPOSERS.supported()) - {"none"}
    assert set(TINY_DRAFTERS.supported()) == set(METHODS)  # a new proposer needs a tiny drafter here


def test_ngram_drafts_and_is_accepted_on_the_selftest_prompts(tmp_path):
    for seed in (0, 1):
        measured = measure_acceptance(selftest_setups(str(tmp_path), seed, ("ngram",), 3)["ngram"])
        assert measured.num_drafted_per_pos[0] >= 15, measured  # ~1 round in 3 drafts
        assert min(measured.num_accepted_per_pos) >= 8, measured  # full copies accepted...
        assert max(measured.acceptance_per_pos) < 0.8, measured  # ...and filler drafts rejected


def test_eagle1_head_drafts_like_its_target(tmp_path):
    rates = measure_acceptance(selftest_setups(str(tmp_path), 0, ("eagle",), 3)["eagle"]).acceptance_per_pos
    assert rates[0] > 0.5 and rates[2] > 0.1, rates


@pytest.mark.slow
def test_every_fault_hosted_by_ngram_runs_on_it():
    rows = run_selftest(methods=("ngram",), checks=("greedy", "metrics"))
    hosted = {name for name in selftest_faults("cpu") if "ngram" in FAULTS[name].methods}
    assert {r.inject for r in rows if r.method == "ngram" and r.inject is not None} == hosted and len(hosted) >= 4


@pytest.mark.slow  # every fault n-gram hosts, 2 seeds, every check: ~30 s on 2 busy cores
def test_selftest_detects_every_fault_on_ngram_without_false_alarms():
    rows = run_selftest(seeds=(0, 1), methods=("ngram",), constrained=False)  # those: test_selftest_constrained
    assert_selftest_rows(rows, "ngram", (0, 1), constrained=False)


@pytest.mark.slow  # every fault on EAGLE-1, 2 seeds: ~60 s on 2 busy cores
def test_selftest_detects_every_fault_on_eagle1_without_false_alarms():
    # clean rows of ten seeds: test_check_false_alarms_selftest; constrained rows: test_selftest_constrained
    rows = run_selftest(seeds=(0,), methods=("eagle",), constrained=False)
    assert_selftest_rows(rows, "eagle", (0,), constrained=False)

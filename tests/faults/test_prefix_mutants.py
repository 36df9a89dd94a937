"""The prefix-cache mutants (faults/prefix_*.py), each caught by the checks' shared-prefix scenario
(check/prefix_scenario.py) against references that cache nothing: the target-side ones by greedy output (or by the
scheduler refusing to write a shared block), the EAGLE one by the draft oracle; the clean engine passes both."""

from __future__ import annotations

import pytest

from specbench.check.crash import run_guarded
from specbench.check.greedy import greedy_prefix_scenario
from specbench.check.oracle import FP32_RTOL, oracle_prefix_scenario
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.result import CheckResult
from specbench.faults import FAULTS
from specbench.faults.catalog import selftest_faults
from specbench.selftest.setups import plain_setup, selftest_setups

TARGET_SIDE = ("prefix-uncommitted-block", "prefix-hash-no-parent", "prefix-stale-after-evict")
DRAFT_SIDE = "prefix-draft-lookahead"


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
    built = selftest_setups(str(tmp_path_factory.mktemp("prefix-faults")), 0, ("eagle",), 3)
    return {"none": plain_setup(built["eagle"]), "eagle": built["eagle"]}


def greedy_passes(setup) -> bool:
    """The greedy check's shared-prefix run; a crash (the scheduler refusing to write a shared block) fails it."""
    return run_guarded("greedy", lambda: CheckResult("greedy", *greedy_prefix_scenario(setup, None), 0.0)).passed


def test_the_catalog_runs_them_in_the_selftest_on_the_right_methods():
    assert set(TARGET_SIDE) | {DRAFT_SIDE} <= set(selftest_faults("cpu"))
    for name in TARGET_SIDE:
        assert {"none", "ngram", "draft", "eagle", "mtp"} <= set(FAULTS[name].methods)
    assert set(FAULTS[DRAFT_SIDE].methods) == {"eagle", "eagle3", "mtp"}


def test_clean_engine_passes_the_scenario(setups):
    assert greedy_passes(setups["none"])
    reference = build_reference_drafting_llm(setups["eagle"].engine)
    num, bad, _ = oracle_prefix_scenario(setups["eagle"], reference, FP32_RTOL)
    assert num > 0 and bad == []


@pytest.mark.parametrize("inject", TARGET_SIDE)
def test_target_side_prefix_mutants_are_caught_by_greedy(setups, inject):
    assert not greedy_passes(setups["none"].with_inject(inject))


def test_draft_lookahead_mutant_keeps_greedy_output_and_is_caught_by_the_oracle(setups):
    mutant = setups["eagle"].with_inject(DRAFT_SIDE)
    assert greedy_passes(mutant)  # drafts only steer acceptance
    reference = build_reference_drafting_llm(mutant.engine)
    num, bad, _ = oracle_prefix_scenario(mutant, reference, FP32_RTOL)
    assert num > 0 and bad

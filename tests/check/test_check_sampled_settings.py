"""Issue 15 item 3, engine side: the sampled check at T < 1 with top-k and top-p, plus a forced-full-acceptance
run whose bonus rows are tested alone. Sampling mutants are invisible at the old setting (T = 1, no truncation)."""

from __future__ import annotations

import pytest

from specbench.check.sampled import check_sampled
from specbench.sampling_params import SamplingParams
from specbench.selftest.runner import selftest_setups

OLD_SETTING = SamplingParams(temperature=1.0, ignore_eos=True)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return selftest_setups(str(tmp_path_factory.mktemp("sampled")), 0, ("draft",), 3)["draft"]


@pytest.mark.parametrize("fault", ["bonus-row-unwarped", "draft-probs-unwarped"])
def test_sampling_mutants_missed_at_the_old_setting_caught_at_the_new(setup, fault):
    mutant = setup.with_inject(fault)
    old = check_sampled(mutant, params=OLD_SETTING)
    assert old.passed, old.detail
    new = check_sampled(mutant)
    assert not new.passed, new.detail


def test_draft_probs_unwarped_breaks_forced_full_acceptance(setup):
    """p = q when the target drafts for itself: an unwarped q rejects drafts, which the check reports."""
    result = check_sampled(setup.with_inject("draft-probs-unwarped"))
    assert "acc=" in result.note, result.note


def test_clean_engine_states_the_bonus_run(setup):
    result = check_sampled(setup)
    assert result.passed, result.detail
    assert "T=0.8 top-k 40 top-p 0.95" in result.detail
    assert "Forced full acceptance (target drafts for itself): 1200/1200 drafts accepted" in result.detail
    assert "bonus rows alone at position 4" in result.detail

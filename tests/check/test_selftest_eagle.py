"""The selftest's EAGLE-3 head, built from the tiny target's own weights, drafts like its target and depends on the
target features as a real head does. Every fault its proposer hosts detected, its tree rows too:
test_selftest_methods.py (one run with the other methods); no false alarm on ten seeds:
test_check_false_alarms_selftest.py."""

from __future__ import annotations

from specbench.check.baseline import measure_acceptance
from specbench.selftest.runner import selftest_setups
from specbench.selftest.tiny import variant_for_seed

SEEDS = (0, 1)  # the built head's acceptance on both tiny variants


def test_built_eagle_head_drafts_like_its_target_and_needs_its_features(tmp_path):
    """Built, not fitted. Acceptance as real EAGLE-3 heads reach (a head with the shift or the embedding copy wrong
    would draft near-random tokens); handed feature rows one position late (feature-rows-off-by-one), it loses
    about half of it at every position, as a real head, which reads its context from the features, would.
    Seed 0 builds the biased pair the faults are tuned on; seed 1 the no-bias tied variant (tiny.py), whose
    layer-1 positional heads are weaker, so its later positions accept less (~0.2 / ~0.06)."""
    for seed in SEEDS:
        setup = selftest_setups(str(tmp_path), seed, ("eagle3",), num_steps=3)["eagle3"]
        rates = measure_acceptance(setup).acceptance_per_pos
        if variant_for_seed(seed) != "biased":
            assert rates[0] > 0.55 and rates[1] > 0.1, rates
        else:
            assert rates[0] > 0.55 and rates[1] > 0.25 and rates[2] > 0.08, rates
        wrong = measure_acceptance(setup.with_inject("feature-rows-off-by-one")).acceptance_per_pos
        assert all(w < 0.7 * r for w, r in zip(wrong, rates)), (rates, wrong)

"""Issue 15: the clean engine over 30 seeds (tiny pair, draft LM; EAGLE-3 head): no check raises a false alarm (the
sampled check's alpha is 0.001; the baseline's 0.01 per test). Each seed is deterministic, so this is a measurement
of those 30 seeds, not a flake."""

from __future__ import annotations

import tempfile

import pytest

from specbench.check.battery import CheckContext, run_checks
from specbench.selftest.reference_baselines import reference_baseline
from specbench.selftest.runner import selftest_setups


@pytest.mark.slow
def test_clean_battery_false_alarms_over_30_seeds(tmp_path):
    failures: dict[str, list[int]] = {}
    for seed in range(30):
        setup = selftest_setups(str(tmp_path / str(seed)), seed, ("draft",), 3)["draft"]
        ctx = CheckContext(baseline=reference_baseline("draft", seed, 3))
        for result in run_checks(setup, context=ctx):
            if not result.passed:
                failures.setdefault(result.name, []).append(seed)
    print(f"false alarms over 30 seeds: {failures or 'none'}")
    assert not failures, failures


@pytest.mark.slow
def test_statistical_checks_on_eagle3_over_30_seeds():
    """The EAGLE-3 head's statistical checks (sampled: alpha 0.001; baseline vs the shipped reference: alpha 0.01 per
    test) and its oracle (recomputed target features, fp32: exact up to rounding) on 30 clean seeds."""
    failures: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(30):
            setup = selftest_setups(f"{tmp}/{seed}", seed, ("eagle3",), 3)["eagle3"]
            ctx = CheckContext(baseline=reference_baseline("eagle3", seed, 3))
            for result in run_checks(setup, ("sampled", "oracle", "baseline"), ctx):
                assert not result.skipped, result.detail
                if not result.passed:
                    failures.setdefault(result.name, []).append(seed)
    print(f"eagle3 false alarms over 30 seeds: {failures or 'none'}")
    assert not failures, failures

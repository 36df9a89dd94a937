"""`specbench selftest --methods mtp`: the clean MTP engine raises no alarm, and mtp-hidden-wrong-position passes
every check that does not look at draft internals (greedy, sampled, verifier rows, invariants, metrics) and is
caught by the draft oracle."""

from __future__ import annotations

import pytest

from specbench.faults import FAULTS
from specbench.faults.catalog import selftest_faults
from specbench.selftest.runner import run_selftest

FAULT = "mtp-hidden-wrong-position"
OUTPUT_CHECKS = ("greedy", "sampled", "rows", "invariants", "metrics")


def test_the_fault_is_hosted_by_mtp_only_and_runs_by_default():
    assert FAULTS[FAULT].methods == ("mtp",) and FAULTS[FAULT].layer == "draft"
    assert FAULT in selftest_faults("cpu")


@pytest.mark.slow  # one seed, the clean row and the mutant, every check: ~35 s on 2 busy cores
def test_oracle_catches_the_wrong_position_hidden_that_output_checks_pass():
    rows = run_selftest(seeds=(0,), methods=("mtp",), faults=(FAULT,), constrained=False)
    clean = next(r for r in rows if r.method == "mtp" and r.inject is None)
    mutant = next(r for r in rows if r.method == "mtp" and r.inject == FAULT)
    assert not clean.detected, [(r.name, r.detail) for r in clean.results]
    by_name = {r.name: r for r in mutant.results}
    assert all(by_name[name].passed for name in OUTPUT_CHECKS), {n: by_name[n].detail for n in OUTPUT_CHECKS}
    assert not by_name["oracle"].passed and "mismatches by step" in by_name["oracle"].detail
    # No shipped acceptance baseline for mtp until reference_baselines.json is regenerated: the check says so.
    baseline = by_name["baseline"]
    assert baseline.passed and (not baseline.skipped or "no shipped reference baseline for mtp" in baseline.detail)

"""Issue 25 item 6: the selftest's metrics check recomputes an engine run's metrics from its raw records, and a
fault in metric accounting that every other check passes is detected by it."""

from __future__ import annotations

import pytest

from specbench.check.battery import CheckContext, run_checks
from specbench.check.metrics_check import check_metrics
from specbench.selftest.reference_baselines import reference_baseline, reference_source
from specbench.selftest.runner import selftest_setups


def test_clean_engine_passes_the_metrics_check_for_every_method_it_drafts_with(tmp_path):
    for method, setup in selftest_setups(str(tmp_path), 0, ("draft", "ngram"), 3).items():
        result = check_metrics(setup)
        assert result.passed and "MISMATCH" not in result.detail, (method, result.detail)
        assert " 0 draft rounds" not in result.detail, result.detail


@pytest.mark.slow
def test_accepted_count_fault_passes_the_old_checks_and_fails_the_metrics_check(tmp_path):
    setup = selftest_setups(str(tmp_path), 0, ("draft",), 3)["draft"].with_inject("accepted-count-off-by-one")
    ctx = CheckContext(baseline=reference_baseline("draft", 0, 3), baseline_source=reference_source())
    results = {r.name: r for r in run_checks(setup, context=ctx)}
    old = [name for name in results if name != "metrics"]
    assert all(results[name].passed for name in old), {n: results[n].detail for n in old}
    metrics = results["metrics"]
    assert not metrics.passed and "num_accepted_tokens: steps total" in metrics.detail, metrics.detail

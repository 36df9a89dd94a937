"""Issue 15 item 5: greedy and oracle each run once more with a KV pool that forces preemption, so a drafter bug
that only shows after a preemption is caught; before, only the invariant sweep preempted (and it cannot see it)."""

from __future__ import annotations

from specbench.check.greedy import greedy_params
from specbench.check.invariant_sweep import check_invariants
from specbench.check.oracle import FP32_RTOL, check_oracle, record_and_compare
from specbench.check.reference import build_reference_drafting_llm
from specbench.check.setup import build_llm, prompt_list
from specbench.selftest.runner import selftest_setups

FAULT = "draft-state-kept-on-preemption"


def test_preemption_only_drafter_bug(tmp_path):
    setup = selftest_setups(str(tmp_path), 0, ("draft",), 3)["draft"].with_inject(FAULT)
    llm = build_llm(setup)  # the old oracle: one run, the pool never preempts
    reference = build_reference_drafting_llm(setup.engine)
    assert record_and_compare(llm, reference, prompt_list(setup), greedy_params(setup), FP32_RTOL)[1] == []
    assert sum(s.num_preempted for s in llm.engine.step_stats) == 0
    assert check_invariants(setup).passed  # metadata stays self-consistent: the sweep's preemption misses it
    result = check_oracle(setup)
    assert not result.passed and "(preempting run)" in result.detail, result.detail
    clean = check_oracle(setup.with_inject(None))
    assert clean.passed and " 0 preemptions" not in clean.detail, clean.detail


def test_sampled_check_samples_through_preemption(tmp_path):
    """Issue 15 item 5 for the sampled check: its own-drafter run uses a KV pool that preempts mid-sampling."""
    from specbench.check.sampled import check_sampled

    for method, setup in selftest_setups(str(tmp_path), 0, ("draft", "eagle3"), 3).items():
        result = check_sampled(setup)
        assert result.passed, result.detail
        num = int(result.detail.split("forced preemption (")[1].split()[0])
        assert num > 10, f"{method}: {result.detail}"
